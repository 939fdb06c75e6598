package broker

import (
	"context"
	"errors"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// TestBrokerSendBackRefusedUnanswered: a send-back the broker cannot
// carry out (here: the disk is full) gets no answer, so that the client's
// call times out and it consumes the message again itself; an error
// answer loses the message with rocketmq-client-go, which takes any
// answer as done. Once the disk frees, the same send-back is answered
// and the retry copy is stored. Before, the refusal was answered
// SERVICE_NOT_AVAILABLE at once.
func TestBrokerSendBackRefusedUnanswered(t *testing.T) {
	var usage atomic.Value
	usage.Store(0.10)
	b := testBroker(t, t.TempDir(), func(o *Options) {
		o.Store.DiskUsage = func(string) (float64, error) { return usage.Load().(float64), nil }
	})
	c := newTestClient(t, b.Addr())
	h := c.mustSend("Work", 0, "payload", "")
	_, phy, err := record.ParseOffsetMessageID(h.MsgID)
	if err != nil {
		t.Fatal(err)
	}
	sendBack := func(timeout time.Duration) (*protocol.Command, error) {
		ctx, cancel := context.WithTimeout(context.Background(), timeout)
		defer cancel()
		hdr := &protocol.ConsumerSendMsgBackRequestHeader{Offset: phy, Group: "rg", OriginMsgID: h.MsgID}
		return c.c.Invoke(ctx, c.addr, protocol.NewRequest(protocol.ConsumerSendMsgBack, hdr, nil))
	}

	usage.Store(0.95)
	testutil.WaitFor(t, 10*time.Second, "the broker refuses writes", func() bool {
		return c.send("Work", 0, "refused", "").Code != protocol.Success
	})
	if resp, err := sendBack(2 * time.Second); !errors.Is(err, context.DeadlineExceeded) {
		if resp != nil {
			t.Fatalf("refused send-back answered: code %d %q, err %v; want no answer", resp.Code, resp.Remark, err)
		}
		t.Fatalf("refused send-back: %v, want no answer (deadline exceeded)", err)
	}

	usage.Store(0.10)
	testutil.WaitFor(t, 10*time.Second, "the broker takes writes again", func() bool {
		return c.send("Work", 0, "accepted", "").Code == protocol.Success
	})
	resp, err := sendBack(30 * time.Second)
	if err != nil || resp.Code != protocol.Success {
		t.Fatalf("send-back after the disk freed: %v %v", resp, err)
	}
	testutil.WaitFor(t, 10*time.Second, "the retry copy", func() bool {
		r := c.pull("rg", "%RETRY%rg", 0, 0, flagSubscription, 0, "*")
		return r.code == protocol.Success && len(r.msgs) == 1 && string(r.msgs[0].Body) == "payload"
	})

	// A request the broker cannot read is still answered, with the error.
	bad := protocol.NewRequest(protocol.ConsumerSendMsgBack, nil, nil)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if resp, err := c.c.Invoke(ctx, c.addr, bad); err != nil || resp.Code == protocol.Success {
		t.Fatalf("send-back without a header: %v %v, want an error answer", resp, err)
	}
}
