package amqp091

import (
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
)

// procNode is one `smartgo` process of a cluster test; its runs append
// to one log file.
type procNode struct {
	name, ready, log string
	args             []string
	bin              string
	cmd              *exec.Cmd
	done             chan struct{}
}

// run starts the process and waits until its log says ready once more.
func (n *procNode) run(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	before := strings.Count(readFile(n.log), n.ready)
	n.cmd = exec.Command(n.bin, n.args...)
	n.cmd.Stdout, n.cmd.Stderr = f, f
	if err := n.cmd.Start(); err != nil {
		_ = f.Close()
		t.Fatal(err)
	}
	cmd, done := n.cmd, make(chan struct{})
	n.done = done
	go func() { _ = cmd.Wait(); _ = f.Close(); close(done) }()
	testutil.WaitFor(t, 60*time.Second, n.name+" up", func() bool {
		select {
		case <-done:
			t.Fatalf("%s exited:\n%s", n.name, tail(readFile(n.log), 4000))
		default:
		}
		return strings.Count(readFile(n.log), n.ready) > before
	})
}

// kill9 kills the process with SIGKILL and waits for it (if it runs).
func (n *procNode) kill9() {
	if n.cmd == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
}

// bridgeCluster is a registry, a broker and a bridge serving AMQP, each
// its own process.
type bridgeCluster struct {
	reg, broker, bridge *procNode
	url                 string
}

func startBridgeCluster(t *testing.T) *bridgeCluster {
	t.Helper()
	if externalURL != "" {
		t.Skip("starts its own smartgo processes; SMARTGO_AMQP_URL is set")
	}
	bin := sharedBinary(t)
	dir := t.TempDir()
	ports := testnet.FreePorts(t, 5)
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	c := &bridgeCluster{url: fmt.Sprintf("amqp://guest:guest@%s/", addr(4))}
	c.reg = &procNode{name: "registry", ready: "registry running", log: filepath.Join(dir, "registry.log"), bin: bin,
		args: []string{"registry", "-set", "registry.listen=" + addr(0), "-set", "registry.kv_config_path=" + filepath.Join(dir, "kv.json")}}
	c.broker = &procNode{name: "broker", ready: "registered with registry", log: filepath.Join(dir, "broker.log"), bin: bin,
		args: []string{"broker", "-listen", addr(1), "-data", filepath.Join(dir, "b"), "-registries", addr(0),
			"-set", "broker.ha_listen=" + addr(2), "-set", "broker.advertise_ip=127.0.0.1", "-set", "store.segment_size=8MiB"}}
	c.bridge = &procNode{name: "bridge", ready: "AMQP 0-9-1 listening", log: filepath.Join(dir, "bridge.log"), bin: bin,
		args: []string{"bridge", "-listen", addr(3), "-registries", addr(0), "-set", "amqp.listen=" + addr(4)}}
	nodes := []*procNode{c.reg, c.broker, c.bridge}
	t.Cleanup(func() {
		for _, n := range slices.Backward(nodes) {
			n.kill9()
		}
		if t.Failed() {
			for _, n := range nodes {
				t.Logf("%s:\n%s", n.log, tail(readFile(n.log), 6000))
			}
		}
	})
	for _, n := range nodes {
		n.run(t)
	}
	return c
}

// TestFaultBrokerDiesUnderBridge: an amqp091-go publisher in confirm
// mode (window 500) publishes through `smartgo bridge` into a durable
// queue whose log is on a broker process; the broker is killed with
// SIGKILL. The publishes in flight and those that follow must be nacked
// (or their channel closed) within the bridge's request timeout (3 s),
// never left unanswered and never acked; once the broker is back on its
// data, publishing is confirmed again; after the bridge too is killed
// and restarted (so that what is read back comes from the broker), every
// confirmed message is in the queue.
func TestFaultBrokerDiesUnderBridge(t *testing.T) {
	if testing.Short() {
		t.Skip("kills processes")
	}
	c := startBridgeCluster(t)
	s := &server{url: c.url}
	q := uniq(t, "q")
	conn := s.dial(t)
	ch := channel(t, conn)
	if _, err := ch.QueueDeclare(q, true, false, false, false, nil); err != nil {
		t.Fatal(err)
	}
	_ = conn.Close()
	p1 := startFaultPublisher(t, c.url, "", q, "before")
	testutil.WaitFor(t, 60*time.Second, "300 confirms", func() bool { a, _ := p1.counts(); return a >= 300 })

	c.broker.kill9()
	killed := time.Now()
	a0, _ := p1.counts()
	testutil.WaitFor(t, 60*time.Second, "nacks or a closed channel after the broker died", func() bool {
		_, n := p1.counts()
		p1.mu.Lock()
		ended := p1.err != nil
		p1.mu.Unlock()
		return n > 0 || ended
	})
	firstRefusal := time.Since(killed)
	p1.stop()
	aDead, nDead := p1.counts()
	p1.mu.Lock()
	hung, ended := p1.unconfirmed, p1.err
	p1.mu.Unlock()
	t.Logf("broker killed after %d confirms; %d more acked (stored before the kill), %d nacked; first refusal %v after the kill; publisher ended with %v",
		a0, aDead-a0, nDead, firstRefusal.Round(time.Millisecond), ended)
	if hung > 0 {
		t.Fatalf("%d publishes neither acked nor nacked 60 s after the publisher stopped, with the broker down", hung)
	}
	if firstRefusal > 20*time.Second {
		t.Errorf("the first nack came %v after the broker died; the request timeout is 3 s", firstRefusal)
	}

	// A publisher while the broker is still down: every publish is
	// answered, none acked.
	p2 := startFaultPublisher(t, c.url, "", q, "down")
	testutil.WaitFor(t, 60*time.Second, "10 nacks with the broker down", func() bool { _, n := p2.counts(); return n >= 10 })
	p2.stop()
	if a, _ := p2.counts(); a > 0 {
		t.Errorf("%d publishes acked while the broker was down", a)
	}
	p2.mu.Lock()
	hung = p2.unconfirmed
	p2.mu.Unlock()
	if hung > 0 {
		t.Fatalf("%d publishes unanswered 60 s after the publisher stopped, with the broker down", hung)
	}

	c.broker.run(t)
	p3 := startFaultPublisher(t, c.url, "", q, "back")
	testutil.WaitFor(t, 60*time.Second, "100 confirms once the broker is back", func() bool { a, _ := p3.counts(); return a >= 100 })
	p3.stop()

	c.bridge.kill9()
	c.bridge.run(t)
	got := consumeAllAck(t, s, q)
	var lost []string
	total := 0
	for _, p := range []*faultPublisher{p1, p2, p3} {
		p.mu.Lock()
		for _, b := range p.acked {
			total++
			if got[b] == 0 {
				lost = append(lost, b)
			}
		}
		p.mu.Unlock()
	}
	t.Logf("%d confirmed in all; %d messages in the queue after the bridge's restart", total, len(got))
	if len(lost) > 0 {
		t.Fatalf("%d confirmed messages lost (e.g. %q)", len(lost), first(lost))
	}
}
