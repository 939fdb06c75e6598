package rocketmq

import (
	"bufio"
	"bytes"
	"context"
	"fmt"
	"maps"
	"net"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"

	pp "github.com/eclipse/paho.golang/packets"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
)

// tailLost is a registry, a broker and an MQTT bridge run as separate
// processes, for the tests of a broker that lost its commitlog's tail.
type tailLost struct {
	dir               string
	regAddr, mqttAddr string
	reg, br, bridge   *ctlNode
	br2               *ctlNode // a second broker ("broker-z"), or nil
	pub               *mqttRaw
	pubID             uint16
}

func startTailLost(t *testing.T, bridgeSets ...string) *tailLost {
	t.Helper()
	return newTailLost(t, false, bridgeSets...)
}

// newTailLost starts the processes of a tailLost, with a second broker
// named broker-z when second (the bridge's topics get queues on both).
func newTailLost(t *testing.T, second bool, bridgeSets ...string) *tailLost {
	t.Helper()
	dir := t.TempDir()
	ports := freePorts(t, 6)
	c := &tailLost{dir: dir, regAddr: "127.0.0.1:" + strconv.Itoa(ports[0]), mqttAddr: "127.0.0.1:" + strconv.Itoa(ports[3])}
	bAddr := "127.0.0.1:" + strconv.Itoa(ports[1])
	c.reg = &ctlNode{name: "registry", ready: "registry running", log: filepath.Join(dir, "registry.log"),
		args: []string{"registry", "-set", "registry.listen=" + c.regAddr, "-set", "registry.kv_config_path=" + filepath.Join(dir, "kv.json"),
			"-set", "log.level=" + logLevel()}}
	c.br = &ctlNode{name: "broker", ready: "registered with registry", log: filepath.Join(dir, "broker.log"),
		args: []string{"broker", "-listen", bAddr, "-data", filepath.Join(dir, "b"), "-registries", c.regAddr,
			"-set", "broker.name=broker-tail", "-set", "broker.ha_listen=127.0.0.1:" + strconv.Itoa(ports[2]),
			"-set", "broker.advertise_ip=127.0.0.1", "-set", "store.segment_size=8MiB", "-set", "log.level=" + logLevel()}}
	if second {
		c.br2 = &ctlNode{name: "broker2", ready: "registered with registry", log: filepath.Join(dir, "broker2.log"),
			args: []string{"broker", "-listen", "127.0.0.1:" + strconv.Itoa(ports[4]), "-data", filepath.Join(dir, "b2"),
				"-registries", c.regAddr, "-set", "broker.name=broker-z", "-set", "broker.ha_listen=127.0.0.1:" + strconv.Itoa(ports[5]),
				"-set", "broker.advertise_ip=127.0.0.1", "-set", "store.segment_size=8MiB", "-set", "log.level=" + logLevel()}}
	}
	c.bridge = &ctlNode{name: "bridge", ready: "bridge started", log: filepath.Join(dir, "bridge.log"),
		args: []string{"bridge", "-listen", c.mqttAddr, "-registries", c.regAddr, "-set", "log.level=" + logLevel()}}
	for _, kv := range bridgeSets {
		c.bridge.args = append(c.bridge.args, "-set", kv)
	}
	nodes := []*ctlNode{c.reg, c.br}
	if second {
		nodes = append(nodes, c.br2)
	}
	nodes = append(nodes, c.bridge)
	t.Cleanup(func() {
		for _, n := range slices.Backward(nodes) {
			n.kill9()
		}
		if t.Failed() {
			for _, n := range nodes {
				data, _ := os.ReadFile(n.log)
				t.Logf("%s:\n%s", n.log, tail(string(data), 60))
			}
		}
	})
	for _, n := range nodes {
		n.run(t)
	}
	c.pub, _ = dialMQTT(t, c.mqttAddr, "tail-pub", true)
	return c
}

// publishAll publishes prefix-00 to prefix-19 on tail/x, QoS 1, each
// until the bridge stores it.
func (c *tailLost) publishAll(t *testing.T, prefix string) {
	t.Helper()
	for i := range 20 {
		c.pubID++
		publishStored(t, c.pub, c.pubID, "tail/x", fmt.Sprintf("%s-%02d", prefix, i))
	}
}

// cutTail stops the broker, cuts its commitlog where the record of marker
// starts (everything from there is lost, as after a crash under async
// flush or a damaged record) and starts it again.
func (c *tailLost) cutTail(t *testing.T, marker string) {
	t.Helper()
	c.br.signal(syscall.SIGINT) // a clean stop: everything is flushed, then cut
	<-c.br.done
	seg := filepath.Join(c.dir, "b", "commitlog", "00000000000000000000")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.Index(data, []byte(marker))
	if cut < 0 {
		t.Fatalf("%s not in the commitlog", marker)
	}
	if err := os.Truncate(seg, int64(cut)); err != nil {
		t.Fatal(err)
	}
	c.br.run(t)
}

// storedBelow fails t unless the ingress topic's queues end below n in
// all: the cut took messages as planned.
func (c *tailLost) storedBelow(t *testing.T, n int64) {
	t.Helper()
	adm, err := admin.New(admin.Options{Registries: []string{c.regAddr}})
	if err != nil {
		t.Fatal(err)
	}
	defer adm.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	stats, err := adm.TopicStats(ctx, "MQTT_INGRESS")
	cancel()
	if err != nil {
		t.Fatal(err)
	}
	var stored int64
	for _, s := range stats {
		stored += s.MaxOffset
	}
	if stored >= n {
		t.Fatalf("the ingress topic's queues end at %d in all: the tail was not lost as planned (want < %d)", stored, n)
	}
}

// waitAll waits until got holds the 20 messages of prefix, logging what
// it holds every 20 s.
func waitAll(t *testing.T, got *mqttGot, prefix, what string) {
	t.Helper()
	last := time.Now().Add(20 * time.Second)
	testutil.WaitFor(t, 60*time.Second, what, func() bool {
		if got.prefixed(prefix) == 20 {
			return true
		}
		if time.Now().After(last) {
			t.Logf("received so far: %v", got.list())
			last = time.Now().Add(20 * time.Second)
		}
		return false
	})
}

// TestInteropMQTTLiveAfterLogTailLost: registry, broker and MQTT bridge
// run as separate processes; a paho.golang subscriber stays connected to
// the bridge while 20 QoS 1 messages are published, then the broker is
// stopped, its commitlog loses its tail from the 11th message on (what a
// crash under async flush or a damaged record leaves) and it starts
// again: its queue gives offsets 10-19 again to the next messages. All 20
// messages published after the restart reach the subscriber once the
// bridge's pull was moved back to the queue's new end. The bridge took the
// ones at the reused offsets for messages it had delivered already and
// dropped them (after-00 to after-09).
func TestInteropMQTTLiveAfterLogTailLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	startTailLost(t).liveThroughCut(t, nil)
}

// liveThroughCut connects a subscriber to tail/#, publishes 20 messages
// and waits until it has them, runs beforeCut (nil: nothing), cuts the
// broker's log at the 11th and restarts it, waits until the bridge's pull
// was moved back, publishes 20 more and waits until the subscriber has
// those too.
func (c *tailLost) liveThroughCut(t *testing.T, beforeCut func()) {
	t.Helper()
	sub, _ := dialMQTT(t, c.mqttAddr, "tail-sub", true)
	sub.subscribe(1, "tail/#", 1)
	got := readPublishes(t, sub)
	c.publishAll(t, "before")
	testutil.WaitFor(t, 30*time.Second, "the 20 first messages delivered", func() bool { return got.prefixed("before-") == 20 })
	if beforeCut != nil {
		beforeCut()
	}

	c.cutTail(t, "before-10")
	// The bridge saw its broker connection close and reads the queue
	// again from its oldest delivery (bridge/recheck.go), or its pull at
	// 20, past the queue's end (10), was moved back to 10 by the broker.
	// (A pull that comes only once the queue reached 20 again is not
	// moved: TestInteropMQTTLiveAfterLogTailLostRefilled.)
	testutil.WaitFor(t, 60*time.Second, "the bridge's pull moved back", func() bool {
		return countIn(c.bridge.log, "pull offset moved")+countIn(c.bridge.log, "reading the queue again") > 0
	})
	c.publishAll(t, "after")
	c.storedBelow(t, 40)
	waitAll(t, got, "after-", "the 20 messages published after the restart delivered live")
}

// TestInteropMQTTLiveAfterLogTailLostRefilled is the test above where
// the subscriber's bridge pulls again only once the queue is back past its
// offset: that bridge is stopped (SIGSTOP) while the broker loses its
// tail and restarts, and a second bridge stores 20 new messages on the
// same queue, 10 of them at the reused offsets 10-19. No pull is moved
// back; once resumed, the first bridge sees its broker connection closed,
// reads the queue again from its oldest delivery remembered, finds other
// messages at 10-19 than it delivered there and delivers from there: the
// subscriber gets all 20.
func TestInteropMQTTLiveAfterLogTailLostRefilled(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := startTailLost(t)
	addr2 := c.startBridge2(t)
	sub, _ := dialMQTT(t, c.mqttAddr, "tail-sub", true)
	sub.subscribe(1, "tail/#", 1)
	got := readPublishes(t, sub)
	c.publishAll(t, "before")
	testutil.WaitFor(t, 30*time.Second, "the 20 first messages delivered", func() bool { return got.prefixed("before-") == 20 })
	c.refillStopped(t, addr2, got)
}

// TestInteropMQTTLiveAfterLogTailLostRefilledFresh is the test above
// where the subscriber's bridge restarted after the 20 first messages
// were stored, so it delivered nothing on the queue before the cut: it
// read the queue's last message (before-19, offset 19) at its start.
// Once resumed, it reads offset 19 again, finds after-09 there, and goes
// back to the first message stored after before-19 (offset 10): the
// subscriber gets all 20. (Without the message read at start nothing was
// read again: after-00 to after-09 never arrived; without going back
// below offset 19, after-00 to after-08 did not.)
func TestInteropMQTTLiveAfterLogTailLostRefilledFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := startTailLost(t)
	addr2 := c.startBridge2(t)
	got := c.freshSubscriber(t)
	c.refillStopped(t, addr2, got)
	noneBefore(t, got)
}

// freshSubscriber stores the 20 first messages, restarts the bridge and
// subscribes to tail/# on it (clean session).
func (c *tailLost) freshSubscriber(t *testing.T) *mqttGot {
	t.Helper()
	c.publishAll(t, "before")
	c.bridge.signal(syscall.SIGINT)
	<-c.bridge.done
	c.bridge.run(t)
	sub, _ := dialMQTT(t, c.mqttAddr, "tail-sub", true)
	sub.subscribe(1, "tail/#", 1)
	return readPublishes(t, sub)
}

// noneBefore fails t if got holds messages stored before the bridge's
// start.
func noneBefore(t *testing.T, got *mqttGot) {
	t.Helper()
	if n := got.prefixed("before-"); n > 0 {
		t.Errorf("%d of the messages stored before the bridge's start delivered: %v", n, got.list())
	}
}

// TestInteropMQTTLiveAfterBrokerRestartFresh is the test above without
// the cut: the broker restarts with its whole log, the bridge reads
// offset 19 again and finds the message it read there at its start. It
// delivers none of the 20 first messages, and the 20 published after the
// restart once each.
func TestInteropMQTTLiveAfterBrokerRestartFresh(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := startTailLost(t)
	got := c.freshSubscriber(t)
	c.br.signal(syscall.SIGINT)
	<-c.br.done
	c.br.run(t)
	testutil.WaitFor(t, 60*time.Second, "the bridge reading the queue again", func() bool {
		return countIn(c.bridge.log, "reading the queue again") > 0
	})
	c.pub, _ = dialMQTT(t, c.mqttAddr, "tail-pub", true)
	c.publishAll(t, "after")
	waitAll(t, got, "after-", "the 20 messages published after the restart delivered live")
	noneBefore(t, got)
	got.mu.Lock()
	defer got.mu.Unlock()
	for p, n := range got.msgs {
		if n > 1 {
			t.Errorf("%s delivered %d times", p, n)
		}
	}
}

// startBridge2 starts a second bridge on the cluster and returns its
// MQTT address.
func (c *tailLost) startBridge2(t *testing.T) string {
	t.Helper()
	addr2 := "127.0.0.1:" + strconv.Itoa(freePorts(t, 1)[0])
	bridge2 := &ctlNode{name: "bridge2", ready: "bridge started", log: filepath.Join(c.dir, "bridge2.log"),
		args: []string{"bridge", "-listen", addr2, "-registries", c.regAddr, "-set", "log.level=" + logLevel()}}
	t.Cleanup(func() {
		bridge2.kill9()
		if t.Failed() {
			data, _ := os.ReadFile(bridge2.log)
			t.Logf("%s:\n%s", bridge2.log, tail(string(data), 60))
		}
	})
	bridge2.run(t)
	return addr2
}

// refillStopped stops the first bridge (SIGSTOP), cuts the broker's log
// at before-10 and restarts it, stores 20 messages through the second
// bridge (at addr2) on the first publisher's queue, 10 of them at the
// reused offsets 10-19, resumes the first bridge and waits until got has
// all 20.
func (c *tailLost) refillStopped(t *testing.T, addr2 string, got *mqttGot) {
	t.Helper()
	c.bridge.signal(syscall.SIGSTOP)
	c.cutTail(t, "before-10")
	// The bridge picks a publisher's queue by its client id: the second
	// publisher's id lands on the first one's queue.
	pub2, _ := dialMQTT(t, addr2, sameQueueID(t, "tail-pub", bridge.DefaultTopicQueues), true)
	for i := range 20 {
		publishStored(t, pub2, uint16(i+1), "tail/x", fmt.Sprintf("after-%02d", i))
	}
	c.storedBelow(t, 40)
	c.bridge.signal(syscall.SIGCONT)
	waitAll(t, got, "after-", "the 20 messages published after the restart delivered live")
	if ingressMoved(t, c.bridge.log) {
		t.Fatal("the first bridge's pull was moved back: not the case this test is for")
	}
}

// ingressMoved reports whether the bridge log at path says a pull of the
// ingress topic was moved back (the system topics' may be: the cut took
// session records too).
func ingressMoved(t *testing.T, path string) bool {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	for line := range bytes.Lines(data) {
		if bytes.Contains(line, []byte("pull offset moved")) && bytes.Contains(line, []byte("Topic:MQTT_INGRESS")) {
			return true
		}
	}
	return false
}

// sameQueueID returns a client id other than id that the bridge stores on
// the same one of n queues (client.HashSelector, the bridge's pick).
func sameQueueID(t *testing.T, id string, n int) string {
	t.Helper()
	qs := make([]client.MessageQueue, n)
	for i := range qs {
		qs[i].QueueID = int32(i)
	}
	want := client.HashSelector(qs, id).QueueID
	for k := range 1000 {
		other := fmt.Sprintf("%s-%d", id, k)
		if client.HashSelector(qs, other).QueueID == want {
			return other
		}
	}
	t.Fatalf("no id on %s's queue", id)
	return ""
}

// TestInteropMQTTOfflineSessionAfterLogTailLost is the test above with a
// persistent session that is offline all along: it subscribed, went away,
// and comes back once the 20 messages after the restart were stored and
// delivered live. It gets all 20 of them.
func TestInteropMQTTOfflineSessionAfterLogTailLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	offlineAfterTailLost(t, nil)
}

// TestInteropMQTTOverflowedSessionAfterLogTailLost is the test above
// with a session queue of 5 messages and a receive maximum of 2: the
// offline session overflows at the 8th message, before the cut, and its
// reader, still below the cut, reads the new messages at the reused
// offsets back when the session returns: it gets all 20. (A reader that
// had read and handed over messages past the cut:
// TestInteropMQTTOverflowedSessionPastLogTailLost.)
func TestInteropMQTTOverflowedSessionAfterLogTailLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	recvMax := func(cc *pp.Connect) { rm := uint16(2); cc.Properties.ReceiveMaximum = &rm }
	c := offlineAfterTailLost(t, recvMax, "bridge.max_queued_messages=5")
	if countIn(c.bridge.log, "session queue full") == 0 {
		t.Fatal("the offline session never overflowed")
	}
}

// TestInteropMQTTOverflowedSessionPastLogTailLost: an online session in
// overflow whose reader had handed over messages past the offsets a
// broker gave again after it lost its log's tail (overflowedPastCut)
// acknowledges again: it gets all 20 messages published after the
// restart, its reader went back to offset 10 with the live consumer.
// (Without that it went on from offset 20 and never sent after-00 to
// after-09, stored at the reused offsets 10-19.)
func TestInteropMQTTOverflowedSessionPastLogTailLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	_, got := overflowedPastCut(t)
	got.ackUntil("")
	waitAll(t, &got.mqttGot, "after-", "the 20 messages published after the restart delivered to the overflowed session")
}

// TestInteropMQTTOverflowedSessionPastLogTailLostResumed is the test
// above where the session, still holding before-12 and before-13, goes
// offline and the bridge restarts: the session comes back from its
// record. It gets the messages it held or had queued, before-12 to
// before-18, as they were (its record holds them whole: their log
// positions now hold after-02 to after-08), and all 20 after ones.
func TestInteropMQTTOverflowedSessionPastLogTailLostResumed(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c, got := overflowedPastCut(t)
	got.disconnect()
	c.bridge.signal(syscall.SIGINT)
	<-c.bridge.done
	c.bridge.run(t)
	back, present := dialConnect(t, c.mqttAddr, "tail-ovf", false, 600, holdSet)
	if !present {
		t.Fatal("the session is gone")
	}
	got2 := readPublishes(t, back)
	waitAll(t, got2, "after-", "the 20 messages published after the restart delivered to the resumed session")
	for i := 12; i <= 18; i++ {
		if p := fmt.Sprintf("before-%02d", i); got2.prefixed(p) == 0 {
			t.Errorf("%s not delivered to the resumed session; it got %v", p, got2.list())
		}
	}
}

// holdSet is the CONNECT of the overflowed session: a receive maximum
// of 2, and no keep alive, as it sends nothing while it holds its
// acknowledgements.
func holdSet(cc *pp.Connect) {
	rm := uint16(2)
	cc.Properties.ReceiveMaximum = &rm
	cc.KeepAlive = 0
}

// overflowedPastCut starts a registry, a broker and a bridge with session
// queues of 5 messages, and connects the session tail-ovf (holdSet) to
// tail/#. It acknowledges nothing while the 20 first messages are
// published, so it overflows at the 8th (offset 7) and its reader reads
// the rest back from the log. Then it acknowledges up to before-11 and
// holds before-12 and before-13 unacknowledged: the reader handed over
// messages past offset 10 (12 and 13 came from it), and the session has
// not caught up (its queue holds 5 at most, so before-19 is still the
// reader's). The broker then loses its log from before-10 on and
// restarts, and 20 messages are stored, after-00 to after-09 at the
// reused offsets 10-19, and delivered live while the session is in
// overflow. It returns with the session still holding before-12 and
// before-13.
func overflowedPastCut(t *testing.T) (*tailLost, *heldGot) {
	t.Helper()
	c := startTailLost(t, "bridge.max_queued_messages=5")
	ovf, _ := dialConnect(t, c.mqttAddr, "tail-ovf", true, 600, holdSet)
	ovf.subscribe(1, "tail/#", 1)
	got := readPublishesHeld(t, ovf, true)
	c.liveThroughCut(t, func() {
		if countIn(c.bridge.log, "session queue full") == 0 {
			t.Fatal("the session never overflowed")
		}
		got.ackUntil("before-12")
		testutil.WaitFor(t, 30*time.Second, "before-13 sent to the session", func() bool { return got.prefixed("before-13") == 1 })
	})
	if n := got.prefixed("before-"); n != 14 {
		t.Fatalf("the session got %d of the first messages while it held before-12 and before-13, want 14: %v", n, got.list())
	}
	return c, got
}

// heldGot is what readPublishesHeld received.
type heldGot struct {
	mqttGot
	mu       sync.Mutex // orders the writes to nc; protects the rest
	nc       net.Conn
	holdFrom string   // the payload whose PUBLISH and later ones are held
	holding  bool     // acknowledgements are held
	held     []uint16 // the packet ids held
}

// ackUntil acknowledges the PUBLISHes held and later ones until the one
// with payload holdFrom, which and after which it holds them again ("":
// never).
func (g *heldGot) ackUntil(holdFrom string) {
	g.mu.Lock()
	defer g.mu.Unlock()
	g.holdFrom, g.holding = holdFrom, false
	for _, id := range g.held {
		g.ackLocked(id)
	}
	g.held = nil
}

// disconnect ends the session's connection with a DISCONNECT, the
// acknowledgements held unsent.
func (g *heldGot) disconnect() {
	g.mu.Lock()
	defer g.mu.Unlock()
	_, _ = pp.NewControlPacket(pp.DISCONNECT).WriteTo(g.nc)
	_ = g.nc.Close()
}

func (g *heldGot) ackLocked(id uint16) {
	ack := pp.NewControlPacket(pp.PUBACK)
	ack.Content.(*pp.Puback).PacketID = id
	_, _ = ack.WriteTo(g.nc) // a closed connection ends the reader
}

// readPublishesHeld is readPublishes holding back its acknowledgements
// (when holding) until ackUntil lets them go.
func readPublishesHeld(t *testing.T, c *mqttRaw, holding bool) *heldGot {
	g := &heldGot{mqttGot: mqttGot{msgs: map[string]int{}}, nc: c.nc, holding: holding}
	var wg sync.WaitGroup
	wg.Add(1)
	go func(r *bufio.Reader) {
		defer wg.Done()
		_ = c.nc.SetReadDeadline(time.Time{})
		for {
			cp, err := pp.ReadPacket(r)
			if err != nil {
				return
			}
			p, ok := cp.Content.(*pp.Publish)
			if !ok {
				continue
			}
			if p.QoS == 1 {
				g.mu.Lock()
				if string(p.Payload) == g.holdFrom {
					g.holding = true
				}
				if g.holding {
					g.held = append(g.held, p.PacketID)
				} else {
					g.ackLocked(p.PacketID)
				}
				g.mu.Unlock()
			}
			g.mqttGot.mu.Lock()
			g.msgs[string(p.Payload)]++
			g.mqttGot.mu.Unlock()
		}
	}(c.r)
	t.Cleanup(func() { c.nc.Close(); wg.Wait() })
	return g
}

// offlineAfterTailLost runs the offline session test: the session tail-off
// connects with set applied to its CONNECTs (nil: nothing), the bridge
// with bridgeSets.
func offlineAfterTailLost(t *testing.T, set func(*pp.Connect), bridgeSets ...string) *tailLost {
	t.Helper()
	c := startTailLost(t, bridgeSets...)
	off, _ := dialConnect(t, c.mqttAddr, "tail-off", false, 600, set)
	off.subscribe(1, "tail/#", 1)
	off.send(pp.NewControlPacket(pp.DISCONNECT))
	_ = off.nc.Close()
	c.liveThroughCut(t, nil)

	back, present := dialConnect(t, c.mqttAddr, "tail-off", false, 600, set)
	if !present {
		t.Fatal("the offline session is gone")
	}
	offGot := readPublishes(t, back)
	waitAll(t, offGot, "after-", "the 20 messages published after the restart delivered to the offline session")
	return c
}

func (g *mqttGot) list() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(maps.Keys(g.msgs))
}

// publishStored publishes payload with QoS 1 until the bridge acknowledges
// it with success (it refuses while the broker is away or its route heals).
func publishStored(t *testing.T, c *mqttRaw, id uint16, topic, payload string) {
	t.Helper()
	deadline := time.Now().Add(60 * time.Second)
	for {
		c.publish(id, topic, payload, 1, false)
		ack := expect[*pp.Puback](c)
		if ack.ReasonCode < 0x80 {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: PUBACK 0x%02x for 60 s", payload, ack.ReasonCode)
		}
		time.Sleep(200 * time.Millisecond)
	}
}

// mqttGot is the set of payloads a subscriber received.
type mqttGot struct {
	mu   sync.Mutex
	msgs map[string]int
}

func (g *mqttGot) prefixed(prefix string) int {
	g.mu.Lock()
	defer g.mu.Unlock()
	n := 0
	for p := range g.msgs {
		if len(p) >= len(prefix) && p[:len(prefix)] == prefix {
			n++
		}
	}
	return n
}

// readPublishes reads c's packets in a goroutine from now on (the test
// must not read c itself any more), acknowledging each QoS 1 PUBLISH and
// recording its payload; it ends when c's connection closes.
func readPublishes(t *testing.T, c *mqttRaw) *mqttGot { return &readPublishesHeld(t, c, false).mqttGot }

// TestInteropMQTTResumeAfterLogTailLost: a persistent session receives the
// 20 first messages, goes offline, the broker loses its log's tail from
// the 11th message on and the bridge restarts, so the session comes back
// from its stored record, not from memory. The 20 messages published then
// reach the session when it reconnects, also those stored at the reused
// offsets 10-19. (With one broker the cut also takes the record the
// session's disconnect wrote, which came after the 11th message: the
// session resumes from its record before it, and gets the surviving
// messages it had acknowledged again, as QoS 1 allows.)
func TestInteropMQTTResumeAfterLogTailLost(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	startTailLost(t).resumeAfterCut(t, "tail-pub", "tail-off")
}

// resumeAfterCut runs the test above: pubID publishes, the persistent
// session offID receives the 20 first messages and goes offline, the
// bridge stops, the broker broker-tail loses its log's tail from
// before-10 on, the bridge starts again, 20 more messages are stored,
// and the session comes back. It returns what the resumed session got
// once it has the 20 after the restart.
func (c *tailLost) resumeAfterCut(t *testing.T, pubID, offID string) *mqttGot {
	t.Helper()
	_ = c.pub.nc.Close()
	c.pub, _ = dialMQTT(t, c.mqttAddr, pubID, true)
	off, _ := dialMQTT(t, c.mqttAddr, offID, false)
	off.subscribe(1, "tail/#", 1)
	offGot := readPublishes(t, off)
	c.publishAll(t, "before")
	testutil.WaitFor(t, 30*time.Second, "the 20 first messages delivered", func() bool { return offGot.prefixed("before-") == 20 })
	off.send(pp.NewControlPacket(pp.DISCONNECT))
	_ = off.nc.Close()

	c.bridge.signal(syscall.SIGINT)
	<-c.bridge.done
	c.cutTail(t, "before-10")
	c.bridge.run(t)
	c.pub, _ = dialMQTT(t, c.mqttAddr, pubID, true)
	c.publishAll(t, "after")
	c.storedBelow(t, 40)

	back, present := dialMQTT(t, c.mqttAddr, offID, false)
	if !present {
		t.Fatal("the offline session is gone")
	}
	got := readPublishes(t, back)
	waitAll(t, got, "after-", "the 20 messages published after the restart delivered to the resumed session")
	return got
}

// TestInteropMQTTResumeAfterLogTailLostElsewhere is the test above with
// two brokers, where the session's records are kept by the broker that
// does not lose its tail: the record the session's disconnect wrote
// survives the cut, and resumes from offset 20 of the queue that now
// holds after-00 to after-09 at the reused offsets 10-19. The record
// names the message at 19 as the bridge delivered it (before-19); on
// resume the bridge finds another one there and resumes from the first
// message stored after before-19, offset 10: the session gets all 20
// (without that it never got after-00 to after-09).
func TestInteropMQTTResumeAfterLogTailLostElsewhere(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	c := newTailLost(t, true)
	// The bridge's topics have 8 queues on each broker, broker-tail's
	// first (client.HashSelector over the queues by broker name): the
	// publisher's messages go to broker-tail, the session's records to
	// broker-z.
	got := c.resumeAfterCut(t, idOnQueues(t, "tail-pub", 0, 8), idOnQueues(t, "tail-off", 8, 16))
	if countIn(c.bridge.log, "session resume point above queue offsets given again") == 0 {
		t.Error("the bridge never moved the session's resume point back")
	}
	if got.prefixed("before-") > 0 {
		// Its record came through the cut: it resumed where it was.
		t.Errorf("the session got again messages it had acknowledged: %v", got.list())
	}
}

// idOnQueues returns a client id starting with prefix that
// client.HashSelector puts on a queue index in [lo, hi) of 16.
func idOnQueues(t *testing.T, prefix string, lo, hi int) string {
	t.Helper()
	qs := make([]client.MessageQueue, 16)
	for i := range qs {
		qs[i].QueueID = int32(i)
	}
	for k := range 1000 {
		id := fmt.Sprintf("%s-%d", prefix, k)
		if q := int(client.HashSelector(qs, id).QueueID); q >= lo && q < hi {
			return id
		}
	}
	t.Fatalf("no id of %s on queues %d to %d", prefix, lo, hi-1)
	return ""
}
