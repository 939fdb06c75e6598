package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// ctlNode is one `smartgo` process of a controller cluster that a test
// kills (SIGKILL), stops (SIGSTOP) and starts again with the same
// arguments.
type ctlNode struct {
	name  string
	args  []string
	ready string
	log   string
	cmd   *exec.Cmd
	done  chan struct{}
}

func (n *ctlNode) run(t *testing.T) {
	t.Helper()
	f, err := os.OpenFile(n.log, os.O_CREATE|os.O_APPEND|os.O_WRONLY, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	before := countIn(n.log, n.ready)
	n.cmd = exec.Command(smartgoBinary(t), withoutAMQP(n.args)...)
	n.cmd.Stdout, n.cmd.Stderr = f, f
	if err := n.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	done := make(chan struct{})
	n.done = done
	go func() { _ = n.cmd.Wait(); _ = f.Close(); close(done) }()
	testutil.WaitFor(t, 60*time.Second, n.name+" up", func() bool { return countIn(n.log, n.ready) > before })
}

// kill9 kills the process with SIGKILL and waits for it.
func (n *ctlNode) kill9() {
	if n.cmd == nil || n.cmd.Process == nil {
		return
	}
	_ = n.cmd.Process.Signal(syscall.SIGCONT)
	_ = n.cmd.Process.Signal(syscall.SIGKILL)
	<-n.done
}

func (n *ctlNode) signal(s syscall.Signal) { _ = n.cmd.Process.Signal(s) }

// countIn counts the lines of the file at path that contain s.
func countIn(path, s string) int {
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), s)
}

// ctlCluster is a registry, three controller replicas and the two brokers
// of group broker-a in controller mode (sync_master, min in-sync 1), each
// its own `smartgo` process on loopback (docs/controller.md).
type ctlCluster struct {
	dir      string
	registry string
	reg      *ctlNode
	ctls     []*ctlNode
	ctlAddrs []string
	brokers  []*ctlNode
	bAddrs   []string
	adm      *admin.Admin
}

// brokerSet are more -set flags of both brokers.
// newRemotingClient is a remoting client of SmartGo's own for the raw
// requests a test makes beside the third-party client; closed with the test.
func newRemotingClient(t testing.TB) *remoting.Client {
	t.Helper()
	c, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func startCtlCluster(t *testing.T, brokerSet ...string) *ctlCluster {
	t.Helper()
	return startCtlClusterOf(t, 3, brokerSet...)
}

// startCtlClusterOf is startCtlCluster with replicas controller replicas.
func startCtlClusterOf(t *testing.T, replicas int, brokerSet ...string) *ctlCluster {
	t.Helper()
	dir := t.TempDir()
	c := &ctlCluster{dir: dir}
	ports := freePorts(t, 1+replicas+2)
	c.registry = "127.0.0.1:" + strconv.Itoa(ports[0])
	c.reg = &ctlNode{name: "registry", ready: "registry running", log: filepath.Join(dir, "registry.log"),
		args: []string{"registry", "-set", "registry.listen=" + c.registry, "-set", "registry.kv_config_path=" + filepath.Join(dir, "kv.json"),
			"-set", "log.level=" + logLevel()}}
	var peers []string
	for k := range replicas {
		p := ports[1+k]
		c.ctlAddrs = append(c.ctlAddrs, "127.0.0.1:"+strconv.Itoa(p))
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d=127.0.0.1:%d", p, p+1))
	}
	for k, a := range c.ctlAddrs {
		c.ctls = append(c.ctls, &ctlNode{name: "controller-" + strconv.Itoa(k), ready: "controller running",
			log: filepath.Join(dir, "controller-"+strconv.Itoa(k)+".log"),
			args: []string{"controller", "-listen", a, "-data", filepath.Join(dir, "c"+strconv.Itoa(k)),
				"-peers", strings.Join(peers, ","), "-set", "controller.raft_listen=" + strings.Split(peers[k], "=")[1],
				"-set", "controller.heartbeat_interval=250ms", "-set", "controller.heartbeat_timeout=2s",
				"-set", "controller.election_timeout=500ms", "-set", "log.level=" + logLevel()}})
	}
	for j := range 2 {
		p := ports[1+replicas+j]
		addr := "127.0.0.1:" + strconv.Itoa(p)
		c.bAddrs = append(c.bAddrs, addr)
		c.brokers = append(c.brokers, &ctlNode{name: "broker-" + strconv.Itoa(j), ready: "registered with registry",
			log: filepath.Join(dir, "broker-"+strconv.Itoa(j)+".log"),
			args: []string{"broker", "-listen", addr, "-data", filepath.Join(dir, "b"+strconv.Itoa(j)),
				"-registries", c.registry, "-set", "broker.name=broker-a", "-set", "broker.controllers=" + strings.Join(c.ctlAddrs, ","),
				"-set", "broker.ha_listen=127.0.0.1:" + strconv.Itoa(p+1), "-set", "broker.role=sync_master",
				"-set", "broker.min_insync_replicas=1", "-set", "broker.sync_lag_max=2s",
				"-set", "broker.slave_sync_interval=500ms", "-set", "broker.advertise_ip=127.0.0.1",
				"-set", "broker.ha_reconnect_max=500ms", "-set", "store.segment_size=8MiB", "-set", "log.level=" + logLevel()}})
		for _, kv := range brokerSet {
			c.brokers[j].args = append(c.brokers[j].args, "-set", kv)
		}
	}
	t.Cleanup(func() {
		for _, n := range c.all() {
			n.kill9()
		}
		if t.Failed() {
			for _, n := range c.all() {
				data, _ := os.ReadFile(n.log)
				t.Logf("%s:\n%s", n.log, tail(string(data), 80))
			}
		}
	})
	c.reg.run(t)
	for _, n := range c.ctls {
		n.run(t)
	}
	for _, n := range c.brokers {
		n.run(t)
	}
	adm, err := admin.New(admin.Options{Registries: []string{c.registry}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	c.adm = adm
	return c
}

func (c *ctlCluster) all() []*ctlNode {
	return append(append([]*ctlNode{c.reg}, c.ctls...), c.brokers...)
}

// group returns broker-a as a controller replica sees it (the leader's
// view when one answers).
func (c *ctlCluster) group() (protocol.ControllerGroup, error) {
	var fallback *protocol.ControllerGroup
	var last error = errors.New("no controller answered")
	for _, a := range c.ctlAddrs {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		md, err := c.adm.ControllerMetadata(ctx, a)
		cancel()
		if err != nil {
			last = err
			continue
		}
		for _, g := range md.Groups {
			if g.BrokerName == "broker-a" {
				if md.State == "Leader" {
					return g, nil
				}
				gg := g
				fallback = &gg
			}
		}
	}
	if fallback != nil {
		return *fallback, nil
	}
	return protocol.ControllerGroup{}, last
}

// waitHealthy waits until both brokers are in the sync state set, the
// master holds its lease and the registry names it; it returns the
// master's index.
func (c *ctlCluster) waitHealthy(t *testing.T) int {
	t.Helper()
	m := -1
	testutil.Eventually(t, 60*time.Second, func() error {
		g, err := c.group()
		if err != nil {
			return err
		}
		if len(g.SyncStateSet) < 2 {
			return fmt.Errorf("sync state set %v", g.SyncStateSet)
		}
		m = slices.Index(c.bAddrs, g.MasterAddr)
		if m < 0 {
			return fmt.Errorf("master %q unknown", g.MasterAddr)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		info, err := c.adm.BrokerRuntimeInfo(ctx, g.MasterAddr)
		cancel()
		if err != nil || info["masterLease"] != "true" {
			return fmt.Errorf("master %s has no lease yet (%v)", g.MasterAddr, err)
		}
		return nil
	})
	return m
}

// clients is the registry address in the shape the client helpers take.
func (c *ctlCluster) clients() *standalone { return &standalone{registry: c.registry} }

// smartgoAdmin runs `smartgo admin args...` against the cluster's
// registry and returns its output.
func (c *ctlCluster) smartgoAdmin(t *testing.T, args ...string) (string, error) {
	t.Helper()
	cmd := exec.Command(smartgoBinary(t), append(append([]string{"admin"}, args...), "-registry", c.registry)...)
	out, err := cmd.CombinedOutput()
	return string(out), err
}

// ackLoad is producers sending distinct bodies with SendSync until
// stopped, remembering which were acknowledged (SEND_OK) and when.
type ackLoad struct {
	mu    sync.Mutex
	acked map[string]time.Time // protected by mu
	fails int                  // protected by mu
	last  string               // the last failure; protected by mu
	stop  context.CancelFunc
	wg    sync.WaitGroup
}

func startAckLoad(t *testing.T, s *standalone, topic string, producers int) *ackLoad {
	t.Helper()
	ctx, stop := context.WithCancel(context.Background())
	l := &ackLoad{acked: map[string]time.Time{}, stop: stop}
	for w := range producers {
		p := newProducer(t, s, fmt.Sprintf("%s-p%d", topic, w))
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				body := fmt.Sprintf("%s-%d-%d", topic, w, n)
				sctx, cancel := context.WithTimeout(ctx, 10*time.Second)
				res, err := p.SendSync(sctx, primitive.NewMessage(topic, []byte(body)))
				cancel()
				l.mu.Lock()
				if err == nil && res.Status == primitive.SendOK {
					l.acked[body] = time.Now()
				} else {
					l.fails++
					l.last = fmt.Sprint(err)
					if err == nil {
						l.last = fmt.Sprintf("status %d", res.Status)
					}
				}
				l.mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	t.Cleanup(l.end)
	return l
}

// end stops the producers and waits for them.
func (l *ackLoad) end() { l.stop(); l.wg.Wait() }

// ackedSince counts the sends acknowledged after t0.
func (l *ackLoad) ackedSince(t0 time.Time) int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, at := range l.acked {
		if at.After(t0) {
			n++
		}
	}
	return n
}

func (l *ackLoad) bodies() []string {
	l.mu.Lock()
	defer l.mu.Unlock()
	var out []string
	for b := range l.acked {
		out = append(out, b)
	}
	return out
}

// startCtlLoad starts a controller cluster, creates topic (4 queues) with
// `smartgo admin topic create`, starts a push consumer of group recording
// what it receives and producers sending with SendSync, and waits for 200
// acknowledged sends; it returns the master's index.
func startCtlLoad(t *testing.T, topic, group string, producers int) (*ctlCluster, int, *received, *ackLoad) {
	t.Helper()
	c := startCtlCluster(t)
	m := c.waitHealthy(t)
	if out, err := c.smartgoAdmin(t, "topic", "create", "-t", topic, "-r", "4", "-w", "4"); err != nil {
		t.Fatalf("admin topic create: %v\n%s", err, out)
	}
	got := &received{}
	newPushConsumer(t, c.clients(), group, group+"-c", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(m)
		return consumer.ConsumeSuccess
	})
	l := startAckLoad(t, c.clients(), topic, producers)
	testutil.WaitFor(t, 60*time.Second, "200 acknowledged sends", func() bool { return l.ackedSince(time.Time{}) >= 200 })
	return c, m, got, l
}

// TestInteropControllerMasterKill9: rocketmq-client-go producers and a push
// consumer run against a controller-mode group (three controller
// replicas, two sync_master brokers) while the master is killed with
// SIGKILL. The slave is promoted, the producers' sends are acknowledged
// again and the consumer resumes; the killed broker restarts and rejoins
// as a slave with the new master's log. Every acknowledged message is
// consumed (redeliveries allowed); `smartgo admin offset reset` to the
// kill time then has the consumer get every message since then again.
func TestInteropControllerMasterKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	const topic, group = "CtlKill", "ctl-kill-g"
	c, m, got, l := startCtlLoad(t, topic, group, 2)
	// The consumer has committed offsets and the slave has copied them.
	var before int64
	testutil.Eventually(t, 60*time.Second, func() error {
		var err error
		before, err = c.committed(group, topic)
		if err == nil && before == 0 {
			err = errors.New("nothing committed yet")
		}
		return err
	})
	time.Sleep(time.Second) // two offset syncs of the slave (broker.slave_sync_interval)

	killed := time.Now()
	c.brokers[m].kill9()
	testutil.WaitFor(t, 90*time.Second, "sends acknowledged by the new master", func() bool { return l.ackedSince(killed) >= 200 })
	t.Logf("first 200 sends after the kill acknowledged within %v", time.Since(killed).Round(time.Millisecond))
	if nm := c.waitHealthyOne(t); nm == m {
		t.Fatalf("broker %d is master again", m)
	}

	// The new master knows the group's progress, from where it was.
	testutil.Eventually(t, 30*time.Second, func() error {
		after, err := c.committed(group, topic)
		if err == nil && after < before {
			err = fmt.Errorf("committed offsets sum to %d on the new master, %d before the kill", after, before)
		}
		return err
	})

	// The commands a user types first answer with the old master down.
	for _, args := range [][]string{{"cluster"}, {"topic", "route", "-t", topic}, {"topic", "stats", "-t", topic},
		{"group", "progress", "-g", group}, {"broker", "stats"}, {"topic", "list"}} {
		if out, err := c.smartgoAdmin(t, args...); err != nil || !strings.Contains(out, "broker-a") && !strings.Contains(out, topic) {
			t.Errorf("admin %v after the failover: %v\n%s", args, err, out)
		}
	}

	c.rejoinAndConsumeAll(t, m, got, l)

	// `smartgo admin offset reset` to the kill time, on the new master:
	// the consumer gets every message stored since then again.
	t.Logf("%d sends acknowledged since the kill", l.ackedSince(killed))
	resetAgain(t, c, got, group, topic, killed)
}

// resetAgain runs `smartgo admin offset reset` of group on topic to ts
// and waits until the consumer recording got has been delivered again
// every queue offset at which it got a message the broker stored at or
// after ts (by the store timestamp the broker gave it: what the reset
// searches by).
//
// The messages acknowledged after ts are not that set: a send the old
// master stored just before a kill at ts may be acknowledged after it
// (the producer's goroutine takes the time once the answer arrived), and
// a send stored after ts may have failed (its answer timed out). Counting
// deliveries against acknowledged sends relied on the second kind to
// outnumber the first. Queue offsets, not bodies: a send retried after a
// timeout is stored twice, and a message the killed master stored and
// served while it was alone in the sync state set may never have reached
// the new master, which stored another at that offset.
func resetAgain(t *testing.T, c *ctlCluster, got *received, group, topic string, ts time.Time) {
	t.Helper()
	before := got.storedSince(ts.UnixMilli())
	maps.DeleteFunc(before, func(k queueOffset, _ int) bool { return k.topic != topic })
	if len(before) < 200 {
		t.Fatalf("%d messages consumed that were stored since %s", len(before), ts.Format(time.RFC3339Nano))
	}
	out, err := c.smartgoAdmin(t, "offset", "reset", "-g", group, "-t", topic, "-ts", strconv.FormatInt(ts.UnixMilli(), 10))
	if err != nil {
		t.Fatalf("admin offset reset: %v\n%s", err, out)
	}
	t.Logf("admin offset reset to %s, %d messages stored since:\n%s", ts.Format(time.RFC3339Nano), len(before), out)
	// The Go client pauses 10 s before it applies a reset.
	testutil.Eventually(t, 90*time.Second, func() error {
		missing := map[int]int{} // by queue id
		first := queueOffset{off: -1}
		for k, n := range before {
			if got.deliveries(k) == n {
				missing[k.queue]++
				if first.off < 0 || k.off < first.off {
					first = k
				}
			}
		}
		if first.off < 0 {
			return nil
		}
		sum, err := c.committed(group, topic)
		return fmt.Errorf("not delivered again: %v by queue id of %d (e.g. %s queue %d offset %d); committed offsets sum to %d (%v)",
			missing, len(before), first.topic, first.queue, first.off, sum, err)
	})
}

// rejoinAndConsumeAll restarts broker m, the killed master, and waits
// until the other is master with both in sync and sends acknowledged
// again; then it ends the load, waits until m is a slave with the new
// master's log, and until got has every acknowledged message.
func (c *ctlCluster) rejoinAndConsumeAll(t *testing.T, m int, got *received, l *ackLoad) {
	t.Helper()
	c.brokers[m].run(t)
	nm := c.waitHealthy(t)
	if nm == m {
		t.Fatalf("the restarted broker %d took the master role back", m)
	}
	rejoined := time.Now()
	testutil.WaitFor(t, 60*time.Second, "sends acknowledged with both brokers in sync", func() bool { return l.ackedSince(rejoined) >= 200 })
	l.end()
	c.waitRejoined(t, m, nm)
	consumedAll(t, got, l)
}

// waitRejoined waits until broker old is a slave of broker master with
// the same log end.
func (c *ctlCluster) waitRejoined(t *testing.T, old, master int) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		var ends []string
		for _, a := range []string{c.bAddrs[master], c.bAddrs[old]} {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			info, err := c.adm.BrokerRuntimeInfo(ctx, a)
			cancel()
			if err != nil {
				return err
			}
			ends = append(ends, info["commitLogMaxOffset"])
			if a == c.bAddrs[old] && info["brokerRole"] != "SLAVE" {
				return fmt.Errorf("broker %d's role is %s", old, info["brokerRole"])
			}
		}
		if ends[0] != ends[1] {
			return fmt.Errorf("log ends: master %s, rejoined %s", ends[0], ends[1])
		}
		return nil
	})
}

// consumedAll waits until got has every message l saw acknowledged.
func consumedAll(t *testing.T, got *received, l *ackLoad) {
	t.Helper()
	want := l.bodies()
	testutil.Eventually(t, 90*time.Second, func() error {
		missing := 0
		var first string
		for _, b := range want {
			if got.get(b) == nil {
				if missing == 0 {
					first = b
				}
				missing++
			}
		}
		if missing > 0 {
			return fmt.Errorf("%d of %d acknowledged messages not consumed (e.g. %s); %d consumed", missing, len(want), first, got.distinct())
		}
		return nil
	})
	l.mu.Lock()
	defer l.mu.Unlock()
	t.Logf("%d acknowledged messages all consumed (%d deliveries, %d failed sends, the last: %s)", len(want), got.n.Load(), l.fails, l.last)
}

// committed sums the group's committed offsets of topic over the queues
// the masters report (admin group progress).
func (c *ctlCluster) committed(group, topic string) (int64, error) {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	qs, err := c.adm.GroupProgress(ctx, group, topic)
	if err != nil {
		return 0, err
	}
	if len(qs) != 4 {
		return 0, fmt.Errorf("group progress lists %d queues: %+v", len(qs), qs)
	}
	var n int64
	for _, q := range qs {
		n += max(q.ConsumerOffset, 0)
	}
	return n, nil
}

// waitHealthyOne waits until the group has a master holding its lease
// (one broker alive) and returns its index.
func (c *ctlCluster) waitHealthyOne(t *testing.T) int {
	t.Helper()
	m := -1
	testutil.Eventually(t, 60*time.Second, func() error {
		g, err := c.group()
		if err != nil {
			return err
		}
		m = slices.Index(c.bAddrs, g.MasterAddr)
		if m < 0 {
			return fmt.Errorf("master %q unknown", g.MasterAddr)
		}
		return nil
	})
	return m
}

// waitMasterIs waits until the controller names broker j master (a
// killed master's successor).
func (c *ctlCluster) waitMasterIs(t *testing.T, j int) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		g, err := c.group()
		if err == nil && g.MasterAddr != c.bAddrs[j] {
			err = fmt.Errorf("master %q, waiting for %s", g.MasterAddr, c.bAddrs[j])
		}
		return err
	})
}

// leader returns the index of the controller replica that says it leads.
func (c *ctlCluster) leader(t *testing.T) int {
	t.Helper()
	l := -1
	testutil.Eventually(t, 30*time.Second, func() error {
		for i, a := range c.ctlAddrs {
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			md, err := c.adm.ControllerMetadata(ctx, a)
			cancel()
			if err == nil && md.State == "Leader" {
				l = i
				return nil
			}
		}
		return errors.New("no controller replica leads")
	})
	return l
}

// maxGap is the longest time between two acknowledged sends in [from, to].
func (l *ackLoad) maxGap(from, to time.Time) time.Duration {
	l.mu.Lock()
	var ts []time.Time
	for _, at := range l.acked {
		if !at.Before(from) && !at.After(to) {
			ts = append(ts, at)
		}
	}
	l.mu.Unlock()
	slices.SortFunc(ts, func(a, b time.Time) int { return a.Compare(b) })
	prev, gap := from, time.Duration(0)
	for _, at := range append(ts, to) {
		gap = max(gap, at.Sub(prev))
		prev = at
	}
	return gap
}

// TestInteropControllerSIGSTOP: under rocketmq-client-go producers and a
// push consumer, the controller leader and then the registry are stopped
// (SIGSTOP) for several seconds and continued. The master keeps
// acknowledging sends throughout (the other replicas elect a leader that
// renews its lease; the clients keep their routes), nothing hangs once
// they resume, and every acknowledged message is consumed.
func TestInteropControllerSIGSTOP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	const topic, group = "CtlStop", "ctl-stop-g"
	c, m, got, l := startCtlLoad(t, topic, group, 2)

	for _, n := range []*ctlNode{c.ctls[c.leader(t)], c.reg} {
		stopped := time.Now()
		n.signal(syscall.SIGSTOP)
		time.Sleep(8 * time.Second)
		n.signal(syscall.SIGCONT)
		resumed := time.Now()
		gap := l.maxGap(stopped, resumed)
		t.Logf("%s stopped for %v: longest time without an acknowledged send %v", n.name, resumed.Sub(stopped).Round(time.Millisecond), gap.Round(time.Millisecond))
		if gap > 4*time.Second {
			t.Errorf("while %s was stopped, no send was acknowledged for %v", n.name, gap.Round(time.Millisecond))
		}
		testutil.WaitFor(t, 30*time.Second, "sends acknowledged after "+n.name+" resumed", func() bool { return l.ackedSince(resumed.Add(time.Second)) >= 100 })
		if nm := c.waitHealthy(t); nm != m {
			t.Errorf("the master moved from broker %d to %d while %s was stopped", m, nm, n.name)
		}
	}
	l.end()
	consumedAll(t, got, l)
}

// TestInteropControllerMasterSIGSTOP: the master of a controller-mode
// group is stopped (SIGSTOP) under rocketmq-client-go producers and a
// push consumer until the controller promotes the slave, then continued:
// the sends it had queued are not acknowledged behind the new master's
// back, it rejoins as a slave with the new master's log, and every
// acknowledged message is consumed.
func TestInteropControllerMasterSIGSTOP(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	const topic, group = "CtlMasterStop", "ctl-mstop-g"
	c, m, got, l := startCtlLoad(t, topic, group, 3)
	c.brokers[m].signal(syscall.SIGSTOP)
	testutil.Eventually(t, 30*time.Second, func() error {
		g, err := c.group()
		if err == nil && g.MasterAddr == c.bAddrs[m] {
			err = errors.New("broker still master")
		}
		return err
	})
	time.Sleep(2 * time.Second) // sends queue up at the stopped broker
	c.brokers[m].signal(syscall.SIGCONT)
	resumed := time.Now()
	nm := c.waitHealthy(t)
	if nm == m {
		t.Fatalf("broker %d is master again", m)
	}
	testutil.WaitFor(t, 90*time.Second, "sends acknowledged after the stopped master resumed", func() bool { return l.ackedSince(resumed) >= 200 })
	l.end()
	c.waitRejoined(t, m, nm)
	consumedAll(t, got, l)
}

// TestInteropControllerSQL92Failover: a rocketmq-client-go push consumer
// with a SQL92 selector (registered by its heartbeats, not carried by its
// pulls) keeps getting exactly its matching messages after the master is
// killed and the slave promoted.
func TestInteropControllerSQL92Failover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	c := startCtlCluster(t)
	m := c.waitHealthy(t)
	const topic, group = "CtlSQL", "ctl-sql-g"
	if out, err := c.smartgoAdmin(t, "topic", "create", "-t", topic, "-r", "4", "-w", "4"); err != nil {
		t.Fatalf("admin topic create: %v\n%s", err, out)
	}
	var got received
	newSelectorConsumer(t, c.clients(), group, "ctl-sql-c", topic, consumer.MessageSelector{Type: consumer.SQL92, Expression: "parity = 'even'"},
		consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
			got.add(m)
			return consumer.ConsumeSuccess
		})
	p := newProducer(t, c.clients(), "ctl-sql-p")
	acked := map[int]bool{}
	send := func(from, to int) {
		for i := from; i < to; i++ {
			msg := primitive.NewMessage(topic, []byte("sql-"+strconv.Itoa(i)))
			msg.WithProperty("parity", []string{"even", "odd"}[i%2])
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			res, err := p.SendSync(ctx, msg)
			cancel()
			if err == nil && res.Status == primitive.SendOK {
				acked[i] = true
			}
		}
	}
	send(0, 100)
	testutil.WaitFor(t, 60*time.Second, "the even messages before the kill", func() bool { return got.distinct() >= 50 })
	c.brokers[m].kill9()
	deadline := time.Now().Add(90 * time.Second)
	for n := 100; len(acked) < 200; n += 20 { // until the new master acknowledges
		if time.Now().After(deadline) {
			t.Fatalf("%d sends acknowledged after the kill", len(acked)-100)
		}
		send(n, n+20)
	}
	testutil.Eventually(t, 90*time.Second, func() error {
		for i := range acked {
			if i%2 == 0 && got.get("sql-"+strconv.Itoa(i)) == nil {
				return fmt.Errorf("sql-%d not consumed", i)
			}
		}
		return nil
	})
	got.mu.Lock()
	defer got.mu.Unlock()
	for b, msg := range got.msgs {
		if msg.GetProperty("parity") != "even" {
			t.Errorf("%s does not match the selector and was delivered", b)
		}
	}
	t.Logf("%d matching messages consumed across the failover (%d acknowledged sends)", len(got.msgs), len(acked))
}

// TestInteropControllerAdminAfterFailover: after the master of a
// controller-mode group is killed with SIGKILL and the slave promoted,
// the `smartgo admin` commands a user types first answer from the new
// master: the controller view, a message by key and by the offset id its
// send returned (which names the dead broker). Offset reset after a
// failover: TestInteropControllerMasterKill9.
func TestInteropControllerAdminAfterFailover(t *testing.T) {
	if testing.Short() {
		t.Skip("starts a cluster of processes")
	}
	c := startCtlCluster(t)
	m := c.waitHealthy(t)
	const topic = "CtlAdmin"
	if out, err := c.smartgoAdmin(t, "topic", "create", "-t", topic, "-r", "4", "-w", "4"); err != nil {
		t.Fatalf("admin topic create: %v\n%s", err, out)
	}
	p := newProducer(t, c.clients(), "ctl-admin-p")
	var ids []string
	for i := range 20 {
		msg := primitive.NewMessage(topic, []byte(fmt.Sprintf("adm-%d", i)))
		msg.WithKeys([]string{fmt.Sprintf("key-%d", i)})
		res, err := p.SendSync(context.Background(), msg)
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("send %d: %+v %v", i, res, err)
		}
		ids = append(ids, res.OffsetMsgID)
	}
	// The slave has every message before the kill (sync_master).
	c.brokers[m].kill9()
	testutil.Eventually(t, 30*time.Second, func() error {
		g, err := c.group()
		if err == nil && g.MasterAddr == c.bAddrs[m] {
			err = errors.New("the killed broker is still master")
		}
		return err
	})
	testutil.Eventually(t, 60*time.Second, func() error {
		out, err := c.smartgoAdmin(t, "cluster")
		if err != nil || strings.Contains(out, c.bAddrs[m]) {
			return fmt.Errorf("admin cluster: %v\n%s", err, out)
		}
		return nil
	})
	for _, cmd := range []struct {
		args []string
		want string
	}{
		{[]string{"controller", "-controller", strings.Join(c.ctlAddrs, ",")}, c.bAddrs[m] + "(down)"},
		{[]string{"msg", "by-key", "-t", topic, "-k", "key-7"}, `"adm-7"`},
		// The id names the dead broker: the promoted slave holds the
		// record at the same offset.
		{[]string{"msg", "by-id", "-id", ids[3]}, `"adm-3"`},
	} {
		if out, err := c.smartgoAdmin(t, cmd.args...); err != nil || !strings.Contains(out, cmd.want) {
			t.Errorf("admin %v after the failover: %v, want %s in\n%s", cmd.args, err, cmd.want, out)
		}
	}
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
