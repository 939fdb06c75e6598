package rocketmq

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropDeadLetterResentToItsGroup: a rocketmq-client-go consumer
// fails a message until it has used every attempt its group allows (2
// here; 16 by default), so the broker moves it to %DLQ%<group>. The
// operator resends the dead letter to the group (the console's "Resend to
// group", admin.ResendToGroup): the consumer gets it once more. The
// resend used to put it straight back into the dead-letter queue (its
// reconsume count was already at the group's maximum) while it reported
// success.
func TestInteropDeadLetterResentToItsGroup(t *testing.T) {
	s := startStandalone(t, "-set", "broker.delay_levels=1s 1s 1s")
	const topic, group = "InteropDLQResend", "interop-dlq-resend"
	createTopic(t, s.broker, topic, 1)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	adm, err := admin.New(admin.Options{Registries: []string{s.registry}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if err := adm.CreateGroup(ctx, "", admin.GroupConfig{Name: group, RetryMaxTimes: 2}); err != nil {
		t.Fatal(err)
	}
	p := newProducer(t, s, "prod-dlq-resend")
	if _, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("dead-letter"))); err != nil {
		t.Fatal(err)
	}

	var accept atomic.Bool
	var attempts, accepted atomic.Int64
	c, err := rocketmq.NewPushConsumer(
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{s.registry})),
		consumer.WithGroupName(group), consumer.WithInstance("cons-dlq-resend"),
		consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset), consumer.WithMaxReconsumeTimes(2))
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, consumer.MessageSelector{}, func(_ context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
		attempts.Add(int64(len(msgs)))
		if !accept.Load() {
			return consumer.ConsumeRetryLater, nil
		}
		for _, m := range msgs {
			if string(m.Body) == "dead-letter" && m.Topic == topic {
				accepted.Add(1)
			}
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

	var dead string // its offset message id
	testutil.Eventually(t, 80*time.Second, func() error {
		msgs, _, _, _, err := adm.BrowseMessages(ctx, "%DLQ%"+group, "broker-a", 0, 0, 10)
		if err != nil {
			return fmt.Errorf("%w (after %d attempts)", err, attempts.Load())
		}
		if len(msgs) != 1 {
			return fmt.Errorf("%d messages in the dead-letter queue after %d attempts", len(msgs), attempts.Load())
		}
		dead = msgs[0].OffsetMsgID
		return nil
	})
	accept.Store(true)
	if err := adm.ResendToGroup(ctx, dead, group); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, "the resent dead letter consumed", func() bool { return accepted.Load() > 0 })
	if msgs, _, _, _, err := adm.BrowseMessages(ctx, "%DLQ%"+group, "broker-a", 0, 0, 10); err != nil || len(msgs) != 1 {
		t.Errorf("dead-letter queue after the resend: %d messages (%v), want the 1 resent", len(msgs), err)
	}
}

// TestInteropResendAfterTheBrokerMoved: a message stored by a broker that
// has since restarted on another address (as after a failover: the
// message id names a broker that no longer answers) is shown by its id
// from the log that holds it, and resending it to a group goes to that
// log's broker group's master: the rocketmq-client-go consumer gets it
// again. The resend used to dial the address in the id and fail.
func TestInteropResendAfterTheBrokerMoved(t *testing.T) {
	dir := t.TempDir()
	const topic, group = "InteropResendMoved", "interop-resend-moved"
	s, stop := runStandaloneAt(t, dir)
	createTopic(t, s.broker, topic, 1)
	p := newProducer(t, s, "prod-resend-moved")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("again")))
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send: %v %v", res, err)
	}
	_ = p.Shutdown()
	stop()

	s, _ = runStandaloneAt(t, dir) // the same log, other ports
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	adm, err := admin.New(admin.Options{Registries: []string{s.registry}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	if err := adm.CreateGroup(ctx, "", admin.GroupConfig{Name: group}); err != nil {
		t.Fatal(err)
	}
	var first, again atomic.Int64
	newPushConsumer(t, s, group, "cons-resend-moved", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		if string(m.Body) == "again" {
			if m.ReconsumeTimes == 0 {
				first.Add(1)
			} else {
				again.Add(1)
			}
		}
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 60*time.Second, "the message consumed", func() bool { return first.Load() > 0 })
	if m, err := adm.MessageByID(ctx, res.OffsetMsgID); err != nil || string(m.Body) != "again" {
		t.Fatalf("message %s by id after the move: %v %v", res.OffsetMsgID, m, err)
	}
	if err := adm.ResendToGroup(ctx, res.OffsetMsgID, group); err != nil {
		t.Fatalf("resend %s after the move: %v", res.OffsetMsgID, err)
	}
	testutil.WaitFor(t, 60*time.Second, "the resent message consumed", func() bool { return again.Load() > 0 })
}
