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

// TestInteropControllerMetadataChangeBeforeFailover: an admin shrinks a
// topic that holds messages in all its queues (4 -> 2 queues, read only)
// and changes a group's retries on the master; the master is killed as
// soon as its slave has the change (its periodic copy is an hour away,
// so only the master's change notice can bring it). The promoted master
// keeps every change: the permission, the group's retries, and the read
// queues the admin shrank (the log's older messages in queues 2 and 3 do
// not raise them back).
func TestInteropControllerMetadataChangeBeforeFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	c := startCtlCluster(t, "broker.slave_sync_interval=1h")
	m := c.waitHealthy(t)
	s := 1 - m
	rc := newRemotingClient(t)
	topics := func(addr string) (protocol.TopicConfigSerializeWrapper, error) {
		var tw protocol.TopicConfigSerializeWrapper
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := rc.Invoke(ctx, addr, protocol.NewRequest(protocol.GetAllTopicConfig, nil, nil))
		if err == nil {
			err = protocol.DecodeJSON(resp.Body, &tw)
		}
		return tw, err
	}
	// The slave's first copy (its only one for an hour) is done.
	testutil.Eventually(t, 30*time.Second, func() error {
		mt, err := topics(c.bAddrs[m])
		if err != nil {
			return err
		}
		st, err := topics(c.bAddrs[s])
		if err != nil {
			return err
		}
		if mt.DataVersion != st.DataVersion {
			return fmt.Errorf("slave's topic table at %+v, master's at %+v", st.DataVersion, mt.DataVersion)
		}
		return nil
	})
	const topic, group = "CtlMetaChange", "ctl-meta-cg"
	if out, err := c.smartgoAdmin(t, "topic", "create", "-t", topic, "-r", "4", "-w", "4"); err != nil {
		t.Fatalf("admin topic create: %v\n%s", err, out)
	}
	if out, err := c.smartgoAdmin(t, "group", "create", "-g", group, "-retry", "5"); err != nil {
		t.Fatalf("admin group create: %v\n%s", err, out)
	}
	p := newProducer(t, c.clients(), "ctl-meta-p")
	queues := map[int]int{}
	for i := 0; i < 40 || queues[2]+queues[3] == 0; i++ {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("meta-%d", i))))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %d: %+v %v", i, res, err)
		}
		queues[res.MessageQueue.QueueId]++
	}
	if out, err := c.smartgoAdmin(t, "topic", "update", "-t", topic, "-r", "2", "-w", "2", "-perm", "4"); err != nil {
		t.Fatalf("admin topic update: %v\n%s", err, out)
	}
	if out, err := c.smartgoAdmin(t, "group", "update", "-g", group, "-retry", "2"); err != nil {
		t.Fatalf("admin group update: %v\n%s", err, out)
	}
	has := func(addr string) error {
		tw, err := topics(addr)
		if err != nil {
			return err
		}
		if tc := tw.TopicConfigTable[topic]; tc == nil || tc.ReadQueueNums != 2 || tc.WriteQueueNums != 2 || tc.Perm != 4 {
			return fmt.Errorf("%s has topic %+v, want 2/2 queues perm 4", addr, tc)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := rc.Invoke(ctx, addr, protocol.NewRequest(protocol.GetAllSubscriptionGroupConfig, nil, nil))
		if err != nil {
			return err
		}
		var gw struct {
			SubscriptionGroupTable map[string]*protocol.SubscriptionGroupConfig `json:"subscriptionGroupTable"`
		}
		if err := protocol.DecodeJSON(resp.Body, &gw); err != nil {
			return err
		}
		if g := gw.SubscriptionGroupTable[group]; g == nil || g.RetryMaxTimes != 2 {
			return fmt.Errorf("%s has group %+v, want 2 retries", addr, g)
		}
		return nil
	}
	testutil.Eventually(t, 30*time.Second, func() error { return has(c.bAddrs[s]) })
	c.brokers[m].kill9()
	c.waitPromoted(t, s)
	if err := has(c.bAddrs[s]); err != nil {
		t.Fatalf("after the failover (messages sent by queue %v): %v", queues, err)
	}
}
