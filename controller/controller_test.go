package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

func testLogger(t *testing.T) *slog.Logger {
	if os.Getenv("SMARTGO_TEST_LOG") != "" {
		return slog.New(slog.NewTextHandler(os.Stderr, &slog.HandlerOptions{Level: slog.LevelDebug}))
	}
	return slog.New(slog.DiscardHandler)
}

// replicas is a controller group on loopback that can stop and restart
// members on their addresses and data.
type replicas struct {
	t     *testing.T
	opts  []Options
	ctrls []*Controller
	mu    sync.Mutex
}

func startReplicas(t *testing.T, n int, tune func(*Options)) *replicas {
	t.Helper()
	ports := testnet.FreePorts(t, n)
	var peers []Peer
	for _, p := range ports {
		peers = append(peers, Peer{Addr: "127.0.0.1:" + strconv.Itoa(p), RaftAddr: "127.0.0.1:" + strconv.Itoa(p+1)})
	}
	rs := &replicas{t: t}
	dir := t.TempDir()
	for i, p := range peers {
		o := Options{Addr: p.Addr, Advertise: p.Addr, RaftAddr: p.RaftAddr, Dir: filepath.Join(dir, "c"+strconv.Itoa(i)),
			HeartbeatInterval: 100 * time.Millisecond, HeartbeatTimeout: time.Second, ElectionTimeout: 200 * time.Millisecond,
			Logger: testLogger(t).With("replica", i)}
		if n > 1 {
			o.Peers = peers
		}
		if tune != nil {
			tune(&o)
		}
		rs.opts = append(rs.opts, o)
		rs.ctrls = append(rs.ctrls, nil)
		rs.start(i)
	}
	t.Cleanup(func() {
		for i := range rs.ctrls {
			rs.stop(i)
		}
	})
	return rs
}

func (rs *replicas) start(i int) {
	rs.t.Helper()
	var err error
	for try := 0; try < 50; try++ {
		var c *Controller
		if c, err = New(rs.opts[i]); err == nil {
			rs.mu.Lock()
			rs.ctrls[i] = c
			rs.mu.Unlock()
			return
		}
		time.Sleep(50 * time.Millisecond) // a port may linger
	}
	rs.t.Fatalf("start replica %d: %v", i, err)
}

func (rs *replicas) stop(i int) {
	rs.mu.Lock()
	c := rs.ctrls[i]
	rs.ctrls[i] = nil
	rs.mu.Unlock()
	if c != nil {
		_ = c.Close()
	}
}

func (rs *replicas) addrs() []string {
	var out []string
	for _, o := range rs.opts {
		out = append(out, o.Advertise)
	}
	return out
}

// leader waits for a leader among the running replicas and returns its
// index.
func (rs *replicas) leader() int {
	rs.t.Helper()
	idx := -1
	testutil.Eventually(rs.t, 15*time.Second, func() error {
		rs.mu.Lock()
		defer rs.mu.Unlock()
		for i, c := range rs.ctrls {
			if c != nil && c.IsLeader() {
				idx = i
				return nil
			}
		}
		return errors.New("no leader")
	})
	return idx
}

// fakeBroker speaks the broker side of the protocol.
type fakeBroker struct {
	t        *testing.T
	cl       *remoting.Client
	srv      *remoting.Server
	ctrls    []string
	name     string
	token    string
	addr     string
	mu       sync.Mutex
	id       int64 // protected by mu
	epoch    int32 // protected by mu
	end      int64 // protected by mu
	master   bool  // protected by mu
	notified chan protocol.ControllerGroup
	stopHB   chan struct{}
	hbDone   sync.WaitGroup
}

func newFakeBroker(t *testing.T, ctrls []string, name, token string) *fakeBroker {
	t.Helper()
	b := &fakeBroker{t: t, ctrls: ctrls, name: name, token: token, notified: make(chan protocol.ControllerGroup, 64)}
	var err error
	if b.cl, err = remoting.NewClient(remoting.ClientOptions{}); err != nil {
		t.Fatal(err)
	}
	if b.srv, err = remoting.NewServer(remoting.Options{Addr: "127.0.0.1:0"}); err != nil {
		t.Fatal(err)
	}
	b.srv.RegisterFunc(protocol.NotifyBrokerRoleChanged, remoting.PoolDefault, func(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		var g protocol.ControllerGroup
		if err := protocol.DecodeControllerBody(req.Body, &g); err == nil {
			select {
			case b.notified <- g:
			default:
			}
		}
		return nil, nil
	})
	if err := b.srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	b.addr = b.srv.Addr().String()
	t.Cleanup(func() {
		b.stopHeartbeats()
		_ = b.srv.Close()
		_ = b.cl.Close()
	})
	return b
}

func (b *fakeBroker) set(end int64, epoch int32, master bool) {
	b.mu.Lock()
	b.end, b.epoch, b.master = end, epoch, master
	b.mu.Unlock()
}

func (b *fakeBroker) ID() int64 {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.id
}

// call sends a leader-only request to each controller until one accepts.
func (b *fakeBroker) call(code int32, body any) (*protocol.Command, error) {
	enc, err := protocol.EncodeJSON(body)
	if err != nil {
		return nil, err
	}
	var last error
	for _, a := range b.ctrls {
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := b.cl.Invoke(ctx, a, protocol.NewRequest(code, nil, enc))
		cancel()
		if err != nil {
			last = err
			continue
		}
		if resp.Code == protocol.ControllerNotLeader {
			last = fmt.Errorf("%s: %s", a, resp.Remark)
			continue
		}
		return resp, nil
	}
	return nil, last
}

func (b *fakeBroker) register() protocol.ControllerRegisterResponse {
	b.t.Helper()
	var out protocol.ControllerRegisterResponse
	testutil.Eventually(b.t, 15*time.Second, func() error {
		b.mu.Lock()
		body := protocol.ControllerRegister{BrokerAddr: b.addr, BrokerID: b.id, BrokerName: b.name, ClusterName: "C",
			Epoch: b.epoch, HAAddr: b.addr, MaxOffset: b.end, Token: b.token}
		b.mu.Unlock()
		resp, err := b.call(protocol.ControllerRegisterBroker, body)
		if err != nil {
			return err
		}
		if resp.Code != protocol.Success {
			return fmt.Errorf("register: %d %s", resp.Code, resp.Remark)
		}
		return protocol.DecodeControllerBody(resp.Body, &out)
	})
	b.mu.Lock()
	b.id = out.BrokerID
	b.mu.Unlock()
	return out
}

// heartbeat sends one heartbeat to controller a.
func (b *fakeBroker) heartbeat(a string) (*protocol.Command, protocol.ControllerHeartbeatResponse, error) {
	b.mu.Lock()
	hb := protocol.ControllerHeartbeat{BrokerAddr: b.addr, BrokerID: b.id, BrokerName: b.name, ClusterName: "C",
		Epoch: b.epoch, Master: b.master, MaxOffset: b.end}
	b.mu.Unlock()
	var out protocol.ControllerHeartbeatResponse
	enc, _ := protocol.EncodeJSON(hb)
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := b.cl.Invoke(ctx, a, protocol.NewRequest(protocol.BrokerHeartbeat, nil, enc))
	if err != nil {
		return nil, out, err
	}
	if len(resp.Body) > 0 {
		err = protocol.DecodeControllerBody(resp.Body, &out)
	}
	return resp, out, err
}

func (b *fakeBroker) startHeartbeats() {
	b.stopHB = make(chan struct{})
	b.hbDone.Add(1)
	go func() {
		defer b.hbDone.Done()
		t := time.NewTicker(50 * time.Millisecond)
		defer t.Stop()
		for {
			select {
			case <-b.stopHB:
				return
			case <-t.C:
			}
			for _, a := range b.ctrls {
				_, _, _ = b.heartbeat(a)
			}
		}
	}()
}

func (b *fakeBroker) stopHeartbeats() {
	if b.stopHB != nil {
		close(b.stopHB)
		b.hbDone.Wait()
		b.stopHB = nil
	}
}

// metadata asks controller a.
func metadata(t *testing.T, cl *remoting.Client, a string) (protocol.ControllerMetadata, error) {
	t.Helper()
	var md protocol.ControllerMetadata
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, a, protocol.NewRequest(protocol.ControllerGetMetadata, nil, nil))
	if err != nil {
		return md, err
	}
	if resp.Code != protocol.Success {
		return md, fmt.Errorf("metadata: %d %s", resp.Code, resp.Remark)
	}
	return md, protocol.DecodeControllerBody(resp.Body, &md)
}

// groupOn waits until some controller reports group "g" satisfying ok.
func groupOn(t *testing.T, b *fakeBroker, what string, ok func(protocol.ControllerGroup) bool) protocol.ControllerGroup {
	t.Helper()
	var got protocol.ControllerGroup
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, a := range b.ctrls {
			md, err := metadata(t, b.cl, a)
			if err != nil {
				continue
			}
			for _, g := range md.Groups {
				if g.BrokerName == b.name && ok(g) {
					got = g
					return nil
				}
			}
		}
		return fmt.Errorf("no controller reports %s", what)
	})
	return got
}

// alterSSS asks for a sync state set change, waiting for a leader.
func alterSSS(b *fakeBroker, g protocol.ControllerGroup, set ...int64) (*protocol.Command, error) {
	var resp *protocol.Command
	var err error
	deadline := time.Now().Add(15 * time.Second)
	for {
		resp, err = b.call(protocol.ControllerAlterSyncStateSet, protocol.ControllerAlterSyncState{BrokerName: g.BrokerName,
			MasterEpoch: g.MasterEpoch, MasterID: g.MasterID, SyncStateSet: set, SyncStateSetEpoch: g.SyncStateSetEpoch})
		if err == nil || time.Now().After(deadline) {
			return resp, err
		}
		// The outcome is unknown: the change may have been applied.
		b.t.Logf("sync state set change to %v: %v; trying again", set, err)
		time.Sleep(50 * time.Millisecond)
	}
}

// TestControllerFailoverSingleReplica: the first broker becomes master;
// when its heartbeats stop the best live member of the sync state set
// takes over with a higher epoch; the old master is fenced; an operator
// can move the master.
func TestControllerFailoverSingleReplica(t *testing.T) {
	var logs testutil.LogBuffer
	rs := startReplicas(t, 1, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	addrs := rs.addrs()
	bs := []*fakeBroker{newFakeBroker(t, addrs, "g", "t1"), newFakeBroker(t, addrs, "g", "t2"), newFakeBroker(t, addrs, "g", "t3")}
	for _, b := range bs {
		r := b.register()
		if r.HeartbeatTimeoutMillis != 1000 || r.LeaseMillis <= 0 || r.LeaseMillis >= r.HeartbeatTimeoutMillis {
			t.Fatalf("register answer %+v", r)
		}
		b.startHeartbeats()
	}
	g := groupOn(t, bs[0], "a master", func(g protocol.ControllerGroup) bool { return g.MasterID != 0 })
	if g.MasterID != bs[0].ID() || g.MasterEpoch != 1 || !slices.Equal(g.SyncStateSet, []int64{g.MasterID}) {
		t.Fatalf("first election %+v", g)
	}
	bs[0].set(100, 1, true)
	bs[1].set(90, 1, false)
	bs[2].set(100, 1, false)
	resp, err := alterSSS(bs[0], g, bs[0].ID(), bs[1].ID(), bs[2].ID())
	if err != nil || resp.Code != protocol.Success {
		t.Fatalf("expand: %v %v", resp, err)
	}
	g = groupOn(t, bs[0], "a full set", func(g protocol.ControllerGroup) bool { return len(g.SyncStateSet) == 3 })

	// The master stops; broker 3 has the longer log.
	killed := time.Now()
	bs[0].stopHeartbeats()
	g = groupOn(t, bs[0], "a new master", func(g protocol.ControllerGroup) bool { return g.MasterEpoch == 2 })
	if took := time.Since(killed); took < 900*time.Millisecond { // last heartbeat up to 50 ms before
		t.Fatalf("master replaced after %v, before the 1 s timeout", took)
	}
	if g.MasterID != bs[2].ID() || !slices.Equal(g.SyncStateSet, []int64{bs[2].ID()}) {
		t.Fatalf("after failover %+v (want master %d)", g, bs[2].ID())
	}
	select {
	case n := <-bs[1].notified:
		if n.MasterEpoch < 1 {
			t.Fatalf("notification %+v", n)
		}
	case <-time.After(5 * time.Second):
		t.Fatal("no role change notification")
	}
	// The old master comes back still claiming epoch 1: refused.
	resp, hb, err := bs[0].heartbeat(addrs[0])
	if err != nil || resp.Code != protocol.ControllerFencedMasterEpoch || hb.Group.MasterEpoch != 2 {
		t.Fatalf("stale master heartbeat: %v %+v %v", resp, hb, err)
	}
	if want := fmt.Sprintf("refused: broker g/%d claims to be master at epoch 1; the group is at epoch 2", bs[0].ID()); !strings.Contains(logs.String(), want) {
		t.Fatalf("no log line %q in:\n%s", want, logs.String())
	}
	old := g
	old.MasterID, old.MasterEpoch = bs[0].ID(), 1
	if resp, err := alterSSS(bs[0], old, bs[0].ID()); err != nil || resp.Code != protocol.ControllerFencedMasterEpoch {
		t.Fatalf("deposed master's set change: %v %v", resp, err)
	}
	bs[0].set(100, 1, false)
	bs[0].startHeartbeats()

	// Hand-over: broker 2 is not in the set yet.
	elect := func(id int64, unclean bool) *protocol.Command {
		resp, err := bs[0].call(protocol.ControllerElectMaster, protocol.ControllerElect{BrokerName: "g", BrokerID: id, Unclean: unclean})
		if err != nil {
			t.Fatal(err)
		}
		return resp
	}
	if r := elect(bs[1].ID(), false); r.Code == protocol.Success {
		t.Fatal("elected a broker outside the sync state set")
	}
	if r := elect(0, false); r.Code != protocol.ControllerMasterStillExist {
		t.Fatalf("automatic election with a live master: %d %s", r.Code, r.Remark)
	}
	if resp, err := alterSSS(bs[2], g, bs[2].ID(), bs[1].ID()); err != nil || resp.Code != protocol.Success {
		t.Fatalf("expand: %v %v", resp, err)
	}
	if r := elect(bs[1].ID(), false); r.Code != protocol.Success {
		t.Fatalf("hand-over: %d %s", r.Code, r.Remark)
	}
	g = groupOn(t, bs[0], "the hand-over", func(g protocol.ControllerGroup) bool { return g.MasterEpoch == 3 })
	if g.MasterID != bs[1].ID() {
		t.Fatalf("after hand-over %+v", g)
	}
	if r := elect(bs[0].ID(), true); r.Code != protocol.Success {
		t.Fatalf("unclean hand-over: %d %s", r.Code, r.Remark)
	}
}

// TestControllerUncleanElectionSwitch: with the switch on, a master whose
// sync state set has no other live member is replaced by any live member,
// and the log says messages may be lost; with it off (the default) nobody
// is elected and the log says why.
func TestControllerUncleanElectionSwitch(t *testing.T) {
	for _, unclean := range []bool{false, true} {
		t.Run(fmt.Sprintf("unclean=%v", unclean), func(t *testing.T) {
			var logs testutil.LogBuffer
			rs := startReplicas(t, 1, func(o *Options) {
				o.UncleanElection = unclean
				o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
			})
			addrs := rs.addrs()
			bs := []*fakeBroker{newFakeBroker(t, addrs, "g", "t1"), newFakeBroker(t, addrs, "g", "t2")}
			for _, b := range bs {
				b.register()
				b.startHeartbeats()
			}
			g := groupOn(t, bs[0], "a master", func(g protocol.ControllerGroup) bool { return g.MasterID != 0 })
			m, other := bs[0], bs[1]
			if g.MasterID == bs[1].ID() {
				m, other = bs[1], bs[0]
			}
			m.stopHeartbeats()
			if !unclean {
				testutil.Eventually(t, 20*time.Second, func() error {
					if !strings.Contains(logs.String(), "no broker may become master") {
						return errors.New("no log line about the missing candidate")
					}
					return nil
				})
				md, err := metadata(t, other.cl, addrs[0])
				if err != nil || md.Groups[0].MasterID != m.ID() || md.Groups[0].MasterEpoch != 1 {
					t.Fatalf("elected outside the sync state set with the switch off: %+v %v", md.Groups, err)
				}
				return
			}
			g = groupOn(t, other, "an unclean election", func(g protocol.ControllerGroup) bool { return g.MasterEpoch == 2 })
			if g.MasterID != other.ID() || !slices.Equal(g.SyncStateSet, []int64{other.ID()}) {
				t.Fatalf("after the unclean election %+v", g)
			}
			// The election is applied (and seen above) before its
			// proposer logs it: wait for the line.
			testutil.Eventually(t, 20*time.Second, func() error {
				if !strings.Contains(logs.String(), "UNCLEAN") {
					return fmt.Errorf("the unclean election was not logged as such:\n%s", logs.String())
				}
				return nil
			})
		})
	}
}

// TestControllerRaftLeaderLoss: with three replicas, losing the leader
// (and then a second replica's restart) keeps elections going while a
// majority is up; with one replica left there is no leader, heartbeats
// are still answered, nothing is elected, and the metadata says why.
func TestControllerRaftLeaderLoss(t *testing.T) {
	rs := startReplicas(t, 3, nil)
	addrs := rs.addrs()
	l := rs.leader()
	bs := []*fakeBroker{newFakeBroker(t, addrs, "g", "t1"), newFakeBroker(t, addrs, "g", "t2"), newFakeBroker(t, addrs, "g", "t3")}
	for _, b := range bs {
		b.register()
		b.startHeartbeats()
	}
	g := groupOn(t, bs[0], "a master", func(g protocol.ControllerGroup) bool { return g.MasterID != 0 })
	master := func(g protocol.ControllerGroup) *fakeBroker {
		for _, b := range bs {
			if b.ID() == g.MasterID {
				return b
			}
		}
		t.Fatalf("master %d unknown", g.MasterID)
		return nil
	}
	m := master(g)
	ids := []int64{bs[0].ID(), bs[1].ID(), bs[2].ID()}
	if resp, err := alterSSS(m, g, ids...); err != nil || resp.Code != protocol.Success {
		t.Fatalf("expand: %v %v", resp, err)
	}
	groupOn(t, bs[0], "a full set", func(g protocol.ControllerGroup) bool { return len(g.SyncStateSet) == 3 })
	// The same request again, as a master sends it when the answer to the
	// first was lost (a timeout, the leader stepping down after the change
	// was committed): the change is in effect, so it is answered as done.
	if resp, err := alterSSS(m, g, ids...); err != nil || resp.Code != protocol.Success {
		t.Fatalf("repeated expand: %v %v", resp, err)
	}

	// The leader goes; the master dies during the leader election.
	rs.stop(l)
	m.stopHeartbeats()
	g = groupOn(t, bs[0], "a new master", func(g protocol.ControllerGroup) bool { return g.MasterEpoch == 2 })
	if g.MasterID == m.ID() {
		t.Fatalf("dead master re-elected: %+v", g)
	}
	// The replica comes back and catches up; then another one goes.
	rs.start(l)
	testutil.Eventually(t, 15*time.Second, func() error {
		md, err := metadata(t, bs[0].cl, addrs[l])
		if err != nil {
			return err
		}
		for _, gg := range md.Groups {
			if gg.MasterEpoch == 2 {
				return nil
			}
		}
		return errors.New("restarted replica did not catch up")
	})
	l2 := rs.leader()
	rs.stop(l2)
	m2 := master(g)
	if resp, err := alterSSS(m2, g, append([]int64{m2.ID()}, otherLive(bs, m, m2)...)...); err != nil || resp.Code != protocol.Success {
		t.Fatalf("expand after the second loss: %v %v", resp, err)
	}
	g = groupOn(t, bs[0], "the set", func(g protocol.ControllerGroup) bool { return len(g.SyncStateSet) == 2 })
	m2.stopHeartbeats()
	g = groupOn(t, bs[0], "a third master", func(g protocol.ControllerGroup) bool { return g.MasterEpoch == 3 })

	// Down to one replica: no majority. The one kept must have applied
	// the last election first.
	var last int
	for i := range rs.ctrls {
		if i != l2 && rs.ctrls[i] != nil && !rs.ctrls[i].IsLeader() {
			last = i
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		md, err := metadata(t, bs[0].cl, addrs[last])
		if err != nil {
			return err
		}
		if md.Groups[0].MasterEpoch != 3 {
			return fmt.Errorf("replica %d at epoch %d", last, md.Groups[0].MasterEpoch)
		}
		return nil
	})
	for i := range rs.ctrls {
		if i != last {
			rs.stop(i)
		}
	}
	testutil.Eventually(t, 15*time.Second, func() error {
		md, err := metadata(t, bs[0].cl, addrs[last])
		if err != nil {
			return err
		}
		if md.Leader != "" || md.Warning == "" {
			return fmt.Errorf("leader %q warning %q", md.Leader, md.Warning)
		}
		return nil
	})
	m3 := master(g)
	resp, hb, err := m3.heartbeat(addrs[last])
	if err != nil || resp.Code != protocol.Success || hb.Group.MasterID != m3.ID() || hb.Leader != "" {
		t.Fatalf("heartbeat without a majority: %v %+v %v", resp, hb, err)
	}
	m3.stopHeartbeats()
	time.Sleep(2 * time.Second) // longer than the heartbeat timeout: nothing may happen
	md, err := metadata(t, bs[0].cl, addrs[last])
	if err != nil {
		t.Fatal(err)
	}
	if md.Groups[0].MasterEpoch != 3 || md.Groups[0].MasterID != m3.ID() {
		t.Fatalf("elected without a majority: %+v", md.Groups[0])
	}
}

func otherLive(bs []*fakeBroker, dead ...*fakeBroker) []int64 {
	var out []int64
	for _, b := range bs {
		if !slices.Contains(dead, b) {
			out = append(out, b.ID())
		}
	}
	return out
}
