//go:build cluster

// Real-process MQTT bridge tests: registry, one broker and two bridge
// nodes as separate processes; a bridge node is killed with SIGKILL.

package cluster

import (
	"context"
	"errors"
	"io"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// mqttConn is a minimal MQTT client on mqtt/packets (internal/mqtttest).
type mqttConn struct {
	*mqtttest.Conn
	t  *testing.T
	nc net.Conn
}

func (m *mqttConn) send(p packets.Packet) { m.t.Helper(); m.Send(p) }
func (m *mqttConn) recv() packets.Packet  { m.t.Helper(); return m.Recv() }
func (m *mqttConn) next(timeout time.Duration) (packets.Packet, error) {
	return m.Next(timeout)
}

// dialMQTT connects a v5 client with a one-hour session expiry, retrying
// while the node starts; it returns the CONNACK's session present flag.
func dialMQTT(t *testing.T, addr, id string, clean bool) (*mqttConn, bool) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		nc, err := net.Dial("tcp", addr)
		if err == nil {
			c := mqtttest.New(t, nc, packets.Version5)
			c.RecvTimeout = 15 * time.Second
			m := &mqttConn{Conn: c, t: t, nc: nc}
			cp := &packets.Connect{ClientID: id, CleanStart: clean, KeepAlive: 60}
			cp.Properties.Present.Add(packets.PropSessionExpiry)
			cp.Properties.SessionExpiry = 3600
			m.send(cp)
			p, err := m.next(15 * time.Second)
			if ack, ok := p.(*packets.Connack); err == nil && ok && ack.ReasonCode == 0 {
				return m, ack.SessionPresent
			}
			nc.Close()
		}
		if time.Now().After(deadline) {
			t.Fatalf("no MQTT session on %s: %v", addr, err)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

func (m *mqttConn) subscribe(id uint16, filter string) {
	m.t.Helper()
	m.send(&packets.Subscribe{PacketID: id, Subscriptions: []packets.Subscription{{Filter: filter, QoS: 1}}})
	if _, ok := m.recv().(*packets.Suback); !ok {
		m.t.Fatal("want SUBACK")
	}
}

// expect returns the payload of the next PUBLISH, acknowledged.
func (m *mqttConn) expect() string {
	m.t.Helper()
	p := m.recv()
	pub, ok := p.(*packets.Publish)
	if !ok {
		m.t.Fatalf("want PUBLISH, got %T %+v", p, p)
	}
	if pub.QoS == 1 {
		m.send(&packets.Puback{PacketID: pub.PacketID})
	}
	return string(pub.Payload)
}

// sessionRecords returns the bodies of the MQTT_SESSION records of id.
func sessionRecords(t *testing.T, reg, id string) []string {
	t.Helper()
	pc, err := client.NewPullConsumer(client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{
		ClientOptions: client.ClientOptions{Registries: []string{reg}}, Group: "TEST_SESSION_READER",
		From: client.ConsumeFromFirst, PullSuspend: 200 * time.Millisecond}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	qs, err := pc.Queues(ctx, "MQTT_SESSION")
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Assign(qs); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	var out []string
	for {
		pctx, cancel := context.WithTimeout(ctx, time.Second)
		msgs, err := pc.Poll(pctx)
		cancel()
		if err != nil {
			return out
		}
		for _, x := range msgs {
			if x.Properties["MQTT_CLIENT_ID"] == id {
				out = append(out, string(x.Body))
			}
		}
	}
}

// startBridgeProcs starts a registry, a broker and two bridge nodes (with
// the -set flags extra) as processes; it returns the registry's address and
// the two nodes' MQTT addresses and processes.
func startBridgeProcs(t *testing.T, extra ...string) (reg, addrA, addrB string, nodeA, nodeB *proc) {
	t.Helper()
	dir := t.TempDir()
	ports := freePorts(t, 4)
	reg = "127.0.0.1:" + strconv.Itoa(ports[0])
	start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	start(t, dir, "broker", "broker", "-listen", "127.0.0.1:"+strconv.Itoa(ports[1]), "-data", filepath.Join(dir, "b"),
		"-registries", reg, "-set", "broker.role=async_master", "-set", "broker.advertise_ip=127.0.0.1",
		"-set", "store.segment_size=8MiB")
	addrA, addrB = "127.0.0.1:"+strconv.Itoa(ports[2]), "127.0.0.1:"+strconv.Itoa(ports[3])
	args := func(addr string) []string {
		a := []string{"bridge", "-listen", addr, "-registries", reg}
		for _, e := range extra {
			a = append(a, "-set", e)
		}
		return a
	}
	nodeA = start(t, dir, "bridgeA", args(addrA)...)
	nodeB = start(t, dir, "bridgeB", args(addrB)...)
	t.Cleanup(func() {
		if t.Failed() {
			for _, p := range []*proc{nodeA, nodeB} {
				data, _ := os.ReadFile(p.log)
				t.Logf("%s:\n%s", p.log, data)
			}
		}
	})
	waitBridgeStarted(t, nodeA)
	waitBridgeStarted(t, nodeB)
	return reg, addrA, addrB, nodeA, nodeB
}

// waitBridgeStarted waits until the bridge process p logs that it
// listens; a node that exits first fails the test at once (its log is
// dumped), not a minute later as a refused connection.
func waitBridgeStarted(t *testing.T, p *proc) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		if data, _ := os.ReadFile(p.log); strings.Contains(string(data), "bridge started") {
			return
		}
		select {
		case <-p.done:
			t.Fatalf("%s exited before it listened: %v", p.log, p.cmd.ProcessState)
		case <-time.After(50 * time.Millisecond):
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s not started within 60 s", p.log)
		}
	}
}

// TestClusterProcBridgeTakeoverAndKill: two bridge processes on one
// broker. A session moves from node A to node B (A's connection gets
// DISCONNECT 0x8E); node B is killed with SIGKILL while the client is
// connected; the client resumes on A with the subscriptions B's records
// hold, and a message sent meanwhile.
func TestClusterProcBridgeTakeoverAndKill(t *testing.T) {
	reg, addrA, addrB, _, nodeB := startBridgeProcs(t)

	onA, _ := dialMQTT(t, addrA, "proc-dev", true)
	onA.subscribe(1, "cmd/proc-dev")
	onB, present := dialMQTT(t, addrB, "proc-dev", false)
	if !present {
		t.Fatal("session not present on B")
	}
	p, err := onA.next(10 * time.Second)
	if d, ok := p.(*packets.Disconnect); err != nil || !ok || d.ReasonCode != packets.ReasonSessionTakenOver {
		t.Fatalf("node A's connection: want DISCONNECT 0x8E, got %T %+v / %v", p, p, err)
	}
	if p, err := onA.next(5 * time.Second); err == nil || !errors.Is(err, io.EOF) && !strings.Contains(err.Error(), "reset") {
		t.Fatalf("node A's connection after the takeover: %T %+v / %v", p, p, err)
	}
	onB.subscribe(2, "extra/proc-dev")
	// The subscription is in the session log before its SUBACK.
	durable := false
	for _, r := range sessionRecords(t, reg, "proc-dev") {
		durable = durable || strings.Contains(r, "extra/proc-dev")
	}
	if !durable {
		t.Fatal("SUBACK received before the subscription reached the session log")
	}

	nodeB.kill()
	prod, err := client.NewProducer(client.DefaultProducerOptions(reg))
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	send := func(topic, body string) {
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		defer cancel()
		if _, err := prod.Send(ctx, &client.Message{Topic: "MQTT_EGRESS", Body: []byte(body),
			Properties: map[string]string{"MQTT_TOPIC": topic, "MQTT_QOS": "1"}}); err != nil {
			t.Fatal(err)
		}
	}
	send("cmd/proc-dev", "while B was dead")
	back, present := dialMQTT(t, addrA, "proc-dev", false)
	if !present {
		t.Fatal("session lost with node B")
	}
	if got := back.expect(); got != "while B was dead" {
		t.Fatalf("after B's crash: %q", got)
	}
	send("extra/proc-dev", "extra")
	send("cmd/proc-dev", "cmd")
	var got []string
	for range 2 {
		pk, err := back.next(3 * time.Second)
		if err != nil {
			break
		}
		if pub, ok := pk.(*packets.Publish); ok {
			back.send(&packets.Puback{PacketID: pub.PacketID})
			got = append(got, string(pub.Payload))
		}
	}
	// Two MQTT topics, sent to two queues of MQTT_EGRESS: MQTT orders a
	// session's messages per topic only, and the bridge reads the queues
	// side by side, so either order is right.
	slices.Sort(got)
	if want := "cmd,extra"; strings.Join(got, ",") != want {
		t.Fatalf("after B's crash got %v, want both of extra, cmd", got)
	}
}
