package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropRetryLevelsThenDeadLetter: a rocketmq-client-go push
// consumer that answers ConsumeRetryLater to every delivery, with max
// reconsume times 3 set only on the client (the group has no config),
// gets the message 4 times: reconsume times 0, 1, 2, 3, each retry after
// the delay of its level (levels 3, 4, 5 of broker.delay_levels: 1s, 2s,
// 4s here, growing as the default 10s, 30s, 1m do). After the last it is
// in %DLQ%<group>, with its body, original topic and keys: another
// group's rocketmq-client-go pull consumer reads it from there.
func TestInteropRetryLevelsThenDeadLetter(t *testing.T) {
	s := startStandalone(t, "-set", "broker.delay_levels=1s 1s 1s 2s 4s 8s")
	const topic, group = "InteropRetryLevels", "interop-retry-levels"
	createTopic(t, s.broker, topic, 1)
	// See TestInteropConsumerRetry: the Go client reads the retry topic's
	// route as it starts.
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	p := newProducer(t, s, "prod-retry-levels")
	m := primitive.NewMessage(topic, []byte("never-consumed"))
	m.WithKeys([]string{"k-retry-levels"})
	ctx, cancel := context.WithTimeout(context.Background(), 120*time.Second)
	defer cancel()
	if res, err := p.SendSync(ctx, m); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send: %v %v", res, err)
	}

	type delivery struct {
		at        time.Time
		reconsume int32
		topic     string
	}
	var mu sync.Mutex
	var got []delivery
	deliveries := func() []delivery {
		mu.Lock()
		defer mu.Unlock()
		return append([]delivery(nil), got...)
	}
	makePushConsumer(t, s, group, "cons-retry-levels", topic, consumer.MessageSelector{}, true,
		func(m *primitive.MessageExt) consumer.ConsumeResult {
			if string(m.Body) == "never-consumed" {
				mu.Lock()
				got = append(got, delivery{time.Now(), m.ReconsumeTimes, m.Topic})
				mu.Unlock()
			}
			return consumer.ConsumeRetryLater
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithMaxReconsumeTimes(3))

	// The dead letter, read with the client from another group once the
	// broker made the topic (the client refuses a topic without a route).
	var dlq rocketmq.PullConsumer
	testutil.Eventually(t, 90*time.Second, func() error {
		c, err := rocketmq.NewPullConsumer(consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{s.registry})),
			consumer.WithGroupName("interop-retry-levels-dlq"), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
		if err != nil {
			t.Fatal(err)
		}
		if err = c.Subscribe("%DLQ%"+group, consumer.MessageSelector{}); err == nil {
			if err = c.Start(); err == nil {
				dlq = c
				return nil
			}
		}
		_ = c.Shutdown()
		return fmt.Errorf("pull consumer of %%DLQ%%%s after %d deliveries: %w", group, len(deliveries()), err)
	})
	t.Cleanup(func() { _ = dlq.Shutdown() })
	var dead *primitive.MessageExt
	for deadline := time.Now().Add(90 * time.Second); dead == nil; {
		if time.Now().After(deadline) {
			t.Fatalf("nothing in %%DLQ%%%s after %d deliveries", group, len(deliveries()))
		}
		cr, err := dlq.Poll(ctx, 2*time.Second)
		if errors.Is(err, consumer.ErrNoNewMsg) {
			continue
		}
		if err != nil {
			t.Fatalf("Poll %%DLQ%%%s: %v", group, err)
		}
		for _, m := range cr.GetMsgList() {
			if dead != nil {
				t.Errorf("a second dead letter: %q", m.Body)
			}
			dead = m
		}
		dlq.ACK(ctx, cr, consumer.ConsumeSuccess)
	}
	if string(dead.Body) != "never-consumed" || dead.GetKeys() != "k-retry-levels" ||
		dead.GetProperty(primitive.PropertyRetryTopic) != topic {
		t.Errorf("dead letter: body %q keys %q original topic %q", dead.Body, dead.GetKeys(), dead.GetProperty(primitive.PropertyRetryTopic))
	}

	d := deliveries()
	if len(d) != 4 {
		t.Fatalf("%d deliveries before the dead-letter queue, want 4 (max reconsume times 3): %+v", len(d), d)
	}
	levels := []time.Duration{0, time.Second, 2 * time.Second, 4 * time.Second}
	for i, x := range d {
		if x.reconsume != int32(i) || x.topic != topic {
			t.Errorf("delivery %d: reconsume times %d topic %q, want %d %q", i, x.reconsume, x.topic, i, topic)
		}
		if i == 0 {
			continue
		}
		// The broker holds a retry at least its level's delay (timers
		// may fire up to 100 ms early at their granularity).
		gap := x.at.Sub(d[i-1].at)
		t.Logf("retry %d after %v", i, gap)
		if gap < levels[i]-100*time.Millisecond {
			t.Errorf("retry %d came %v after the delivery before it, want at least its level's %v", i, gap, levels[i])
		}
	}
}
