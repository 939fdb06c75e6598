package rocketmq

import (
	"context"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// Delay levels with rocketmq-client-go (the default levels: 1 = 1 s,
// 2 = 5 s): a delayed message reaches its consumer on its own topic, with
// its tag and keys, no earlier than its delay. A batch holding a delayed
// message is refused with a clear error: RocketMQ's broker would store it
// at once, delay ignored (the Java client refuses to build such a batch;
// the Go client sends it).
func TestInteropDelayLevels(t *testing.T) {
	s := startStandalone(t)
	const topic, group = "InteropDelay", "interop-delay"
	createTopic(t, s.broker, topic, 2)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	p := newProducer(t, s, "prod-delay")
	var mu sync.Mutex
	arrived := map[string]time.Duration{} // body -> consumed after born
	var got received
	newPushConsumer(t, s, group, "cons-delay", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		mu.Lock()
		if _, ok := arrived[string(m.Body)]; !ok {
			arrived[string(m.Body)] = time.Since(time.UnixMilli(m.BornTimestamp))
		}
		mu.Unlock()
		got.add(m)
		return consumer.ConsumeSuccess
	})
	// The consumer is live once it has taken a plain message.
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("warm-up"))); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, "the warm-up message", func() bool { return got.get("warm-up") != nil })

	delays := map[string]time.Duration{"level-1": time.Second, "level-2": 5 * time.Second}
	for body, level := range map[string]int{"level-1": 1, "level-2": 2} {
		m := primitive.NewMessage(topic, []byte(body))
		m.WithDelayTimeLevel(level)
		m.WithTag("TagD")
		m.WithKeys([]string{"key-" + body})
		if _, err := p.SendSync(context.Background(), m); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
	}
	testutil.WaitFor(t, 60*time.Second, "the delayed messages", func() bool {
		return got.get("level-1") != nil && got.get("level-2") != nil
	})
	mu.Lock()
	for body, d := range delays {
		m := got.get(body)
		if arrived[body] < d {
			t.Errorf("%s consumed %v after it was born, before its %v delay", body, arrived[body], d)
		}
		if m.Topic != topic || m.GetTags() != "TagD" || m.GetKeys() != "key-"+body || m.GetProperty("DELAY") != "" {
			t.Errorf("%s arrived as topic %q tags %q keys %q DELAY %q", body, m.Topic, m.GetTags(), m.GetKeys(), m.GetProperty("DELAY"))
		}
	}
	mu.Unlock()
	t.Logf("consumed after born: %v", arrived)

	delayed := primitive.NewMessage(topic, []byte("batch-delayed"))
	delayed.WithDelayTimeLevel(2)
	_, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("batch-plain")), delayed)
	if err == nil || !strings.Contains(err.Error(), "delay level") {
		t.Fatalf("batch with a delayed message: %v, want a refusal naming the delay level", err)
	}
	// Nothing of the refused batch is delivered, before or after a plain
	// message sent next.
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("after-batch"))); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, "the message after the refused batch", func() bool { return got.get("after-batch") != nil })
	if got.get("batch-plain") != nil || got.get("batch-delayed") != nil {
		t.Fatal("a message of the refused batch was delivered")
	}
}
