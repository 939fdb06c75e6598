package cluster

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestClusterHASlaveForgetsDeletedTopicStats: a slave that served pulls
// of a topic drops the topic's pull counters once it copies a topic table
// without it (the master deleted the topic), as the master does. Before,
// the slave kept them until it restarted.
func TestClusterHASlaveForgetsDeletedTopicStats(t *testing.T) {
	c := startHACluster(t, Options{Slave: func(_ int, o *broker.Options) { o.SlaveReadEnable = true }})
	p := newProducer(t, c)
	ctx := context.Background()
	const topic, group = "HAStatsGone", "g-stats"
	for i := range 3 {
		if _, err := p.Send(ctx, &client.Message{Topic: topic, Body: fmt.Appendf(nil, "m%d", i)}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error { return caughtUp(c, 0) })
	var queues int32
	testutil.Eventually(t, 10*time.Second, func() error {
		tc, ok := c.Slave(0).Topics().Get(topic)
		if !ok {
			return errors.New("topic not copied to the slave")
		}
		queues = tc.ReadQueueNums
		return nil
	})
	// The slave's commitlog has the messages; its dispatcher builds the
	// consume queues from it afterwards (tens of ms behind on a busy
	// machine), and until then a pull finds nothing and is not counted.
	testutil.Eventually(t, 10*time.Second, func() error {
		var n int64
		for q := range queues {
			n += c.Slave(0).Store().MaxOffset(topic, q)
		}
		if n != 3 {
			return fmt.Errorf("the slave's queues hold %d of 3 messages", n)
		}
		return nil
	})
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	key := topic + "@" + group
	for q := range queues {
		h := &protocol.PullMessageRequestHeader{ConsumerGroup: group, Topic: topic, QueueID: q, QueueOffset: 0, MaxMsgNums: 8,
			SysFlag: protocol.PullFlagSubscription, Subscription: "*", ExpressionType: protocol.ExpressionTypeTag}
		resp, err := rc.Invoke(ctx, c.SlaveAddr(0), protocol.NewRequest(protocol.PullMessage, h, nil))
		if err != nil {
			t.Fatal(err)
		}
		if resp.Code != protocol.Success && resp.Code != protocol.PullNotFound {
			t.Fatalf("pull queue %d from the slave: %d %s", q, resp.Code, resp.Remark)
		}
	}
	if _, ok := c.Slave(0).Stats().Get(broker.GroupGetNums, key); !ok {
		t.Fatal("no pull served by the slave was counted")
	}

	resp, err := rc.Invoke(ctx, c.BrokerAddr(0), protocol.NewRequest(protocol.DeleteTopicInBroker,
		&protocol.DeleteTopicRequestHeader{Topic: topic}, nil))
	if err != nil || resp.Code != protocol.Success {
		t.Fatalf("delete %s on the master: %v %v", topic, resp, err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if _, ok := c.Slave(0).Topics().Get(topic); ok {
			return errors.New("the slave still has the topic")
		}
		if _, ok := c.Slave(0).Stats().Get(broker.GroupGetNums, key); ok {
			return errors.New("the slave still counts the deleted topic's pulls")
		}
		return nil
	})
}
