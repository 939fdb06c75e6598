package bridge

import (
	"slices"
	"testing"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeResumeOverlappingSubscriptionIdentifier: a session subscribed
// with one SUBSCRIBE to two overlapping filters under identifier 7 gets a
// message sent while it was offline, resumed on another node, with the
// identifier once, as it gets one sent while it is connected
// (libmosquitto 2.0 drops the connection on a PUBLISH with two).
func TestBridgeResumeOverlappingSubscriptionIdentifier(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, shortHandoff)
	b := startBridge(t, c, shortHandoff)
	prod := newProducer(t, c)

	dev, _ := persistent(t, addrOf(a), "ovl-sub", true)
	s := &packets.Subscribe{PacketID: 1, Subscriptions: []packets.Subscription{sub("ovl/#", 1), sub("ovl/+", 1)}}
	s.Properties.SubscriptionIdentifiers = []uint32{7}
	dev.send(s)
	if _, ok := dev.recv().(*packets.Suback); !ok {
		t.Fatal("want SUBACK")
	}
	sendCmd(t, prod, "ovl/x", "live")
	if pub := dev.expectPublish(); string(pub.Payload) != "live" || !slices.Equal(pub.Properties.SubscriptionIdentifiers, []uint32{7}) {
		t.Fatalf("connected: %q with identifiers %v", pub.Payload, pub.Properties.SubscriptionIdentifiers)
	}
	dev.disconnect()

	sendCmd(t, prod, "ovl/x", "offline")
	dev2, ack := persistent(t, addrOf(b), "ovl-sub", false)
	if !ack.SessionPresent {
		t.Fatal("session lost")
	}
	// "live" may come again (at least once: its PUBACK and the
	// disconnect race the handoff); each delivery carries 7 once.
	for {
		pub := dev2.expectPublish()
		if !slices.Equal(pub.Properties.SubscriptionIdentifiers, []uint32{7}) {
			t.Fatalf("resumed on another node: %q with identifiers %v", pub.Payload, pub.Properties.SubscriptionIdentifiers)
		}
		if string(pub.Payload) == "offline" {
			return
		}
		if string(pub.Payload) != "live" {
			t.Fatalf("resumed on another node: %q", pub.Payload)
		}
	}
}
