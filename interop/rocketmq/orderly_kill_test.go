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
	"github.com/apache/rocketmq-client-go/v2/producer"

	"github.com/smartgo/smartgo/internal/testutil"
)

// orderSeq records, per order, the steps an orderly consumer was given,
// in the order it was given them.
type orderSeq struct {
	mu  sync.Mutex
	seq map[int][]int // protected by mu
	bad []string      // protected by mu
}

func (s *orderSeq) add(body string) {
	var o, st int
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, err := fmt.Sscanf(body, "o%d-s%d", &o, &st); err != nil {
		s.bad = append(s.bad, body)
		return
	}
	if s.seq == nil {
		s.seq = map[int][]int{}
	}
	s.seq[o] = append(s.seq[o], st)
}

// complete reports whether every order up to orders had steps 0..steps-1.
func (s *orderSeq) complete(orders, steps int) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	for o := 0; o < orders; o++ {
		max := -1
		for _, st := range s.seq[o] {
			max = maxInt(max, st)
		}
		if max < steps-1 {
			return false
		}
	}
	return true
}

func maxInt(a, b int) int {
	if a > b {
		return a
	}
	return b
}

// check fails t for an order whose steps were not given in sequence:
// each step is at most one past the highest given so far (a step given
// again after a restart is at-least-once; a step given before the one
// ahead of it is out of order), and the first is step 0.
func (s *orderSeq) check(t *testing.T) {
	t.Helper()
	s.mu.Lock()
	defer s.mu.Unlock()
	if len(s.bad) > 0 {
		t.Errorf("unexpected bodies %v", s.bad)
	}
	for o, seq := range s.seq {
		max := -1
		for i, st := range seq {
			if st > max+1 {
				t.Errorf("order %d: step %d given after %v (at %d), before step %d", o, st, seq[:i], i, max+1)
				break
			}
			max = maxInt(max, st)
		}
	}
}

// Ordered messages (a hash queue selector, an orderly push consumer)
// across a kill -9 of the broker: each order's steps reach the consumer
// in sequence, those acknowledged before the kill and those sent after
// it; a step may come again after the restart (its offset was not
// committed yet), never ahead of an earlier one, and none is lost.
func TestInteropOrderlyAcrossKill9(t *testing.T) {
	k := startKillable(t)
	s := &k.standalone
	const topic, group = "InteropOrderlyKill", "interop-orderly-kill"
	createTopic(t, s.broker, topic, 4)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	runOrdersAcross(t, s, topic, group, func() { k.kill9Restart(t) })
}

// runOrdersAcross sends the first half of 8 orders' steps through an
// ordered producer (hash selector on the order), consumes them with an
// orderly push consumer of group, runs fault, sends the second half (a
// step again until it is acknowledged, so each order's steps are stored
// in sequence) and checks that every step arrived, in sequence.
func runOrdersAcross(t *testing.T, s *standalone, topic, group string, fault func()) {
	t.Helper()
	resolver := primitive.NewPassthroughResolver([]string{s.registry})
	p := newOrderedProducer(t, s, group+"-pg", group+"-p", producer.WithRetry(0), producer.WithSendMsgTimeout(5*time.Second))
	const orders, steps = 8, 40
	send := func(from, to int) {
		t.Helper()
		for st := from; st < to; st++ {
			for o := 0; o < orders; o++ {
				m := primitive.NewMessage(topic, []byte(fmt.Sprintf("o%d-s%d", o, st)))
				m.WithShardingKey(fmt.Sprintf("order-%d", o))
				// After the fault the producer's route and connection
				// come back within a few tries; an unacknowledged step is
				// sent again, so each order's steps stay in sequence.
				testutil.WaitFor(t, 90*time.Second, fmt.Sprintf("o%d-s%d acknowledged", o, st), func() bool {
					res, err := p.SendSync(context.Background(), m)
					return err == nil && res.Status == primitive.SendOK
				})
			}
		}
	}
	var got orderSeq
	c, err := rocketmq.NewPushConsumer(consumer.WithNsResolver(resolver), consumer.WithGroupName(group), consumer.WithInstance(group+"-c"),
		consumer.WithConsumerOrder(true), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		for _, m := range msgs {
			got.add(string(m.Body))
		}
		return consumer.ConsumeSuccess, nil
	})
	if err != nil {
		t.Fatal(err)
	}
	send(0, steps/2)
	if err := c.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	testutil.WaitFor(t, 60*time.Second, "the first half consumed", func() bool { return got.complete(orders, steps/2) })
	fault()
	send(steps/2, steps)
	testutil.WaitFor(t, 120*time.Second, "every step consumed", func() bool { return got.complete(orders, steps) })
	got.check(t)
}

// TestInteropControllerOrderlyAcrossFailover: ordered messages and an
// orderly consumer (rocketmq-client-go) on a controller-mode group whose
// master is killed with SIGKILL: the slave is promoted (its lock table
// empty, the consumer locks its queues again), and every order's steps,
// those stored before the kill and those sent after it, are consumed in
// sequence, none lost.
func TestInteropControllerOrderlyAcrossFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	const topic, group = "CtlOrderly", "ctl-orderly"
	c := startCtlCluster(t)
	m := c.waitHealthy(t)
	for _, tp := range []string{topic, "%RETRY%" + group} {
		if out, err := c.smartgoAdmin(t, "topic", "create", "-t", tp, "-r", "4", "-w", "4"); err != nil {
			t.Fatalf("admin topic create: %v\n%s", err, out)
		}
	}
	runOrdersAcross(t, c.clients(), topic, group, func() {
		c.brokers[m].kill9()
		c.waitMasterIs(t, 1-m)
	})
}
