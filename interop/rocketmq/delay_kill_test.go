package rocketmq

import (
	"context"
	"fmt"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropDelayLevelsAcrossKill9: rocketmq-client-go sends messages
// with delay levels 2 (5 s) and 3 (10 s) to a `smartgo standalone` that is
// killed with SIGKILL and restarted before they are due. Each reaches its
// consumer after the restart, not before its delay.
func TestInteropDelayLevelsAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a process")
	}
	k := startKillable(t)
	const topic, group = "InteropDelayKill", "interop-delayk"
	createTopic(t, k.broker, topic, 2)
	createTopic(t, k.broker, "%RETRY%"+group, 1)
	p := newProducer(t, &k.standalone, "prod-delayk")
	sent := sendDelayed(t, p, topic)
	k.kill9Restart(t)
	var got received
	newPushConsumer(t, &k.standalone, group, "cons-delayk", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(m)
		return consumer.ConsumeSuccess
	})
	awaitDelayed(t, &got, sent, "the restart")
	t.Logf("%d delayed messages consumed after kill -9 (%d deliveries)", len(sent), got.n.Load())
}

// sendDelayed sends 20 messages to topic with delay levels 2 (5 s) and 3
// (10 s) and returns each body with its delay.
func sendDelayed(t *testing.T, p rocketmq.Producer, topic string) map[string]time.Duration {
	t.Helper()
	sent := map[string]time.Duration{}
	for i := range 20 {
		level := 2 + i%2
		body := fmt.Sprintf("delayed-%d-level-%d", i, level)
		m := primitive.NewMessage(topic, []byte(body))
		m.WithDelayTimeLevel(level)
		if res, err := p.SendSync(context.Background(), m); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %s: %v %v", body, res, err)
		}
		sent[body] = map[int]time.Duration{2: 5 * time.Second, 3: 10 * time.Second}[level]
	}
	return sent
}

// awaitDelayed waits until got has every message of sent, each stored in
// its topic no sooner than its delay after it was born.
func awaitDelayed(t *testing.T, got *received, sent map[string]time.Duration, after string) {
	t.Helper()
	testutil.Eventually(t, 90*time.Second, func() error {
		n := 0
		for b := range sent {
			if got.get(b) == nil {
				n++
			}
		}
		if n > 0 {
			return fmt.Errorf("%d of %d delayed messages not consumed after %s", n, len(sent), after)
		}
		return nil
	})
	for b, d := range sent {
		m := got.get(b)
		if early := time.UnixMilli(m.StoreTimestamp).Sub(time.UnixMilli(m.BornTimestamp)); early < d-100*time.Millisecond {
			t.Errorf("%s stored in its topic %v after it was born, before its delay %v", b, early, d)
		}
	}
}
