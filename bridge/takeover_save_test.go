package bridge

import (
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeTakeoverAnsweredAfterSave: a client connected to node A
// connects to node B, and a record of node A of the session is stored
// after B's connect request but before A's tail applies that request
// (held here): the offline save of A's connection, which ended just then
// ("save"), or a record of the connection still there, a new
// subscription ("checkpoint"). B waits for A's handoff (A's records
// before the request said the session was connected there); A answers
// the request with a handoff of the session and drops its copy, so B
// resumes at once, with every subscription. Before, A took the request
// for older than its session (its record came later in the client's
// queue), wrote no handoff and kept its copy, and B waited the whole
// HandoffTimeout before it resumed from A's latest record (the
// connection on A, if any, was dropped later, when A applied B's
// records).
func TestBridgeTakeoverAnsweredAfterSave(t *testing.T) {
	t.Run("save", func(t *testing.T) { testTakeoverAnsweredAfter(t, false) })
	t.Run("checkpoint", func(t *testing.T) { testTakeoverAnsweredAfter(t, true) })
}

// testTakeoverAnsweredAfter: node A writes a record of the session after
// B's connect request, before A applies it: with connected, a new
// subscription of the connection still there, else the offline save of
// the connection, which ends.
func testTakeoverAnsweredAfter(t *testing.T, connected bool) {
	c := startCluster(t)
	const id = "answered-after"
	a, hold := startBridgeHeldAtRequest(t, c, nil, id)
	// B waits far longer for a handoff than the test allows for the
	// CONNACK: a CONNACK in time came from A's answer.
	const handoffTimeout = 40 * time.Second
	b := startBridge(t, c, func(_ *mqtt.Options, o *Options) { o.HandoffTimeout = handoffTimeout })
	prod := newProducer(t, c)

	dev, _ := persistent(t, addrOf(a), id, true)
	dev.subscribe(1, sub("cmd/"+id, 1))
	hold.armed.Store(true)

	dev2 := dialRaw(t, addrOf(b), packets.Version5)
	cp := &packets.Connect{ClientID: id, KeepAlive: 60}
	cp.Properties.Present.Add(packets.PropSessionExpiry)
	cp.Properties.SessionExpiry = 3600
	dev2.send(cp)
	hold.wait(t)
	// The hook sees the record before its position is set: B's own copy
	// has it.
	var req *sessionRecord
	testutil.WaitFor(t, 20*time.Second, "node B's connect request stored", func() bool {
		req = ownRecord(b, id)
		return req != nil && req.Connect
	})
	// A's tail is held at B's request: A's record is stored after it,
	// before A applies it.
	topics := []string{"cmd/" + id}
	if connected {
		dev.subscribe(2, sub("cmd/late/+", 1))
		topics = append(topics, "cmd/late/x")
	} else {
		dev.nc.Close()
	}
	testutil.WaitFor(t, 20*time.Second, "node A's record after B's connect request", func() bool {
		r := ownRecord(a, id)
		return r != nil && r.Online == connected && !r.Connect && len(r.Subscriptions) == len(topics) &&
			r.q == req.q && r.off > req.off
	})
	start := time.Now()
	hold.Release()

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
	if connected {
		expectTakenOver(t, dev)
	}
	testutil.WaitFor(t, 10*time.Second, "node A to drop its copy of the session", func() bool {
		return a.Server().SessionInstance(id) == 0
	})
	// The session goes on on B with every subscription A's record held.
	for _, topic := range topics {
		sendCmd(t, prod, topic, topic)
		if pub := dev2.expectPublish(); string(pub.Payload) != topic {
			t.Fatalf("on node B: %s %q, want %q", pub.Topic, pub.Payload, topic)
		}
	}
}
