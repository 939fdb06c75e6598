package rocketmq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/smartgo/smartgo/internal/testutil"
)

// Ordered messages with rocketmq-client-go: a producer with a hash queue
// selector sends each order's steps to one queue (sync and oneway), and
// an orderly push consumer (LOCK_BATCH_MQ, one queue at a time) gets each
// order's steps in sequence, also when it suspends a queue once
// (SuspendCurrentQueueAMoment) and the step is consumed again.
func TestInteropOrderlyConsumer(t *testing.T) {
	s := startStandalone(t)
	const topic, group = "InteropOrderly", "interop-orderly"
	createTopic(t, s.broker, topic, 4)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	resolver := primitive.NewPassthroughResolver([]string{s.registry})
	p := newOrderedProducer(t, s, "interop-orderly-pg", "prod-orderly")
	const orders, steps = 8, 10
	queues := map[int]map[int]bool{} // order -> queue ids its steps went to
	for st := 0; st < steps; st++ {
		for o := 0; o < orders; o++ {
			m := primitive.NewMessage(topic, []byte(fmt.Sprintf("o%d-s%d", o, st)))
			m.WithShardingKey(fmt.Sprintf("order-%d", o))
			if st%2 == 1 {
				// Oneway sends go through the same selector.
				if err := p.SendOneWay(context.Background(), m); err != nil {
					t.Fatal(err)
				}
				continue
			}
			res, err := p.SendSync(context.Background(), m)
			if err != nil {
				t.Fatal(err)
			}
			if queues[o] == nil {
				queues[o] = map[int]bool{}
			}
			queues[o][res.MessageQueue.QueueId] = true
		}
	}
	for o, qs := range queues {
		if len(qs) != 1 {
			t.Fatalf("order %d went to queues %v", o, qs)
		}
	}
	var mu sync.Mutex
	seq := map[int][]int{}
	var n atomic.Int64
	var suspended atomic.Bool
	c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(resolver), consumer.WithGroupName(group), consumer.WithInstance("cons-orderly"),
		consumer.WithConsumerOrder(true), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			var o, st int
			if _, err := fmt.Sscanf(string(m.Body), "o%d-s%d", &o, &st); err != nil {
				t.Errorf("unexpected message %q", m.Body)
				continue
			}
			if o == 3 && st == 5 && suspended.CompareAndSwap(false, true) {
				return consumer.SuspendCurrentQueueAMoment, nil
			}
			mu.Lock()
			seq[o] = append(seq[o], st)
			mu.Unlock()
			n.Add(1)
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	testutil.WaitFor(t, 90*time.Second, fmt.Sprintf("%d ordered messages", orders*steps), func() bool { return n.Load() >= orders*steps })
	mu.Lock()
	defer mu.Unlock()
	for o := 0; o < orders; o++ {
		for i, st := range seq[o] {
			if st != i {
				t.Errorf("order %d consumed as %v, want steps 0..%d in sequence", o, seq[o], steps-1)
				break
			}
		}
	}
	if !suspended.Load() {
		t.Error("the suspension was never exercised")
	}
}

// newOrderedProducer starts a producer of group whose hash queue selector
// sends the messages of a sharding key to one queue; opts come after its
// registry, group, instance and selector. Cleanup shuts it down.
func newOrderedProducer(t *testing.T, s *standalone, group, instance string, opts ...producer.Option) rocketmq.Producer {
	t.Helper()
	p, err := rocketmq.NewProducer(append([]producer.Option{producer.WithNsResolver(primitive.NewPassthroughResolver([]string{s.registry})),
		producer.WithGroupName(group), producer.WithInstanceName(instance), producer.WithQueueSelector(producer.NewHashQueueSelector())}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}
