package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// rocketmq-client-go's pull consumer: Poll returns what its background
// pulls fetched (they send maxMsgNums 0, which RocketMQ serves as one
// message), ACK commits it.
func TestInteropPullConsumerPoll(t *testing.T) {
	s := startStandalone(t)
	const topic, group = "InteropPoll", "interop-poll"
	createTopic(t, s.broker, topic, 2)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	p := newProducer(t, s, "prod-poll")
	want := map[string]bool{}
	for i := 0; i < 10; i++ {
		body := fmt.Sprintf("poll-%d", i)
		if _, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(body))); err != nil {
			t.Fatalf("send %s: %v", body, err)
		}
		want[body] = true
	}
	c := startPullConsumer(t, s.registry, group, topic)
	got := map[string]bool{}
	deadline := time.Now().Add(90 * time.Second)
	for len(got) < len(want) {
		if time.Now().After(deadline) {
			t.Fatalf("Poll returned %d of %d messages in 90 s: %v", len(got), len(want), got)
		}
		cr, err := c.Poll(context.Background(), 5*time.Second)
		if errors.Is(err, consumer.ErrNoNewMsg) {
			continue
		}
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		for _, m := range cr.GetMsgList() {
			if !want[string(m.Body)] || m.Topic != topic {
				t.Fatalf("Poll returned %q of topic %q", m.Body, m.Topic)
			}
			got[string(m.Body)] = true
		}
		c.ACK(context.Background(), cr, consumer.ConsumeSuccess)
	}
}

// startPullConsumer starts a rocketmq-client-go pull consumer of group on
// topic from the first offset; cleanup shuts it down.
func startPullConsumer(t *testing.T, registry, group, topic string) rocketmq.PullConsumer {
	t.Helper()
	c, err := rocketmq.NewPullConsumer(consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{registry})),
		consumer.WithGroupName(group), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Subscribe(topic, consumer.MessageSelector{}); err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	return c
}
