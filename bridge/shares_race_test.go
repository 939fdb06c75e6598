package bridge

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
)

// TestBridgeSharedSubscriptionStartedOnTwoNodesAtOnce: members of the
// same new (or restarted: its last member left) shared subscription
// subscribe on two nodes at about the same time, with messages published
// between the two SUBACKs and before either node's consumer of the group
// runs. Every message published after the first SUBACK reaches some
// member: the group never starts past it.
//
// Each node's share loop is held before it starts the group's consumer
// until both SUBACKs are done; the second node's then starts first. Each
// node used to write its own SUBACK's offsets as the group's when its
// consumer started: the second node's started the group after the
// messages between the SUBACKs, and its consumer (and the commits of the
// queues it held) kept it there, so they were lost for the group.
func TestBridgeSharedSubscriptionStartedOnTwoNodesAtOnce(t *testing.T) {
	t.Run("new", func(t *testing.T) { startedTwice(t, false) })
	t.Run("restarted", func(t *testing.T) { startedTwice(t, true) })
}

func startedTwice(t *testing.T, restart bool) {
	c := startCluster(t)
	const share = "$share/twice/jobs/#"
	var armed atomic.Bool // hold the share loops from now on
	var releases []func()
	holding := func(name string) (func(*Bridge), func()) {
		release := make(chan struct{})
		var once sync.Once
		open := func() { once.Do(func() { close(release) }) }
		releases = append(releases, open)
		return func(b *Bridge) {
			b.Backend().testShareHook = func(step, s string) {
				if step == "start" && s == share && armed.Load() {
					select {
					case <-release:
					case <-time.After(60 * time.Second): // a stuck test fails, not hangs
						t.Errorf("node %s: the share loop was held too long", name)
					}
				}
			}
		}, open
	}
	fast := func(_ *mqtt.Options, o *Options) { o.ShareRefresh = 50 * time.Millisecond }
	holdA, openA := holding("A")
	holdB, openB := holding("B")
	a := startBridgeWith(t, c, fast, holdA)
	b := startBridgeWith(t, c, fast, holdB)
	t.Cleanup(func() { // before the nodes close
		for _, open := range releases {
			open()
		}
	})
	prod := newProducer(t, c)
	publish := func(prefix string) {
		t.Helper()
		for i := range 8 { // round robin: two on each of the topic's queues
			sendCmd(t, prod, "jobs/x", fmt.Sprint(prefix, i))
		}
	}
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	got := map[string]int{}
	count := func(prefix string) int { return distinctWith(&mu, got, prefix) }
	subscribe := func(node *Bridge, id string) *paho.Client {
		t.Helper()
		m := pahoShareMember(t, ctx, addrOf(node), id, &mu, got)
		if sa, err := m.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: share, QoS: 1}}}); err != nil || sa.Reasons[0] != 1 {
			t.Fatalf("subscribe %s: %v %+v", id, err, sa)
		}
		return m
	}

	publish("old-") // history the subscription must not get
	if restart {
		m := subscribe(a, "twice-first")
		publish("first-")
		testutil.WaitFor(t, 30*time.Second, "the first member got its messages", func() bool { return count("first-") == 8 })
		_ = m.Disconnect(&paho.Disconnect{})
		testutil.WaitFor(t, 30*time.Second, "node A left the group", func() bool { return a.Backend().ShareQueues(share) == nil })
		publish("gap-") // nobody holds the subscription
	}
	armed.Store(true)
	subscribe(a, "twice-a")
	publish("between-") // after the first SUBACK, before the second
	subscribe(b, "twice-b")
	publish("after-")

	openB()
	testutil.WaitFor(t, 30*time.Second, "node B runs the group", func() bool { return len(b.Backend().ShareQueues(share)) > 0 })
	openA()
	testutil.WaitFor(t, 30*time.Second, "node A runs the group", func() bool { return len(a.Backend().ShareQueues(share)) > 0 })
	testutil.WaitFor(t, 30*time.Second, "every message published after the first SUBACK at a member", func() bool {
		return count("between-") == 8 && count("after-") == 8
	})
	if n := count("old-") + count("gap-"); n != 0 {
		t.Fatalf("the members got %d messages published while the group had no member", n)
	}
}

// distinctWith counts the distinct payloads in got (guarded by mu) that
// start with prefix.
func distinctWith(mu *sync.Mutex, got map[string]int, prefix string) int {
	mu.Lock()
	defer mu.Unlock()
	n := 0
	for k := range got {
		if strings.HasPrefix(k, prefix) {
			n++
		}
	}
	return n
}
