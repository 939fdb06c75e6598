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

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
)

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
	dir := t.TempDir()
	ports := freePorts(t, 4)
	regAddr, bAddr := "127.0.0.1:"+strconv.Itoa(ports[0]), "127.0.0.1:"+strconv.Itoa(ports[1])
	mqttAddr := "127.0.0.1:" + strconv.Itoa(ports[3])
	reg := &ctlNode{name: "registry", ready: "registry running", log: filepath.Join(dir, "registry.log"),
		args: []string{"registry", "-set", "registry.listen=" + regAddr, "-set", "registry.kv_config_path=" + filepath.Join(dir, "kv.json"),
			"-set", "log.level=" + logLevel()}}
	br := &ctlNode{name: "broker", ready: "registered with registry", log: filepath.Join(dir, "broker.log"),
		args: []string{"broker", "-listen", bAddr, "-data", filepath.Join(dir, "b"), "-registries", regAddr,
			"-set", "broker.name=broker-tail", "-set", "broker.ha_listen=127.0.0.1:" + strconv.Itoa(ports[2]),
			"-set", "broker.advertise_ip=127.0.0.1", "-set", "store.segment_size=8MiB", "-set", "log.level=" + logLevel()}}
	bridge := &ctlNode{name: "bridge", ready: "bridge started", log: filepath.Join(dir, "bridge.log"),
		args: []string{"bridge", "-listen", mqttAddr, "-registries", regAddr, "-set", "log.level=" + logLevel()}}
	t.Cleanup(func() {
		for _, n := range []*ctlNode{bridge, br, reg} {
			n.kill9()
		}
		if t.Failed() {
			for _, n := range []*ctlNode{reg, br, bridge} {
				data, _ := os.ReadFile(n.log)
				t.Logf("%s:\n%s", n.log, tail(string(data), 60))
			}
		}
	})
	reg.run(t)
	br.run(t)
	bridge.run(t)

	sub, _ := dialMQTT(t, mqttAddr, "tail-sub", true)
	sub.subscribe(1, "tail/#", 1)
	got := readPublishes(t, sub)
	pub, _ := dialMQTT(t, mqttAddr, "tail-pub", true)
	id := uint16(0)
	publishAll := func(prefix string) {
		t.Helper()
		for i := range 20 {
			id++
			publishStored(t, pub, id, "tail/x", fmt.Sprintf("%s-%02d", prefix, i))
		}
	}
	publishAll("before")
	testutil.WaitFor(t, 30*time.Second, "the 20 first messages delivered", func() bool { return got.prefixed("before-") == 20 })

	br.signal(syscall.SIGINT) // a clean stop: everything is flushed, then cut
	<-br.done
	seg := filepath.Join(dir, "b", "commitlog", "00000000000000000000")
	data, err := os.ReadFile(seg)
	if err != nil {
		t.Fatal(err)
	}
	cut := bytes.Index(data, []byte("before-10"))
	if cut < 0 {
		t.Fatal("before-10 not in the commitlog")
	}
	if err := os.Truncate(seg, int64(cut)); err != nil {
		t.Fatal(err)
	}
	br.run(t)
	// The bridge's live consumer pulls at 20, past the queue's end (10):
	// the broker moves it back to 10. (A pull that comes only once the
	// queue reached 20 again is not moved, and the bridge cannot see the
	// reused offsets: that case is not covered yet.)
	testutil.WaitFor(t, 60*time.Second, "the bridge's pull moved back", func() bool {
		return countIn(bridge.log, "pull offset moved") > 0
	})

	publishAll("after")
	adm, err := admin.New(admin.Options{Registries: []string{regAddr}})
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
	last := time.Now().Add(20 * time.Second)
	var stored int64
	for _, s := range stats {
		stored += s.MaxOffset
	}
	if stored >= 40 {
		t.Fatalf("the ingress topic's queues end at %d in all: the tail was not lost as planned (want < 40)", stored)
	}
	testutil.WaitFor(t, 60*time.Second, "the 20 messages published after the restart delivered", func() bool {
		if got.prefixed("after-") == 20 {
			return true
		}
		if time.Now().After(last) {
			t.Logf("received so far: %v", got.list())
			last = time.Now().Add(20 * time.Second)
		}
		return false
	})
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
func readPublishes(t *testing.T, c *mqttRaw) *mqttGot {
	g := &mqttGot{msgs: map[string]int{}}
	var wg sync.WaitGroup
	wg.Add(1)
	go func(nc net.Conn, r *bufio.Reader) {
		defer wg.Done()
		_ = nc.SetReadDeadline(time.Time{})
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
				ack := pp.NewControlPacket(pp.PUBACK)
				ack.Content.(*pp.Puback).PacketID = p.PacketID
				if _, err := ack.WriteTo(nc); err != nil {
					return
				}
			}
			g.mu.Lock()
			g.msgs[string(p.Payload)]++
			g.mu.Unlock()
		}
	}(c.nc, c.r)
	t.Cleanup(func() { c.nc.Close(); wg.Wait() })
	return g
}
