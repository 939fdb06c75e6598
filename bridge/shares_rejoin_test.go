package bridge

import (
	"context"
	"fmt"
	"strings"
	"sync"
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
func TestBridgeSharedSubscriptionRejoinStartsAtSuback(t *testing.T) {
	c := startCluster(t)
	b := startBridge(t, c, func(_ *mqtt.Options, o *Options) { o.ShareRefresh = 100 * time.Millisecond })
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	const share = "$share/rejoin/work/#"
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
	b, prod := sharedThenCrashed(t, "$share/held/jobs/#", "held-dev")

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
// every CONNECT) still holds it: the SUBSCRIBE replaces a subscription
// the session had, so what was published while it was away reaches it.
func TestBridgeSharedSubscriptionResubscribeAfterResume(t *testing.T) {
	const share = "$share/again/jobs/#"
	b, prod := sharedThenCrashed(t, share, "again-dev")

	const n = 5
	for i := range n {
		sendCmd(t, prod, "jobs/x", fmt.Sprint("away-", i))
	}
	r, ack := persistent(t, addrOf(b), "again-dev", false)
	if !ack.SessionPresent {
		t.Fatal("session lost")
	}
	r.send(&packets.Subscribe{PacketID: 2, Subscriptions: []packets.Subscription{sub(share, 0)}}) // QoS 0 now: the subscription changes
	seen := map[string]bool{}
	for len(seen) < n {
		switch p := r.recv().(type) { // fails after RecvTimeout when one is missing
		case *packets.Suback:
		case *packets.Publish:
			if p.QoS == 1 {
				r.send(&packets.Puback{PacketID: p.PacketID})
			}
			if s := string(p.Payload); strings.HasPrefix(s, "away-") {
				seen[s] = true
			}
		default:
			t.Fatalf("got %T %+v", p, p)
		}
	}
}

// sharedThenCrashed starts two bridges A and B, subscribes persistent
// session id on A to share, checks that it receives a message, and
// crashes A: the session is offline, holding share. It returns B and a
// producer.
func sharedThenCrashed(t *testing.T, share, id string) (*Bridge, *client.Producer) {
	t.Helper()
	c := startCluster(t)
	fast := func(mo *mqtt.Options, o *Options) { shortHandoff(mo, o); o.ShareRefresh = 100 * time.Millisecond }
	a := startBridge(t, c, fast)
	b := startBridge(t, c, fast)
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
