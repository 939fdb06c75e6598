package rocketmq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestInteropControllerPromotedSlavePullPastEnd: a slave replicated 30
// messages stored after it started, then became master (the old one
// killed -9) and stored 10 of its own, at queue offsets 30-39. A pull at
// offset 100, past the queue's end (a group that consumed a tail of the
// old master's this broker never got), is moved to 30, the first message
// the new master stored: not to 0, the first one stored since it
// started, which the group had consumed on the old master already.
func TestInteropControllerPromotedSlavePullPastEnd(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	c := startCtlCluster(t, "broker.slave_sync_interval=1h")
	m := c.waitHealthy(t)
	s := 1 - m
	const topic = "CtlPromotedPull"
	if out, err := c.smartgoAdmin(t, "topic", "create", "-t", topic, "-r", "1", "-w", "1"); err != nil {
		t.Fatalf("admin topic create: %v\n%s", err, out)
	}
	rc := newRemotingClient(t)
	invoke := func(addr string, code int32, h protocol.HeaderEncoder) (*protocol.Command, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		return rc.Invoke(ctx, addr, protocol.NewRequest(code, h, nil))
	}
	maxOffset := func(addr string) (int64, error) {
		resp, err := invoke(addr, protocol.GetMaxOffset, &protocol.TopicQueueHeader{Topic: topic, QueueID: 0})
		if err != nil {
			return 0, err
		}
		var h protocol.OffsetResponseHeader
		if err := resp.DecodeHeader(&h); err != nil {
			return 0, err
		}
		return h.Offset, nil
	}
	p := newProducer(t, c.clients(), "ctl-promoted-pull-p")
	// send stores n messages, each retried until it is stored (the
	// producer's route names the killed master for a while).
	send := func(n int, prefix string) []int64 {
		var at []int64
		for i := range n {
			testutil.Eventually(t, 60*time.Second, func() error {
				res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, fmt.Appendf(nil, "%s-%d", prefix, i)))
				if err != nil {
					return err
				}
				if res.Status != primitive.SendOK {
					return fmt.Errorf("send %s-%d: status %v", prefix, i, res.Status)
				}
				at = append(at, res.QueueOffset)
				return nil
			})
		}
		return at
	}
	send(30, "before")
	testutil.Eventually(t, 30*time.Second, func() error {
		n, err := maxOffset(c.bAddrs[s])
		if err == nil && n != 30 {
			err = fmt.Errorf("slave's queue ends at %d, want 30", n)
		}
		return err
	})
	c.brokers[m].kill9()
	c.waitPromoted(t, s)
	after := send(10, "after")
	if after[0] != 30 {
		t.Fatalf("the new master stored its first message at queue offset %d, want 30", after[0])
	}
	h := &protocol.PullMessageRequestHeader{ConsumerGroup: "ctl-promoted-pull-g", Topic: topic, QueueID: 0, QueueOffset: 100, MaxMsgNums: 8,
		SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTypeTag}
	resp, err := invoke(c.bAddrs[s], protocol.PullMessage, h)
	if err != nil {
		t.Fatal(err)
	}
	var rh protocol.PullMessageResponseHeader
	if err := resp.DecodeHeader(&rh); err != nil {
		t.Fatal(err)
	}
	if rh.NextBeginOffset != 30 {
		t.Fatalf("pull at 100 past the end (40) answered code %d, next begin offset %d: want 30, the first message stored as master",
			resp.Code, rh.NextBeginOffset)
	}
}
