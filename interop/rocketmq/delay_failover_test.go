package rocketmq

import (
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropControllerDelayAcrossFailover: a topic is created, a
// rocketmq-client-go push consumer subscribes to it and a producer sends it
// messages with delay levels 2 (5 s) and 3 (10 s); the controller-mode
// group's master is killed with SIGKILL at once, before they are due and
// before the slave copied the topic table (broker.slave_sync_interval).
// The promoted slave delivers each of them, not before its delay: it
// configures and routes the topic it had never heard of (it used to put
// them to a topic with no route, which no consumer ever read).
func TestInteropControllerDelayAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	const topic, group = "CtlDelay", "ctl-delay-g"
	c := startCtlCluster(t)
	m := c.waitHealthy(t)
	if out, err := c.smartgoAdmin(t, "topic", "create", "-t", topic, "-r", "2", "-w", "2"); err != nil {
		t.Fatalf("admin topic create: %v\n%s", err, out)
	}
	var got received
	newPushConsumer(t, c.clients(), group, "cons-ctl-delay", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(m)
		return consumer.ConsumeSuccess
	})
	p := newProducer(t, c.clients(), "prod-ctl-delay")
	sent := sendDelayed(t, p, topic)
	c.brokers[m].kill9()
	testutil.Eventually(t, 60*time.Second, func() error {
		g, err := c.group()
		if err == nil && g.MasterAddr != c.bAddrs[1-m] {
			err = fmt.Errorf("master %q, want %s", g.MasterAddr, c.bAddrs[1-m])
		}
		return err
	})
	t.Cleanup(func() {
		if !t.Failed() {
			return
		}
		for _, tp := range []string{topic, "SCHEDULE_TOPIC_XXXX"} {
			out, err := c.smartgoAdmin(t, "topic", "stats", "-t", tp)
			t.Logf("stats %s: %v\n%s", tp, err, out)
		}
	})
	awaitDelayed(t, &got, sent, "the failover")
}
