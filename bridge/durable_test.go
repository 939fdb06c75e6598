package bridge

import (
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// crash stops a node without its graceful session saves: the back end
// goes first, so the server's saves at Close fail.
func crash(t *testing.T, b *Bridge) {
	t.Helper()
	if err := b.Backend().Close(); err != nil {
		t.Log("backend close:", err)
	}
	b.Server().Close()
}

func shortHandoff(_ *mqtt.Options, bo *Options) { bo.HandoffTimeout = 300 * time.Millisecond }

// ownRecord returns the last session record node n wrote for id.
func ownRecord(n *Bridge, id string) *sessionRecord {
	n.Backend().mu.Lock()
	defer n.Backend().mu.Unlock()
	return n.Backend().own[id]
}

// TestBridgeSubscriptionSurvivesCrash: subscriptions handed to the back
// end with Server.SaveSubscriptions (as the server does before SUBACK and
// UNSUBACK) survive a crash of the node: the client resumes on another
// node with exactly those subscriptions.
func TestBridgeSubscriptionSurvivesCrash(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, shortHandoff)
	b := startBridge(t, c, shortHandoff)
	prod := newProducer(t, c)

	dev, _ := persistent(t, addrOf(a), "durable", true)
	dev.subscribe(1, sub("cmd/durable/#", 1), sub("gone/durable", 1))
	if err := a.Server().SaveSubscriptions("durable"); err != nil {
		t.Fatal(err)
	}
	dev.send(&packets.Unsubscribe{PacketID: 2, Filters: []string{"gone/durable"}})
	if _, ok := dev.recv().(*packets.Unsuback); !ok {
		t.Fatal("want UNSUBACK")
	}
	if err := a.Server().SaveSubscriptions("durable"); err != nil {
		t.Fatal(err)
	}
	if r := ownRecord(a, "durable"); r == nil || !r.Online || len(r.Subscriptions) != 1 {
		t.Fatalf("A's record after UNSUBSCRIBE: %+v", r)
	}
	crash(t, a)

	dev2, ack := persistent(t, addrOf(b), "durable", false)
	if !ack.SessionPresent {
		t.Fatal("session lost with the node")
	}
	sendCmd(t, prod, "gone/durable", "unsubscribed")
	sendCmd(t, prod, "cmd/durable/x", "kept")
	if pub := dev2.expectPublish(); string(pub.Payload) != "kept" {
		t.Fatalf("after the crash: %s %q", pub.Topic, pub.Payload)
	}
	dev2.nothing(300 * time.Millisecond)
}

// TestBridgeSubscribeWrittenBeforeSuback: the server writes a persistent
// session's subscriptions to the session log before the SUBACK (the engine
// calls Server.SaveSubscriptions from its SUBSCRIBE and UNSUBSCRIBE
// handlers).
func TestBridgeSubscribeWrittenBeforeSuback(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, shortHandoff)
	b := startBridge(t, c, shortHandoff)
	prod := newProducer(t, c)

	dev, _ := persistent(t, addrOf(a), "early", true)
	dev.subscribe(1, sub("cmd/early", 1))
	if r := ownRecord(a, "early"); r == nil || !r.Online || len(r.Subscriptions) != 1 {
		t.Fatalf("no online record with the subscription when the SUBACK arrived: %+v", r)
	}
	crashThenResumeGets(t, a, b, prod, "early", "cmd/early")
}

// crashThenResumeGets crashes node a, resumes id's session on node b and
// requires a message sent to topic to reach it (the session kept a
// subscription to topic through the crash).
func crashThenResumeGets(t *testing.T, a, b *Bridge, prod *client.Producer, id, topic string) {
	t.Helper()
	crash(t, a)
	dev, ack := persistent(t, addrOf(b), id, false)
	if !ack.SessionPresent {
		t.Fatal("session lost with the node")
	}
	sendCmd(t, prod, topic, "kept")
	if pub := dev.expectPublish(); string(pub.Payload) != "kept" {
		t.Fatalf("after the crash: %s %q", pub.Topic, pub.Payload)
	}
}
