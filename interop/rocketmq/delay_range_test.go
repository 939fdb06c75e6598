package rocketmq

import (
	"context"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropDelayLevelsOutOfRange: rocketmq-client-go sends delay levels
// outside the broker's configured ones (here two: 1 s and 3 s). As
// RocketMQ's broker does, a level of 0 or below means no delay, and a
// level above the last is delivered at the last level's delay: neither is
// refused nor lost, and each arrives on its own topic.
func TestInteropDelayLevelsOutOfRange(t *testing.T) {
	s := startStandalone(t, "-set", "broker.delay_levels=1s 3s")
	const topic, group = "InteropDelayRange", "interop-delay-range"
	createTopic(t, s.broker, topic, 2)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	p := newProducer(t, s, "prod-delay-range")
	var mu sync.Mutex
	var order []string                    // bodies in the order first consumed
	arrived := map[string]time.Duration{} // body -> consumed after born
	var got received
	newPushConsumer(t, s, group, "cons-delay-range", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		mu.Lock()
		if _, ok := arrived[string(m.Body)]; !ok {
			arrived[string(m.Body)] = time.Since(time.UnixMilli(m.BornTimestamp))
			order = append(order, string(m.Body))
		}
		mu.Unlock()
		got.add(m)
		return consumer.ConsumeSuccess
	})
	if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte("warm-up"))); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, "the warm-up message", func() bool { return got.get("warm-up") != nil })

	// The clamped ones first, so the undelayed ones overtake them.
	levels := []struct {
		body  string
		level int
	}{{"level-19", 19}, {"level-100", 100}, {"level-0", 0}, {"level-minus-1", -1}}
	for _, l := range levels {
		m := primitive.NewMessage(topic, []byte(l.body))
		m.WithDelayTimeLevel(l.level)
		if res, err := p.SendSync(context.Background(), m); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %s: %v %v", l.body, res, err)
		}
	}
	testutil.WaitFor(t, 60*time.Second, "every out-of-range message", func() bool {
		for _, l := range levels {
			if got.get(l.body) == nil {
				return false
			}
		}
		return true
	})
	mu.Lock()
	defer mu.Unlock()
	t.Logf("consumed in order %v, after born %v", order, arrived)
	for _, body := range []string{"level-19", "level-100"} {
		if arrived[body] < 3*time.Second {
			t.Errorf("%s consumed %v after it was born, before the last level's 3s", body, arrived[body])
		}
	}
	first := map[string]bool{}
	for _, b := range order[1:3] { // after the warm-up
		first[b] = true
	}
	if !first["level-0"] || !first["level-minus-1"] {
		t.Errorf("consumed in order %v: levels 0 and -1 should not wait behind the delayed ones", order)
	}
	// A delayed message arrives without its DELAY; an undelayed one keeps
	// the property as sent (RocketMQ's broker does not touch it either).
	for _, l := range levels {
		m := got.get(l.body)
		if l.level > 0 && m.GetProperty("DELAY") != "" {
			t.Errorf("%s arrived with DELAY %q", l.body, m.GetProperty("DELAY"))
		}
		if m.Topic != topic {
			t.Errorf("%s arrived on topic %q", l.body, m.Topic)
		}
	}
}
