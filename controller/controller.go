package controller

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"path/filepath"
	"sync"
	"time"

	"github.com/hashicorp/raft"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// applyTimeout bounds one Raft proposal.
const applyTimeout = 5 * time.Second

// Controller is one controller replica. Start it with New; stop it with
// Close.
type Controller struct {
	opts  Options
	log   *slog.Logger
	self  Peer
	peers []Peer

	store  *logStore
	trans  *raft.NetworkTransport
	raft   *raft.Raft
	fsm    *fsm
	srv    *remoting.Server // serves the requests
	ownSrv bool             // srv is ours to close
	client *remoting.Client // notifications to brokers

	mu          sync.Mutex
	live        map[liveKey]*liveInfo // last heartbeat per broker; protected by mu
	leaderSince time.Time             // when this replica last became leader, zero if not; protected by mu
	firstSeen   map[string]time.Time  // first registration per group on this leader; protected by mu
	noted       map[string]time.Time  // rate limit of repeated log lines; protected by mu

	closing   bool // set by Close; no new goroutines; protected by mu
	kick      chan struct{}
	ctx       context.Context
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

type liveKey struct {
	group string
	id    int64
}

// liveInfo is a broker's last heartbeat as this replica saw it.
type liveInfo struct {
	at        time.Time
	addr      string
	epoch     int32
	maxOffset int64
	master    bool
}

// New opens the replica's Raft state in opts.Dir (bootstrapping the peer
// configuration on first start), serves the controller requests and
// starts electing masters once this replica leads.
func New(opts Options) (*Controller, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill()
	c := &Controller{opts: opts, log: opts.Logger, live: map[liveKey]*liveInfo{}, firstSeen: map[string]time.Time{},
		noted: map[string]time.Time{}, kick: make(chan struct{}, 1)}
	c.ctx, c.cancel = context.WithCancel(context.Background())
	if err := c.resolvePeers(); err != nil {
		return nil, err
	}
	ok := false
	defer func() {
		if !ok {
			c.wg.Wait()
			_ = c.closeParts()
		}
	}()
	var err error
	if c.store, err = openLogStore(filepath.Join(opts.Dir, "raft"), c.log); err != nil {
		return nil, err
	}
	if err = c.startRaft(); err != nil {
		return nil, err
	}
	if c.client, err = remoting.NewClient(remoting.ClientOptions{Logger: c.log}); err != nil {
		return nil, fmt.Errorf("controller: %w", err)
	}
	c.srv = opts.Server
	if c.srv == nil {
		if c.srv, err = remoting.NewServer(remoting.Options{Addr: opts.Addr, Logger: c.log}); err != nil {
			return nil, fmt.Errorf("controller: %w", err)
		}
		c.ownSrv = true
	}
	c.registerProcessors()
	if c.ownSrv {
		if err = c.srv.Start(context.Background()); err != nil {
			return nil, fmt.Errorf("controller: %w", err)
		}
	}
	c.goFunc(c.run)
	ok = true
	c.log.Info("controller: started", "self", c.self.Addr, "raft", c.self.RaftAddr, "peers", len(c.peers),
		"heartbeatTimeout", opts.HeartbeatTimeout, "uncleanElection", opts.UncleanElection, "dir", opts.Dir)
	return c, nil
}

// resolvePeers finds this replica among the peers (or makes it the only
// one).
func (c *Controller) resolvePeers() error {
	o := &c.opts
	adv := o.Advertise
	if adv == "" {
		if o.Server != nil && o.Server.Addr() != nil {
			adv = defaultHostAddr(o.Server.Addr().String())
		} else {
			adv = defaultHostAddr(o.Addr)
		}
	}
	raftAdv := o.RaftAdvertise
	if raftAdv == "" && o.RaftListener != nil {
		raftAdv = o.RaftListener.Addr().String()
	}
	if len(o.Peers) == 0 {
		if raftAdv == "" {
			raftAdv = defaultHostAddr(o.RaftAddr)
		}
		c.self = Peer{Addr: adv, RaftAddr: raftAdv}
		c.peers = []Peer{c.self}
		return nil
	}
	c.peers = append([]Peer(nil), o.Peers...)
	for _, p := range c.peers {
		if p.Addr == adv || (o.Advertise == "" && raftAdv != "" && p.RaftAddr == raftAdv) {
			c.self = p
			return nil
		}
	}
	return fmt.Errorf("%w: this replica (%s, raft %s) is not among the peers; set its advertised address", ErrInvalidOptions, adv, raftAdv)
}

// streamLayer is raft's TCP stream layer on a listener of ours.
type streamLayer struct {
	net.Listener
	adv net.Addr
}

func (s *streamLayer) Addr() net.Addr { return s.adv }

func (s *streamLayer) Dial(addr raft.ServerAddress, timeout time.Duration) (net.Conn, error) {
	return net.DialTimeout("tcp", string(addr), timeout)
}

func (c *Controller) startRaft() error {
	o := &c.opts
	ln := o.RaftListener
	if ln == nil {
		var err error
		if ln, err = net.Listen("tcp", o.RaftAddr); err != nil {
			return fmt.Errorf("controller: raft listen %s: %w", o.RaftAddr, err)
		}
	}
	adv, err := net.ResolveTCPAddr("tcp", c.self.RaftAddr)
	if err != nil {
		_ = ln.Close()
		return fmt.Errorf("controller: raft address %s: %w", c.self.RaftAddr, err)
	}
	hl := newHCLog(c.log)
	c.trans = raft.NewNetworkTransportWithLogger(&streamLayer{Listener: ln, adv: adv}, 3, 5*time.Second, hl)
	snaps, err := raft.NewFileSnapshotStoreWithLogger(filepath.Join(o.Dir, "snapshots"), 2, hl)
	if err != nil {
		return fmt.Errorf("controller: snapshots: %w", err)
	}
	rc := raft.DefaultConfig()
	rc.LocalID = raft.ServerID(c.self.Addr)
	rc.Logger = hl
	rc.HeartbeatTimeout = o.ElectionTimeout
	rc.ElectionTimeout = o.ElectionTimeout
	rc.LeaderLeaseTimeout = o.ElectionTimeout / 2
	rc.CommitTimeout = min(rc.CommitTimeout, o.ElectionTimeout/10)
	rc.SnapshotThreshold = o.SnapshotThreshold
	rc.TrailingLogs = o.SnapshotThreshold
	rc.SnapshotInterval = 30 * time.Second
	if err := raft.ValidateConfig(rc); err != nil {
		return fmt.Errorf("%w: raft: %v", ErrInvalidOptions, err)
	}
	c.fsm = newFSM(c.log)
	has, err := raft.HasExistingState(c.store, c.store, snaps)
	if err != nil {
		return fmt.Errorf("controller: raft state: %w", err)
	}
	if c.raft, err = raft.NewRaft(rc, c.fsm, c.store, c.store, snaps, c.trans); err != nil {
		return fmt.Errorf("controller: raft: %w", err)
	}
	if !has {
		cfg := raft.Configuration{}
		for _, p := range c.peers {
			cfg.Servers = append(cfg.Servers, raft.Server{Suffrage: raft.Voter, ID: raft.ServerID(p.Addr), Address: raft.ServerAddress(p.RaftAddr)})
		}
		if err := c.raft.BootstrapCluster(cfg).Error(); err != nil && !errors.Is(err, raft.ErrCantBootstrap) {
			return fmt.Errorf("controller: bootstrap: %w", err)
		}
		c.log.Info("controller: bootstrapped a new controller group", "peers", len(c.peers))
	}
	return nil
}

// Addr returns this replica's advertised remoting address.
func (c *Controller) Addr() string { return c.self.Addr }

// RaftAddr returns this replica's Raft address.
func (c *Controller) RaftAddr() string { return c.self.RaftAddr }

// IsLeader reports whether this replica is the Raft leader.
func (c *Controller) IsLeader() bool { return c.raft.State() == raft.Leader }

// Leader returns the leader's remoting address, or "".
func (c *Controller) Leader() string {
	_, id := c.raft.LeaderWithID()
	return string(id)
}

// Close stops the replica: no more elections, Raft shut down, its server
// closed (unless it was given one). It is idempotent.
func (c *Controller) Close() error {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.closing = true
		c.mu.Unlock()
		c.cancel()
		c.wg.Wait()
		// A snapshot now lets the replica answer with the current state
		// as soon as it restarts, before it hears from a leader.
		if c.raft != nil {
			if err := c.raft.Snapshot().Error(); err != nil && !errors.Is(err, raft.ErrNothingNewToSnapshot) {
				c.log.Warn("controller: snapshot at shutdown", "err", err)
			}
		}
		c.closeErr = c.closeParts()
		c.log.Info("controller: stopped", "self", c.self.Addr)
	})
	return c.closeErr
}

// goFunc runs fn on a goroutine Close waits for (nothing once closing).
func (c *Controller) goFunc(fn func()) {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.closing {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		fn()
	}()
}

func (c *Controller) closeParts() error {
	c.cancel()
	var errs []error
	if c.ownSrv && c.srv != nil {
		errs = append(errs, c.srv.Close())
	}
	if c.raft != nil {
		errs = append(errs, c.raft.Shutdown().Error())
	}
	if c.trans != nil {
		errs = append(errs, c.trans.Close())
	}
	if c.client != nil {
		errs = append(errs, c.client.Close())
	}
	if c.store != nil {
		errs = append(errs, c.store.Close())
	}
	return errors.Join(errs...)
}

// propose replicates one command and returns its result on this replica.
func (c *Controller) propose(cmd *command) (result, error) {
	b, err := encodeCommand(cmd)
	if err != nil {
		return result{}, err
	}
	f := c.raft.Apply(b, applyTimeout)
	if err := f.Error(); err != nil {
		if errors.Is(err, raft.ErrNotLeader) || errors.Is(err, raft.ErrLeadershipLost) || errors.Is(err, raft.ErrLeadershipTransferInProgress) {
			return result{}, fmt.Errorf("%w: %v", ErrNotLeader, err)
		}
		if errors.Is(err, raft.ErrRaftShutdown) {
			return result{}, ErrClosed
		}
		return result{}, fmt.Errorf("controller: apply: %w", err)
	}
	r, ok := f.Response().(result)
	if !ok {
		return result{}, fmt.Errorf("controller: apply returned %T", f.Response())
	}
	return r, nil
}

// heard records a broker's heartbeat (or registration).
func (c *Controller) heard(group string, id int64, addr string, epoch int32, maxOffset int64, master bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	k := liveKey{group, id}
	li := c.live[k]
	if li == nil {
		li = &liveInfo{}
		c.live[k] = li
	}
	li.at, li.addr, li.epoch, li.maxOffset, li.master = time.Now(), addr, epoch, maxOffset, master
}

// liveness returns a broker's heartbeat view: alive, epoch, end.
func (c *Controller) liveness(group string, id int64, now time.Time) (bool, int32, int64) {
	c.mu.Lock()
	defer c.mu.Unlock()
	li := c.live[liveKey{group, id}]
	if li == nil {
		return false, 0, 0
	}
	return now.Sub(li.at) < c.opts.HeartbeatTimeout, li.epoch, li.maxOffset
}

// masterClaim looks at the live members of g as their heartbeats last
// told: the one acting as master at the highest epoch (0: none), that
// epoch, the highest epoch any live member reported (top), and whether
// another live member acts as master at that same epoch (tie).
func (c *Controller) masterClaim(g *groupState, now time.Time) (id int64, epoch, top int32, tie bool) {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range g.ids() {
		li := c.live[liveKey{g.Name, m}]
		if li == nil || now.Sub(li.at) >= c.opts.HeartbeatTimeout {
			continue
		}
		top = max(top, li.epoch)
		if !li.master {
			continue
		}
		switch {
		case id == 0 || li.epoch > epoch:
			id, epoch, tie = m, li.epoch, false
		case li.epoch == epoch:
			tie = true
		}
	}
	return id, epoch, top, tie
}

// view is the wire form of g with this replica's liveness.
func (c *Controller) view(g *groupState) protocol.ControllerGroup {
	now := time.Now()
	return g.view(func(id int64) (bool, int32, int64) { return c.liveness(g.Name, id, now) })
}

// note logs at most once per period for a key; it returns whether the
// caller should log.
func (c *Controller) note(key string, period time.Duration) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	now := time.Now()
	if t, ok := c.noted[key]; ok && now.Sub(t) < period {
		return false
	}
	c.noted[key] = now
	return true
}

func (c *Controller) wake() {
	select {
	case c.kick <- struct{}{}:
	default:
	}
}
