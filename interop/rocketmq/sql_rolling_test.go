package rocketmq

import (
	"context"
	"fmt"
	"strconv"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// groupConnection asks the broker for a consumer group's members and
// subscriptions (GET_CONSUMER_CONNECTION_LIST, as mqadmin
// consumerConnection does).
func groupConnection(t *testing.T, broker, group string) (protocol.ConsumerConnection, error) {
	t.Helper()
	c := newRemotingClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, broker, protocol.NewRequest(protocol.GetConsumerConnectionList, &protocol.ConsumerGroupHeader{ConsumerGroup: group}, nil))
	if err != nil {
		return protocol.ConsumerConnection{}, err
	}
	if resp.Code != protocol.Success {
		return protocol.ConsumerConnection{}, fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
	}
	var cc protocol.ConsumerConnection
	err = protocol.DecodeJSON(resp.Body, &cc)
	return cc, err
}

// sqlConsumer makes a rocketmq-client-go push consumer of group with a
// SQL92 selector on topic, not started; it records what it gets in r.
func sqlConsumer(t *testing.T, s *standalone, group, instance, topic, expr string, r *received) rocketmq.PushConsumer {
	t.Helper()
	return makePushConsumer(t, s, group, instance, topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: expr}, false,
		func(m *primitive.MessageExt) consumer.ConsumeResult {
			r.add(m)
			return consumer.ConsumeSuccess
		}, consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
}

// TestInteropSQL92SelectorRollingChange: a group's SQL92 selector changed
// by a rolling deployment. A member with the new selector (subscribed
// later: a newer subscription version) runs beside a member with the old
// one, whose heartbeat reaches the broker after the new member's; then
// the old member leaves. What is sent after that is filtered by the new
// selector: the new member gets every message it selects and none of the
// others. The broker used to take the group's subscription from whichever
// heartbeat came last, so it went back to the old selector, kept it after
// the old member left, and until the new member's next heartbeat (up to
// 30 s) filtered the queue with it: the messages of the new selector were
// skipped for the group, never delivered.
func TestInteropSQL92SelectorRollingChange(t *testing.T) {
	s := startStandalone(t)
	const topic, group = "InteropSQLRolling", "interop-sql-rolling"
	createTopic(t, s.broker, topic, 1)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	p := newProducer(t, s, "prod-sql-rolling")
	send := func(prefix, kind string, n int) []string {
		t.Helper()
		var bodies []string
		for i := 0; i < n; i++ {
			b := prefix + strconv.Itoa(i)
			m := primitive.NewMessage(topic, []byte(b))
			m.WithProperty("kind", kind)
			if res, err := p.SendSync(context.Background(), m); err != nil || res.Status != primitive.SendOK {
				t.Fatalf("send %s: %v %v", b, res, err)
			}
			bodies = append(bodies, b)
		}
		return bodies
	}
	sub := func(cc protocol.ConsumerConnection) string {
		if sd := cc.SubscriptionTable[topic]; sd != nil {
			return sd.SubString
		}
		return ""
	}

	var old, fresh received
	oldC := sqlConsumer(t, s, group, "cons-sql-rolling-old", topic, "kind = 'a'", &old)
	newC := sqlConsumer(t, s, group, "cons-sql-rolling-new", topic, "kind = 'b'", &fresh)
	started := time.Now()
	if err := newC.Start(); err != nil {
		t.Fatal(err)
	}
	marker := send("marker-b-", "b", 1)
	testutil.WaitFor(t, 30*time.Second, "the new member consuming", func() bool { return fresh.hasAll(marker) })
	// The client heartbeats when it starts and again a second later; the
	// old member's heartbeat is to come after both.
	testutil.WaitFor(t, 5*time.Second, "the new member's second heartbeat", func() bool { return time.Since(started) > 2*time.Second })
	if err := oldC.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		cc, err := groupConnection(t, s.broker, group)
		if err == nil && len(cc.ConnectionSet) != 2 {
			err = fmt.Errorf("%d members", len(cc.ConnectionSet))
		}
		return err
	})
	if err := oldC.Shutdown(); err != nil {
		t.Fatal(err)
	}
	var cc protocol.ConsumerConnection
	testutil.Eventually(t, 30*time.Second, func() error {
		var err error
		cc, err = groupConnection(t, s.broker, group)
		if err == nil && len(cc.ConnectionSet) != 1 {
			err = fmt.Errorf("%d members", len(cc.ConnectionSet))
		}
		return err
	})
	if got := sub(cc); got != "kind = 'b'" {
		t.Errorf("the group's subscription is %q with only the new member left", got)
	}
	bs := send("b-", "b", 10)
	as := send("a-", "a", 10)
	testutil.WaitFor(t, 60*time.Second, "the new selector's messages", func() bool { return fresh.hasAll(bs) })
	// A fence the new selector takes, sent last (one queue): when it is
	// in, every message before it was given or filtered out.
	fence := send("fence-", "b", 1)
	testutil.WaitFor(t, 30*time.Second, "the fence", func() bool { return fresh.hasAll(fence) })
	for _, b := range as {
		if fresh.get(b) != nil {
			t.Errorf("the new member got %s, which its selector does not take", b)
		}
	}
}
