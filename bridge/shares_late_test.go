package bridge

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
)

// holdNothing allocates its member no queue: a member of a group that
// only shrinks the others' share while it is there.
type holdNothing struct{}

func (holdNothing) Name() string { return "NONE" }

func (holdNothing) Allocate(string, []client.MessageQueue, []string) []client.MessageQueue {
	return nil
}

// TestBridgeSharedSubscriptionLateQueueStartsAtSuback: a queue of a
// shared subscription's group that the node's consumer is assigned after
// its start (here: another member of the group took part of the queues,
// then left; in production also a first rebalance that failed, or a
// member of another node) starts at the SUBACK like the others. Only the
// queues held at the start used to be moved there: a late one started at
// the max offset of the moment in a new group (skipping what came after
// the SUBACK) and at the old offsets in a restarted one (any node taking
// it would hand the member the backlog of while the group had none).
// The queues hold history that is not young, so a group without offsets
// starts at a queue's end.
func TestBridgeSharedSubscriptionLateQueueStartsAtSuback(t *testing.T) {
	for _, restart := range []bool{false, true} {
		name := "new"
		if restart {
			name = "restarted"
		}
		t.Run(name, func(t *testing.T) { lateQueues(t, restart) })
	}
}

func lateQueues(t *testing.T, restart bool) {
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir(), MemoryResidentBytes: 1})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	const share = "$share/late/jobs/#"
	var armed atomic.Bool
	extraC := make(chan *client.PullConsumer, 1)
	b := startBridgeWith(t, c, func(_ *mqtt.Options, o *Options) { o.ShareRefresh = 100 * time.Millisecond }, func(b *Bridge) {
		b.Backend().testShareHook = func(step, s string) {
			if step != "join" || s != share || !armed.CompareAndSwap(true, false) {
				return
			}
			pc, err := joinHoldingNothing(ctx, c, b.Backend(), shareGroup(share))
			if err != nil {
				t.Errorf("the other member: %v", err)
			}
			extraC <- pc
		}
	})
	prod := newProducer(t, c)
	publish := func(prefix string) {
		t.Helper()
		for i := range 20 { // round-robin: five on each of the topic's queues
			sendCmd(t, prod, "jobs/x", fmt.Sprint(prefix, i))
		}
	}
	var mu sync.Mutex
	got := map[string]int{}
	count := func(prefix string) int { return distinctWith(&mu, got, prefix) }
	subscribe := func(id string) *paho.Client {
		t.Helper()
		m := pahoShareMember(t, ctx, addrOf(b), id, &mu, got)
		if sa, err := m.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: share, QoS: 1}}}); err != nil || sa.Reasons[0] != 1 {
			t.Fatalf("subscribe %s: %v %+v", id, err, sa)
		}
		return m
	}

	publish("old-") // history the subscription must not get
	if restart {
		m1 := subscribe("late-m1")
		publish("first-")
		testutil.WaitFor(t, 30*time.Second, "the first member got its messages", func() bool { return count("first-") == 20 })
		_ = m1.Disconnect(&paho.Disconnect{})
		testutil.WaitFor(t, 30*time.Second, "the node left the group", func() bool { return b.Backend().ShareQueues(share) == nil })
		publish("gap-") // nobody holds the subscription
	}
	before, err := topicEnds(ctx, b.Backend()) // the subscription starts at or past these
	if err != nil {
		t.Fatal(err)
	}
	armed.Store(true)
	subscribe("late-m")
	publish("new-")
	var extra *client.PullConsumer
	select {
	case extra = <-extraC:
	case <-ctx.Done():
		t.Fatal("the group's consumer did not start")
	}
	if extra == nil {
		t.FailNow()
	}
	defer extra.Close()
	testutil.WaitFor(t, 30*time.Second, "the node runs the group", func() bool { return len(b.Backend().ShareQueues(share)) > 0 })
	if n := len(b.Backend().ShareQueues(share)); n >= len(before) {
		t.Fatalf("the node holds %d of the %d queues: the other member took none", n, len(before))
	}
	// Where any member that takes a queue from now on starts: the group's
	// stored offsets.
	progress, err := b.Backend().adm.GroupProgress(ctx, shareGroup(share), "")
	if err != nil {
		t.Fatal(err)
	}
	stored := map[client.MessageQueue]int64{}
	for _, p := range progress {
		stored[p.Queue] = p.ConsumerOffset
	}
	for mq, off := range before {
		if s, ok := stored[mq]; !ok || s < off {
			t.Errorf("queue %v: the group's stored offset is %d (stored: %v), before the SUBACK at %d or later", mq, s, ok, off)
		}
	}
	if err := extra.Close(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 30*time.Second, "every message published after the SUBACK at the member", func() bool { return count("new-") == 20 })
	if n := count("old-") + count("gap-"); n != 0 {
		t.Fatalf("the member got %d messages published before its SUBACK", n)
	}
}

// joinHoldingNothing starts a consumer of group over the node's topics
// that takes no queue, and returns once the brokers list it.
func joinHoldingNothing(ctx context.Context, c *cluster.Cluster, b *Backend, group string) (*client.PullConsumer, error) {
	pc, err := client.NewPullConsumer(client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{
		ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs()},
		Group:         group, Model: client.Clustering, Strategy: holdNothing{}}})
	if err != nil {
		return nil, err
	}
	for _, t := range b.Topics() {
		if err := pc.Subscribe(t, "*"); err != nil {
			pc.Close()
			return nil, err
		}
	}
	if err := pc.Start(ctx); err != nil {
		pc.Close()
		return nil, err
	}
	for {
		if ms, err := b.adm.GroupMembers(ctx, group); err == nil && len(ms) > 0 {
			return pc, nil
		}
		select {
		case <-ctx.Done():
			pc.Close()
			return nil, ctx.Err()
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// topicEnds returns the max offset of every queue of the node's
// device-facing topics.
func topicEnds(ctx context.Context, b *Backend) (map[client.MessageQueue]int64, error) {
	ends := map[client.MessageQueue]int64{}
	for _, t := range b.Topics() {
		stats, err := b.adm.TopicStats(ctx, t)
		if err != nil {
			return nil, err
		}
		for _, s := range stats {
			ends[s.Queue] = s.MaxOffset
		}
	}
	return ends, nil
}
