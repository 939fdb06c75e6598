package bridge

import (
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeTakeoverAnsweredAfterSave: a client's connection on node A
// ends (its offline save is written) just as the client connects to node
// B, and the save is stored after B's connect request but before A's tail
// applies that request (held here). B waits for A's handoff (A's record
// before the request said the session was connected there); A answers
// the request with a handoff of the saved session and drops its copy, so
// B resumes at once, with the subscription. Before, A took the request
// for older than its session (its save came later in the client's queue),
// wrote no handoff and kept its copy, and B waited the whole
// HandoffTimeout before it resumed from the save.
func TestBridgeTakeoverAnsweredAfterSave(t *testing.T) {
	c := startCluster(t)
	const id = "saved-then-moved"
	var armed atomic.Bool
	held := make(chan struct{}, 1)
	release := make(chan struct{})
	a := startBridgeWith(t, c, nil, func(br *Bridge) {
		node := br.Backend().opts.NodeID
		br.Backend().testBeforeApply = func(rec *sessionRecord) {
			if rec.ClientID != id || rec.Node == node || !rec.Connect || rec.Deleted || !armed.CompareAndSwap(true, false) {
				return
			}
			held <- struct{}{}
			select { // bounded, so a failed test does not hang
			case <-release:
			case <-time.After(30 * time.Second):
			}
		}
	})
	// B waits far longer for a handoff than the test allows for the
	// CONNACK: a CONNACK in time came from A's answer.
	const handoffTimeout = 40 * time.Second
	b := startBridge(t, c, func(_ *mqtt.Options, o *Options) { o.HandoffTimeout = handoffTimeout })
	prod := newProducer(t, c)

	dev, _ := persistent(t, addrOf(a), id, true)
	dev.subscribe(1, sub("cmd/"+id, 1))
	armed.Store(true)

	dev2 := dialRaw(t, addrOf(b), packets.Version5)
	cp := &packets.Connect{ClientID: id, KeepAlive: 60}
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	cp.Properties.SessionExpiry = 3600
	dev2.send(cp)
	select {
	case <-held:
	case <-time.After(20 * time.Second):
		t.Fatal("node A's tail never reached node B's connect request")
	}
	// The hook sees the record before its position is set: B's own copy
	// has it.
	var req *sessionRecord
	testutil.WaitFor(t, 20*time.Second, "node B's connect request stored", func() bool {
		req = ownRecord(b, id)
		return req != nil && req.Connect
	})
	// A's tail is held at B's request: the save of the ended connection
	// is stored after it, before A applies it.
	dev.nc.Close()
	testutil.WaitFor(t, 20*time.Second, "node A's offline save after B's connect request", func() bool {
		r := ownRecord(a, id)
		return r != nil && !r.Online && !r.Connect && r.q == req.q && r.off > req.off
	})
	start := time.Now()
	close(release)

	p, err := dev2.next(handoffTimeout / 2)
	if err != nil {
		t.Fatalf("no CONNACK on node B %v after A applied its connect request (it waits for a handoff for %v): %v",
			time.Since(start).Round(time.Millisecond), handoffTimeout, err)
	}
	ack, ok := p.(*packets.Connack)
	if !ok || ack.ReasonCode != 0 || !ack.SessionPresent {
		t.Fatalf("CONNACK on node B: %T %+v", p, p)
	}
	if r := ownRecord(a, id); r == nil || r.Gen != req.off+1 {
		t.Fatalf("node A's last record of the client: %+v (want its handoff answering offset %d)", r, req.off)
	}
	testutil.WaitFor(t, 10*time.Second, "node A to drop its copy of the session", func() bool {
		return a.Server().SessionInstance(id) == 0
	})
	sendCmd(t, prod, "cmd/"+id, "after")
	if pub := dev2.expectPublish(); string(pub.Payload) != "after" {
		t.Fatalf("on node B: %s %q", pub.Topic, pub.Payload)
	}
}
