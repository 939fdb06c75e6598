package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"reflect"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
	"github.com/smartgo/smartgo/store"
)

// State store errors (kept here rather than errors.go, which another
// change owns; the coordinator may move them).
var (
	// ErrStateStoreNotOwner: this broker does not own the shard (a slave,
	// or a shard number outside the topic). Sent as ServiceNotAvailable.
	ErrStateStoreNotOwner = errors.New("broker: state store shard not owned here")
	// ErrStateStoreUnavailable: the entry could not be appended to the
	// log (nothing changed). Sent as ServiceNotAvailable.
	ErrStateStoreUnavailable = errors.New("broker: state store unavailable")
	// ErrStateStoreFailed: the shard stopped after an apply or log error
	// (fail-stop); a restart replays the log. Sent as SystemError.
	ErrStateStoreFailed = errors.New("broker: state store shard failed")
)

// StateStoreTopic is the system topic whose queues are the state store's
// shard logs: queue i holds the log entries (statestore log entry format,
// one per record body) of shard i. The broker hosting the queue's master
// owns the shard.
const StateStoreTopic = "%SYS_STATESTORE"

// Defaults for StateStoreOptions.
const (
	DefaultStateStoreShards   = 8
	DefaultSnapshotInterval   = time.Minute
	defaultStateStoreMaxDelay = time.Second // longest sleep of the expiry loop
)

// StateStoreOptions configures the state store hosted by a broker.
// Zero values take the documented defaults.
type StateStoreOptions struct {
	// Shards is the number of shards, i.e. queues of StateStoreTopic
	// (default 8). It is FROZEN once the topic exists: keys are mapped to
	// shards by statestore.ShardOf(key, Shards).
	Shards int
	// Engine configures each shard's engine (see statestore.Options; the
	// fields that shape applied state must match on every replica).
	Engine statestore.Options
	// Dir holds the shard snapshots (default <store root>/statestore).
	Dir string
	// SnapshotInterval is the period of snapshots (default 1 minute); a
	// snapshot is also written on Close.
	SnapshotInterval time.Duration
	// Logger receives events; nil uses the broker's.
	Logger *slog.Logger
}

// DefaultStateStoreOptions returns the defaults (Dir stays empty: it
// follows the broker's store root).
func DefaultStateStoreOptions() StateStoreOptions {
	o := StateStoreOptions{Engine: statestore.DefaultOptions()}
	o.fill("")
	o.Dir = ""
	return o
}

// Validate reports the first invalid field.
func (o *StateStoreOptions) Validate() error {
	if o.Shards < 0 || o.Shards > 1024 {
		return fmt.Errorf("%w: state store shards %d not in 0..1024", ErrBadOptions, o.Shards)
	}
	if o.SnapshotInterval < 0 {
		return fmt.Errorf("%w: negative state store interval", ErrBadOptions)
	}
	if err := o.Engine.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	return nil
}

func (o *StateStoreOptions) fill(root string) {
	if o.Shards == 0 {
		o.Shards = DefaultStateStoreShards
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(root, "statestore")
	}
	if o.SnapshotInterval == 0 {
		o.SnapshotInterval = DefaultSnapshotInterval
	}
}

// StateStore hosts the state store shards of one broker: on a master it
// serves StateStoreInvoke (Prepare, append the entry to the shard's queue,
// Apply, answer), expires keys on time and snapshots; on a slave it applies
// the replicated queues to keep the same tables. Open it after the broker
// with OpenStateStore and close it before the broker.
type StateStore struct {
	b       *Broker
	opts    StateStoreOptions
	log     *slog.Logger
	shards  []*ssShard
	host    shardLog // host.slave: the shards follow the log and serve nothing
	metrics *ssMetrics

	connMu sync.Mutex
	conns  map[string]ssPeer // client id -> front end that last carried its request; protected by connMu
	sinks  sync.Map          // protocol.StateStoreSink -> *ssSinkPeer
	// lastSink is the peer sinkPeer returned last: a process has one
	// in-process front end, whose every request then finds its peer
	// without a lookup in sinks.
	lastSink atomic.Pointer[ssSinkPeer]
	// watched is set by the first request that may register a watch (a
	// KEYNOTIFY, or a payload that did not parse) and stays set: until
	// then no client can have a watch, so no notification needs conns
	// and admit leaves it alone (its lock, and a lookup of the client id
	// in a table of every client, were 1-2 % of a GET's CPU).
	watched atomic.Bool

	wake chan struct{} // nudges the expiry loop (expiryDue)
	// expiryAt is when the expiry loop looks next, in ms of the broker's
	// clock: math.MaxInt64 while it looks (every apply that leaves a
	// key to expire nudges it then). An apply nudges the loop only when
	// its shard's next expiry comes before expiryAt, so a SET without an
	// expiry wakes no goroutine.
	expiryAt     atomic.Int64
	expiryRounds atomic.Int64 // rounds of the expiry loop (tests)
	// wallClock: the broker's clock is time.Now, so a caller's reading
	// of the wall clock may stand in for one (InvokeDeferred).
	wallClock bool
}

// ssSnapshotter is a shard engine's snapshot side: its state is copied
// under the shard's mutex and encoded after (freezer).
type ssSnapshotter struct{ *statestore.Engine }

func (s ssSnapshotter) freeze() io.WriterTo { return s.Freeze() }

// ssShard is one shard: its engine and its place in the log.
type ssShard struct {
	logShard
	eng *statestore.Engine
	// entry is the buffer of the last mutation's log entry, reused by the
	// next (the store copies it, Apply keeps none of it); protected by mu.
	entry  []byte
	pend   ssPendQueue // mutations put and not applied yet (statestore_defer.go); protected by mu
	held   ssHeldNotes // notifications of entries not on the sync state set yet (statestore_held.go)
	outbox ssOutbox    // notifications applied and not routed yet, in log order (statestore_order.go)
}

// maxReusedEntry bounds the entry buffer a shard keeps between requests.
const maxReusedEntry = 64 << 10

// ssPeer is where the notifications of a client go when a request of
// another front end causes them: the front end that carried the client's
// last request. Peers are compared with ==.
type ssPeer interface {
	push([]protocol.StateStoreNotification) error
}

// ssConnPeer is a front end behind a remoting connection (StateStoreNotify).
// push runs on the goroutine of the request that caused the change (or of
// a later change of its shard: statestore_order.go); the notice is queued
// for the connection's writer and never waits for a front end that
// stopped reading (it is cut off after WriteTimeout).
type ssConnPeer struct{ c *remoting.Conn }

func (p ssConnPeer) push(list []protocol.StateStoreNotification) error {
	body := (&protocol.StateStoreResponse{Notifications: list}).AppendBody(nil)
	if err := p.c.OnewayNoWait(protocol.NewRequest(protocol.StateStoreNotify, nil, body)); err != nil {
		return fmt.Errorf("%s: %w", p.c.RemoteAddr(), err)
	}
	return nil
}

// ssSinkPeer is an in-process front end (InvokeLocal). One is made per
// sink (StateStore.sinkPeer), so that a request does not box a new one.
type ssSinkPeer struct{ s protocol.StateStoreSink }

func (p *ssSinkPeer) push(list []protocol.StateStoreNotification) error {
	p.s.PushStateStoreNotifications(list)
	return nil
}

// OpenStateStore creates (or checks) StateStoreTopic, registers the state
// store request codes with the broker's server, restores every shard from
// its snapshot and the log after it and starts the expiry, snapshot and
// (on a slave) replication loops. When the consume queues cannot be
// rebuilt yet (a disk that stays full after a crash) it returns without
// the shards: requests get ErrStateStoreUnavailable and Err says why until
// they are open, which happens by itself once the queues are written
// (logshard_open.go).
func OpenStateStore(b *Broker, opts StateStoreOptions) (*StateStore, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill(b.opts.Store.Root)
	lg := opts.Logger
	if lg == nil {
		lg = b.log
	}
	s := &StateStore{b: b, opts: opts, metrics: newSSMetrics(), log: lg.With("component", "statestore"),
		conns: map[string]ssPeer{}, wake: make(chan struct{}, 1),
		wallClock: reflect.ValueOf(b.now).Pointer() == reflect.ValueOf(time.Now).Pointer()}
	s.expiryAt.Store(math.MaxInt64)
	// Controller mode: a slave until the broker's promotion reaches the
	// state store (becameMaster).
	slave := b.isSlave() || b.controlled()
	if !slave {
		tc, err := b.topics.CreateSystemTopic(StateStoreTopic, int32(opts.Shards), PermRW)
		if err != nil {
			return nil, fmt.Errorf("broker: state store topic: %w", err)
		}
		if int(tc.WriteQueueNums) != opts.Shards {
			return nil, fmt.Errorf("%w: %s has %d queues, state store configured for %d shards (the shard count is frozen)",
				ErrBadOptions, StateStoreTopic, tc.WriteQueueNums, opts.Shards)
		}
		// Publish the shard route now, not at the next registration.
		b.triggerRegister()
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: state store dir: %w", err)
	}
	s.host = shardLog{b: b, topic: StateStoreTopic, dir: opts.Dir, magic: ssSnapMagic, what: "state store", log: s.log,
		errUnavailable: ErrStateStoreUnavailable, errFailed: ErrStateStoreFailed, errNotOwner: ErrStateStoreNotOwner}
	s.host.slave.Store(slave)
	fresh, err := statestore.New(opts.Engine, s.log)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	var empty bytes.Buffer
	if err := fresh.Snapshot(&empty); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	s.host.empty = empty.Bytes()
	ctx, cancel := context.WithCancel(context.Background())
	s.host.cancel = cancel
	// The request codes answer from now on: ErrStateStoreUnavailable
	// until the shards are open (admit).
	if ir, ok := any(b.srv).(inlineRegistrar); ok && b.opts.Store.FlushMode == store.FlushAsync && b.opts.Role != RoleSyncMaster {
		// Nothing in Do waits for a disk flush or a slave: run it on the
		// connection's reader while the pool is idle (no hand-off).
		ir.RegisterInline(protocol.StateStoreInvoke, remoting.PoolSend, remoting.ProcessorFunc(s.processInvoke))
	} else {
		b.srv.RegisterFunc(protocol.StateStoreInvoke, remoting.PoolSend, s.processInvoke)
	}
	b.srv.RegisterFunc(protocol.StateStoreDropClient, remoting.PoolDefault, s.processDropClient)
	b.srv.RegisterFunc(protocol.StateStoreScan, remoting.PoolAdmin, s.processScan)
	b.srv.OnConnClose(s.connClosed)
	if err := s.host.start(ctx, s, func() error { return s.load(ctx, slave) }); err != nil {
		return nil, err
	}
	return s, nil
}

// load restores every shard from its snapshot and the log after it and
// starts the expiry, snapshot and (on a slave) replication loops: the
// state store is open (shardLog.open runs it once the consume queues
// cover the commitlog).
func (s *StateStore) load(ctx context.Context, slave bool) error {
	for i := 0; i < s.opts.Shards; i++ {
		eng, err := statestore.New(s.opts.Engine, s.log)
		if err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		sh := &ssShard{logShard: logShard{id: int32(i), snap: ssSnapshotter{eng}}, eng: eng}
		sh.replay = func(entry []byte, storeTime time.Time, _ int64) error {
			_, err := eng.Apply(entry, storeTime)
			return err
		}
		start := time.Now()
		if err := s.host.loadSnapshot(&sh.logShard); err != nil {
			return err
		}
		s.host.replayAll(&sh.logShard, start)
		s.shards = append(s.shards, sh)
		s.host.shards = append(s.host.shards, &sh.logShard)
	}
	if !slave {
		s.prepareQueues()
	}
	s.goFunc(func() { s.host.snapshotLoop(ctx, s.opts.SnapshotInterval) })
	if slave {
		s.goFunc(func() { s.host.replicateLoop(ctx) })
	}
	if !slave || s.b.controlled() {
		s.goFunc(func() { s.expiryLoop(ctx) })
	}
	s.log.Info("state store open", "shards", s.opts.Shards, "slave", s.host.slave.Load(), "dir", s.opts.Dir)
	return nil
}

// becameMaster implements roleListener (controller mode): the shard topic
// exists, then the shards take over once caught up.
func (s *StateStore) becameMaster(context.Context) error {
	tc, err := s.b.topics.CreateSystemTopic(StateStoreTopic, int32(s.opts.Shards), PermRW)
	if err != nil {
		return fmt.Errorf("broker: state store topic: %w", err)
	}
	if int(tc.WriteQueueNums) != s.opts.Shards {
		return fmt.Errorf("%w: %s has %d queues, state store configured for %d shards", ErrBadOptions, StateStoreTopic, tc.WriteQueueNums, s.opts.Shards)
	}
	s.host.becameMaster()
	s.prepareQueues()
	s.nudge()
	return nil
}

// prepareQueues makes the files of the shards' queues that have none yet
// (store.PrepareQueue), so that a shard's first SET does not make them in
// the dispatch of its round, on the poller that serves it. A failure is
// not the state store's: the queue is then made by its first entry, as
// before, which reports the cause.
func (s *StateStore) prepareQueues() {
	for i := range s.shards {
		if err := s.b.store.PrepareQueue(StateStoreTopic, int32(i)); err != nil {
			s.log.Warn("state store: shard queue not prepared", "shard", i, "err", err)
		}
	}
}

// becameSlave implements roleListener. The KEYNOTIFY registrations of
// the front ends are left behind with the role: their connections are
// closed, which tells each front end (router.Options.OnMasterChange) to
// register its clients' watches on the new master.
func (s *StateStore) becameSlave() {
	s.host.becameSlave()
	for _, sh := range s.shards {
		sh.held.drop()
	}
	s.connMu.Lock()
	var fronts []*remoting.Conn
	for _, p := range s.conns {
		if c, ok := p.(ssConnPeer); ok && !slices.Contains(fronts, c.c) {
			fronts = append(fronts, c.c)
		}
	}
	s.connMu.Unlock()
	for _, c := range fronts {
		_ = c.Close()
	}
}

// truncated implements roleListener.
func (s *StateStore) truncated(offset int64) error { return s.host.truncated(offset) }

func (s *StateStore) goFunc(fn func()) { s.host.goFunc(fn) }

// Close stops the loops and writes a final snapshot of every healthy
// shard. It is idempotent. Call it before Broker.Close.
func (s *StateStore) Close() error { return s.host.close(s) }

// stop ends the loops without a snapshot (tests that simulate a crash).
func (s *StateStore) stop() { s.host.stop() }

// Shards returns the number of shards.
func (s *StateStore) Shards() int { return s.opts.Shards }

// Engine returns shard i's engine (for inspection: Get, Stats, Snapshot).
func (s *StateStore) Engine(i int) *statestore.Engine { return s.shards[i].eng }

// Err returns the error that stopped a shard, if any.
func (s *StateStore) Err() error { return s.host.err() }

// Do serves one request in process: shard ownership checks, Prepare,
// append, Apply. The notifications a change causes are pushed, each to the
// front end connection that carried its client's last request
// (StateStoreNotify), from's too, in the shard's log order
// (statestore_order.go), a KEYNOTIFY ... SINCE's backlog too: the response
// carries none. from may be nil (in-process callers), and then every
// notification is returned and none pushed.
func (s *StateStore) Do(ctx context.Context, req *protocol.StateStoreRequest, from *remoting.Conn) (*protocol.StateStoreResponse, error) {
	var peer ssPeer
	if from != nil {
		peer = ssConnPeer{from}
	}
	resp := new(protocol.StateStoreResponse)
	if err := s.serve(ctx, req, nil, peer, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// InvokeLocal serves req for a front end in the same process (the MQTT
// bridge of `smartgo standalone`), without the remoting round trip: it is
// Do with sink in place of the connection: the notifications of clients
// whose last request came through sink go to sink, those of clients last
// seen on another front end to it, whoever caused them (this request,
// another front end's, an expiry, a KEYNOTIFY ... SINCE's backlog), in the
// shard's log order; the response carries none. sink is called on the
// goroutine of whichever change routes the notices (this call's among
// them), with the shard's notices held back until it returns: it must not
// block. A nil
// sink returns every notification, pushing none.
// cmd, when not nil, is statestore.ParseCommand(req.Payload) done by the
// front end (to pick the shard): it is used as it is, so the payload is
// parsed once on its way. The response goes into resp, the caller's (a
// front end reuses one per request: nothing is allocated for it), set
// only when the error is nil. Errors wrap ErrStateStoreNotOwner or
// ErrStateStoreUnavailable (try again, maybe elsewhere) or
// ErrStateStoreFailed.
func (s *StateStore) InvokeLocal(ctx context.Context, req *protocol.StateStoreRequest, cmd *statestore.Command, sink protocol.StateStoreSink, resp *protocol.StateStoreResponse) error {
	if sink == nil {
		return s.serve(ctx, req, cmd, nil, resp)
	}
	return s.serve(ctx, req, cmd, s.sinkPeer(sink), resp)
}

// Waits reports whether serving cmd (nil: a payload that did not parse)
// may wait: a mutation that reaches the log for a sync flush's group
// commit or a sync master's slave, any request in controller mode for
// the sync state set (the read barrier). Otherwise Do and InvokeLocal
// take no lock that is held across a wait.
func (s *StateStore) Waits(cmd *statestore.Command) bool {
	if s.b.controlled() {
		return true
	}
	if cmd == nil {
		return false
	}
	switch cmd.Verb {
	case statestore.VerbSet, statestore.VerbDel, statestore.VerbVDel:
		return s.b.opts.Store.FlushMode != store.FlushAsync || s.b.opts.Role == RoleSyncMaster
	}
	return false
}

// sinkPeer returns the peer standing for sink (the same one each time).
func (s *StateStore) sinkPeer(sink protocol.StateStoreSink) ssPeer {
	if p := s.lastSink.Load(); p != nil && p.s == sink {
		return p
	}
	p, ok := s.sinks.Load(sink)
	if !ok {
		p, _ = s.sinks.LoadOrStore(sink, &ssSinkPeer{sink})
	}
	sp := p.(*ssSinkPeer)
	s.lastSink.Store(sp)
	return sp
}

// serve serves Do and InvokeLocal: cmd nil parses req.Payload, once (the
// metrics and the engine use the result); from nil returns every
// notification.
func (s *StateStore) serve(ctx context.Context, req *protocol.StateStoreRequest, cmd *statestore.Command, from ssPeer, resp *protocol.StateStoreResponse) (err error) {
	start, _ := s.metrics.timed()
	if cmd == nil {
		if c, err := statestore.ParseCommand(req.Payload); err == nil {
			cmd = &c
		}
	}
	defer func() { s.metrics.observe(cmd, start, err) }()
	return s.do(ctx, req, cmd, from, resp)
}

// admit checks that this broker serves req's shard now and records from
// as the front end of req's client (once any request may have registered
// a watch: see watched); it returns the shard. cmd is req's parsed
// payload, nil when it did not parse.
func (s *StateStore) admit(req *protocol.StateStoreRequest, cmd *statestore.Command, from ssPeer) (*ssShard, error) {
	if s.host.slave.Load() {
		return nil, fmt.Errorf("%w: slave", ErrStateStoreNotOwner)
	}
	if ok, why := s.b.writable(); !ok {
		return nil, fmt.Errorf("%w: the broker %s", ErrStateStoreNotOwner, why)
	}
	if err := s.host.notOpen(); err != nil {
		return nil, err
	}
	if req.Shard < 0 || int(req.Shard) >= len(s.shards) {
		return nil, fmt.Errorf("%w: shard %d of %d", ErrStateStoreNotOwner, req.Shard, len(s.shards))
	}
	if !s.watched.Load() && (cmd == nil || cmd.Verb == statestore.VerbKeyNotify) {
		s.watched.Store(true) // before the registration, which Prepare makes
	}
	if from != nil && req.ClientID != "" && s.watched.Load() {
		s.connMu.Lock()
		if s.conns[req.ClientID] != from { // usually the same front end as last time
			s.conns[req.ClientID] = from
		}
		s.connMu.Unlock()
	}
	return s.shards[req.Shard], nil
}

// engineRequest is the engine's request for req; cmd is the parsed
// payload, nil after a parse error (Prepare parses again and answers it).
func (s *StateStore) engineRequest(req *protocol.StateStoreRequest, cmd *statestore.Command) statestore.Request {
	r := statestore.Request{Payload: req.Payload, ClientID: req.ClientID, DedupKey: req.DedupKey,
		DedupTTL: time.Duration(req.DedupTTLMillis) * time.Millisecond}
	if len(r.DedupKey) == 0 {
		r.DedupKey = nil
	}
	// The properties' fields as SetUserProperty would set them, without
	// its switch on the names.
	if req.HasTimestamp {
		r.Timestamp, r.HasTimestamp = req.Timestamp, true
	}
	if req.HasFencingToken {
		r.FencingToken, r.HasFencingToken = req.FencingToken, true
	}
	r.Command = cmd
	return r
}

// do serves one request into resp; cmd is the parsed req.Payload, nil
// when it did not parse (the engine answers the error).
func (s *StateStore) do(ctx context.Context, req *protocol.StateStoreRequest, cmd *statestore.Command, from ssPeer, resp *protocol.StateStoreResponse) error {
	sh, err := s.admit(req, cmd, from)
	if err != nil {
		return err
	}
	rv := s.engineRequest(req, cmd)
	r := &rv
	if cmd == nil || cmd.Verb == statestore.VerbGet {
		// A GET (or a request the engine rejects) is answered by Prepare
		// alone, from the applied table: it needs no log position, so it
		// does not wait behind another request's append (and its flush
		// under sync flush) for sh.mu.
		if sh.down.Load() {
			sh.mu.Lock()
			err := sh.failed
			sh.mu.Unlock()
			return fmt.Errorf("%w: shard %d: %w", ErrStateStoreFailed, sh.id, err)
		}
		end := sh.applied.Load()
		if _, out, needsLog := sh.eng.Prepare(r, s.b.now()); !needsLog {
			if err := s.host.readBarrier(ctx, end); err != nil {
				return err
			}
			s.reply(resp, out, from)
			return nil
		}
		// Unreachable (Prepare logs only SET, DEL and VDEL); a version was
		// issued out of order, so stop rather than diverge.
		sh.mu.Lock()
		sh.fail(fmt.Errorf("broker: state store shard %d: a read asked for the log", sh.id))
		err := sh.failed
		sh.mu.Unlock()
		return fmt.Errorf("%w: %w", ErrStateStoreFailed, err)
	}
	sh.mu.Lock()
	s.applyPendingLocked(sh) // mutations deferred before this one first (log order)
	if sh.failed != nil {
		err := sh.failed
		sh.mu.Unlock()
		return fmt.Errorf("%w: shard %d: %w", ErrStateStoreFailed, sh.id, err)
	}
	entry, out, needsLog := sh.eng.PrepareAppend(sh.entry[:0], r, s.b.now())
	var end int64
	var queued *ssNotes // out's notifications, routed in log order
	controlled := s.b.controlled()
	cached := controlled && !needsLog && cmd != nil && cmd.Verb != statestore.VerbKeyNotify &&
		len(out.Reply.Payload) > 0 && out.Reply.Payload[0] != '-'
	if cached {
		// A mutation answered without the log: a repeated request's
		// cached reply (or an error reply). Its entry may not be on the
		// sync state set yet (its first answer said so): answered only
		// once it is, like a read.
		end = sh.lastEnd
	}
	if needsLog {
		if cap(entry) <= maxReusedEntry {
			sh.entry = entry
		}
		var err error
		out, err = s.appendApply(ctx, sh, entry)
		if err != nil {
			sh.mu.Unlock()
			return err
		}
		end = sh.lastEnd
		queued = s.queueNotes(sh, out.Notifications, from == nil)
	} else if cmd != nil && cmd.Verb == statestore.VerbKeyNotify && !cmd.Stop && len(out.Reply.Payload) > 0 && out.Reply.Payload[0] == '+' {
		// A registration answers the shard's clock as its version: the
		// front end keeps it (it is not the client's) to register the
		// watch again on another master from there (KEYNOTIFY ...
		// SINCE), should this one change.
		out.Reply.Version = sh.eng.Clock()
		// A SINCE backlog is routed as the shard's changes' notices are,
		// queued behind them: a change made after the registration (its
		// notices queued after these) never reaches the watcher first.
		queued = s.queueNotes(sh, out.Notifications, from == nil)
	}
	sh.mu.Unlock()
	if needsLog {
		s.expiryDue(sh)
		// A sync master answers once a slave has the entry too. The entry
		// is applied either way; a late slave is logged, not reported (a
		// redelivered request gets the cached reply).
		if code := s.b.waitSlave(ctx, protocol.Success, end, true); code != protocol.Success {
			if s.b.controlled() {
				// Not on every member of the sync state set: a failover
				// may take it back, so it is not acknowledged, and its
				// notifications wait until it is on the set
				// (statestore_held.go). A retry with the same dedup key
				// gets the cached reply if it survives.
				if s.unqueue(sh, queued) {
					s.hold(sh, end, out.Notifications)
				}
				return fmt.Errorf("%w: shard %d: entry not on the sync state set (code %d)", ErrStateStoreUnavailable, sh.id, code)
			}
			s.log.Warn("state store entry not acknowledged by a slave", "shard", sh.id, "code", code)
		}
	}
	if cached {
		if err := s.host.readBarrier(ctx, end); err != nil {
			return err
		}
	}
	if controlled && (needsLog || cached) {
		s.releaseHeld(sh, end) // what the shard held before this entry first
	}
	s.replyQueued(resp, out, from, sh, queued)
	return nil
}

// reply sets resp to the response for an outcome, routing its
// notifications.
func (s *StateStore) reply(resp *protocol.StateStoreResponse, out statestore.Outcome, from ssPeer) {
	*resp = protocol.StateStoreResponse{Reply: out.Reply.Payload, Version: out.Reply.VersionString()}
	resp.Notifications = s.route(out.Notifications, from, from == nil)
}

// replyQueued is reply for an outcome whose notifications were queued
// (queued, nil when there were none) on sh: they are routed after every
// one queued before them.
func (s *StateStore) replyQueued(resp *protocol.StateStoreResponse, out statestore.Outcome, from ssPeer, sh *ssShard, queued *ssNotes) {
	if queued == nil {
		s.reply(resp, out, from)
		return
	}
	*resp = protocol.StateStoreResponse{Reply: out.Reply.Payload, Version: out.Reply.VersionString()}
	resp.Notifications = s.routeQueued(sh, queued)
}

// appendApply appends entry to the shard's queue and applies it. Called
// with sh.mu held. An append failure leaves the engine unchanged; an Apply
// failure stops the shard.
func (s *StateStore) appendApply(ctx context.Context, sh *ssShard, entry []byte) (statestore.Outcome, error) {
	var out statestore.Outcome
	err := s.host.appendLocked(ctx, &sh.logShard, entry, func(storeTime time.Time, _ int64) error {
		var err error
		out, err = sh.eng.Apply(entry, storeTime)
		return err
	})
	return out, err
}

// route converts notifications, pushes those of clients last seen on a
// front end other than from (nil: any), and returns the rest (with
// keepAll, all of them, pushing none).
func (s *StateStore) route(ns []statestore.Notification, from ssPeer, keepAll bool) []protocol.StateStoreNotification {
	if len(ns) == 0 {
		return nil
	}
	var mine []protocol.StateStoreNotification
	other := map[ssPeer][]protocol.StateStoreNotification{}
	s.connMu.Lock()
	for _, n := range ns {
		w := protocol.StateStoreNotification{ClientID: n.ClientID, Key: []byte(n.Key), Op: uint8(n.Op),
			Value: n.Value, Version: n.Version.String()}
		c := s.conns[n.ClientID]
		if keepAll || (c == from && c != nil) {
			mine = append(mine, w)
		} else if c != nil {
			other[c] = append(other[c], w)
		}
	}
	s.connMu.Unlock()
	for c, list := range other {
		if err := c.push(list); err != nil {
			s.log.Debug("state store notify push", "err", err)
		}
	}
	return mine
}

// DropClient removes a client's KEYNOTIFY registrations on every shard.
func (s *StateStore) DropClient(clientID string) int { return s.dropClient(clientID, nil) }

// DropClientOf is DropClient for the in-process front end sink, which
// learned that the client's connection to it ended (see dropClient).
func (s *StateStore) DropClientOf(clientID string, sink protocol.StateStoreSink) int {
	return s.dropClient(clientID, s.sinkPeer(sink))
}

// dropClient removes a client's KEYNOTIFY registrations on every shard,
// unless from (not nil) is not the front end that carried the client's
// last request here: the client has moved to another front end (it
// reconnected through another bridge node) and may have registered again
// through it before from learned that its old connection ended, so the
// watches are the new front end's. connMu is held throughout: a request
// through the new front end is admitted either before the check (and its
// registration kept) or after the drop.
func (s *StateStore) dropClient(clientID string, from ssPeer) int {
	if s.host.notOpen() != nil {
		return 0 // no shard holds anything of it yet
	}
	s.connMu.Lock()
	defer s.connMu.Unlock()
	if c, ok := s.conns[clientID]; ok && from != nil && c != from {
		return 0
	}
	delete(s.conns, clientID)
	n := 0
	for _, sh := range s.shards {
		n += sh.eng.DropClient(clientID)
	}
	return n
}

func (s *StateStore) connClosed(c *remoting.Conn, _ error) {
	var gone []string
	s.connMu.Lock()
	for id, cc := range s.conns {
		if cc == (ssConnPeer{c}) {
			gone = append(gone, id)
		}
	}
	s.connMu.Unlock()
	for _, id := range gone {
		s.dropClient(id, ssConnPeer{c})
	}
}

// inlineRegistrar is the remoting server's RegisterInline (run quick
// processors on the connection's reader goroutine), used when present.
type inlineRegistrar interface {
	RegisterInline(code int32, pool remoting.Pool, p remoting.Processor)
}

func (s *StateStore) processInvoke(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	r, err := protocol.DecodeStateStoreRequest(req)
	if err != nil {
		return errResp(protocol.SystemError, "bad state store request: %v", err), nil
	}
	resp, err := s.Do(context.Background(), r, c)
	switch {
	case errors.Is(err, ErrStateStoreNotOwner), errors.Is(err, ErrStateStoreUnavailable):
		out := errResp(protocol.ServiceNotAvailable, "%v", err)
		if errors.Is(err, store.ErrDiskFull) {
			out.ExtFields = protocol.ExtFields{protocol.FieldRefusal: protocol.RefusalDiskFull}
		}
		return out, nil
	case err != nil:
		return errResp(protocol.SystemError, "%v", err), nil
	}
	out := protocol.NewResponse(protocol.Success, "")
	out.Body = resp.AppendBody(nil)
	return out, nil
}

func (s *StateStore) processDropClient(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	id := req.ExtFields["clientId"]
	if id == "" {
		return errResp(protocol.SystemError, "state store drop client: missing clientId"), nil
	}
	s.dropClient(id, ssConnPeer{c})
	return protocol.NewResponse(protocol.Success, ""), nil
}

// Sync (slave) applies every replicated entry already dispatched; tests
// use it instead of waiting for the poll.
func (s *StateStore) Sync() error { return s.host.syncAll() }

// Snapshot writes every shard's snapshot now (when its entries are
// flushed). The file format is shardLog's (logshard.go).
func (s *StateStore) Snapshot() error { return s.host.snapshotAll() }
