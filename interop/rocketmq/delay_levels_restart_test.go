package rocketmq

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropDelayLevelsShortenedAcrossRestart: rocketmq-client-go sends
// messages with delay level 5 to a `smartgo standalone` configured with
// five levels; it is stopped before they are due and started again on
// the same data with two levels. The messages waiting at level 5 are
// delivered under the last level's delay (as a send above the last level
// is), not kept forever in a schedule queue no level reads, and the
// restart finds no damage in the schedule queues.
func TestInteropDelayLevelsShortenedAcrossRestart(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a process twice")
	}
	dir := t.TempDir()
	s, stop := runStandaloneAt(t, dir, "-set", "broker.delay_levels=1s 1s 1s 1s 1h")
	const topic, group = "InteropDelayShrink", "interop-delay-shrink"
	createTopic(t, s.broker, topic, 2)
	p := newProducer(t, s, "prod-delay-shrink")
	var sent []string
	for i := range 4 {
		body := fmt.Sprintf("level-5-%d", i)
		m := primitive.NewMessage(topic, []byte(body))
		m.WithDelayTimeLevel(5)
		if res, err := p.SendSync(context.Background(), m); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %s: %v %v", body, res, err)
		}
		sent = append(sent, body)
	}
	_ = p.Shutdown()
	stop()

	s, _ = runStandaloneAt(t, dir, "-set", "broker.delay_levels=1s 2s")
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	var got received
	newPushConsumer(t, s, group, "cons-delay-shrink", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(m)
		return consumer.ConsumeSuccess
	})
	testutil.Eventually(t, 60*time.Second, func() error {
		var missing []string
		for _, b := range sent {
			if got.get(b) == nil {
				missing = append(missing, b)
			}
		}
		if len(missing) > 0 {
			return fmt.Errorf("delayed messages of a level no longer configured not delivered: %v", missing)
		}
		return nil
	})
	// The schedule queues' tagsCodes (due times) follow the levels: that
	// they differ from what the new levels give is not damage.
	if s.logContains("corruption found") {
		t.Error("the restart with other delay levels reported corruption")
	}
	for _, b := range sent {
		if m := got.get(b); m.Topic != topic || m.GetProperty("DELAY") != "" {
			t.Errorf("%s arrived as topic %q DELAY %q", b, m.Topic, m.GetProperty("DELAY"))
		}
	}
}
