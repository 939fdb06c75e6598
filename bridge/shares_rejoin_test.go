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

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeSharedSubscriptionRejoinStartsAtSuback: a shared subscription
// exists while some session holds it. Once its last member left (a clean
// session that disconnected), what is published is nobody's: a new member
// of the same group starts at its SUBACK, as a brand-new group does, and
// does not get that backlog from the group's old offsets.
//
// The new member's SUBSCRIBE is held where the node judges the group
// (the "mark" step) until the share loop has walked twice: the loop used
// to find the subscription listed before it was judged, start the group
// without a mark and resume its old offsets (a flake of this test in CI).
//
// "wrapped" runs it with the server's backend wrapped the way the smartgo
// binary wraps it (the state store's session hook, Options.WrapBackend):
// the wrapper used to hide the backend's mqtt.SharePreparer, so no mark
// was ever taken and the new member got the backlog.
func TestBridgeSharedSubscriptionRejoinStartsAtSuback(t *testing.T) {
	t.Run("plain", func(t *testing.T) { testShareRejoin(t, nil) })
	t.Run("wrapped", func(t *testing.T) {
		testShareRejoin(t, func(be mqtt.Backend) mqtt.Backend { return NewStateStoreSessionHook(be) })
	})
}

func testShareRejoin(t *testing.T, wrap func(mqtt.Backend) mqtt.Backend) {
	c := startCluster(t)
	const share = "$share/rejoin/work/#"
	var armed atomic.Bool
	var walks atomic.Int64
	b := startBridgeWith(t, c, func(_ *mqtt.Options, o *Options) {
		o.ShareRefresh = 50 * time.Millisecond
		o.WrapBackend = wrap
	}, func(b *Bridge) {
		b.Backend().testShareHook = func(step, s string) {
			switch {
			case step == "walked":
				walks.Add(1)
			case step == "mark" && s == share && armed.CompareAndSwap(true, false):
				// Two whole passes after this point; bounded, so a
				// stopped loop fails the test rather than hangs it.
				for n, deadline := walks.Load()+2, time.Now().Add(5*time.Second); walks.Load() < n && time.Now().Before(deadline); {
					time.Sleep(time.Millisecond)
				}
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	var mu sync.Mutex
	got := map[string]int{}
	pub := pahoShareMember(t, ctx, addrOf(b), "rejoin-pub", &mu, map[string]int{})
	publish := func(prefix string, n int) {
		t.Helper()
		for i := range n {
			if _, err := pub.Publish(ctx, &paho.Publish{Topic: "work/x", QoS: 1, Payload: []byte(fmt.Sprint(prefix, i))}); err != nil {
				t.Fatal(err)
			}
		}
	}
	count := func(prefix string) int {
		mu.Lock()
		defer mu.Unlock()
		n := 0
		for k, v := range got {
			if strings.HasPrefix(k, prefix) {
				n += v
			}
		}
		return n
	}

	m1 := pahoShareMember(t, ctx, addrOf(b), "rejoin-m1", &mu, got)
	if sa, err := m1.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: share, QoS: 1}}}); err != nil || sa.Reasons[0] != 1 {
		t.Fatalf("subscribe m1: %v %+v", err, sa)
	}
	publish("first-", 5)
	testutil.WaitFor(t, 30*time.Second, "the first member got its messages", func() bool { return count("first-") == 5 })
	_ = m1.Disconnect(&paho.Disconnect{})
	testutil.WaitFor(t, 30*time.Second, "the node left the group", func() bool { return b.Backend().ShareQueues(share) == nil })

	publish("gap-", 5) // nobody holds the subscription

	m2 := pahoShareMember(t, ctx, addrOf(b), "rejoin-m2", &mu, got)
	armed.Store(true)
	if sa, err := m2.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: share, QoS: 1}}}); err != nil || sa.Reasons[0] != 1 {
		t.Fatalf("subscribe m2: %v %+v", err, sa)
	}
	publish("second-", 5)
	testutil.WaitFor(t, 30*time.Second, "the new member got what was published after its SUBACK", func() bool { return count("second-") == 5 })
	if n := count("gap-"); n != 0 {
		t.Fatalf("the new member got %d messages published while the group had no member", n)
	}
}

// TestBridgeSharedSubscriptionHeldByOfflineSession: a persistent session
// that holds a shared subscription keeps it while it is away, also when
// its node is gone: what is published meanwhile waits in the group and
// reaches the session when it resumes on another node (the group resumes
// from its offsets there; it does not start at the resume).
func TestBridgeSharedSubscriptionHeldByOfflineSession(t *testing.T) {
	b, prod := sharedThenCrashed(t, "$share/held/jobs/#", "held-dev", nil)

	awayThenResume(t, prod, addrOf(b), "held-dev")
}

// awayThenResume stores five messages for jobs/x, then resumes id's
// session at addr and expects them all (in any order: the producer
// spreads them over queues; a message from before may come again).
func awayThenResume(t *testing.T, prod *client.Producer, addr, id string) {
	t.Helper()
	const n = 5
	for i := range n {
		sendCmd(t, prod, "jobs/x", fmt.Sprint("away-", i))
	}
	r, ack := persistent(t, addr, id, false)
	if !ack.SessionPresent {
		t.Fatal("session lost")
	}
	seen := map[string]bool{}
	for len(seen) < n {
		p := r.expectPublish() // fails after RecvTimeout when one is missing
		if s := string(p.Payload); strings.HasPrefix(s, "away-") {
			seen[s] = true
		}
	}
}

// TestBridgeSharedSubscriptionOfflineMemberSameNode: a persistent member
// that disconnects keeps its shared subscription on its node: what is
// published while it is away is queued for it and arrives when it
// reconnects.
func TestBridgeSharedSubscriptionOfflineMemberSameNode(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, func(_ *mqtt.Options, o *Options) { o.ShareRefresh = 100 * time.Millisecond })
	prod := newProducer(t, c)
	const share = "$share/away/jobs/#"
	dev, _ := persistent(t, addrOf(a), "away-dev", true)
	dev.subscribe(1, sub(share, 1))
	testutil.WaitFor(t, 30*time.Second, "the node runs the group", func() bool { return len(a.Backend().ShareQueues(share)) > 0 })
	dev.disconnect()
	awayThenResume(t, prod, addrOf(a), "away-dev")
}

// TestBridgeSharedSubscriptionResubscribeAfterResume: a persistent
// session that resumes on another node after its node died and at once
// subscribes to its shared subscription again (as many clients do after
// every CONNECT; mosquitto_sub -c does) still holds it: the SUBSCRIBE
// replaces a subscription the session had, so what was published while
// it was away reaches it, at the same QoS or another. The node's share
// loop is held until the SUBACK: the group's consumer starts after it, as
// it may on a busy node (or after a restart). It used to judge the group
// unheld then (no member, no other session) and start it at the SUBACK,
// skipping that backlog.
func TestBridgeSharedSubscriptionResubscribeAfterResume(t *testing.T) {
	for _, qos := range []byte{1, 0} {
		t.Run(fmt.Sprint("qos", qos), func(t *testing.T) {
			share := fmt.Sprintf("$share/again%d/jobs/#", qos)
			release := make(chan struct{})
			var once sync.Once
			open := func() { once.Do(func() { close(release) }) }
			hold := func(b *Bridge) {
				b.Backend().testShareHook = func(step, s string) {
					if step == "start" && s == share {
						<-release
					}
				}
			}
			b, prod := sharedThenCrashed(t, share, "again-dev", hold)
			t.Cleanup(open) // before b closes
			// Nothing of the group runs any more: the crashed node's
			// consumer left it, and b's waits.
			testutil.WaitFor(t, 30*time.Second, "the group has no member", func() bool {
				ms, err := b.Backend().adm.GroupMembers(context.Background(), shareGroup(share))
				return err == nil && len(ms) == 0
			})

			const n = 5
			for i := range n {
				sendCmd(t, prod, "jobs/x", fmt.Sprint("away-", i))
			}
			r, ack := persistent(t, addrOf(b), "again-dev", false)
			if !ack.SessionPresent {
				t.Fatal("session lost")
			}
			if sa := r.subscribe(2, sub(share, qos)); sa.ReasonCodes[0] != packets.ReasonCode(qos) {
				t.Fatalf("suback %+v", sa)
			}
			if b.Backend().ShareQueues(share) != nil {
				t.Fatal("the group's consumer started before the SUBACK")
			}
			open()
			seen := map[string]bool{}
			for len(seen) < n {
				p := r.expectPublish() // fails after RecvTimeout when one is missing
				if s := string(p.Payload); strings.HasPrefix(s, "away-") {
					seen[s] = true
				}
			}
		})
	}
}

// sharedThenCrashed starts two bridges A and B, subscribes persistent
// session id on A to share, checks that it receives a message, and
// crashes A: the session is offline, holding share. It returns B and a
// producer; preB, when not nil, runs on B before it starts.
func sharedThenCrashed(t *testing.T, share, id string, preB func(*Bridge)) (*Bridge, *client.Producer) {
	t.Helper()
	c := startCluster(t)
	fast := func(mo *mqtt.Options, o *Options) { shortHandoff(mo, o); o.ShareRefresh = 100 * time.Millisecond }
	a := startBridge(t, c, fast)
	b := startBridgeWith(t, c, fast, preB)
	prod := newProducer(t, c)

	dev, _ := persistent(t, addrOf(a), id, true)
	dev.subscribe(1, sub(share, 1))
	testutil.WaitFor(t, 30*time.Second, "node A runs the group", func() bool { return len(a.Backend().ShareQueues(share)) > 0 })
	sendCmd(t, prod, "jobs/x", "before")
	if p := dev.expectPublish(); string(p.Payload) != "before" {
		t.Fatalf("got %q", p.Payload)
	}
	crash(t, a)
	return b, prod
}
