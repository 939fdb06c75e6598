package rocketmq

import (
	"context"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// A producer's WAIT property (the Java client sets WAIT=true on every
// message) asks the broker to wait before answering; it is not message
// data, so the consumer must not see it. Single and batch sends.
func TestInteropWaitPropertyNotDelivered(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropWait"
	createTopic(t, s.broker, topic, 2)
	createTopic(t, s.broker, "%RETRY%interop-wait", 1)
	p := newProducer(t, s, "prod-wait")
	mk := func(body string) *primitive.Message {
		m := primitive.NewMessage(topic, []byte(body))
		m.WithTag("TagW")
		m.WithProperty("WAIT", "true")
		m.WithProperty("origin", "interop")
		return m
	}
	if _, err := p.SendSync(context.Background(), mk("single")); err != nil {
		t.Fatal(err)
	}
	if _, err := p.SendSync(context.Background(), mk("batch-0"), mk("batch-1")); err != nil {
		t.Fatal(err)
	}
	var got received
	newPushConsumer(t, s, "interop-wait", "cons-wait", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(m)
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 60*time.Second, "3 messages", func() bool { return got.distinct() == 3 })
	for _, body := range []string{"single", "batch-0", "batch-1"} {
		m := got.get(body)
		props := m.GetProperties()
		if _, ok := props["WAIT"]; ok {
			t.Errorf("%s delivered with WAIT: %v", body, props)
		}
		if m.GetTags() != "TagW" || props["origin"] != "interop" || props["CLUSTER"] == "" {
			t.Errorf("%s delivered with properties %v", body, props)
		}
	}
}
