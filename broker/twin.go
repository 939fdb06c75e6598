package broker

import (
	"bytes"
	"context"
	"crypto/rand"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"sync"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/twin"
)

// Twin errors.
var (
	// ErrTwinNotOwner: this broker does not own the shard (a slave, or a
	// shard number outside the topic). Sent as ServiceNotAvailable.
	ErrTwinNotOwner = errors.New("broker: twin shard not owned here")
	// ErrTwinUnavailable: the entry could not be appended to the log
	// (nothing changed). Sent as ServiceNotAvailable.
	ErrTwinUnavailable = errors.New("broker: twin shard unavailable")
	// ErrTwinFailed: the shard stopped after an apply or log error
	// (fail-stop); a restart replays the log. Sent as SystemError.
	ErrTwinFailed = errors.New("broker: twin shard failed")
)

// TwinTopic is the system topic whose queues are the twin shards' logs:
// queue i holds the twin log entries (twin/doc.go, one per record body) of
// shard i. It is a sibling of StateStoreTopic rather than a record kind
// inside it: the two engines keep their own shard counts, snapshots and
// locks, a twin-heavy fleet does not queue key-value requests behind twin
// writes, and each queue is replayed by exactly one decoder. Both follow
// the same hosting (shardLog), so a slave taking over serves both.
const TwinTopic = "%SYS_TWIN"

// Defaults for TwinOptions.
const (
	DefaultTwinShards      = 8
	DefaultTwinEventsTopic = "twin-events"
)

// TwinOptions configures the twins hosted by a broker. Zero values take
// the documented defaults.
type TwinOptions struct {
	// Shards is the number of shards, i.e. queues of TwinTopic (default
	// 8). It is FROZEN once the topic exists: devices are mapped to shards
	// by twin.ShardOf over the shards of every broker.
	Shards int
	// Engine configures each shard's engine (its fields must match on
	// every replica).
	Engine twin.Options
	// Dir holds the shard snapshots (default <store root>/twin).
	Dir string
	// SnapshotInterval is the period of snapshots (default 1 minute); a
	// snapshot is also written on Close.
	SnapshotInterval time.Duration
	// EventsTopic receives a message per twin change and connection change
	// (default "twin-events"); it gets one queue per shard.
	EventsTopic string
	// NoEvents turns the change events off.
	NoEvents bool
	// Logger receives events; nil uses the broker's.
	Logger *slog.Logger
}

// DefaultTwinOptions returns the defaults (Dir stays empty: it follows the
// broker's store root).
func DefaultTwinOptions() TwinOptions {
	o := TwinOptions{Engine: twin.DefaultOptions()}
	o.fill("")
	o.Dir = ""
	return o
}

// Validate reports the first invalid field.
func (o *TwinOptions) Validate() error {
	if o.Shards < 0 || o.Shards > 1024 {
		return fmt.Errorf("%w: twin shards %d not in 0..1024", ErrBadOptions, o.Shards)
	}
	if o.SnapshotInterval < 0 {
		return fmt.Errorf("%w: negative twin interval", ErrBadOptions)
	}
	if o.EventsTopic != "" {
		if err := ValidateTopicName(o.EventsTopic); err != nil {
			return fmt.Errorf("%w: twin events topic: %w", ErrBadOptions, err)
		}
	}
	if err := o.Engine.Validate(); err != nil {
		return fmt.Errorf("%w: %w", ErrBadOptions, err)
	}
	return nil
}

func (o *TwinOptions) fill(root string) {
	if o.Shards == 0 {
		o.Shards = DefaultTwinShards
	}
	if o.Dir == "" {
		o.Dir = filepath.Join(root, "twin")
	}
	if o.SnapshotInterval == 0 {
		o.SnapshotInterval = DefaultSnapshotInterval
	}
	if o.EventsTopic == "" {
		o.EventsTopic = DefaultTwinEventsTopic
	}
}

// Twins hosts the twin shards of one broker, the way StateStore hosts the
// state store's: on a master it serves TwinInvoke (reads from the applied
// state; writes Prepare, append to the shard's queue, Apply, produce the
// change events, answer), pushes desired changes to the connections that
// watch them (TwinWatch, TwinNotify) and snapshots; on a slave it applies
// the replicated queues. Open it after the broker with OpenTwins and close
// it before the broker.
type Twins struct {
	b      *Broker
	opts   TwinOptions
	log    *slog.Logger
	host   shardLog // host.slave: the shards follow the log and serve nothing
	shards []*twShard
	epoch  uint64

	watchMu  sync.Mutex
	watchers map[string]map[twPeer]struct{} // twin key -> peers watching it; protected by watchMu
	watched  map[twPeer]map[string]struct{} // peer -> keys; protected by watchMu

}

// twShard is one twin shard.
type twShard struct {
	logShard
	eng *twin.Engine
	// After a master restart, replayed entries whose events may not have
	// been produced yet produce them: every entry at or after emitFrom,
	// and the events from partialFrom on of the entry at partialOff.
	// Protected by mu.
	emitFrom    int64
	partialOff  int64
	partialFrom int
	// recent holds the events of the last entries a following shard
	// applied (controller mode), so that a promotion can produce those the
	// old master did not get to; oldest first. Protected by mu.
	recent []recentEvents
}

// recentEvents are the events of the entry at queue offset off.
type recentEvents struct {
	off    int64
	events []twin.Event
}

// recentEntries bounds twShard.recent: the old master writes an entry's
// events right after the entry, under the shard's lock, so at most the
// last entry of a shard can lack them; a few more cover a slow writer.
const recentEntries = 8

// twPeer is where a watched twin's desired changes go; peers are compared
// with ==.
type twPeer interface {
	push([]twin.DesiredChange) error
}

// twConnPeer is a front end behind a remoting connection (TwinNotify). As
// for the state store, push never waits for a front end that stopped
// reading: the notice waits in its connection's queue.
type twConnPeer struct{ c *remoting.Conn }

func (p twConnPeer) push(list []twin.DesiredChange) error {
	if err := p.c.OnewayNoWait(protocol.NewRequest(protocol.TwinNotify, nil, twin.AppendDesiredChanges(nil, list))); err != nil {
		return fmt.Errorf("%s: %w", p.c.RemoteAddr(), err)
	}
	return nil
}

// twSinkPeer is a front end in this process.
type twSinkPeer struct{ s twin.Sink }

func (p twSinkPeer) push(list []twin.DesiredChange) error {
	p.s.PushDesired(list)
	return nil
}

// OpenTwins creates (or checks) TwinTopic and the events topic, registers
// the twin request codes with the broker's server, restores every shard
// from its snapshot and the log after it (producing the events a crash may
// have lost) and starts the snapshot and (on a slave) replication loops.
// When the consume queues cannot be rebuilt yet (a disk that stays full
// after a crash) it returns without the shards: requests get
// ErrTwinUnavailable and Err says why until they are open, which happens
// by itself once the queues are written (logshard_open.go).
func OpenTwins(b *Broker, opts TwinOptions) (*Twins, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill(b.opts.Store.Root)
	lg := opts.Logger
	if lg == nil {
		lg = b.log
	}
	var eb [8]byte
	if _, err := rand.Read(eb[:]); err != nil {
		return nil, fmt.Errorf("broker: twin epoch: %w", err)
	}
	t := &Twins{b: b, opts: opts, log: lg.With("component", "twin"),
		epoch: binary.BigEndian.Uint64(eb[:]), watchers: map[string]map[twPeer]struct{}{}, watched: map[twPeer]map[string]struct{}{}}
	// Controller mode: a slave until the broker's promotion reaches the
	// twins (becameMaster).
	slave := b.isSlave() || b.controlled()
	if !slave {
		if err := t.createTopics(); err != nil {
			return nil, err
		}
		b.triggerRegister()
	}
	if err := os.MkdirAll(opts.Dir, 0o755); err != nil {
		return nil, fmt.Errorf("broker: twin dir: %w", err)
	}
	t.host = shardLog{b: b, topic: TwinTopic, dir: opts.Dir, magic: twinSnapMagic, what: "twin", log: t.log,
		errUnavailable: ErrTwinUnavailable, errFailed: ErrTwinFailed, errNotOwner: ErrTwinNotOwner}
	t.host.slave.Store(slave)
	t.host.onTakeOver = func(sh *logShard) { t.takeOverLocked(t.shards[sh.id]) }
	fresh, err := twin.New(opts.Engine, t.log)
	if err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	var empty bytes.Buffer
	if err := fresh.Snapshot(&empty); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	t.host.empty = empty.Bytes()
	ctx, cancel := context.WithCancel(context.Background())
	t.host.cancel = cancel
	// The request codes answer from now on: ErrTwinUnavailable until the
	// shards are open (Do).
	// Not inline (unlike the state store): a query may scan a shard for
	// long, and an inline processor has no watchdog to hand the
	// connection's reading on; a lead does.
	b.srv.RegisterFunc(protocol.TwinInvoke, remoting.PoolSend, t.processInvoke)
	b.srv.RegisterFunc(protocol.TwinWatch, remoting.PoolDefault, t.processWatch)
	b.srv.OnConnClose(t.connClosed)
	if err := t.host.start(ctx, t, func() error { return t.load(ctx, slave) }); err != nil {
		return nil, err
	}
	return t, nil
}

// load restores every shard from its snapshot and the log after it
// (producing the events a crash may have lost) and starts the snapshot
// and (on a slave) replication loops: the twins are open (shardLog.open
// runs it once the consume queues cover the commitlog).
func (t *Twins) load(ctx context.Context, slave bool) error {
	for i := 0; i < t.opts.Shards; i++ {
		eng, err := twin.New(t.opts.Engine, t.log)
		if err != nil {
			return fmt.Errorf("broker: %w", err)
		}
		sh := &twShard{logShard: logShard{id: int32(i), snap: eng}, eng: eng, emitFrom: -1, partialOff: -1}
		sh.replay = func(entry []byte, storeTime time.Time, off int64) error { return t.replay(sh, entry, storeTime, off) }
		start := time.Now()
		if err := t.host.loadSnapshot(&sh.logShard); err != nil {
			return err
		}
		if !slave && !t.opts.NoEvents {
			t.eventsFloor(sh)
		}
		t.host.replayAll(&sh.logShard, start)
		sh.emitFrom, sh.partialOff = -1, -1
		t.shards = append(t.shards, sh)
		t.host.shards = append(t.host.shards, &sh.logShard)
	}
	t.goFunc(func() { t.host.snapshotLoop(ctx, t.opts.SnapshotInterval) })
	if slave {
		t.goFunc(func() { t.host.replicateLoop(ctx) })
	}
	t.log.Info("twins open", "shards", t.opts.Shards, "slave", slave, "dir", t.opts.Dir, "events", !t.opts.NoEvents && !slave)
	return nil
}

// createTopics creates (or checks) the twin topic and the events topic.
func (t *Twins) createTopics() error {
	topics := []string{TwinTopic}
	if !t.opts.NoEvents {
		topics = append(topics, t.opts.EventsTopic)
	}
	for _, name := range topics {
		tc, err := t.b.topics.CreateSystemTopic(name, int32(t.opts.Shards), PermRW)
		if err != nil {
			return fmt.Errorf("broker: twin topic %s: %w", name, err)
		}
		if int(tc.WriteQueueNums) != t.opts.Shards {
			return fmt.Errorf("%w: %s has %d queues, twins configured for %d shards (the shard count is frozen)",
				ErrBadOptions, name, tc.WriteQueueNums, t.opts.Shards)
		}
	}
	return nil
}

// becameMaster implements roleListener (controller mode): the topics
// exist, then the shards take over once caught up; the events of the last
// entries the old master applied but did not get to emit are produced
// then (takeOverLocked), as a restart's replay produces them.
func (t *Twins) becameMaster(context.Context) error {
	if err := t.createTopics(); err != nil {
		return err
	}
	// Publish the topics' route now, not at the next registration.
	t.goFunc(t.b.triggerRegister)
	t.host.becameMaster()
	return nil
}

// becameSlave implements roleListener.
func (t *Twins) becameSlave() { t.host.becameSlave() }

// truncated implements roleListener.
func (t *Twins) truncated(offset int64) error { return t.host.truncated(offset) }

func (t *Twins) goFunc(fn func()) { t.host.goFunc(fn) }

// Close stops the loops and writes a final snapshot of every healthy
// shard. It is idempotent. Call it before Broker.Close.
func (t *Twins) Close() error { return t.host.close(t) }

// stop ends the loops without a snapshot (tests that simulate a crash).
func (t *Twins) stop() { t.host.stop() }

// Shards returns the number of shards.
func (t *Twins) Shards() int { return t.opts.Shards }

// Engine returns shard i's engine (for inspection: Get, Stats, Snapshot).
func (t *Twins) Engine(i int) *twin.Engine { return t.shards[i].eng }

// Epoch returns the number drawn when the twins were opened (see
// protocol.TwinWatch).
func (t *Twins) Epoch() uint64 { return t.epoch }

// EventsTopic returns the topic change events go to ("" when off).
func (t *Twins) EventsTopic() string {
	if t.opts.NoEvents {
		return ""
	}
	return t.opts.EventsTopic
}

// Err returns the error that stopped a shard, if any.
func (t *Twins) Err() error { return t.host.err() }

// Snapshot writes every shard's snapshot now (when its records are
// flushed).
func (t *Twins) Snapshot() error { return t.host.snapshotAll() }

// Sync (slave) applies every replicated entry already dispatched; tests
// use it instead of waiting for the poll.
func (t *Twins) Sync() error { return t.host.syncAll() }

// Do serves one twin request for shard: reads from the applied state,
// writes through the log. The operation's own failures (404, 412, ...) are
// in the reply; errors wrap ErrTwinNotOwner or ErrTwinUnavailable (try
// again, maybe elsewhere; nothing changed) or ErrTwinFailed.
func (t *Twins) Do(ctx context.Context, shard int32, req *twin.Request) (twin.Reply, error) {
	if t.host.slave.Load() {
		return twin.Reply{}, fmt.Errorf("%w: slave", ErrTwinNotOwner)
	}
	if ok, why := t.b.writable(); !ok {
		return twin.Reply{}, fmt.Errorf("%w: the broker %s", ErrTwinNotOwner, why)
	}
	if err := t.host.notOpen(); err != nil {
		return twin.Reply{}, err
	}
	if shard < 0 || int(shard) >= len(t.shards) {
		return twin.Reply{}, fmt.Errorf("%w: shard %d of %d", ErrTwinNotOwner, shard, len(t.shards))
	}
	sh := t.shards[shard]
	if sh.down.Load() {
		return twin.Reply{}, fmt.Errorf("%w: shard %d: %w", ErrTwinFailed, sh.id, sh.failure())
	}
	if !req.Op.Logged() {
		// Reads need no log position, so they do not wait behind another
		// request's append (and its flush under sync flush) for sh.mu.
		end := sh.applied.Load()
		_, rep, _ := sh.eng.Prepare(req)
		if err := t.host.readBarrier(ctx, end); err != nil {
			return twin.Reply{}, err
		}
		return rep, nil
	}
	sh.mu.Lock()
	if sh.failed != nil {
		err := sh.failed
		sh.mu.Unlock()
		return twin.Reply{}, fmt.Errorf("%w: shard %d: %w", ErrTwinFailed, sh.id, err)
	}
	entry, rep, needsLog := sh.eng.Prepare(req)
	if !needsLog {
		sh.mu.Unlock()
		return rep, nil
	}
	var out twin.Outcome
	err := t.host.appendLocked(ctx, &sh.logShard, entry, func(storeTime time.Time, off int64) error {
		var err error
		if out, err = sh.eng.Apply(entry, storeTime); err != nil {
			return err
		}
		t.emitLocked(ctx, sh, out.Events, off, 0)
		return nil
	})
	end := sh.lastEnd
	sh.mu.Unlock()
	if err != nil {
		return twin.Reply{}, err
	}
	t.notify(out.Desired)
	// A sync master answers once a slave has the entry too; the entry is
	// applied either way.
	if code := t.b.waitSlave(ctx, protocol.Success, end, true); code != protocol.Success {
		if t.b.controlled() {
			// Not on the whole sync state set: a failover may take it back.
			return twin.Reply{}, fmt.Errorf("%w: shard %d: entry not on the sync state set (code %d)", ErrTwinUnavailable, sh.id, code)
		}
		t.log.Warn("twin entry not acknowledged by a slave", "shard", sh.id, "code", code)
	}
	return out.Reply, nil
}

// ReadReplica serves the read req (an operation that is not logged) for
// shard from this broker's replica whatever its role: on a master as Do
// does, on a slave from the state it applied last (the entries
// replicated so far), which may lag the master's or miss what a dead
// master never replicated. A client reads there while the shard's master
// is down (protocol.MarkTwinReplicaRead); writes stay refused on a slave.
func (t *Twins) ReadReplica(ctx context.Context, shard int32, req *twin.Request) (twin.Reply, error) {
	if req.Op.Logged() {
		return twin.Reply{}, fmt.Errorf("%w: %v is not a read", ErrTwinNotOwner, req.Op)
	}
	if !t.host.slave.Load() {
		return t.Do(ctx, shard, req)
	}
	if err := t.host.notOpen(); err != nil {
		return twin.Reply{}, err
	}
	if shard < 0 || int(shard) >= len(t.shards) {
		return twin.Reply{}, fmt.Errorf("%w: shard %d of %d", ErrTwinNotOwner, shard, len(t.shards))
	}
	sh := t.shards[shard]
	if sh.down.Load() {
		return twin.Reply{}, fmt.Errorf("%w: shard %d: %w", ErrTwinFailed, sh.id, sh.failure())
	}
	_, rep, _ := sh.eng.Prepare(req)
	return rep, nil
}

// replay applies an entry read back from the log; on a restarting master
// it produces the events a crash may have lost.
func (t *Twins) replay(sh *twShard, entry []byte, storeTime time.Time, off int64) error {
	out, err := sh.eng.Apply(entry, storeTime)
	if err != nil {
		return err
	}
	switch {
	case sh.emitFrom >= 0 && off >= sh.emitFrom:
		t.emitLocked(context.Background(), sh, out.Events, off, 0)
	case off == sh.partialOff:
		t.emitLocked(context.Background(), sh, out.Events, off, sh.partialFrom)
	case t.host.slave.Load() && t.b.controlled() && !t.opts.NoEvents && len(out.Events) > 0:
		if len(sh.recent) == recentEntries {
			copy(sh.recent, sh.recent[1:])
			sh.recent = sh.recent[:recentEntries-1]
		}
		sh.recent = append(sh.recent, recentEvents{off: off, events: out.Events})
	}
	return nil
}

func (t *Twins) processInvoke(_ *remoting.Conn, cmd *protocol.Command) (*protocol.Command, error) {
	shard, err := protocol.TwinShard(cmd)
	if err != nil {
		return errResp(protocol.SystemError, "bad twin request: %v", err), nil
	}
	req, err := twin.DecodeRequest(cmd.Body)
	if err != nil {
		return errResp(protocol.SystemError, "bad twin request: %v", err), nil
	}
	var rep twin.Reply
	if protocol.TwinReplicaRead(cmd) {
		rep, err = t.ReadReplica(context.Background(), shard, req)
	} else {
		rep, err = t.Do(context.Background(), shard, req)
	}
	switch {
	case errors.Is(err, ErrTwinNotOwner), errors.Is(err, ErrTwinUnavailable):
		return errResp(protocol.ServiceNotAvailable, "%v", err), nil
	case err != nil:
		return errResp(protocol.SystemError, "%v", err), nil
	}
	out := protocol.NewResponse(protocol.Success, "")
	out.Body = rep.AppendBinary(nil)
	return out, nil
}
