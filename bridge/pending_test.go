package bridge

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	pp "github.com/eclipse/paho.golang/packets"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// pahoConn is a device speaking MQTT 5 through paho.golang's codec, so
// what SmartGo sends is decoded by a third-party reader, and the test
// decides which PUBLISH it acknowledges.
type pahoConn struct {
	t  *testing.T
	nc net.Conn
}

func dialPaho(t *testing.T, addr string) *pahoConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &pahoConn{t: t, nc: nc}
}

func (c *pahoConn) send(cp *pp.ControlPacket) {
	c.t.Helper()
	if _, err := cp.WriteTo(c.nc); err != nil {
		c.t.Fatal(err)
	}
}

func (c *pahoConn) recv() *pp.ControlPacket {
	c.t.Helper()
	c.nc.SetReadDeadline(time.Now().Add(15 * time.Second))
	cp, err := pp.ReadPacket(c.nc)
	if err != nil {
		c.t.Fatal(err)
	}
	return cp
}

func (c *pahoConn) connect(id string, clean bool) *pp.Connack {
	c.t.Helper()
	cp := pp.NewControlPacket(pp.CONNECT)
	cc := cp.Content.(*pp.Connect)
	cc.ProtocolName, cc.ProtocolVersion, cc.ClientID, cc.CleanStart, cc.KeepAlive = "MQTT", 5, id, clean, 60
	expiry := uint32(3600)
	cc.Properties = &pp.Properties{SessionExpiryInterval: &expiry}
	c.send(cp)
	ack, ok := c.recv().Content.(*pp.Connack)
	if !ok || ack.ReasonCode != 0 {
		c.t.Fatalf("connack %+v", ack)
	}
	return ack
}

// TestBridgePendingDeliveryAcrossRestart: the messages a persistent
// session holds (sent and unacknowledged, or queued while its client was
// away) come back after a bridge restart as the live delivery gave them:
// at the QoS the subscription granted (QoS 1 for a QoS 2 publish), with
// the retain flag of a retained message sent on subscribe or under Retain
// As Published, with the subscription identifier, and with DUP on those
// sent before. They used to come back at the publish QoS (above the
// grant), without retain flag or identifier, and without DUP.
func TestBridgePendingDeliveryAcrossRestart(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	pub := connected(t, addrOf(a), packets.Version5, "keep-pub")
	publish := func(id uint16, topic, payload string, qos byte, retain bool) {
		t.Helper()
		pub.send(&packets.Publish{Topic: topic, Payload: []byte(payload), QoS: qos, Retain: retain, PacketID: id})
		if qos == 2 {
			if _, ok := pub.recv().(*packets.Pubrec); !ok {
				t.Fatal("want PUBREC")
			}
			pub.send(&packets.Pubrel{PacketID: id})
			if _, ok := pub.recv().(*packets.Pubcomp); !ok {
				t.Fatal("want PUBCOMP")
			}
		} else if _, ok := pub.recv().(*packets.Puback); !ok {
			t.Fatal("want PUBACK")
		}
	}
	publish(1, "keep/old", "retained before", 1, true)
	// Its live delivery must be over before the device subscribes: a
	// lagging live consumer would hand it to the new subscription too
	// (before the SUBACK, under load), besides the retained copy.
	waitLiveCaughtUp(t, a)

	dev := dialPaho(t, addrOf(a))
	dev.connect("keeper", true)
	sp := pp.NewControlPacket(pp.SUBSCRIBE)
	sc := sp.Content.(*pp.Subscribe)
	subID := 42
	sc.PacketID, sc.Properties = 1, &pp.Properties{SubscriptionIdentifier: &subID}
	sc.Subscriptions = []pp.SubOptions{{Topic: "keep/#", QoS: 1, RetainAsPublished: true}}
	dev.send(sp)
	type want struct {
		topic       string
		dup, retain bool
	}
	check := func(cp *pp.ControlPacket, w want) {
		t.Helper()
		p, ok := cp.Content.(*pp.Publish)
		if !ok {
			t.Fatalf("want PUBLISH %s, got %s", w.topic, cp)
		}
		got := fmt.Sprintf("%s qos=%d dup=%v retain=%v", p.Topic, p.QoS, p.Duplicate, p.Retain)
		exp := fmt.Sprintf("%s qos=1 dup=%v retain=%v", w.topic, w.dup, w.retain)
		if got != exp {
			t.Errorf("got %s, want %s", got, exp)
		}
		if p.Properties == nil || p.Properties.SubscriptionIdentifier == nil || *p.Properties.SubscriptionIdentifier != subID {
			t.Errorf("%s: subscription identifier %v, want %d", p.Topic, p.Properties, subID)
		}
	}
	if _, ok := dev.recv().Content.(*pp.Suback); !ok {
		t.Fatal("want SUBACK")
	}
	check(dev.recv(), want{"keep/old", false, true})
	publish(2, "keep/a", "qos 2 to a qos 1 grant", 2, false)
	check(dev.recv(), want{"keep/a", false, false})
	publish(3, "keep/r", "retained, as published", 1, true)
	check(dev.recv(), want{"keep/r", false, true})
	// None of the three acknowledged; the device drops off.
	dev.nc.Close()
	testutil.WaitFor(t, 10*time.Second, "keeper offline", func() bool { return !a.Server().Connected("keeper") })
	publish(4, "keep/b", "while away", 2, false)
	publish(5, "keep/r2", "retained while away", 1, true)

	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	a2 := startBridge(t, c, nil)
	dev2 := dialPaho(t, addrOf(a2))
	if ack := dev2.connect("keeper", false); !ack.SessionPresent {
		t.Fatal("session lost in the restart")
	}
	for _, w := range []want{{"keep/old", true, true}, {"keep/a", true, false}, {"keep/r", true, true},
		{"keep/b", false, false}, {"keep/r2", false, true}} {
		check(dev2.recv(), w)
	}
}

// waitLiveCaughtUp waits until n's live consumer has delivered what the
// brokers stored so far in its device-facing topics.
func waitLiveCaughtUp(t *testing.T, n *Bridge) {
	t.Helper()
	var pts []resumePoint
	for _, topic := range n.Backend().Topics() {
		pts = append(pts, resumePoint{Topic: topic})
	}
	n.Backend().waitLive(context.Background(), pts)
}
