package rocketmq

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
)

// sendBodies sends one message per body, sync, and fails the test on any
// send that is not SEND_OK.
func sendBodies(t *testing.T, p rocketmq.Producer, topic string, bodies ...string) {
	t.Helper()
	for _, b := range bodies {
		res, err := p.SendSync(context.Background(), primitive.NewMessage(topic, []byte(b)))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %s: %v %v", b, res, err)
		}
	}
}

func numbered(prefix string, n int) []string {
	out := make([]string, n)
	for i := range out {
		out[i] = prefix + strconv.Itoa(i)
	}
	return out
}

// startConsumerFrom starts a push consumer of group on topic that starts,
// where the group has no committed offset, from where (with ts for
// ConsumeFromTimestamp), and records what it gets in r.
func startConsumerFrom(t *testing.T, s *standalone, group, instance, topic string, model consumer.MessageModel,
	where consumer.ConsumeFromWhere, ts string, r *received) rocketmq.PushConsumer {
	t.Helper()
	opts := []consumer.Option{consumer.WithConsumerModel(model), consumer.WithConsumeFromWhere(where)}
	if ts != "" {
		opts = append(opts, consumer.WithConsumeTimestamp(ts))
	}
	return makePushConsumer(t, s, group, instance, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: "*"}, true,
		func(m *primitive.MessageExt) consumer.ConsumeResult {
			r.add(m)
			return consumer.ConsumeSuccess
		}, opts...)
}

// hasAll reports whether r got every body.
func (r *received) hasAll(bodies []string) bool {
	for _, b := range bodies {
		if r.get(b) == nil {
			return false
		}
	}
	return true
}

// withPrefix returns the distinct bodies r got that start with prefix.
func (r *received) withPrefix(prefix string) []string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var out []string
	for b := range r.msgs {
		if strings.HasPrefix(b, prefix) {
			out = append(out, b)
		}
	}
	return out
}

// A new group that consumes from a timestamp (the Go client's
// CONSUME_FROM_TIMESTAMP) on a young queue: QUERY_CONSUMER_OFFSET answers
// 0 while the queue starts at 0 and its first message is in memory, so
// the group reads the queue from its first message, before the timestamp,
// as from a RocketMQ 4 broker (docs/protocols.md, "Where a new consumer
// group starts"). An operator who wants it to start later creates the
// group and resets its offsets by time first: after that the group's
// consumer gets only what was stored from the timestamp on.
func TestInteropConsumeFromTimestampYoungQueue(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropFromTime"
	createTopic(t, s.broker, topic, 4)
	p := newProducer(t, s, "prod-from-time")
	old := numbered("old-", 40)
	sendBodies(t, p, topic, old...)
	// The timestamp has whole seconds: wait until the clock is in a
	// second after the last old message's, and start from that second.
	last := time.Now()
	testutil.WaitFor(t, 5*time.Second, "the next second", func() bool { return time.Now().Unix() > last.Unix() })
	from := time.Now().UTC().Truncate(time.Second)
	fresh := numbered("new-", 40)
	sendBodies(t, p, topic, fresh...)

	const young = "interop-from-time-young"
	createTopic(t, s.broker, "%RETRY%"+young, 1)
	var got received
	startConsumerFrom(t, s, young, "cons-from-time-young", topic, consumer.Clustering, consumer.ConsumeFromTimestamp, from.Format("20060102150405"), &got)
	testutil.WaitFor(t, 60*time.Second, "the whole young queue", func() bool { return got.hasAll(old) && got.hasAll(fresh) })

	// The documented way to start later: the group and its offsets first.
	const later = "interop-from-time-later"
	createTopic(t, s.broker, "%RETRY%"+later, 1)
	c := &ctlCluster{registry: s.registry}
	if out, err := c.smartgoAdmin(t, "group", "create", "-g", later); err != nil {
		t.Fatalf("group create: %v\n%s", err, out)
	}
	if out, err := c.smartgoAdmin(t, "offset", "reset", "-g", later, "-t", topic, "-ts", strconv.FormatInt(from.UnixMilli(), 10)); err != nil {
		t.Fatalf("offset reset: %v\n%s", err, out)
	}
	var after received
	startConsumerFrom(t, s, later, "cons-from-time-later", topic, consumer.Clustering, consumer.ConsumeFromTimestamp, from.Format("20060102150405"), &after)
	live := numbered("live-", 10)
	sendBodies(t, p, topic, live...)
	testutil.WaitFor(t, 60*time.Second, "the messages from the timestamp on", func() bool { return after.hasAll(fresh) && after.hasAll(live) })
	if o := after.withPrefix("old-"); len(o) > 0 {
		t.Fatalf("a group reset to %s got %d messages stored before it: %v", from, len(o), o)
	}
	for _, b := range fresh {
		if m := after.get(b); m.StoreTimestamp < from.UnixMilli() {
			t.Errorf("%s stored at %d, before %d", b, m.StoreTimestamp, from.UnixMilli())
		}
	}
}

// A group consumed in clustering mode, then run in broadcasting mode (a
// deployment switching its model), then in clustering mode again: the
// broadcasting members get every message, and the clustering consumer
// afterwards resumes from the group's committed offsets, so it gets what
// was sent while the group was broadcasting and nothing it had consumed
// before the switch.
func TestInteropGroupSwitchesClusteringBroadcasting(t *testing.T) {
	s := startStandalone(t)
	group := fmt.Sprintf("interop-switch-%d", time.Now().UnixNano())
	const topic = "InteropSwitch"
	if home, err := os.UserHomeDir(); err == nil {
		t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(home, ".rocketmq_client_go", group)) })
	}
	createTopic(t, s.broker, topic, 4)
	createTopic(t, s.broker, "%RETRY%"+group, 1)
	p := newProducer(t, s, "prod-switch")

	first := numbered("first-", 30)
	sendBodies(t, p, topic, first...)
	var c1 received
	cl := startConsumerFrom(t, s, group, "cons-switch-c1", topic, consumer.Clustering, consumer.ConsumeFromFirstOffset, "", &c1)
	testutil.WaitFor(t, 60*time.Second, "the first messages in clustering mode", func() bool { return c1.hasAll(first) })
	// The group's offsets, committed by the client's periodic commit while
	// it runs. The commit its Shutdown sends is oneway, right before it
	// closes its connections, and one of its queues' was seen missing in
	// CI: the close reset the connection, the broker's next write to it
	// failed and closed it before the commit was read (fixed since,
	// `remoting/peergone_test.go`). The test is about the switch of model,
	// not that race.
	adm, err := admin.New(admin.Options{Registries: []string{s.registry}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	testutil.WaitFor(t, 30*time.Second, "the clustering consumer's offsets committed", func() bool {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		qs, err := adm.GroupProgress(ctx, group, topic)
		var n int64
		for _, q := range qs {
			n += max(q.ConsumerOffset, 0)
		}
		return err == nil && n == int64(len(first))
	})
	if err := cl.Shutdown(); err != nil {
		t.Fatal(err)
	}

	var ba, bb received
	bcA := startConsumerFrom(t, s, group, "cons-switch-ba", topic, consumer.BroadCasting, consumer.ConsumeFromLastOffset, "", &ba)
	bcB := startConsumerFrom(t, s, group, "cons-switch-bb", topic, consumer.BroadCasting, consumer.ConsumeFromLastOffset, "", &bb)
	// Both broadcasting members must be pulling before the next sends: a
	// marker sent until both have it.
	testutil.WaitFor(t, 60*time.Second, "both broadcasting members to be live", func() bool {
		sendBodies(t, p, topic, "marker-"+strconv.FormatInt(time.Now().UnixNano(), 10))
		return len(ba.withPrefix("marker-")) > 0 && len(bb.withPrefix("marker-")) > 0
	})
	during := numbered("during-", 30)
	sendBodies(t, p, topic, during...)
	testutil.WaitFor(t, 60*time.Second, "both broadcasting members to get everything", func() bool {
		return ba.hasAll(during) && bb.hasAll(during)
	})
	for _, c := range []rocketmq.PushConsumer{bcA, bcB} {
		if err := c.Shutdown(); err != nil {
			t.Fatal(err)
		}
	}

	var c2 received
	startConsumerFrom(t, s, group, "cons-switch-c2", topic, consumer.Clustering, consumer.ConsumeFromLastOffset, "", &c2)
	after := numbered("after-", 10)
	sendBodies(t, p, topic, after...)
	testutil.WaitFor(t, 60*time.Second, "the clustering consumer to resume", func() bool {
		return c2.hasAll(during) && c2.hasAll(after)
	})
	if f := c2.withPrefix("first-"); len(f) > 0 {
		t.Fatalf("the clustering consumer got %d messages its group had consumed before broadcasting: %v", len(f), f)
	}
}
