package bridge

import (
	"slices"
	"testing"
	"time"

	pp "github.com/eclipse/paho.golang/packets"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgePubrelAcrossRestart: a QoS 2 message the server sent, whose
// PUBREC came (so the server sent PUBREL) and whose PUBCOMP did not,
// gets its PUBREL again, with the same packet id and before anything
// else, when the persistent session resumes after the node stopped (MQTT
// 4.4); a second one that the device received but did not PUBREC comes
// again as PUBLISH with DUP and its first packet id. Before, the released
// message was left out of the session's record (no PUBREL came after the
// restart) and the resent one took a new id (here the released one's).
func TestBridgePubrelAcrossRestart(t *testing.T) {
	c := startCluster(t)
	t.Run("stop", func(t *testing.T) { testPubrelResume(t, c, false) })
	t.Run("crash", func(t *testing.T) { testPubrelResume(t, c, true) })
}

// testPubrelResume: with crash, node A dies without saving (as under
// kill -9) after a checkpoint recorded the session, and the client
// resumes on node B from that checkpoint.
func testPubrelResume(t *testing.T, c *cluster.Cluster, crashed bool) {
	mod := func(mo *mqtt.Options, bo *Options) {
		shortHandoff(mo, bo)
		bo.CheckpointInterval = 50 * time.Millisecond
	}
	a := startBridge(t, c, mod)
	id := "releaser-stop"
	if crashed {
		id = "releaser-crash"
	}
	pub := connected(t, addrOf(a), packets.Version5, id+"-pub")
	publish2 := func(id uint16, topic, payload string) {
		t.Helper()
		pub.send(&packets.Publish{Topic: topic, Payload: []byte(payload), QoS: 2, PacketID: id})
		if _, ok := pub.recv().(*packets.Pubrec); !ok {
			t.Fatal("want PUBREC")
		}
		pub.send(&packets.Pubrel{PacketID: id})
		if _, ok := pub.recv().(*packets.Pubcomp); !ok {
			t.Fatal("want PUBCOMP")
		}
	}
	dev := dialPaho(t, addrOf(a))
	dev.connect(id, true)
	sp := pp.NewControlPacket(pp.SUBSCRIBE)
	sc := sp.Content.(*pp.Subscribe)
	sc.PacketID = 1
	sc.Subscriptions = []pp.SubOptions{{Topic: id + "/#", QoS: 2}}
	dev.send(sp)
	if _, ok := dev.recv().Content.(*pp.Suback); !ok {
		t.Fatal("want SUBACK")
	}
	recvPublish := func(d *pahoConn) *pp.Publish {
		t.Helper()
		cp := d.recv()
		p, ok := cp.Content.(*pp.Publish)
		if !ok {
			t.Fatalf("want PUBLISH, got %s", cp)
		}
		return p
	}
	publish2(1, id+"/a", "released")
	first := recvPublish(dev)
	if first.QoS != 2 || first.Topic != id+"/a" {
		t.Fatalf("got %s qos %d", first.Topic, first.QoS)
	}
	rec := pp.NewControlPacket(pp.PUBREC)
	rec.Content.(*pp.Pubrec).PacketID = first.PacketID
	dev.send(rec)
	if p, ok := dev.recv().Content.(*pp.Pubrel); !ok || p.PacketID != first.PacketID {
		t.Fatalf("want PUBREL %d, got %+v", first.PacketID, p)
	}
	// The PUBCOMP is withheld. A second message is received and not
	// acknowledged at all.
	publish2(2, id+"/b", "received")
	second := recvPublish(dev)
	if second.Topic != id+"/b" || second.PacketID == first.PacketID {
		t.Fatalf("second: %s id %d", second.Topic, second.PacketID)
	}
	if crashed {
		testutil.WaitFor(t, 10*time.Second, "a checkpoint with both", func() bool {
			r := ownRecord(a, id)
			return r != nil && r.Online && slices.Equal(r.Released, []uint16{first.PacketID}) &&
				len(r.Resume) > 0 && slices.ContainsFunc(r.Resume, func(rp resumePoint) bool {
				return slices.Equal(rp.SentIDs, []uint16{second.PacketID})
			})
		})
		crash(t, a)
	} else {
		dev.nc.Close()
		testutil.WaitFor(t, 10*time.Second, "client offline", func() bool { return !a.Server().Connected(id) })
		if err := a.Close(); err != nil {
			t.Fatal(err)
		}
	}

	a2 := startBridge(t, c, mod)
	dev2 := dialPaho(t, addrOf(a2))
	if ack := dev2.connect(id, false); !ack.SessionPresent {
		t.Fatal("session lost in the restart")
	}
	cp := dev2.recv()
	rel, ok := cp.Content.(*pp.Pubrel)
	if !ok || rel.PacketID != first.PacketID {
		t.Fatalf("want PUBREL %d first, got %s", first.PacketID, cp)
	}
	again := recvPublish(dev2)
	if again.Topic != id+"/b" || !again.Duplicate || again.QoS != 2 || string(again.Payload) != "received" ||
		again.PacketID != second.PacketID {
		t.Fatalf("resent: %s dup=%v qos=%d %q id %d (first sent with id %d)", again.Topic, again.Duplicate, again.QoS,
			again.Payload, again.PacketID, second.PacketID)
	}
	// Completing the released one frees its id: the server answers
	// nothing, and the session goes on.
	comp := pp.NewControlPacket(pp.PUBCOMP)
	comp.Content.(*pp.Pubcomp).PacketID = first.PacketID
	dev2.send(comp)
	rec2 := pp.NewControlPacket(pp.PUBREC)
	rec2.Content.(*pp.Pubrec).PacketID = again.PacketID
	dev2.send(rec2)
	if p, ok := dev2.recv().Content.(*pp.Pubrel); !ok || p.PacketID != again.PacketID {
		t.Fatalf("want PUBREL %d, got %+v", again.PacketID, p)
	}
}
