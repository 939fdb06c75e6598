package bridge

import (
	"errors"
	"io"
	"net"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// expectTakenOver asserts that the server ends r's connection because the
// session moved: one DISCONNECT 0x8E (v5) or nothing (3.1.1), then EOF.
func expectTakenOver(t *testing.T, r *rawClient) {
	t.Helper()
	if r.v == packets.Version5 {
		p, err := r.next(10 * time.Second)
		if err != nil {
			t.Fatalf("want DISCONNECT 0x8E, got %v", err)
		}
		d, ok := p.(*packets.Disconnect)
		if !ok || d.ReasonCode != packets.ReasonSessionTakenOver {
			t.Fatalf("want DISCONNECT 0x8E, got %T %+v", p, p)
		}
	}
	p, err := r.next(10 * time.Second)
	var ne net.Error
	if err == nil || !errors.Is(err, io.EOF) && !(errors.As(err, &ne) && !ne.Timeout()) {
		t.Fatalf("want the connection closed after the takeover, got %T %+v / %v", p, p, err)
	}
}

// recvPublish returns the next PUBLISH without acknowledging it.
func (r *rawClient) recvPublish() *packets.Publish {
	r.t.Helper()
	p := r.recv()
	pub, ok := p.(*packets.Publish)
	if !ok {
		r.t.Fatalf("want PUBLISH, got %T %+v", p, p)
	}
	return pub
}

// TestBridgeTakeoverAcrossNodes: a client connected to node A connects
// with the same id to node B: A's connection gets DISCONNECT 0x8E once and
// B resumes the session with A's unacknowledged message; back on A, the
// session is B's (a subscription made on B, B's unacknowledged message),
// not A's stale copy.
func TestBridgeTakeoverAcrossNodes(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	prod := newProducer(t, c)

	onA, _ := persistent(t, addrOf(a), "mover", true)
	onA.subscribe(1, sub("cmd/mover/#", 1))
	sendCmd(t, prod, "cmd/mover/x", "one")
	if pub := onA.recvPublish(); string(pub.Payload) != "one" {
		t.Fatalf("on A: %q", pub.Payload)
	} // not acknowledged: pending when the session moves

	onB, ack := persistent(t, addrOf(b), "mover", false)
	if !ack.SessionPresent {
		t.Fatal("session not present on B")
	}
	expectTakenOver(t, onA)
	if pub := onB.expectPublish(); string(pub.Payload) != "one" || pub.Topic != "cmd/mover/x" {
		t.Fatalf("pending message on B: %s %q", pub.Topic, pub.Payload)
	}
	onB.subscribe(2, sub("extra/mover", 1))
	sendCmd(t, prod, "cmd/mover/y", "two")
	if pub := onB.recvPublish(); string(pub.Payload) != "two" {
		t.Fatalf("on B: %q", pub.Payload)
	} // not acknowledged

	backOnA, ack := persistent(t, addrOf(a), "mover", false)
	if !ack.SessionPresent {
		t.Fatal("session not present back on A")
	}
	expectTakenOver(t, onB)
	if pub := backOnA.expectPublish(); string(pub.Payload) != "two" || pub.Topic != "cmd/mover/y" {
		t.Fatalf("B's pending message back on A: %s %q", pub.Topic, pub.Payload)
	}
	sendCmd(t, prod, "extra/mover", "three")
	if pub := backOnA.expectPublish(); string(pub.Payload) != "three" {
		t.Fatalf("subscription made on B, back on A: %s %q", pub.Topic, pub.Payload)
	}
	sendCmd(t, prod, "cmd/mover/z", "four")
	if pub := backOnA.expectPublish(); string(pub.Payload) != "four" {
		t.Fatalf("on A: %s %q", pub.Topic, pub.Payload)
	}
	backOnA.nothing(300 * time.Millisecond)
}

// TestBridgeTakeoverCleanAndV311: takeovers of a 3.1.1 persistent session
// (the old connection is closed without DISCONNECT) and of a clean v5
// session (0x8E, and the new node starts empty).
func TestBridgeTakeoverCleanAndV311(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	prod := newProducer(t, c)

	v3a := dialRaw(t, addrOf(a), packets.Version311)
	v3a.connect(&packets.Connect{ClientID: "old3", KeepAlive: 60})
	v3a.subscribe(1, sub("cmd/old3", 1))
	v3b := dialRaw(t, addrOf(b), packets.Version311)
	if ack := v3b.connect(&packets.Connect{ClientID: "old3", KeepAlive: 60}); !ack.SessionPresent {
		t.Fatal("3.1.1 session not present on B")
	}
	expectTakenOver(t, v3a)
	sendCmd(t, prod, "cmd/old3", "hi")
	if pub := v3b.expectPublish(); string(pub.Payload) != "hi" {
		t.Fatalf("3.1.1 on B: %q", pub.Payload)
	}

	ca := connected(t, addrOf(a), packets.Version5, "fresh")
	ca.subscribe(1, sub("cmd/fresh", 0))
	cb := connected(t, addrOf(b), packets.Version5, "fresh")
	expectTakenOver(t, ca)
	sendCmd(t, prod, "cmd/fresh", "x")
	cb.nothing(300 * time.Millisecond) // a clean start: no subscription
}

// TestBridgeTakeoverWhileDelivering: a session taken over while its node
// is still finishing the live delivery of a message the client has (not
// yet in the queue's delivery history, the queue's progress not moved
// on) resumes with that message once. The record kept it whole and left
// the resume point before it: the new node sent it as a pending message
// and again read from the log.
func TestBridgeTakeoverWhileDelivering(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	prod := newProducer(t, c)

	onB, _ := persistent(t, addrOf(b), "midway", true)
	onB.subscribe(1, sub("cmd/midway/#", 1))
	held, release := make(chan struct{}), make(chan struct{})
	b.Backend().testAfterDeliver = func(m *mqtt.Message) {
		if string(m.Payload) != "held" {
			return
		}
		close(held)
		select {
		case <-release:
		case <-time.After(20 * time.Second):
		}
	}
	sendCmd(t, prod, "cmd/midway/x", "held")
	if pub := onB.recvPublish(); string(pub.Payload) != "held" {
		t.Fatalf("on B: %q", pub.Payload)
	} // not acknowledged
	<-held
	onA, ack := persistent(t, addrOf(a), "midway", false)
	close(release)
	if !ack.SessionPresent {
		t.Fatal("session not present on A")
	}
	if pub := onA.expectPublish(); string(pub.Payload) != "held" {
		t.Fatalf("pending message on A: %s %q", pub.Topic, pub.Payload)
	}
	onA.nothing(300 * time.Millisecond)
}
