package rocketmq

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
)

// An orderly consumer (rocketmq-client-go) that cannot consume one
// message of its queue suspends the queue for it again and again; past
// its max reconsume times the client sends the message back with delay
// level -1, which puts it straight into the group's dead-letter queue.
// The queue then goes on: the steps behind the poisoned one are consumed,
// in order, and the dead letter is in %DLQ%<group> with its body, its
// original topic and its keys, and found there by its key.
func TestInteropOrderlyPoisonToDeadLetter(t *testing.T) {
	s := startStandalone(t)
	const topic, group = "InteropOrderlyPoison", "interop-orderly-poison"
	createTopic(t, s.broker, topic, 1)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	resolver := primitive.NewPassthroughResolver([]string{s.registry})
	p := newOrderedProducer(t, s, "interop-orderly-poison-pg", "prod-orderly-poison")
	const steps, poison = 10, 4
	for st := 0; st < steps; st++ {
		m := primitive.NewMessage(topic, []byte(fmt.Sprintf("o0-s%d", st)))
		m.WithShardingKey("order-0")
		m.WithKeys([]string{fmt.Sprintf("step-%d", st)})
		if res, err := p.SendSync(context.Background(), m); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send step %d: %v %v", st, res, err)
		}
	}
	var mu sync.Mutex
	var seq []int
	tries := 0
	c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(resolver), consumer.WithGroupName(group), consumer.WithInstance("cons-orderly-poison"),
		consumer.WithConsumerOrder(true), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset),
		consumer.WithMaxReconsumeTimes(2), consumer.WithSuspendCurrentQueueTimeMillis(100*time.Millisecond))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			var o, st int
			if _, err := fmt.Sscanf(string(m.Body), "o%d-s%d", &o, &st); err != nil {
				t.Errorf("unexpected message %q", m.Body)
				continue
			}
			if st == poison {
				tries++
				return consumer.SuspendCurrentQueueAMoment, nil
			}
			seq = append(seq, st)
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
	testutil.WaitFor(t, 90*time.Second, "the steps behind the poisoned one", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seq) >= steps-1
	})
	mu.Lock()
	want := 0
	for i, st := range seq {
		if want == poison {
			want++
		}
		if st != want && !(i > 0 && st <= seq[i-1]) {
			t.Errorf("consumed %v: step %d out of order", seq, st)
			break
		}
		if st == want {
			want++
		}
	}
	if want != steps {
		t.Errorf("consumed %v: want every step but %d, in order", seq, poison)
	}
	if tries < 3 {
		t.Errorf("the poisoned step was tried %d times, want 3 (max reconsume times 2)", tries)
	}
	mu.Unlock()

	adm, err := admin.New(admin.Options{Registries: []string{s.registry}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	testutil.Eventually(t, 30*time.Second, func() error {
		msgs, _, _, _, err := adm.BrowseMessages(ctx, "%DLQ%"+group, "broker-a", 0, 0, 10)
		if err != nil {
			return err
		}
		if len(msgs) != 1 {
			return fmt.Errorf("%d messages in the dead-letter queue", len(msgs))
		}
		m := msgs[0]
		if string(m.Body) != fmt.Sprintf("o0-s%d", poison) || m.Property("RETRY_TOPIC") != topic || m.Property("KEYS") != fmt.Sprintf("step-%d", poison) {
			t.Fatalf("dead letter %q with properties %q", m.Body, m.RawProperties)
		}
		return nil
	})
	// The dead letter is found by its key in the dead-letter topic, as
	// mqadmin queryMsgByKey -t %DLQ%<group> finds it.
	testutil.Eventually(t, 30*time.Second, func() error {
		found, err := adm.MessagesByKey(ctx, "%DLQ%"+group, fmt.Sprintf("step-%d", poison), 10, time.Time{}, time.Now().Add(time.Minute), false)
		if err != nil {
			return err
		}
		if len(found) != 1 || string(found[0].Body) != fmt.Sprintf("o0-s%d", poison) {
			return fmt.Errorf("%d messages found by key in the dead-letter topic", len(found))
		}
		return nil
	})
}
