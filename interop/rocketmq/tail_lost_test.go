package rocketmq

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropConsumeAfterLogTailLost: a rocketmq-client-go group consumed
// and committed 100 messages of a one-queue topic; the broker stopped and
// its commitlog lost its tail from the 51st message on (what a crash
// under async flush, or a segment cut by a bad disk, leaves); started
// again, it stored 20 new messages at queue offsets 50-69. The group's
// offset, 100, is past the queue's end: the pull is moved to the first
// message stored since the broker started, and the group consumes the 20
// new messages. It was moved to the queue's end (70) and never got them.
func TestInteropConsumeAfterLogTailLost(t *testing.T) {
	dir := t.TempDir()
	s, stop := runStandaloneAt(t, dir)
	const topic, group = "interop-tail-lost", "interop-tail-lost-g"
	createTopic(t, s.broker, topic, 1)
	p := newProducer(t, s, "tail-lost")
	cut := sendForCut(t, p, 100, 50, func(i int) *primitive.Message { // the 51st message's commitlog offset
		return primitive.NewMessage(topic, []byte("before-"+strconv.Itoa(i)))
	})
	var before received
	c := newPushConsumer(t, s, group, "tail-lost-c1", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		before.add(m)
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 60*time.Second, "100 messages consumed", func() bool { return before.distinct() == 100 })
	_ = c.Shutdown() // commits the group's offset, 100
	_ = p.Shutdown()
	stop() // writes the offsets out

	cutCommitlog(t, dir, cut)
	s2, _ := runStandaloneAt(t, dir)
	p2 := newProducer(t, s2, "tail-lost-2")
	for i := range 20 {
		res, err := p2.SendSync(context.Background(), primitive.NewMessage(topic, []byte("after-"+strconv.Itoa(i))))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendSync after the restart %d: %v %v", i, res, err)
		}
		if res.QueueOffset != int64(50+i) {
			t.Fatalf("after-%d stored at queue offset %d, want %d (the tail was not cut as planned)", i, res.QueueOffset, 50+i)
		}
	}
	var after received
	newPushConsumer(t, s2, group, "tail-lost-c2", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		after.add(m)
		return consumer.ConsumeSuccess
	})
	// rocketmq-client-go waits about 10 s before it takes a moved offset.
	testutil.WaitFor(t, 60*time.Second, "the 20 messages stored after the restart consumed", func() bool {
		return after.prefixed("after-") == 20
	})
}

// sendForCut sends msg(0..n-1) with SendSync and returns the commitlog
// offset of message cutAt (where a test cuts the log).
func sendForCut(t *testing.T, p rocketmq.Producer, n, cutAt int, msg func(i int) *primitive.Message) int64 {
	t.Helper()
	var cut int64
	for i := range n {
		res, err := p.SendSync(context.Background(), msg(i))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendSync %d: %v %v", i, res, err)
		}
		if i == cutAt {
			id := res.OffsetMsgID
			if cut, err = strconv.ParseInt(id[len(id)-16:], 16, 64); err != nil {
				t.Fatalf("offset message id %q: %v", id, err)
			}
		}
	}
	return cut
}

// cutCommitlog cuts the standalone's (stopped) commitlog in dir at
// offset at: the tail a crash under async flush or a bad disk takes.
func cutCommitlog(t *testing.T, dir string, at int64) {
	t.Helper()
	seg := filepath.Join(dir, "data", "store", "commitlog", "00000000000000000000")
	if err := os.Truncate(seg, at); err != nil {
		t.Fatal(err)
	}
}

// prefixed counts the distinct bodies received that start with prefix.
func (r *received) prefixed(prefix string) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	n := 0
	for b := range r.msgs {
		if strings.HasPrefix(b, prefix) {
			n++
		}
	}
	return n
}
