package client

import (
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
)

// SendBatchOrderly stores a batch on the queue the selector picks for the
// key, in order, after an orderly send with the same key.
func TestClientSendBatchOrderly(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "BatchOrd", 8)
	p := newTestProducer(t, c, nil)
	ctx := testCtx(t, 30*time.Second)
	first, err := p.SendOrderly(ctx, &Message{Topic: "BatchOrd", Body: []byte("single")}, "device-42", nil)
	if err != nil {
		t.Fatal(err)
	}
	var msgs []*Message
	for i := 0; i < 10; i++ {
		msgs = append(msgs, &Message{Topic: "BatchOrd", Body: fmt.Appendf(nil, "b%d", i)})
	}
	res, err := p.SendBatchOrderly(ctx, msgs, "device-42", nil)
	if err != nil {
		t.Fatal(err)
	}
	if res.Queue != first.Queue || res.QueueOffset != first.QueueOffset+1 {
		t.Fatalf("batch went to %+v@%d, single to %+v@%d: want the same queue, right after", res.Queue, res.QueueOffset, first.Queue, first.QueueOffset)
	}
	b := c.Broker(0)
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := b.Store().MaxOffset("BatchOrd", res.Queue.QueueID); n != 11 {
			return fmt.Errorf("queue holds %d", n)
		}
		return nil
	})
	gr, err := b.Store().GetMessages("BatchOrd", res.Queue.QueueID, 0, 32, nil)
	if err != nil {
		t.Fatal(err)
	}
	defer gr.Release()
	if len(gr.Buffers) != 11 {
		t.Fatalf("read %d messages", len(gr.Buffers))
	}
	if _, err := p.SendBatchOrderly(ctx, nil, "k", nil); err == nil {
		t.Fatal("empty batch accepted")
	}
	if _, err := p.SendBatchOrderly(ctx, []*Message{{Topic: "A", Body: []byte("x")}, {Topic: "B", Body: []byte("y")}}, "k", nil); err == nil {
		t.Fatal("two topics in one batch accepted")
	}
}
