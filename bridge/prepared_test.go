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
	r := dialRaw(t, addrOf(a), packets.Version5)
	cp := &packets.Connect{ClientID: id, CleanStart: true, KeepAlive: 60, UsernameFlag: true, Username: "first"}
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	cp.Properties.SessionExpiry = 3600
	r.connect(cp)
	r.subscribe(1, sub("c2d/"+id+"/#", 1))
	r.disconnect()
	testutil.WaitFor(t, 30*time.Second, "A holds the session offline", func() bool {
		srv := a.Server()
		return srv.SessionInstance(id) != 0 && !srv.Connected(id)
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
