package rocketmq

import (
	"bufio"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"syscall"
	"testing"
	"time"

	pp "github.com/eclipse/paho.golang/packets"
)

// killable is a `smartgo standalone` that a test kills with SIGKILL and
// starts again on the same ports and data.
type killable struct {
	standalone
	dir  string
	args []string
	runs int
	logs []string
}

// startKillable runs `smartgo standalone` on free loopback ports with its
// data in a temp dir (extra: more -set flags); cleanup stops it (SIGINT).
func startKillable(t *testing.T, extra ...string) *killable {
	t.Helper()
	return startKillableData(t, "", extra...)
}

// startKillableData is startKillable with its data in data (its logs
// stay in a temp dir), or in the temp dir when data is "".
func startKillableData(t *testing.T, data string, extra ...string) *killable {
	t.Helper()
	ports := freePorts(t, 3)
	k := &killable{dir: t.TempDir()}
	if data == "" {
		data = filepath.Join(k.dir, "data")
	}
	k.registry, k.broker, k.mqtt = fmt.Sprintf("127.0.0.1:%d", ports[0]), fmt.Sprintf("127.0.0.1:%d", ports[1]), fmt.Sprintf("127.0.0.1:%d", ports[2])
	k.args = []string{"standalone", "-data", data, "-set", "registry.listen=" + k.registry,
		"-set", "broker.listen=" + k.broker, "-set", "bridge.listen=" + k.mqtt, "-set", "console.listen=",
		"-set", "store.segment_size=64MiB", "-set", "log.level=" + logLevel()}
	for _, e := range extra {
		k.args = append(k.args, "-set", e)
	}
	t.Cleanup(func() {
		if k.cmd.ProcessState == nil {
			_ = k.cmd.Process.Signal(os.Interrupt)
			done := make(chan error, 1)
			go func() { done <- k.cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("smartgo standalone exited with %v", err)
				}
			case <-time.After(15 * time.Second):
				_ = k.cmd.Process.Kill()
				<-done
				t.Error("smartgo standalone did not stop within 15 s of SIGINT")
			}
		}
		if t.Failed() {
			for _, l := range k.logs {
				data, _ := os.ReadFile(l)
				t.Logf("%s:\n%s", l, tail(string(data), 200))
			}
		}
		_ = k.log.Close()
	})
	k.start(t)
	return k
}

// start runs the process and waits until it serves MQTT.
func (k *killable) start(t *testing.T) {
	t.Helper()
	k.runs++
	path := filepath.Join(k.dir, fmt.Sprintf("smartgo-%d.log", k.runs))
	k.logs = append(k.logs, path)
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	k.log = f
	bin := os.Getenv("SMARTGO_KILL_BIN") // another build, e.g. to check a test fails on it
	if bin == "" {
		bin = smartgoBinary(t)
	}
	k.cmd = exec.Command(bin, withoutAMQP(k.args)...)
	k.cmd.Stdout, k.cmd.Stderr = f, f
	if err := k.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	for deadline := time.Now().Add(60 * time.Second); !fileContains(path, "standalone running"); {
		if time.Now().After(deadline) {
			t.Fatalf("standalone did not come up (run %d)", k.runs)
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// kill9Restart kills the process with SIGKILL (nothing is saved or
// flushed) and starts it again.
func (k *killable) kill9Restart(t *testing.T) {
	t.Helper()
	_ = k.cmd.Process.Signal(syscall.SIGKILL)
	_ = k.cmd.Wait()
	_ = k.log.Close()
	k.start(t)
}

// mqttRaw is an MQTT 5 client speaking through paho.golang's codec, so the
// test decides which packet it sends and acknowledges.
type mqttRaw struct {
	t  *testing.T
	nc net.Conn
	r  *bufio.Reader
}

// dialMQTT connects clientID to addr with a session that outlives the
// connection (expiry 600 s); clean starts a new one. It returns whether
// the server had the session.
func dialMQTT(t *testing.T, addr, clientID string, clean bool) (*mqttRaw, bool) {
	t.Helper()
	return dialConnect(t, addr, clientID, clean, 600, nil)
}

// dialConnect connects clientID with session expiry expiry (seconds) and
// whatever set adds to the CONNECT (nil: nothing); it returns whether the
// server had the session.
func dialConnect(t *testing.T, addr, clientID string, clean bool, expiry uint32, set func(*pp.Connect)) (*mqttRaw, bool) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &mqttRaw{t: t, nc: nc, r: bufio.NewReader(nc)}
	cp := pp.NewControlPacket(pp.CONNECT)
	cc := cp.Content.(*pp.Connect)
	cc.ProtocolName, cc.ProtocolVersion, cc.ClientID, cc.CleanStart, cc.KeepAlive = "MQTT", 5, clientID, clean, 60
	cc.Properties = &pp.Properties{SessionExpiryInterval: &expiry}
	if set != nil {
		set(cc)
	}
	c.send(cp)
	ack, ok := c.recv().Content.(*pp.Connack)
	if !ok || ack.ReasonCode != 0 {
		t.Fatalf("%s: CONNACK %+v", clientID, ack)
	}
	return c, ack.SessionPresent
}

func (c *mqttRaw) send(cp *pp.ControlPacket) {
	c.t.Helper()
	if _, err := cp.WriteTo(c.nc); err != nil {
		c.t.Fatal(err)
	}
}

func (c *mqttRaw) recv() *pp.ControlPacket {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	cp, err := pp.ReadPacket(c.r)
	if err != nil {
		c.t.Fatal(err)
	}
	return cp
}

// ack sends a PUBACK, PUBREC, PUBREL or PUBCOMP for id.
func (c *mqttRaw) ack(typ byte, id uint16) {
	c.t.Helper()
	cp := pp.NewControlPacket(typ)
	switch a := cp.Content.(type) {
	case *pp.Puback:
		a.PacketID = id
	case *pp.Pubrec:
		a.PacketID = id
	case *pp.Pubrel:
		a.PacketID = id
	case *pp.Pubcomp:
		a.PacketID = id
	}
	c.send(cp)
}

func (c *mqttRaw) publish(id uint16, topic, payload string, qos byte, dup bool) {
	c.t.Helper()
	cp := pp.NewControlPacket(pp.PUBLISH)
	p := cp.Content.(*pp.Publish)
	p.PacketID, p.Topic, p.Payload, p.QoS, p.Duplicate = id, topic, []byte(payload), qos, dup
	c.send(cp)
}

func (c *mqttRaw) subscribe(id uint16, filter string, qos byte) {
	c.t.Helper()
	c.sendSubscribe(id, filter, qos)
	if sa, ok := c.recv().Content.(*pp.Suback); !ok || len(sa.Reasons) != 1 || sa.Reasons[0] != qos {
		c.t.Fatalf("SUBACK %+v", sa)
	}
}

// sendSubscribe sends a SUBSCRIBE of filter at qos.
func (c *mqttRaw) sendSubscribe(id uint16, filter string, qos byte) {
	c.t.Helper()
	cp := pp.NewControlPacket(pp.SUBSCRIBE)
	s := cp.Content.(*pp.Subscribe)
	s.PacketID, s.Subscriptions = id, []pp.SubOptions{{Topic: filter, QoS: qos}}
	c.send(cp)
}

// expect returns the next packet, which must be of type T.
func expect[T any](c *mqttRaw) T {
	c.t.Helper()
	cp := c.recv()
	v, ok := cp.Content.(T)
	if !ok {
		c.t.Fatalf("want %T, got %s", v, cp)
	}
	return v
}
