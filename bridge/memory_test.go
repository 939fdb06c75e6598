package bridge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// sessionMaps is the size of a node's per-client session bookkeeping.
type sessionMaps struct {
	sessions, own, vouches, writing, deferred, waits, connectPrev int
}

func mapsOf(n *Bridge) sessionMaps {
	b := n.Backend()
	b.mu.Lock()
	defer b.mu.Unlock()
	return sessionMaps{len(b.sessions), len(b.own), len(b.vouches), len(b.writing), len(b.deferred), len(b.waits),
		len(b.connectPrev)}
}

// atMost reports whether every map of m holds at most n entries.
func (m sessionMaps) atMost(n int) bool {
	return m.sessions <= n && m.own <= n && m.vouches <= n && m.writing <= n && m.deferred <= n && m.waits <= n &&
		m.connectPrev <= n
}

// caughtUp waits until node n's tail applied every session record stored
// so far.
func caughtUp(t *testing.T, n *Bridge) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := n.Backend().catchUpSys(ctx, n.Backend().opts.SessionTopic); err != nil {
		t.Fatal(err)
	}
}

// waitMaps waits until node n's session maps hold at most max entries
// each.
func waitMaps(t *testing.T, n *Bridge, name string, max int) {
	t.Helper()
	caughtUp(t, n)
	testutil.Eventually(t, 10*time.Second, func() error {
		if m := mapsOf(n); !m.atMost(max) {
			return fmt.Errorf("node %s keeps session state for gone clients: %+v (want at most %d each)", name, m, max)
		}
		return nil
	})
}

// TestBridgeSessionChurnForgetsClients: 1,000 clean 3.1.1 clients with
// distinct ids connect to node A and leave; a few stay connected. Both the
// node they used and another node end with session bookkeeping for the
// connected ones only (issue 8: every clean connect used to leave its
// records in b.sessions, b.own and b.vouches for good, on every node).
func TestBridgeSessionChurnForgetsClients(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	const cycles, held = 1000, 5
	for i := range cycles {
		r := connected(t, addrOf(a), packets.Version311, fmt.Sprintf("churn-%d", i))
		r.disconnect()
	}
	var stay []*rawClient
	for i := range held {
		stay = append(stay, connected(t, addrOf(a), packets.Version311, fmt.Sprintf("stay-%d", i)))
	}
	waitMaps(t, a, "A (used)", held)
	waitMaps(t, b, "B (other)", held)
	// The connected clients are still protected: a connect elsewhere
	// takes them over.
	other := connected(t, addrOf(b), packets.Version311, "stay-0")
	expectTakenOver(t, stay[0])
	other.disconnect()
	waitMaps(t, a, "A after takeover", held)
	waitMaps(t, b, "B after takeover", held)
}

// TestBridgeSessionTakeoverChurnForgets: clean clients that move from
// node A to node B (a takeover: A's server evicts them without telling
// the back end) and leave B leave nothing behind on either node, and B
// keeps each of them until it leaves. B's tail applies A's clean-start
// announcement while B's server installs the client's session: an
// announcement judged against no session used to evict the session
// installed meanwhile (so A was never taken over, or B's own
// announcement, written after the eviction, left its vouch behind).
func TestBridgeSessionTakeoverChurnForgets(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	const cycles = 100
	for i := range cycles {
		id := fmt.Sprintf("mover-%d", i)
		onA := connected(t, addrOf(a), packets.Version5, id)
		onB := connected(t, addrOf(b), packets.Version5, id)
		expectTakenOver(t, onA)
		// B's tail has applied A's announcement, older than B's
		// session: the session is still there.
		caughtUp(t, b)
		onB.send(&packets.Pingreq{})
		if p, err := onB.next(10 * time.Second); err != nil {
			t.Fatalf("%s on B: want PINGRESP, got %v", id, err)
		} else if _, ok := p.(*packets.Pingresp); !ok {
			t.Fatalf("%s on B: want PINGRESP, got %T %+v", id, p, p)
		}
		onB.disconnect()
	}
	waitMaps(t, a, "A", 0)
	waitMaps(t, b, "B", 0)
}

// TestBridgeSessionOneCopyOfOwnRecords: once the tail has applied a
// record this node wrote, the node keeps that record once (the decoded
// copy from the tail is not kept beside it).
func TestBridgeSessionOneCopyOfOwnRecords(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	dev, _ := persistent(t, addrOf(a), "single", true)
	dev.subscribe(1, sub("cmd/single", 1)) // an online record
	caughtUp(t, a)
	be := a.Backend()
	be.mu.Lock()
	cur, own := be.sessions["single"], be.own["single"]
	be.mu.Unlock()
	if own == nil || !own.Online {
		t.Fatalf("own record %+v, want the online record", own)
	}
	if cur != own {
		t.Fatalf("two records of a local client: current %p, own %p", cur, own)
	}
	dev.disconnect() // an offline save
	testutil.WaitFor(t, 5*time.Second, "offline record", func() bool {
		be.mu.Lock()
		defer be.mu.Unlock()
		o := be.own["single"]
		return o != nil && !o.Online
	})
	caughtUp(t, a)
	be.mu.Lock()
	cur, own = be.sessions["single"], be.own["single"]
	be.mu.Unlock()
	if cur != own {
		t.Fatalf("two records of an offline local session: current %p, own %p", cur, own)
	}
}

// TestBridgeSessionDeletedHandoffNotMissed: node A holds a session that
// ends with its connection (v5, no clean start, expiry 0); a connect of
// the same client to node B waits for A's handoff, a delete, which B's
// tail does not keep in b.sessions: the connect still sees it at once
// instead of waiting out HandoffTimeout.
func TestBridgeSessionDeletedHandoffNotMissed(t *testing.T) {
	c := startCluster(t)
	long := func(_ *mqtt.Options, bo *Options) { bo.HandoffTimeout = 10 * time.Second }
	a := startBridge(t, c, long)
	b := startBridge(t, c, long)
	onA := dialRaw(t, addrOf(a), packets.Version5)
	onA.connect(&packets.Connect{ClientID: "brief", KeepAlive: 60}) // a connect request, no session
	caughtUp(t, b)
	start := time.Now()
	onB := dialRaw(t, addrOf(b), packets.Version5)
	if ack := onB.connect(&packets.Connect{ClientID: "brief", KeepAlive: 60}); ack.SessionPresent {
		t.Fatal("session present on B: A's session ended with its connection")
	}
	if el := time.Since(start); el > 5*time.Second {
		t.Fatalf("connect on B took %v: A's delete handoff was missed", el)
	}
	expectTakenOver(t, onA)
	onB.disconnect()
	waitMaps(t, a, "A", 0)
	waitMaps(t, b, "B", 0)
}
