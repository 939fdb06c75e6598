package rocketmq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestInteropControllerTopicGrownBeforeFailover: a topic's queue count
// is raised on the master, messages are sent to the new queues and the
// master is killed before the slave copied the new topic table
// (broker.slave_sync_interval). The new master must serve the queues its
// log holds: every acknowledged message is consumed.
func TestInteropControllerTopicGrownBeforeFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	c := startCtlCluster(t, "broker.slave_sync_interval=1h")
	m := c.waitHealthy(t)
	const topic, group = "CtlGrow", "ctl-grow-cg"
	if out, err := c.smartgoAdmin(t, "topic", "create", "-t", topic, "-r", "2", "-w", "2"); err != nil {
		t.Fatalf("admin topic create: %v\n%s", err, out)
	}
	// The slave copies the topic table once when it starts following
	// and then every slave_sync_interval (1 h here): restart it so its
	// copy has the 2-queue topic, and wait until it follows again.
	s := 1 - m
	c.brokers[s].kill9()
	c.brokers[s].run(t)
	c.waitHealthy(t)
	rc := newRemotingClient(t)
	testutil.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := rc.Invoke(ctx, c.bAddrs[s], protocol.NewRequest(protocol.GetAllTopicConfig, nil, nil))
		if err != nil {
			return err
		}
		var w protocol.TopicConfigSerializeWrapper
		if err := protocol.DecodeJSON(resp.Body, &w); err != nil {
			return err
		}
		if tc := w.TopicConfigTable[topic]; tc == nil || tc.ReadQueueNums != 2 {
			return fmt.Errorf("slave has %+v", tc)
		}
		return nil
	})
	if out, err := c.smartgoAdmin(t, "topic", "create", "-t", topic, "-r", "4", "-w", "4"); err != nil {
		t.Fatalf("admin topic update: %v\n%s", err, out)
	}
	p := newProducer(t, c.clients(), "ctl-grow-p")
	const n = 40
	queues := map[int]int{}
	for i := range n {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(fmt.Sprintf("grow-%d", i))))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %d: %+v %v", i, res, err)
		}
		queues[res.MessageQueue.QueueId]++
	}
	if queues[2]+queues[3] == 0 {
		t.Fatalf("no message went to the new queues: %v", queues)
	}
	c.brokers[m].kill9()
	c.waitMasterIs(t, s)
	var got received
	newPushConsumer(t, c.clients(), group, "ctl-grow-c", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(m)
		return consumer.ConsumeSuccess
	})
	testutil.Eventually(t, 90*time.Second, func() error {
		var missing []string
		for i := range n {
			if b := fmt.Sprintf("grow-%d", i); got.get(b) == nil {
				missing = append(missing, b)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("acknowledged messages not consumed (sent by queue %v): %v", queues, missing)
		}
		return nil
	})
}
