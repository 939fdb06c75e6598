//go:build cluster

// Real-process failover tests: a registry, controller replicas and a
// broker group whose master the controller elects, each its own `smartgo`
// process on loopback; masters are killed with SIGKILL.

package cluster

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// Controller timing of these tests: brokers heartbeat every 250 ms, a
// master silent for 2 s is replaced (its lease is 2 s - 667 ms).
const (
	ctlHeartbeatInterval = "250ms"
	ctlHeartbeatTimeout  = "2s"
)

type ctlProcOpts struct {
	brokers, controllers int
	minISR               int
	proxied              bool // brokers reach the controllers through cuttable proxies
}

// ctlProc is a controller-mode cluster of processes.
type ctlProc struct {
	t        *testing.T
	dir, reg string
	ctls     []*proc
	ctlAddrs []string
	brokers  []*proc
	bAddrs   []string
	bDirs    []string
	proxies  [][]*linkProxy // [broker][controller], when proxied
	adm      *admin.Admin
}

func startCtlProc(t *testing.T, o ctlProcOpts) *ctlProc {
	t.Helper()
	dir := t.TempDir()
	c := &ctlProc{t: t, dir: dir}
	ports := freePorts(t, 1+o.controllers+o.brokers)
	c.reg = "127.0.0.1:" + strconv.Itoa(ports[0])
	start(t, dir, "registry", "registry", "-set", "registry.listen="+c.reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	var peers []string
	for k := range o.controllers {
		p := ports[1+k]
		c.ctlAddrs = append(c.ctlAddrs, "127.0.0.1:"+strconv.Itoa(p))
		peers = append(peers, fmt.Sprintf("127.0.0.1:%d=127.0.0.1:%d", p, p+1))
	}
	for k, a := range c.ctlAddrs {
		c.ctls = append(c.ctls, start(t, dir, "controller-"+strconv.Itoa(k), "controller", "-listen", a,
			"-data", filepath.Join(dir, "c"+strconv.Itoa(k)), "-peers", strings.Join(peers, ","),
			"-set", "controller.raft_listen="+strings.Split(peers[k], "=")[1],
			"-set", "controller.heartbeat_interval="+ctlHeartbeatInterval, "-set", "controller.heartbeat_timeout="+ctlHeartbeatTimeout,
			"-set", "controller.election_timeout=500ms"))
	}
	for j := range o.brokers {
		p := ports[1+o.controllers+j]
		c.bAddrs = append(c.bAddrs, "127.0.0.1:"+strconv.Itoa(p))
		c.bDirs = append(c.bDirs, filepath.Join(dir, "b"+strconv.Itoa(j)))
		ctls := c.ctlAddrs
		if o.proxied {
			var row []*linkProxy
			var addrs []string
			for _, a := range c.ctlAddrs {
				px := newLinkProxy(t)
				px.target.Store(&a)
				row = append(row, px)
				addrs = append(addrs, px.addr())
			}
			c.proxies = append(c.proxies, row)
			ctls = addrs
		}
		c.brokers = append(c.brokers, start(t, dir, "broker-"+strconv.Itoa(j), "broker", "-listen", c.bAddrs[j], "-data", c.bDirs[j],
			"-registries", c.reg, "-set", "broker.controllers="+strings.Join(ctls, ","),
			"-set", "broker.ha_listen=127.0.0.1:"+strconv.Itoa(p+1), "-set", "broker.role=sync_master",
			"-set", "broker.min_insync_replicas="+strconv.Itoa(o.minISR), "-set", "broker.sync_lag_max=2s",
			"-set", "broker.slave_sync_interval=500ms", "-set", "broker.register_interval=10s",
			"-set", "broker.advertise_ip=127.0.0.1", "-set", "broker.ha_reconnect_max=500ms",
			"-set", "store.segment_size=8MiB", "-set", "store.cq_entries_per_file=10000",
			"-set", "store.index_slots=20000", "-set", "store.index_entries=80000"))
	}
	adm, err := admin.New(admin.Options{Registries: []string{c.reg}})
	if err != nil {
		t.Fatal(err)
	}
	c.adm = adm
	t.Cleanup(func() {
		_ = adm.Close()
		if t.Failed() {
			for _, p := range append(slices.Clone(c.ctls), c.brokers...) {
				data, _ := os.ReadFile(p.log)
				t.Logf("%s:\n%s", p.log, tailLines(string(data), 60))
			}
		}
	})
	return c
}

// storeOptions are the options the brokers' stores were written with.
func (c *ctlProc) storeOptions(root string) store.Options {
	o := store.DefaultOptions(root)
	o.SegmentSize, o.CQEntriesPerFile, o.IndexSlots, o.IndexEntries = 8<<20, 10000, 20000, 80000
	return o
}

// group returns broker-a's state from a controller (the leader's view
// when one answers).
func (c *ctlProc) group() (protocol.ControllerGroup, string, error) {
	var fallback *protocol.ControllerGroup
	var leader string
	var last error
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
					return g, md.Self, nil
				}
				gg := g
				fallback, leader = &gg, md.Leader
			}
		}
	}
	if fallback != nil {
		return *fallback, leader, nil
	}
	return protocol.ControllerGroup{}, "", fmt.Errorf("no controller knows broker-a: %v", last)
}

func (c *ctlProc) index(addr string) int { return slices.Index(c.bAddrs, addr) }

func (c *ctlProc) runtime(addr string) map[string]string {
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	defer cancel()
	info, err := c.adm.BrokerRuntimeInfo(ctx, addr)
	if err != nil {
		return nil
	}
	return info
}

// waitHealthy waits until every running broker is in the sync state set
// and the master holds its lease; it returns the master's index.
func (c *ctlProc) waitHealthy(t *testing.T, members int) int {
	t.Helper()
	m := -1
	testutil.Eventually(t, 60*time.Second, func() error {
		g, _, err := c.group()
		if err != nil {
			return err
		}
		if len(g.SyncStateSet) < members {
			return fmt.Errorf("sync state set %v", g.SyncStateSet)
		}
		m = c.index(g.MasterAddr)
		if m < 0 {
			return fmt.Errorf("master %q unknown", g.MasterAddr)
		}
		if info := c.runtime(g.MasterAddr); info["masterLease"] != "true" {
			return fmt.Errorf("master %s has no lease yet", g.MasterAddr)
		}
		if rawMasterAddr(c.reg, "broker-a") != g.MasterAddr {
			return errors.New("registry does not name the master yet")
		}
		return nil
	})
	return m
}

func (c *ctlProc) producer(t *testing.T) *client.Producer {
	t.Helper()
	po := client.DefaultProducerOptions(c.reg)
	po.SendTimeout, po.RouteRefresh = 4*time.Second, time.Second
	p, err := client.NewProducer(po)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// sendRec is one send of a load.
type sendRec struct {
	body  string
	acked bool      // SEND_OK
	sent  time.Time // when the send began
	at    time.Time // when the answer came
	host  string    // the broker that answered (store host), acked only
}

// load runs workers sending distinct messages until stopped.
type load struct {
	mu   sync.Mutex
	recs []sendRec // protected by mu
	stop chan struct{}
	wg   sync.WaitGroup
}

func startLoad(p *client.Producer, topic string, workers int) *load {
	l := &load{stop: make(chan struct{})}
	for w := range workers {
		l.wg.Add(1)
		go func() {
			defer l.wg.Done()
			for i := 0; ; i++ {
				select {
				case <-l.stop:
					return
				default:
				}
				body := fmt.Sprintf("%s-%d-%d", topic, w, i)
				ctx, cancel := context.WithTimeout(context.Background(), 15*time.Second)
				sent := time.Now()
				r, err := p.Send(ctx, &client.Message{Topic: topic, Body: []byte(body)})
				cancel()
				rec := sendRec{body: body, sent: sent, at: time.Now()}
				if err == nil && r.Status == client.SendOK {
					rec.acked = true
					if ap, _, err := record.ParseOffsetMessageID(r.OffsetMsgID); err == nil {
						rec.host = ap.String()
					}
				}
				l.mu.Lock()
				l.recs = append(l.recs, rec)
				l.mu.Unlock()
			}
		}()
	}
	return l
}

func (l *load) end() []sendRec {
	close(l.stop)
	l.wg.Wait()
	l.mu.Lock()
	defer l.mu.Unlock()
	return slices.Clone(l.recs)
}

// firstAckAfter returns when the first send acknowledged by a broker other
// than old was answered after t0.
func (l *load) firstAckAfter(t0 time.Time, old string) (time.Time, bool) {
	l.mu.Lock()
	defer l.mu.Unlock()
	for _, r := range l.recs {
		if r.acked && r.host != old && r.at.After(t0) {
			return r.at, true
		}
	}
	return time.Time{}, false
}

func (l *load) acked() int {
	l.mu.Lock()
	defer l.mu.Unlock()
	n := 0
	for _, r := range l.recs {
		if r.acked {
			n++
		}
	}
	return n
}

// stopAll stops the brokers cleanly and opens their stores in process:
// it returns, per broker, the body counts of every topic and the store.
func (c *ctlProc) stopAndOpen(t *testing.T) []*store.Store {
	t.Helper()
	var out []*store.Store
	for j, p := range c.brokers {
		p.stop()
		s, err := store.Open(c.storeOptions(c.bDirs[j]))
		if err != nil {
			t.Fatalf("open broker %d's store: %v", j, err)
		}
		t.Cleanup(func() { _ = s.Close() })
		out = append(out, s)
	}
	return out
}

// bodies counts the bodies of every message of the topics with prefix.
func bodies(t *testing.T, s *store.Store, prefix string) map[string]int {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		if d, m := s.DispatchedPhysicalOffset(), s.MaxPhysicalOffset(); d < m {
			return fmt.Errorf("dispatched %d of %d", d, m)
		}
		return nil
	})
	out := map[string]int{}
	for _, topic := range s.Topics() {
		if !strings.HasPrefix(topic, prefix) {
			continue
		}
		for _, q := range s.QueueIDs(topic) {
			for off := s.MinOffset(topic, q); off < s.MaxOffset(topic, q); {
				r, err := s.GetMessages(topic, q, off, 64, nil)
				if err != nil || r.Status != store.GetFound {
					t.Fatalf("read %s/%d at %d: %v", topic, q, off, err)
				}
				for _, b := range r.Buffers {
					m, _, err := record.Decode(b, true)
					if err != nil {
						t.Fatal(err)
					}
					out[string(m.Body)]++
				}
				off = r.NextBeginOffset
				r.Release()
			}
		}
	}
	return out
}

// sameLogs checks that every store holds the same commitlog bytes up to
// the common end.
func sameLogs(t *testing.T, stores []*store.Store) int64 {
	t.Helper()
	from, to := int64(0), int64(1<<62)
	for _, s := range stores {
		from, to = max(from, s.MinPhysicalOffset()), min(to, s.MaxPhysicalOffset())
	}
	for pos := from; pos < to; {
		ref, err := stores[0].ReadRaw(pos, int(min(1<<20, to-pos)))
		if err != nil {
			t.Fatal(err)
		}
		n := ref.TotalBytes
		for i, s := range stores[1:] {
			r, err := s.ReadRaw(pos, n)
			if err != nil || r.TotalBytes != n || !bytes.Equal(r.Buffers[0], ref.Buffers[0]) {
				t.Fatalf("broker %d's log differs from broker 0's at %d", i+1, pos)
			}
			r.Release()
		}
		ref.Release()
		pos += int64(n)
	}
	return to - from
}

// waitSameEnds waits until every broker reports the same commitlog end.
func (c *ctlProc) waitSameEnds(t *testing.T) {
	t.Helper()
	testutil.Eventually(t, 60*time.Second, func() error {
		var ends []string
		for _, a := range c.bAddrs {
			ends = append(ends, c.runtime(a)["commitLogMaxOffset"])
		}
		if ends[0] == "" || slices.ContainsFunc(ends, func(e string) bool { return e != ends[0] }) {
			return fmt.Errorf("log ends %v", ends)
		}
		return nil
	})
}

// ackedOnce checks that every store holds each acknowledged message of
// recs (topics with prefix) exactly once, and returns how many there are.
func ackedOnce(t *testing.T, stores []*store.Store, prefix string, recs []sendRec) int {
	t.Helper()
	n := 0
	for j, s := range stores {
		counts := bodies(t, s, prefix)
		for _, r := range recs {
			if !r.acked {
				continue
			}
			if j == 0 {
				n++
			}
			if counts[r.body] != 1 {
				t.Fatalf("broker %d holds acknowledged message %s %d times", j, r.body, counts[r.body])
			}
		}
	}
	return n
}

func percentile(ds []time.Duration, p float64) time.Duration {
	s := slices.Clone(ds)
	slices.Sort(s)
	if len(s) == 0 {
		return 0
	}
	return s[min(len(s)-1, int(float64(len(s))*p))]
}

// TestClusterControllerKillLoop: under a sync-replicated produce load the
// master is killed with SIGKILL, again and again (20 times;
// SMARTGO_FAILOVER_KILLS for more). Each time a member of the sync state
// set takes over and the group accepts writes again; the killed broker
// comes back as a slave and cuts the tail nobody acknowledged. At the end
// every acknowledged message is on every broker exactly once, the brokers'
// logs are byte-identical, and a consumer that ran throughout received
// every acknowledged message of its topic (continuing from its committed
// offsets after each failover).
func TestClusterControllerKillLoop(t *testing.T) {
	kills := 20
	if v, err := strconv.Atoi(os.Getenv("SMARTGO_FAILOVER_KILLS")); err == nil && v > 0 {
		kills = v
	}
	c := startCtlProc(t, ctlProcOpts{brokers: 3, controllers: 3, minISR: 2})
	c.waitHealthy(t, 3)
	p := c.producer(t)

	// A consumer group that runs throughout, on its own topic.
	var got sync.Map
	var received, dups atomicCounter
	co := client.ConsumerOptions{ClientOptions: client.ClientOptions{Registries: []string{c.reg}}, Group: "KillLoopGroup",
		From: client.ConsumeFromFirst}
	co.RouteRefresh = time.Second
	cons, err := client.NewPushConsumer(co, func(_ context.Context, msgs []*client.MessageExt) client.ConsumeResult {
		for _, m := range msgs {
			if _, loaded := got.LoadOrStore(string(m.Body), true); loaded {
				dups.add(1)
			} else {
				received.add(1)
			}
		}
		return client.ConsumeSuccess
	})
	if err != nil {
		t.Fatal(err)
	}
	if err := cons.Subscribe("Flow", "*"); err != nil {
		t.Fatal(err)
	}
	flow := startLoad(p, "Flow", 1)
	if err := cons.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = cons.Close() })

	var failovers []time.Duration
	var all []sendRec
	truncated := 0
	for i := range kills {
		m := c.waitHealthy(t, 3)
		l := startLoad(p, fmt.Sprintf("Kill%03d", i), 6)
		testutil.Eventually(t, 30*time.Second, func() error {
			if n := l.acked(); n < 150 {
				return fmt.Errorf("%d acknowledged", n)
			}
			return nil
		})
		old := c.bAddrs[m]
		killed := time.Now()
		c.brokers[m].kill()
		var back time.Time
		testutil.Eventually(t, 30*time.Second, func() error {
			at, ok := l.firstAckAfter(killed, old)
			if !ok {
				return errors.New("no write acknowledged by a new master yet")
			}
			back = at
			return nil
		})
		failovers = append(failovers, back.Sub(killed))
		time.Sleep(300 * time.Millisecond) // writes on the new master
		all = append(all, l.end()...)
		before := logCount(t, c.brokers[m].log, "cutting the log tail")
		c.brokers[m].run(t)
		c.waitHealthy(t, 3)
		if logCount(t, c.brokers[m].log, "cutting the log tail") > before {
			truncated++
		}
		t.Logf("kill %d: broker %d, writes back after %v", i+1, m, back.Sub(killed).Round(time.Millisecond))
	}
	all = append(all, flow.end()...)
	t.Logf("failover (SIGKILL of the master -> first write acknowledged by the new master) over %d kills: p50 %v, p99 %v, max %v; "+
		"controller heartbeat timeout %s; %d rejoining masters cut an unacknowledged tail",
		kills, percentile(failovers, 0.5).Round(time.Millisecond), percentile(failovers, 0.99).Round(time.Millisecond),
		slices.Max(failovers).Round(time.Millisecond), ctlHeartbeatTimeout, truncated)
	if rp := os.Getenv("SMARTGO_FAILOVER_REPORT"); rp != "" {
		var b strings.Builder
		for _, d := range failovers {
			fmt.Fprintf(&b, "%d\n", d.Milliseconds())
		}
		_ = os.WriteFile(rp, []byte(b.String()), 0o644)
	}

	// The consumer has every acknowledged message of its topic.
	testutil.Eventually(t, 60*time.Second, func() error {
		for _, r := range all {
			if r.acked && strings.HasPrefix(r.body, "Flow-") {
				if _, ok := got.Load(r.body); !ok {
					return fmt.Errorf("consumer never received %s (received %d)", r.body, received.load())
				}
			}
		}
		return nil
	})
	t.Logf("consumer: %d messages, %d redelivered across %d failovers", received.load(), dups.load(), kills)

	// Every broker has every acknowledged message once, in the same log.
	c.waitHealthy(t, 3)
	c.waitSameEnds(t)
	stores := c.stopAndOpen(t)
	n := sameLogs(t, stores)
	ackedN := ackedOnce(t, stores, "", all)
	t.Logf("%d acknowledged messages on all 3 brokers once each; logs identical over %d bytes", ackedN, n)
}

type atomicCounter struct {
	mu sync.Mutex
	n  int
}

func (a *atomicCounter) add(d int) { a.mu.Lock(); a.n += d; a.mu.Unlock() }
func (a *atomicCounter) load() int { a.mu.Lock(); defer a.mu.Unlock(); return a.n }

// logCount counts the lines of a process log that contain s.
func logCount(t *testing.T, path, s string) int {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		return 0
	}
	return strings.Count(string(data), s)
}

// electedAt returns when a controller log says it elected a master at
// epoch (zero if none did).
func (c *ctlProc) electedAt(t *testing.T, epoch int32) time.Time {
	t.Helper()
	want := fmt.Sprintf("epoch=%d ", epoch)
	for _, p := range c.ctls {
		data, _ := os.ReadFile(p.log)
		for _, line := range strings.Split(string(data), "\n") {
			if !strings.Contains(line, `msg="controller: elected master"`) || !strings.Contains(line, want) {
				continue
			}
			ts, _, _ := strings.Cut(strings.TrimPrefix(line, "time="), " ")
			if at, err := time.Parse(time.RFC3339Nano, ts); err == nil {
				return at
			}
		}
	}
	return time.Time{}
}

// TestClusterControllerPartition: the master is cut off from every
// controller replica but not from its clients or slaves. Its lease runs
// out and it stops acknowledging writes before the controller elects a
// new master, so no write is acknowledged by both; when the link comes
// back it rejoins as a slave, and every acknowledged message is on every
// broker once.
func TestClusterControllerPartition(t *testing.T) {
	c := startCtlProc(t, ctlProcOpts{brokers: 3, controllers: 3, minISR: 2, proxied: true})
	m := c.waitHealthy(t, 3)
	g, _, err := c.group()
	if err != nil {
		t.Fatal(err)
	}
	p := c.producer(t)
	l := startLoad(p, "Part", 6)
	waitAcked(t, l, 200)
	old := c.bAddrs[m]
	cut := time.Now()
	for _, px := range c.proxies[m] {
		px.set(linkCut)
	}
	next := waitTakenOver(t, c, l, g, old, cut)
	time.Sleep(500 * time.Millisecond)
	recs := l.end()
	elected := c.electedAt(t, next.MasterEpoch)
	if elected.IsZero() {
		t.Fatal("no controller logged the election")
	}
	var lastOld, firstNew time.Time
	for _, r := range recs {
		switch {
		case !r.acked:
		case r.host == old && r.at.After(lastOld):
			lastOld = r.at
		case r.host != old && r.at.After(cut) && (firstNew.IsZero() || r.at.Before(firstNew)):
			firstNew = r.at
		}
	}
	t.Logf("cut at %s; old master's last acknowledged write %s; new master elected %s; its first write %s",
		cut.Format("15:04:05.000"), lastOld.Format("15:04:05.000"), elected.Format("15:04:05.000"), firstNew.Format("15:04:05.000"))
	if !lastOld.Before(elected) || !lastOld.Before(firstNew) {
		t.Fatalf("the old master acknowledged a write at %s, after the election at %s", lastOld, elected)
	}
	if logCount(t, c.brokers[m].log, "master lease lost") == 0 {
		t.Fatal("the old master did not log losing its lease")
	}

	// The link comes back: the old master rejoins as a slave.
	for _, px := range c.proxies[m] {
		px.set(linkPass)
	}
	c.waitHealthy(t, 3)
	testutil.Eventually(t, 30*time.Second, func() error {
		if info := c.runtime(old); info["brokerRole"] != "SLAVE" {
			return fmt.Errorf("old master's role %q", info["brokerRole"])
		}
		return nil
	})
	stores := c.stopAndOpen(t)
	sameLogs(t, stores)
	ackedOnce(t, stores, "Part", recs)
}

// TestClusterControllerReplicaLoss: a controller replica killed while an
// election is due, then the Raft leader killed: with a majority left the
// group still gets a new master each time. With no majority, the group
// keeps serving with its master and the replica says why.
func TestClusterControllerReplicaLoss(t *testing.T) {
	c := startCtlProc(t, ctlProcOpts{brokers: 3, controllers: 3, minISR: 1})
	p := c.producer(t)
	send := func(what string) {
		t.Helper()
		testutil.Eventually(t, 30*time.Second, func() error {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			defer cancel()
			r, err := p.Send(ctx, &client.Message{Topic: "Ctl", Body: []byte(what)})
			if err != nil {
				return err
			}
			if r.Status != client.SendOK {
				return fmt.Errorf("status %v", r.Status)
			}
			return nil
		})
	}
	leaderIdx := func() int {
		_, leader, err := c.group()
		if err != nil {
			return -1
		}
		return slices.Index(c.ctlAddrs, leader)
	}
	// waitLeader is the Raft leader's index: a query of the leader can
	// time out on a loaded machine and leave only a follower's answer,
	// which may name no leader.
	waitLeader := func() int {
		t.Helper()
		l := -1
		testutil.Eventually(t, 30*time.Second, func() error {
			if l = leaderIdx(); l < 0 {
				return errors.New("no leader")
			}
			return nil
		})
		return l
	}
	// failover kills the master, then the replica pick chose before it.
	failover := func(round string, pick func() int) int {
		t.Helper()
		m := c.waitHealthy(t, 3)
		g, _, _ := c.group()
		send(round + "-before")
		k := pick()
		c.brokers[m].kill()
		c.ctls[k].kill()
		testutil.Eventually(t, 30*time.Second, func() error {
			ng, _, err := c.group()
			if err != nil || ng.MasterEpoch <= g.MasterEpoch || ng.MasterAddr == c.bAddrs[m] {
				return fmt.Errorf("no new master yet (%v)", err)
			}
			return nil
		})
		send(round + "-after")
		c.brokers[m].run(t)
		return k
	}
	// A follower replica dies during the master's heartbeat timeout.
	k1 := failover("follower", func() int { return (waitLeader() + 1) % len(c.ctls) })
	c.ctls[k1].run(t)
	// The leader dies during the master's heartbeat timeout.
	k2 := failover("leader", waitLeader)
	c.ctls[k2].run(t)

	// Two replicas down: no majority. Writes go on with the master. The
	// replica left is one that applied the group's state.
	m := c.waitHealthy(t, 3)
	g, _, _ := c.group()
	survivor := (waitLeader() + 1) % len(c.ctls)
	testutil.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		md, err := c.adm.ControllerMetadata(ctx, c.ctlAddrs[survivor])
		if err != nil {
			return err
		}
		if len(md.Groups) != 1 || md.Groups[0].MasterEpoch != g.MasterEpoch || len(md.Groups[0].SyncStateSet) != len(g.SyncStateSet) {
			return fmt.Errorf("replica %d has not applied the group's state: %+v", survivor, md.Groups)
		}
		return nil
	})
	for k := range c.ctls {
		if k != survivor {
			c.ctls[k].kill()
		}
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), time.Second)
		defer cancel()
		md, err := c.adm.ControllerMetadata(ctx, c.ctlAddrs[survivor])
		if err != nil {
			return err
		}
		if md.Leader != "" || !strings.Contains(md.Warning, "elections are suspended") {
			return fmt.Errorf("leader %q warning %q", md.Leader, md.Warning)
		}
		return nil
	})
	for i := range 20 {
		send(fmt.Sprintf("no-majority-%d", i))
	}
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	md, err := c.adm.ControllerMetadata(ctx, c.ctlAddrs[survivor])
	cancel()
	if err != nil || len(md.Groups) != 1 || md.Groups[0].MasterAddr != c.bAddrs[m] {
		t.Fatalf("master changed without a majority: %+v %v", md, err)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if logCount(t, c.ctls[survivor].log, "no leader: a majority of controller replicas is not reachable") == 0 {
			return errors.New("the replica did not log the missing majority")
		}
		return nil
	})
	code, out := runAdmin(t, "admin", "controller", "-controller", c.ctlAddrs[survivor])
	if code != 0 || !strings.Contains(out, "elections are suspended") {
		t.Fatalf("admin controller without a majority: %d %s", code, out)
	}
}

// runAdmin runs the smartgo binary with args and returns its exit code and
// output.
func runAdmin(t *testing.T, args ...string) (int, string) {
	t.Helper()
	cmd := exec.Command(smartgoBin(t), args...)
	out, err := cmd.CombinedOutput()
	var ee *exec.ExitError
	if errors.As(err, &ee) {
		return ee.ExitCode(), string(out)
	}
	if err != nil {
		t.Fatal(err)
	}
	return 0, string(out)
}
