//go:build cluster

// Real-process master/slave tests: `go test -tags cluster ./internal/cluster/`
// (make cluster). They build cmd/smartgo and run registry, master and slave
// as separate processes on loopback.

package cluster

import (
	"bytes"
	"context"
	"fmt"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
)

func smartgoBin(t testing.TB) string { return testnet.SmartgoBinary(t, filepath.Join("..", "..")) }

// freePorts: see testnet.FreePorts.
func freePorts(t testing.TB, n int) []int { return testnet.FreePorts(t, n) }

type proc struct {
	cmd  *exec.Cmd
	args []string
	log  string
	done chan struct{} // closed when cmd.Wait returned (cmd.ProcessState set)
}

func start(t testing.TB, dir, name string, args ...string) *proc {
	t.Helper()
	p := &proc{args: args, log: filepath.Join(dir, name+".log")}
	p.run(t)
	t.Cleanup(func() { p.kill() })
	return p
}

func (p *proc) run(t testing.TB) {
	t.Helper()
	f, err := os.OpenFile(p.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	// The waiter holds its own cmd: a restart (run again after kill)
	// replaces p.cmd while the old waiter may still be reading it.
	cmd := exec.Command(smartgoBin(t), withoutAMQP(p.args)...)
	cmd.Stdout, cmd.Stderr = f, f
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	p.cmd, p.done = cmd, done
	go func() { _ = cmd.Wait(); _ = f.Close(); close(done) }()
}

// kill sends SIGKILL and waits until the process has been reaped (its
// ports and files released).
func (p *proc) kill() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGKILL)
		select {
		case <-p.done:
		case <-time.After(10 * time.Second):
		}
	}
}

func (p *proc) stop() {
	if p.cmd != nil && p.cmd.Process != nil {
		_ = p.cmd.Process.Signal(syscall.SIGTERM)
		select { // read ProcessState only after Wait set it
		case <-p.done:
		case <-time.After(5 * time.Second):
		}
	}
}

type procCluster struct {
	dir, reg          string
	masterPort        int
	slavePort         int
	master, slave     *proc
	masterDir, slaveD string
}

func startProcCluster(t *testing.T, role string, extraSlave ...string) *procCluster {
	t.Helper()
	dir := t.TempDir()
	c := &procCluster{dir: dir}
	ports := freePorts(t, 3)
	rp := ports[0]
	c.reg = "127.0.0.1:" + strconv.Itoa(rp)
	start(t, dir, "registry", "registry", "-set", "registry.listen="+c.reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	c.masterPort, c.slavePort = ports[1], ports[2]
	c.masterDir, c.slaveD = filepath.Join(dir, "m"), filepath.Join(dir, "s")
	common := []string{"-registries", c.reg, "-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1",
		"-set", "store.sync_flush_timeout=1s"}
	c.master = start(t, dir, "master", append([]string{"broker", "-listen", "127.0.0.1:" + strconv.Itoa(c.masterPort), "-data", c.masterDir,
		"-set", "broker.role=" + role}, common...)...)
	sargs := append([]string{"broker", "-listen", "127.0.0.1:" + strconv.Itoa(c.slavePort), "-data", c.slaveD,
		"-set", "broker.role=slave", "-set", "broker.id=1"}, common...)
	c.slave = start(t, dir, "slave", append(sargs, extraSlave...)...)
	return c
}

func (c *procCluster) runtime(t *testing.T, addr string) map[string]string {
	t.Helper()
	a, err := admin.New(admin.Options{Registries: []string{c.reg}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	info, err := a.BrokerRuntimeInfo(ctx, addr)
	if err != nil {
		return nil
	}
	return info
}

func (c *procCluster) masterAddr() string { return "127.0.0.1:" + strconv.Itoa(c.masterPort) }
func (c *procCluster) slaveAddr() string  { return "127.0.0.1:" + strconv.Itoa(c.slavePort) }

func (c *procCluster) waitSlaveConnected(t *testing.T) {
	t.Helper()
	defer func() {
		if t.Failed() {
			for _, p := range []*proc{c.master, c.slave} {
				data, _ := os.ReadFile(p.log)
				t.Logf("%s:\n%s", p.log, tailLines(string(data), 40))
			}
		}
	}()
	testutil.Eventually(t, 30*time.Second, func() error {
		if info := c.runtime(t, c.slaveAddr()); info["haConnected"] != "true" {
			return fmt.Errorf("slave not connected: %v", info["haLastError"])
		}
		return nil
	})
}

func (c *procCluster) producer(t *testing.T) *client.Producer {
	t.Helper()
	po := client.DefaultProducerOptions(c.reg)
	po.Retries = -1
	p, err := client.NewProducer(po)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// commitlogBytes concatenates a store's commitlog files in [from, to).
func commitlogBytes(t *testing.T, root string, from, to int64) []byte {
	t.Helper()
	files, _ := filepath.Glob(filepath.Join(root, "commitlog", "*"))
	var out []byte
	for _, f := range files {
		base, err := strconv.ParseInt(filepath.Base(f), 10, 64)
		if err != nil {
			continue
		}
		b, err := os.ReadFile(f)
		if err != nil {
			t.Fatal(err)
		}
		lo, hi := max(from, base), min(to, base+int64(len(b)))
		if lo < hi {
			out = append(out, b[lo-base:hi-base]...)
		}
	}
	return out
}

// TestClusterProcReplication: 100,000 messages to an async master; the
// slave's commitlog is byte-identical and its queues serve them.
func TestClusterProcReplication(t *testing.T) {
	c := startProcCluster(t, "async_master")
	c.waitSlaveConnected(t)
	p := c.producer(t)
	ctx := context.Background()
	body := bytes.Repeat([]byte("r"), 100)
	const batches, per = 1000, 100
	for i := range batches {
		msgs := make([]*client.Message, per)
		for j := range msgs {
			msgs[j] = &client.Message{Topic: "Repl", Body: body}
		}
		if _, err := p.SendBatch(ctx, msgs); err != nil {
			t.Fatalf("batch %d: %v", i, err)
		}
	}
	var mEnd int64
	testutil.Eventually(t, 60*time.Second, func() error {
		mi, si := c.runtime(t, c.masterAddr()), c.runtime(t, c.slaveAddr())
		if mi == nil || si == nil || mi["commitLogMaxOffset"] != si["commitLogMaxOffset"] {
			return fmt.Errorf("master %s slave %s", mi["commitLogMaxOffset"], si["commitLogMaxOffset"])
		}
		mEnd, _ = strconv.ParseInt(mi["commitLogMaxOffset"], 10, 64)
		return nil
	})
	// The slave's consume queues serve the same messages: with the master
	// gone it answers pulls, and every one of the 100,000 is there.
	c.master.stop()
	testutil.Eventually(t, 30*time.Second, func() error {
		if info := c.runtime(t, c.slaveAddr()); info == nil || info["haConnected"] == "true" {
			return fmt.Errorf("slave has not noticed the master is gone")
		}
		return nil
	})
	if got := pullAll(t, c.slaveAddr(), "Repl", 4); len(got) != batches*per {
		t.Fatalf("slave's queues serve %d of %d messages", len(got), batches*per)
	}
	c.slave.stop()
	m := commitlogBytes(t, c.masterDir, 0, mEnd)
	s := commitlogBytes(t, c.slaveD, 0, mEnd)
	if int64(len(m)) != mEnd || !bytes.Equal(m, s) {
		t.Fatalf("commitlogs differ: master %d bytes, slave %d bytes, end %d", len(m), len(s), mEnd)
	}
}

// TestClusterProcSyncMasterKill: every message a sync master acknowledged
// is on the slave after the master is killed with SIGKILL.
func TestClusterProcSyncMasterKill(t *testing.T) {
	c := startProcCluster(t, "sync_master")
	c.waitSlaveConnected(t)
	p := c.producer(t)
	var mu sync.Mutex
	var acked []string
	stop := make(chan struct{})
	var wg sync.WaitGroup
	for g := range 4 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
				r, err := p.Send(ctx, &client.Message{Topic: "SyncKill", Body: fmt.Appendf(nil, "g%d-%d", g, i)})
				cancel()
				if err == nil && r.Status == client.SendOK {
					mu.Lock()
					acked = append(acked, r.OffsetMsgID)
					mu.Unlock()
				}
			}
		}()
	}
	time.Sleep(2 * time.Second)
	c.master.kill()
	close(stop)
	wg.Wait()
	if len(acked) == 0 {
		t.Fatal("nothing acknowledged")
	}
	// Every acked message's offset is below the slave's end.
	si := c.runtime(t, c.slaveAddr())
	end, _ := strconv.ParseInt(si["commitLogMaxOffset"], 10, 64)
	for _, id := range acked {
		off, err := strconv.ParseInt(id[len(id)-16:], 16, 64)
		if err != nil {
			t.Fatal(err)
		}
		if off >= end {
			t.Fatalf("acked message at %d missing on the slave (end %d)", off, end)
		}
	}
	t.Logf("%d acknowledged messages all on the slave (end %d)", len(acked), end)
}

// TestClusterProcWrongMaster: a slave of another group refuses to
// replicate and keeps its log.
func TestClusterProcWrongMaster(t *testing.T) {
	c := startProcCluster(t, "async_master", "-set", "broker.name=broker-b")
	// Point the slave explicitly at the master's HA port.
	c.slave.kill()
	c.slave.args = append(c.slave.args, "-set", "broker.ha_master_address=127.0.0.1:"+strconv.Itoa(c.masterPort+1))
	c.slave.run(t)
	testutil.Eventually(t, 30*time.Second, func() error {
		info := c.runtime(t, c.slaveAddr())
		if info == nil || info["haLastError"] == "" {
			return fmt.Errorf("no refusal yet")
		}
		if info["haConnected"] == "true" {
			t.Fatalf("slave of broker-b connected to broker-a's master")
		}
		return nil
	})
	if info := c.runtime(t, c.slaveAddr()); info["commitLogMaxOffset"] != "0" {
		t.Fatalf("slave log changed: %v", info["commitLogMaxOffset"])
	}
}

func tailLines(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// withoutAMQP turns AMQP off in a bridge or standalone command line (right
// after the command word, so a test's own amqp.listen comes later and
// wins): the processes of the tests must not all take port 5672.
func withoutAMQP(args []string) []string {
	if len(args) > 0 && (args[0] == "bridge" || args[0] == "standalone") {
		return append([]string{args[0], "-set", "amqp.listen="}, args[1:]...)
	}
	return args
}
