package bridge

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgePreparedOverAnotherNodesOfflineSession: node B, whose copy of
// the session topic had not yet read the record node A wrote when the
// client left its session there, prepares a session for the client
// (tagged with the client id's first owner), then replaces it for a new
// owner. Node A, which still holds the first owner's session in memory,
// must drop it: the new owner's connect (anywhere) is otherwise answered
// by A's handoff of that session, and receives what was queued for the
// first owner. It did before: B announced the replacement only when the
// record replaced was another node's, and here it was B's own prepared
// one (seen in bridge/iothub's TestHubC2DNotForAReplacedIdentity under
// load).
func TestBridgePreparedOverAnotherNodesOfflineSession(t *testing.T) {
	const id = "prep-lag"
	c := startCluster(t)
	a := startBridge(t, c, nil)
	var hold atomic.Bool
	release := make(chan struct{})
	hold.Store(true)
	b := startBridgeWith(t, c, nil, func(b *Bridge) {
		b.Backend().testBeforeApply = func(rec *sessionRecord) {
			if rec.ClientID == id && rec.Node != b.Backend().opts.NodeID && hold.Load() {
				<-release // B's tail lags behind A's records of the client
			}
		}
	})
	var once sync.Once
	unblock := func() { once.Do(func() { hold.Store(false); close(release) }) }
	t.Cleanup(unblock)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	// The first owner connects to A, subscribes and leaves its session.
	r, cp := connectC2D(t, a, id, "first")
	r.disconnect()
	testutil.WaitFor(t, 30*time.Second, "A holds the session offline", func() bool {
		srv := a.Server()
		return srv.SessionInstance(id) != 0 && !srv.Connected(id)
	})
	// B judges on the records stored so far: A's record of the client
	// leaving must be stored (A applies its own record once the broker
	// has it), not only A's session offline in memory.
	testutil.WaitFor(t, 30*time.Second, "A's record of the client leaving stored", func() bool {
		a.Backend().mu.Lock()
		defer a.Backend().mu.Unlock()
		rec := a.Backend().sessions[id]
		return rec != nil && !rec.Online && !rec.Connect && rec.DisconnectedAt != 0
	})

	// B, not having read A's records, prepares one for the first owner.
	subs := []mqtt.Subscription{{Filter: "c2d/" + id + "/#", QoS: 1}}
	left := func(time.Time) bool { return true }
	made, err := b.Backend().PrepareSessionReplacing(ctx, id, subs, time.Hour, Replacer{Tag: func() string { return "first" }, Left: left})
	if err != nil || !made {
		t.Fatalf("prepared %v %v", made, err)
	}
	unblock()
	pub := connected(t, addrOf(b), packets.Version5, "prep-sender")
	pub.publish1(1, &packets.Publish{Topic: "c2d/" + id + "/x", Payload: []byte("for the first owner")})

	// A new owner of the id: B replaces its own prepared record.
	made, err = b.Backend().PrepareSessionReplacing(ctx, id, subs, time.Hour, Replacer{Tag: func() string { return "second" }, Left: left})
	if err != nil || !made {
		t.Fatalf("replaced %v %v", made, err)
	}
	testutil.WaitFor(t, 30*time.Second, "A dropping the first owner's session", func() bool {
		return a.Server().SessionInstance(id) == 0
	})
	pub.publish1(2, &packets.Publish{Topic: "c2d/" + id + "/x", Payload: []byte("for the second owner")})
	d := dialRaw(t, addrOf(b), packets.Version5)
	cp.Username = "second"
	cp.CleanStart = false
	if ack := d.connect(cp); !ack.SessionPresent {
		t.Fatal("the prepared session is not present")
	}
	if p := d.expectPublish(); string(p.Payload) != "for the second owner" {
		t.Fatalf("the new owner got %q", p.Payload)
	}
	d.nothing(300 * time.Millisecond)
}

// TestBridgeReplacingAfterAnotherNodesOnlineClaim: node B last read the
// online claim of a client connected to node A for its id's first owner
// ("first", SetOwnerTag) when the client leaves and, at once, B prepares
// a session for a new owner of the id; B's copy of the session topic is
// still behind the record A wrote when the client left. B must judge on
// that record (a session of an earlier owner: replaced), and A drop the
// session it holds. It did not: B took the stale claim for a connection,
// wrote nothing, and the new owner's connect to A started a session
// without the prepared subscription, so it got none of its messages
// (bridge/iothub's TestHubC2DNotForAReplacedIdentity, "reconnecting to
// the holder", under load).
func TestBridgeReplacingAfterAnotherNodesOnlineClaim(t *testing.T) {
	const id = "claim-lag"
	c := startCluster(t)
	a := startBridgeWith(t, c, nil, func(br *Bridge) {
		br.Backend().SetOwnerTag(func(string) string { return "first" })
	})
	aNode := a.Backend().NodeID()
	var lag atomic.Bool
	b := startBridgeWith(t, c, nil, func(br *Bridge) {
		br.Backend().testBeforeApply = func(rec *sessionRecord) {
			// B's tail is slow to read the record A writes when the
			// client leaves (a loaded machine).
			if rec.ClientID == id && rec.Node == aNode && !rec.Online && !rec.Connect && rec.DisconnectedAt != 0 && lag.CompareAndSwap(true, false) {
				time.Sleep(time.Second)
			}
		}
	})
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()

	r, _ := connectC2D(t, a, id, "dev")
	testutil.WaitFor(t, 30*time.Second, "B reading A's online claim with the subscription", func() bool {
		b.Backend().mu.Lock()
		defer b.Backend().mu.Unlock()
		rec := b.Backend().sessions[id]
		return rec != nil && rec.Online && rec.Node == aNode && len(rec.Subscriptions) == 1
	})
	lag.Store(true)
	r.disconnect()
	testutil.WaitFor(t, 30*time.Second, "A holds the session offline", func() bool {
		srv := a.Server()
		return srv.SessionInstance(id) != 0 && !srv.Connected(id)
	})
	// B judges on the records stored so far: A's record of the client
	// leaving must be stored (A applies its own record once the broker
	// has it), not only A's session offline in memory.
	testutil.WaitFor(t, 30*time.Second, "A's record of the client leaving stored", func() bool {
		a.Backend().mu.Lock()
		defer a.Backend().mu.Unlock()
		rec := a.Backend().sessions[id]
		return rec != nil && !rec.Online && !rec.Connect && rec.DisconnectedAt != 0
	})

	subs := []mqtt.Subscription{{Filter: "c2d/" + id + "/#", QoS: 1}}
	made, err := b.Backend().PrepareSessionReplacing(ctx, id, subs, time.Hour, Replacer{Tag: func() string { return "second" }})
	if err != nil || !made {
		t.Fatalf("replaced %v %v", made, err)
	}
	testutil.WaitFor(t, 30*time.Second, "A dropping the first owner's session", func() bool {
		return a.Server().SessionInstance(id) == 0
	})
	b.Backend().mu.Lock()
	rec := b.Backend().sessions[id]
	b.Backend().mu.Unlock()
	if rec == nil || rec.Prepared != "second" {
		t.Fatalf("B's record of the client: %+v", rec)
	}
}

// connectC2D connects client id to node n as user, with a session
// expiring an hour after it ends, subscribed to c2d/{id}/# at QoS 1; it
// returns the connection and its CONNECT.
func connectC2D(t *testing.T, n *Bridge, id, user string) (*rawClient, *packets.Connect) {
	t.Helper()
	r := dialRaw(t, addrOf(n), packets.Version5)
	cp := &packets.Connect{ClientID: id, CleanStart: true, KeepAlive: 60, UsernameFlag: true, Username: user}
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	cp.Properties.SessionExpiry = 3600
	r.connect(cp)
	r.subscribe(1, sub("c2d/"+id+"/#", 1))
	return r, cp
}
