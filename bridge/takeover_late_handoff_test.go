package bridge

import (
	"context"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
)

// requestHold holds a node's system tail at another node's next connect
// request of one client, once armed, until released (at the latest 30 s
// later, so that a failed test does not hang).
type requestHold struct {
	armed   atomic.Bool
	held    chan struct{}
	release chan struct{}
	once    sync.Once
}

// startBridgeHeldAtRequest starts a bridge node (options changed by mod)
// whose tail its hold stops at another node's connect request of id.
func startBridgeHeldAtRequest(t *testing.T, c *cluster.Cluster, mod func(*mqtt.Options, *Options), id string) (*Bridge, *requestHold) {
	h := &requestHold{held: make(chan struct{}, 1), release: make(chan struct{})}
	t.Cleanup(h.Release) // before the node closes (cleanups run last first)
	n := startBridgeWith(t, c, mod, func(br *Bridge) {
		node := br.Backend().opts.NodeID
		br.Backend().testBeforeApply = func(rec *sessionRecord) {
			if rec.ClientID != id || rec.Node == node || !rec.Connect || rec.Deleted || !h.armed.CompareAndSwap(true, false) {
				return
			}
			h.held <- struct{}{}
			select {
			case <-h.release:
			case <-time.After(30 * time.Second):
			}
		}
	})
	return n, h
}

// wait waits until the tail stopped at the request.
func (h *requestHold) wait(t *testing.T) {
	t.Helper()
	select {
	case <-h.held:
	case <-time.After(20 * time.Second):
		t.Fatal("the node's tail never reached the other node's connect request")
	}
}

// Release lets the tail go on.
func (h *requestHold) Release() { h.once.Do(func() { close(h.release) }) }

// TestBridgeLateHandoffIsOlderState: a persistent session goes offline
// on node A, which keeps it in memory. The client connects to node B; the
// record before B's connect request is A's offline save, so B resumes
// from it without waiting for a handoff, while A's tail is held at B's
// request. On B the client subscribes to a second topic and disconnects:
// B's records come after the request. Then A's tail goes on, and A
// answers the request with a handoff of the session as it had it (one
// subscription), stored after B's records. The client's next connect to
// B resumes B's own session, with both subscriptions: the handoff carries
// the state as of the request, older than B's records after it. Before,
// the late handoff stood as the client's latest record, B resumed from it
// and the second subscription, acknowledged with SUBACK, was lost.
func TestBridgeLateHandoffIsOlderState(t *testing.T) {
	c := startCluster(t)
	const id = "late-handoff"
	a, hold := startBridgeHeldAtRequest(t, c, nil, id)
	b := startBridge(t, c, nil)
	prod := newProducer(t, c)

	onA, _ := persistent(t, addrOf(a), id, true)
	onA.subscribe(1, sub("cmd/"+id+"/one", 1))
	onA.disconnect()
	testutil.WaitFor(t, 20*time.Second, "node A holding the session offline, its save stored", func() bool {
		r := ownRecord(a, id)
		return !a.Server().Connected(id) && a.Server().SessionInstance(id) != 0 && r != nil && !r.Online && !r.Connect
	})
	hold.armed.Store(true)

	onB, ack := persistent(t, addrOf(b), id, false)
	if !ack.SessionPresent {
		t.Fatal("node B did not resume the session from node A's save")
	}
	hold.wait(t)
	onB.subscribe(2, sub("cmd/"+id+"/two", 1))
	onB.disconnect()
	testutil.WaitFor(t, 20*time.Second, "node B's offline save with both subscriptions", func() bool {
		r := ownRecord(b, id)
		return !b.Server().Connected(id) && r != nil && !r.Online && !r.Connect && len(r.Subscriptions) == 2
	})
	saved := ownRecord(b, id)

	hold.Release()
	testutil.WaitFor(t, 20*time.Second, "node A's answer to B's request", func() bool {
		return a.Server().SessionInstance(id) == 0
	})
	// B's tail passes A's answer before the client comes back.
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if err := a.Backend().catchUpSys(ctx, a.Backend().opts.SessionTopic); err != nil {
		t.Fatal(err)
	}
	if err := b.Backend().catchUpSys(ctx, b.Backend().opts.SessionTopic); err != nil {
		t.Fatal(err)
	}
	b.Backend().mu.Lock()
	cur := b.Backend().sessions[id]
	b.Backend().mu.Unlock()
	if cur == nil {
		t.Fatal("node B has no current record of the client")
	}
	if cur.Node != saved.Node || cur.off != saved.off {
		t.Errorf("node B's current record of the client is not its own save at offset %d but %s's at %d (gen %d, %d subscriptions)",
			saved.off, cur.Node, cur.off, cur.Gen, len(cur.Subscriptions))
	}

	back, ack := persistent(t, addrOf(b), id, false)
	if !ack.SessionPresent {
		t.Fatal("the session is gone")
	}
	for _, topic := range []string{"cmd/" + id + "/one", "cmd/" + id + "/two"} {
		sendCmd(t, prod, topic, topic)
		if pub := back.expectPublish(); pub.Topic != topic {
			t.Fatalf("expected a message on %s, got one on %s", topic, pub.Topic)
		}
	}
}
