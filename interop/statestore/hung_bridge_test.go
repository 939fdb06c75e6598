package statestore

import (
	"bufio"
	"net"
	"strconv"
	"syscall"
	"testing"
	"time"

	pp "github.com/eclipse/paho.golang/packets"

	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
)

// mqttConn is an MQTT 5 connection through paho.golang's codec.
type mqttConn struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

// dialMQTT5 connects id to addr with a session expiry of 600 s (clean:
// a new session), retrying until the node answers, and returns whether
// the session was present.
func dialMQTT5(t *testing.T, addr, id string, clean bool) (*mqttConn, bool) {
	t.Helper()
	var c *mqttConn
	present := false
	testutil.WaitFor(t, 60*time.Second, "CONNACK for "+id, func() bool {
		nc, err := net.Dial("tcp", addr)
		if err != nil {
			return false
		}
		c = &mqttConn{t: t, nc: nc, r: bufio.NewReader(nc)}
		cp := pp.NewControlPacket(pp.CONNECT)
		cc := cp.Content.(*pp.Connect)
		cc.ProtocolName, cc.ProtocolVersion, cc.ClientID, cc.CleanStart, cc.KeepAlive = "MQTT", 5, id, clean, 60
		expiry := uint32(600)
		cc.Properties = &pp.Properties{SessionExpiryInterval: &expiry}
		_, _ = cp.WriteTo(nc)
		_ = nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		a, err := pp.ReadPacket(c.r)
		if ack, ok := a.Content.(*pp.Connack); err != nil || !ok || ack.ReasonCode != 0 {
			nc.Close()
			return false
		} else {
			present = ack.SessionPresent
		}
		return true
	})
	t.Cleanup(func() { c.nc.Close() })
	return c, present
}

func (c *mqttConn) send(cp *pp.ControlPacket) {
	c.t.Helper()
	if _, err := cp.WriteTo(c.nc); err != nil {
		c.t.Fatal(err)
	}
}

func (c *mqttConn) subscribe(id uint16, filter string) {
	c.t.Helper()
	cp := pp.NewControlPacket(pp.SUBSCRIBE)
	s := cp.Content.(*pp.Subscribe)
	s.PacketID, s.Subscriptions = id, []pp.SubOptions{{Topic: filter, QoS: 1}}
	c.send(cp)
	_ = c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	if a, err := pp.ReadPacket(c.r); err != nil {
		c.t.Fatal(err)
	} else if sa, ok := a.Content.(*pp.Suback); !ok || len(sa.Reasons) != 1 || sa.Reasons[0] != 1 {
		c.t.Fatalf("SUBACK %s", a)
	}
}

// TestMQTTBridgeHungNodeLateHandoff: a client's session lives on bridge
// A, which hangs (SIGSTOP); the client connects to bridge B, which waits
// for A's handoff (bridge.handoff_timeout, 2 s), resumes from A's last
// record and takes a new subscription (SUBACKed, so stored). When A runs
// again it drops its copy of the session and must not answer B's old
// connect request with a handoff: stored after B's records, that stale
// state became the client's latest record, and a resume elsewhere (here
// on A, after B is killed) lost the subscription made on B.
func TestMQTTBridgeHungNodeLateHandoff(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes and stops a bridge")
	}
	c := startFailoverCluster(t)
	c.master(t)
	ports := testnet.FreePorts(t, 2)
	aAddr, bAddr := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	shards := "statestore.shards=" + strconv.Itoa(testShards)
	a := c.spawn(t, "bridge-a", "bridge", "-registries", c.reg, "-set", "bridge.listen="+aAddr, "-set", shards)
	b := c.spawn(t, "bridge-b", "bridge", "-registries", c.reg, "-set", "bridge.listen="+bAddr, "-set", shards)

	onA, _ := dialMQTT5(t, aAddr, "late-dev", true)
	onA.subscribe(1, "late/one")
	if err := a.Process.Signal(syscall.SIGSTOP); err != nil {
		t.Fatal(err)
	}
	onB, present := dialMQTT5(t, bAddr, "late-dev", false)
	if !present {
		t.Fatal("B did not resume the session")
	}
	onB.subscribe(2, "late/two")
	if err := a.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	// A takes the client's first connection down once it has seen B's
	// connect request (and decided about the handoff).
	_ = onA.nc.SetReadDeadline(time.Now().Add(60 * time.Second))
	for {
		cp, err := pp.ReadPacket(onA.r)
		if err != nil {
			break
		}
		if _, ok := cp.Content.(*pp.Disconnect); ok {
			break
		}
	}
	if err := b.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	again, present := dialMQTT5(t, aAddr, "late-dev", false)
	if !present {
		t.Fatal("the session did not survive")
	}
	pub, _ := dialMQTT5(t, aAddr, "late-pub", true)
	for i, topic := range []string{"late/one", "late/two"} {
		cp := pp.NewControlPacket(pp.PUBLISH)
		p := cp.Content.(*pp.Publish)
		p.PacketID, p.Topic, p.Payload, p.QoS = uint16(i+1), topic, []byte(topic), 1
		pub.send(cp)
	}
	got := map[string]bool{}
	_ = again.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
	for len(got) < 2 {
		cp, err := pp.ReadPacket(again.r)
		if err != nil {
			t.Fatalf("after resuming on A the client got %v (%v): the subscription made on B was lost", got, err)
		}
		if p, ok := cp.Content.(*pp.Publish); ok {
			got[p.Topic] = true
			ack := pp.NewControlPacket(pp.PUBACK)
			ack.Content.(*pp.Puback).PacketID = p.PacketID
			again.send(ack)
		}
	}
}
