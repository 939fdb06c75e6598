//go:build cluster

package cluster

import (
	"net"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestClusterProcBridgeWillOfKilledNode: two bridge processes on one
// broker. A client with a will (no delay, a session that ends with its
// connection) is connected to node A, which is killed with SIGKILL; node
// B publishes the will, once: a watcher on B gets it, and nothing more.
func TestClusterProcBridgeWillOfKilledNode(t *testing.T) {
	_, addrA, addrB, nodeA, _ := startBridgeProcs(t, "bridge.heartbeat_interval=1s")

	watcher, _ := dialMQTT(t, addrB, "will-watcher", true)
	watcher.subscribe(1, "will/#")
	dev, _ := dialMQTT(t, addrA, "will-dev", true) // waits until A serves MQTT
	dev.nc.Close()                                 // no will: nothing to publish
	mqttWill(t, addrA, "will-dev")
	nodeA.kill()

	pk, err := watcher.next(60 * time.Second)
	pub, ok := pk.(*packets.Publish)
	if err != nil || !ok {
		t.Fatalf("want will-dev's will on node B, got %T %+v / %v", pk, pk, err)
	}
	if pub.Topic != "will/will-dev" || string(pub.Payload) != "offline" {
		t.Fatalf("will: %s %q", pub.Topic, pub.Payload)
	}
	watcher.send(&packets.Puback{PacketID: pub.PacketID})
	if pk, err := watcher.next(5 * time.Second); err == nil {
		t.Fatalf("after the will: %T %+v", pk, pk)
	}
}

// mqttWill connects a v5 clean session with a will "offline" on
// will/<id> and pings: the node has stored the will once it answers.
func mqttWill(t *testing.T, addr, id string) *mqttConn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	c := mqtttest.New(t, nc, packets.Version5)
	c.RecvTimeout = 15 * time.Second
	m := &mqttConn{Conn: c, t: t, nc: nc}
	cp := &packets.Connect{ClientID: id, CleanStart: true, KeepAlive: 60, WillFlag: true, WillQoS: 1,
		WillTopic: "will/" + id, WillPayload: []byte("offline")}
	m.send(cp)
	if ack, ok := m.recv().(*packets.Connack); !ok || ack.ReasonCode != 0 {
		t.Fatalf("%s: CONNACK %+v", id, ack)
	}
	m.send(&packets.Pingreq{})
	if _, ok := m.recv().(*packets.Pingresp); !ok {
		t.Fatal("want PINGRESP")
	}
	return m
}
