package rocketmq

import (
	"bufio"
	"fmt"
	"io"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	pp "github.com/eclipse/paho.golang/packets"
)

// TestInteropMQTTCleanStartDropsStoredSession: an MQTT 5 device with a
// persistent session (session expiry 600 s) subscribes at QoS 1 and
// leaves; five messages are published to it while it is offline. It
// connects again with Clean Start: the CONNACK says no session present,
// and none of the five arrives, not before the SUBACK of its new
// subscription nor after it (a message published then does). It leaves
// and connects with Clean Start false: the session present is the new
// one, and it gets what was published to that, nothing of the old.
func TestInteropMQTTCleanStartDropsStoredSession(t *testing.T) {
	s := startStandalone(t)
	waitBridge(t, s)
	cleanStartDrops(t, s.mqtt, s.mqtt, s.mqtt)
}

// TestInteropMQTTCleanStartOnOtherNode: the session is made on node A and
// gets the offline messages there, the clean start is on node B, the
// resume with Clean Start false on node A again: node A does not resume
// the session it held before the clean start, and no old message arrives
// on either node.
func TestInteropMQTTCleanStartOnOtherNode(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := startTailLost(t)
	b := c.startBridge2(t)
	cleanStartDrops(t, c.mqttAddr, b, c.mqttAddr)
}

// waitBridge waits until a standalone's MQTT bridge made its topics.
func waitBridge(t *testing.T, s *standalone) {
	t.Helper()
	for deadline := time.Now().Add(60 * time.Second); !s.logContains("standalone running"); {
		if time.Now().After(deadline) {
			t.Fatal("standalone: the bridge did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// cleanStartDrops runs the clean start test: the session is made and
// gets its offline messages at addrA, the clean start is at addrB, the
// resume at addrC.
func cleanStartDrops(t *testing.T, addrA, addrB, addrC string) {
	t.Helper()
	dev, _ := dialMQTT(t, addrA, "cs-dev", true)
	dev.subscribe(1, "cs/#", 1)
	dev.send(pp.NewControlPacket(pp.DISCONNECT))
	_ = dev.nc.Close()

	// A subscriber on the same node shows when the node has handed the
	// messages to its sessions, the offline one too.
	ctlA, _ := dialMQTT(t, addrA, "cs-ctl-a", true)
	ctlA.subscribe(1, "cs/#", 1)
	pub, _ := dialMQTT(t, addrA, "cs-pub", true)
	for i := range 5 {
		publishStored(t, pub, uint16(i+1), "cs/a", fmt.Sprintf("old-%d", i))
	}
	if got := readUntil(ctlA, "old-4"); len(got) != 4 {
		t.Fatalf("the online subscriber got %v before old-4", got)
	}

	dev, present := dialMQTT(t, addrB, "cs-dev", true)
	if present {
		t.Error("CONNACK of a clean start says session present")
	}
	dev.subscribeSeeing(2, "cs/#", 1)
	publishStored(t, pub, 6, "cs/a", "new-0")
	if got := readUntil(dev, "new-0"); len(got) != 0 {
		t.Errorf("after the clean start, before new-0, the device got %v", got)
	}
	dev.send(pp.NewControlPacket(pp.DISCONNECT))
	_ = dev.nc.Close()

	ctlB, _ := dialMQTT(t, addrB, "cs-ctl-b", true)
	ctlB.subscribe(1, "cs/#", 1)
	publishStored(t, pub, 7, "cs/a", "mid-0")
	readUntil(ctlB, "mid-0")
	dev, present = dialMQTT(t, addrC, "cs-dev", false)
	if !present {
		t.Error("the session of the clean start is not present")
	}
	if got := readUntil(dev, "mid-0"); len(got) != 0 {
		t.Errorf("resumed after the clean start, before mid-0, the device got %v", got)
	}
	// Nothing follows either: a message published now is the next.
	publishStored(t, pub, 8, "cs/a", "last-0")
	if got := readUntil(dev, "last-0"); len(got) != 0 {
		t.Errorf("resumed after the clean start, between mid-0 and last-0, the device got %v", got)
	}
}

// subscribeSeeing subscribes as subscribe does, failing if a PUBLISH
// comes before the SUBACK.
func (c *mqttRaw) subscribeSeeing(id uint16, filter string, qos byte) {
	c.t.Helper()
	c.sendSubscribe(id, filter, qos)
	for {
		switch p := c.recv().Content.(type) {
		case *pp.Publish:
			c.t.Errorf("PUBLISH %q before the SUBACK", p.Payload)
			if p.QoS == 1 {
				c.ack(pp.PUBACK, p.PacketID)
			}
		case *pp.Suback:
			if len(p.Reasons) != 1 || p.Reasons[0] != qos {
				c.t.Fatalf("SUBACK %+v", p)
			}
			return
		default:
			c.t.Fatalf("want SUBACK, got %T", p)
		}
	}
}

// readUntil reads c's PUBLISHes, acknowledging those of QoS 1 and 2,
// until one with payload marker, and returns the payloads before it.
func readUntil(c *mqttRaw, marker string) []string {
	c.t.Helper()
	var before []string
	for {
		var p *pp.Publish
		switch x := c.recv().Content.(type) {
		case *pp.Publish:
			p = x
		case *pp.Pubrel:
			c.ack(pp.PUBCOMP, x.PacketID)
			continue
		default:
			continue
		}
		switch p.QoS {
		case 1:
			c.ack(pp.PUBACK, p.PacketID)
		case 2:
			c.ack(pp.PUBREC, p.PacketID)
		}
		if string(p.Payload) == marker {
			return before
		}
		before = append(before, string(p.Payload))
		if len(before) > 100 {
			c.t.Fatalf("no %s in %d messages: %s", marker, len(before), strings.Join(before, " "))
		}
	}
}

// TestInteropMQTT311CleanSessionDropsStoredSession is the test above in
// MQTT 3.1.1 with mosquitto_sub: a persistent session (-c) subscribes
// and leaves, five messages are published to it; mosquitto_sub without
// -c (Clean Session 1) under the same client id gets none of them, only
// what is published after it subscribed; that session ends with its
// connection, so a Clean Session 0 CONNECT then finds none (session
// present 0) and receives nothing before a PINGRESP, and mosquitto_sub -c
// again gets only new messages. Last, a Clean Session 1 CONNECT over a
// stored session with messages waiting gets session present 0 and none
// of them.
func TestInteropMQTT311CleanSessionDropsStoredSession(t *testing.T) {
	subBin := mosquittoOrSkip(t, "mosquitto_sub")
	s := startStandalone(t)
	waitBridge(t, s)
	host, port, _ := net.SplitHostPort(s.mqtt)
	sub := func(args ...string) *exec.Cmd {
		return exec.Command(subBin, append([]string{"-V", "mqttv311", "-h", host, "-p", port, "-i", "cs311-dev",
			"-t", "cs311/#", "-q", "1"}, args...)...)
	}
	if out, err := sub("-c", "-E").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_sub -c -E: %v %s", err, out)
	}
	ctl, _ := dialMQTT(t, s.mqtt, "cs311-ctl", true)
	ctl.subscribe(1, "cs311/#", 1)
	pub, _ := dialMQTT(t, s.mqtt, "cs311-pub", true)
	var id uint16
	publishOld := func(round string) {
		for i := range 5 {
			id++
			publishStored(t, pub, id, "cs311/a", fmt.Sprintf("%s-%d", round, i))
		}
		readUntil(ctl, round+"-4")
	}
	publishOld("old")

	// Markers go out until mosquitto_sub has printed n messages.
	receiveMarkers := func(cmd *exec.Cmd, n int) []string {
		t.Helper()
		var out strings.Builder
		cmd.Stdout, cmd.Stderr = &out, &out
		cmd.Args = append(cmd.Args, "-C", strconv.Itoa(n), "-W", "60")
		if err := cmd.Start(); err != nil {
			t.Fatal(err)
		}
		done := make(chan error, 1)
		go func() { done <- cmd.Wait() }()
		for i := 0; ; i++ {
			id++
			publishStored(t, pub, id, "cs311/a", fmt.Sprintf("marker-%d", i))
			select {
			case err := <-done:
				if err != nil {
					t.Fatalf("mosquitto_sub: %v %s", err, out.String())
				}
				return strings.Fields(out.String())
			case <-time.After(200 * time.Millisecond):
			}
		}
	}
	notOld := func(what string, got []string) {
		t.Helper()
		for _, p := range got {
			if !strings.HasPrefix(p, "marker-") {
				t.Errorf("%s: mosquitto_sub got %q (all it got: %v)", what, p, got)
			}
		}
	}
	notOld("clean session", receiveMarkers(sub(), 3))

	c := dial311(t, s.mqtt, "cs311-dev", false)
	if c.present {
		t.Error("CONNACK of Clean Session 0 after a clean session ended says session present")
	}
	c.pingNothingBefore()
	notOld("persistent session after the clean one", receiveMarkers(sub("-c"), 3))

	// The persistent session is stored again (mosquitto_sub -c left it,
	// subscribed) and gets messages while offline.
	publishOld("old2")
	c = dial311(t, s.mqtt, "cs311-dev", true)
	if c.present {
		t.Error("CONNACK of Clean Session 1 over a stored session says session present")
	}
	c.pingNothingBefore()
}

// raw311 is an MQTT 3.1.1 connection spoken byte by byte (paho.golang's
// codec speaks MQTT 5 only).
type raw311 struct {
	t       *testing.T
	nc      net.Conn
	r       *bufio.Reader
	present bool
}

// dial311 connects clientID with MQTT 3.1.1 and Clean Session clean,
// keep alive 60 s, and reads the CONNACK, which must accept it.
func dial311(t *testing.T, addr, clientID string, clean bool) *raw311 {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	flags := byte(0)
	if clean {
		flags = 0x02
	}
	body := append([]byte{0, 4, 'M', 'Q', 'T', 'T', 4, flags, 0, 60, 0, byte(len(clientID))}, clientID...)
	if _, err := nc.Write(append([]byte{0x10, byte(len(body))}, body...)); err != nil {
		t.Fatal(err)
	}
	c := &raw311{t: t, nc: nc, r: bufio.NewReader(nc)}
	typ, ack := c.read()
	if typ != 0x20 || len(ack) != 2 || ack[1] != 0 {
		t.Fatalf("%s: want CONNACK accepted, got type 0x%02x %x", clientID, typ, ack)
	}
	c.present = ack[0]&1 == 1
	return c
}

// read returns the next packet's type byte and body.
func (c *raw311) read() (byte, []byte) {
	c.t.Helper()
	_ = c.nc.SetReadDeadline(time.Now().Add(30 * time.Second))
	typ, err := c.r.ReadByte()
	if err != nil {
		c.t.Fatal(err)
	}
	n, shift := 0, 0
	for {
		b, err := c.r.ReadByte()
		if err != nil {
			c.t.Fatal(err)
		}
		n |= int(b&0x7f) << shift
		if b&0x80 == 0 {
			break
		}
		shift += 7
	}
	body := make([]byte, n)
	if _, err := io.ReadFull(c.r, body); err != nil {
		c.t.Fatal(err)
	}
	return typ, body
}

// pingNothingBefore sends PINGREQ, fails on any PUBLISH before the
// PINGRESP, and disconnects.
func (c *raw311) pingNothingBefore() {
	c.t.Helper()
	if _, err := c.nc.Write([]byte{0xc0, 0}); err != nil {
		c.t.Fatal(err)
	}
	for {
		typ, body := c.read()
		if typ>>4 == 3 {
			c.t.Errorf("PUBLISH before the PINGRESP: % x", body)
			continue
		}
		if typ != 0xd0 {
			c.t.Fatalf("want PINGRESP, got type 0x%02x", typ)
		}
		break
	}
	_, _ = c.nc.Write([]byte{0xe0, 0})
	_ = c.nc.Close()
}
