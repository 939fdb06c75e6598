package cluster

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestClusterControlledPromotionPastEndIgnoresOldMasterClock: a master
// whose clock runs an hour ahead stores messages, which its slaves copy
// with its store times; it stops and a slave is promoted. A pull past a
// queue's end on the new master (a group that consumed a tail the new
// master never got) goes back to the first message stored since the
// promotion, which is the queue's end at the promotion: not to the old
// master's last messages, whose store times are after the promotion by
// its clock (the bound was once "stored at or after the promotion time",
// comparing this node's clock with the old master's).
func TestClusterControlledPromotionPastEndIgnoresOldMasterClock(t *testing.T) {
	var fast atomic.Int32 // the broker whose store clock runs ahead
	fast.Store(-1)
	c := startControlled(t, CtlOptions{Sync: true, Broker: func(j int, o *broker.Options) {
		o.Store.Now = func() time.Time {
			if int(fast.Load()) == j {
				return time.Now().Add(time.Hour)
			}
			return time.Now()
		}
	}})
	old, ok := c.Master()
	if !ok {
		t.Fatal("no master")
	}
	fast.Store(int32(old))
	p := ctlProducer(t, c, 5*time.Second)
	const topic = "PromoteClock"
	ctx := context.Background()
	send := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			testutil.Eventually(t, 30*time.Second, func() error {
				r, err := p.Send(ctx, &client.Message{Topic: topic, Body: fmt.Appendf(nil, "%s-%d", prefix, i)})
				if err == nil && r.Status != client.SendOK {
					err = fmt.Errorf("status %v", r.Status)
				}
				return err
			})
		}
	}
	send("before", 40)
	waitSyncSet(t, c, 3)
	send("synced", 8)
	if err := c.StopBroker(old); err != nil {
		t.Fatal(err)
	}
	nm, err := c.WaitMaster(ctx, old)
	if err != nil {
		t.Fatal(err)
	}
	nb := c.Broker(nm)
	queues := nb.Store().QueueIDs(topic)
	if len(queues) == 0 {
		t.Fatal("the new master holds no queue of the topic")
	}
	atPromotion := map[int32]int64{}
	stored := int64(0)
	for _, q := range queues {
		atPromotion[q] = nb.Store().MaxOffset(topic, q)
		stored += atPromotion[q]
	}
	if stored < 48 {
		t.Fatalf("the new master holds %d of the 48 messages acknowledged by a sync master", stored)
	}
	send("after", 8)

	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = rc.Close() })
	for _, q := range queues {
		h := &protocol.PullMessageRequestHeader{ConsumerGroup: "promote-clock-g", Topic: topic, QueueID: q, QueueOffset: 1000, MaxMsgNums: 8,
			SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTypeTag}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		resp, err := rc.Invoke(cctx, c.BrokerAddr(nm), protocol.NewRequest(protocol.PullMessage, h, nil))
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		var rh protocol.PullMessageResponseHeader
		if err := resp.DecodeHeader(&rh); err != nil {
			t.Fatal(err)
		}
		if rh.NextBeginOffset != atPromotion[q] {
			t.Fatalf("queue %d: a pull at 1000, past the end (%d), answered code %d, next begin offset %d: want %d, the queue's end at the promotion",
				q, rh.MaxOffset, resp.Code, rh.NextBeginOffset, atPromotion[q])
		}
	}
}
