package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net/netip"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/internal/ratelog"
	"github.com/smartgo/smartgo/internal/wake"
	"github.com/smartgo/smartgo/store/record"
	"github.com/smartgo/smartgo/store/vfs"
)

// PutStatus is the outcome of a put, mirroring RocketMQ's PutMessageStatus.
type PutStatus int

const (
	PutOK                  PutStatus = iota // stored (and flushed, in sync mode)
	PutFlushDiskTimeout                     // stored, but the sync flush did not confirm in time
	PutServiceNotAvailable                  // refused: store closed, disk full, or failed
	PutMessageIllegal                       // refused: too large or not encodable
	PutUnknownError                         // refused: unexpected error
)

var putStatusNames = [...]string{"PUT_OK", "FLUSH_DISK_TIMEOUT", "SERVICE_NOT_AVAILABLE", "MESSAGE_ILLEGAL", "UNKNOWN_ERROR"}

// String returns the RocketMQ status name.
func (s PutStatus) String() string {
	if int(s) < len(putStatusNames) {
		return putStatusNames[s]
	}
	return fmt.Sprintf("PutStatus(%d)", int(s))
}

// PutResult describes a stored message. A non-nil error from Put means
// nothing was stored; PutFlushDiskTimeout comes with a nil error because
// the message is stored.
type PutResult struct {
	Status         PutStatus
	PhysicalOffset int64 // commitlog offset of the (first) record
	QueueOffset    int64 // logical offset of the (first) record in its queue
	WroteBytes     int   // bytes appended (all records of a batch)
	StoreTimestamp int64 // ms
	MsgCount       int   // records written (1, or the batch size)
	StoreHost      netip.AddrPort
	// Latency is how long the put took, from the call (PutAsyncDeferredAt:
	// from the caller's reading) to its result:
	// until its records were written (written behind: until the write
	// that covered them) and, for a put that waited for the group commit,
	// until they were durable. The store reads the clock for it anyway
	// (its own put latency, Stats.PutLatency): a caller timing its puts
	// takes it from here rather than reading the clock around the call.
	// Zero for a put that failed.
	Latency time.Duration
}

// AppendMsgID appends the offset message id (uppercase hex) of the first
// record to dst.
func (r PutResult) AppendMsgID(dst []byte) []byte {
	return record.AppendOffsetMessageID(dst, r.StoreHost, r.PhysicalOffset)
}

// MsgID returns the offset message id of the first record.
func (r PutResult) MsgID() string { return record.OffsetMessageID(r.StoreHost, r.PhysicalOffset) }

// BatchResult is a PutResult plus the physical offset of every record.
type BatchResult struct {
	PutResult
	PhysicalOffsets []int64
	End             int64 // commitlog offset just past the last record
}

// cqKey identifies a logical queue in the writer's offset table.
type cqKey struct {
	topic   string
	queueID int32
}

// Store is the message store: commitlog, consume queues, index, flush,
// checkpoint, recovery and retention. All methods are safe for concurrent
// use.
type Store struct {
	opts        Options
	fs          *fileSys // every data file goes through it (Options.FS), with the descriptor cache
	log         *slog.Logger
	rlog        *ratelog.Limiter // lines a read of damaged data causes (ratelog)
	noVerify    bool             // benchmarks only: serve records without verifying them
	deleteHours [24]bool
	lockFile    *os.File

	cl  *commitLog
	idx *indexService
	// idxRepaired is closed when the index-repair goroutine is done.
	idxRepaired chan struct{}

	putMu        sync.Mutex
	putLockedAt  atomic.Int64          // store time (ms) at which the current Put or PutBatch took putMu; 0 when free
	clock        putClock              // store times of single puts; protected by putMu
	queueOffsets map[cqKey]*queueNext  // next queue offset per queue; protected by putMu
	lastQueues   queueCache[queueNext] // the last topic's entries of queueOffsets; protected by putMu
	batchProps   []byte                // PutBatch's properties scratch; protected by putMu
	behind       []behindPut           // puts written behind, not answered yet, in append order; protected by putMu
	wq           wroteQueue            // the writer's notes of the records it appended (wrote.go); protected by putMu
	answerMu     sync.Mutex            // held while written-behind puts are answered (writebehind.go)
	answering    []behindPut           // the puts being answered; protected by answerMu
	closed       atomic.Bool           // set under putMu by Close
	werr         atomic.Pointer[error]
	diskFull     atomic.Bool // writes refused until the disk has room (space.go)
	space        spaceState
	rawMode      atomic.Bool // AppendRaw used: the dispatcher keeps queueOffsets in step

	cqMu sync.RWMutex
	cqs  map[string]map[int32]*consumeQueue // protected by cqMu
	// cqRepairMu serialises rebuilds of damaged consume-queue entries
	// (cqrepair.go).
	cqRepairMu sync.Mutex
	// cqRepairScans holds the rebuilds a pull left to the next one, up
	// to maxRepairScans a queue (cqrepair.go); protected by cqRepairMu.
	cqRepairScans map[*consumeQueue][]*repairScan

	dispMu       sync.Mutex            // held by the dispatcher while it appends; DeleteTopic takes it
	disp         dispatcher            // protected by dispMu
	dispatched   atomic.Int64          // commitlog offset the dispatcher has processed up to
	dispStall    atomic.Pointer[error] // why the dispatcher stopped at a record whose entry it cannot write; nil while it is not stopped
	dispatchTs   atomic.Int64          // store timestamp of the last dispatched record
	dispatchWake chan struct{}
	markMu       sync.Mutex
	dispMark     dispatchMark // the dispatcher's last round, for the indexer; protected by markMu
	ixq          wroteQueue   // notes of dispatched records, for the indexer (wrote.go); protected by markMu
	ix           indexer      // index follower, see indexer.go
	indexed      atomic.Int64 // commitlog offset the indexer has walked up to
	indexTs      atomic.Int64 // store timestamp of the last indexed record
	arrival      atomic.Pointer[func(topic string, queueID int32, maxOffset int64)]
	arriveMu     sync.Mutex     // held while the arrival listener is called
	arrived      []arrivedQueue // a round's grown queues; protected by arriveMu

	// dispWake is notified whenever dispatched moves or the dispatcher
	// stalls (WaitDispatched).
	dispWake wake.Notifier

	// dispatchLimit caps what the dispatcher makes visible to consumers
	// (SetDispatchLimit; math.MaxInt64 when unlimited).
	dispatchLimit atomic.Int64
	epochs        *epochs // the epoch file (epoch.go)

	gc groupCommit

	raw rawHints // where replication chunks that ended inside a record resume

	stats  statCounters
	report RecoveryReport // set by Open, read-only afterwards
	rstop  recoverStop    // ends recovery early (OpenContext's context); zero afterwards

	cleanMu sync.Mutex // serialises retention runs

	indexFlushedAt time.Time // last index sync; owned by the logic flusher

	cpMu sync.Mutex
	cp   checkpoint // last checkpoint written; protected by cpMu
	// cpFile is the checkpoint file, open for its in-place writes after
	// the run's first (writeCheckpoint); owned by whoever runs flushLogic.
	cpFile vfs.File

	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
}

// drainFailed handles a failed write-out of pend outside a put: a full
// disk took the records back (no harm done, the error is returned), any
// other failure is sticky.
func (s *Store) drainFailed(err error) error {
	if isNoSpace(err) {
		return err
	}
	s.setWriteErr(err)
	return s.Err()
}

// setWriteErr makes a write failure sticky (fail-stop).
func (s *Store) setWriteErr(err error) {
	e := fmt.Errorf("%w: %w", ErrWriteFailed, err)
	if s.werr.CompareAndSwap(nil, &e) {
		s.log.Error("store: write failed, refusing further writes", "err", err)
		s.emit(Event{Kind: EventWriteFailed, Err: err})
	}
}

// Err returns the sticky write error, or nil.
func (s *Store) Err() error {
	if p := s.werr.Load(); p != nil {
		return *p
	}
	return nil
}

func (s *Store) emit(ev Event) {
	if s.opts.Listener != nil {
		s.opts.Listener(ev)
	}
}

// OnArrival registers fn to be called by the dispatcher (or a Drain that
// dispatches) after it appended entries to a queue (for long polling),
// with no store lock held. fn must not block: the dispatcher waits for it
// before its next round. A later call
// replaces the previous function; nil unregisters.
func (s *Store) OnArrival(fn func(topic string, queueID int32, maxOffset int64)) {
	if fn == nil {
		s.arrival.Store(nil)
		return
	}
	s.arrival.Store(&fn)
}

func (s *Store) wakeDispatcher() {
	select {
	case s.dispatchWake <- struct{}{}:
	default:
	}
}

// checkWritable returns the status and error refusing a write, if any.
func (s *Store) checkWritable() (PutStatus, error) { return s.checkWritableAt(-1) }

// checkWritableAt is checkWritable for a put that read the monotonic
// clock (monoNow) at now: the near-full check of the disk takes that
// reading instead of reading the clock again (now < 0: it reads it).
func (s *Store) checkWritableAt(now time.Duration) (PutStatus, error) {
	if st, err := s.stillWritable(); err != nil {
		return st, err
	}
	s.nearFull(now)
	return s.stillWritable()
}

// stillWritable is checkWritable without the near-full check of the disk:
// for a put checking again under putMu, right after checkWritable.
func (s *Store) stillWritable() (PutStatus, error) {
	if s.closed.Load() {
		return PutServiceNotAvailable, ErrClosed
	}
	if p := s.werr.Load(); p != nil {
		return PutServiceNotAvailable, *p
	}
	if s.diskFull.Load() {
		if r := s.space.reason.Load(); r != nil {
			return PutServiceNotAvailable, fmt.Errorf("%w: %s", ErrDiskFull, *r)
		}
		return PutServiceNotAvailable, ErrDiskFull
	}
	return PutOK, nil
}

func isTxExcluded(sysFlag int32) bool {
	t := sysFlag & record.TxMask
	return t == record.TxPrepared || t == record.TxRollback
}

// Put appends m. The store sets m.QueueOffset, m.PhysicalOffset,
// m.StoreTimestamp and m.StoreHost. Prepared and rollback transaction
// messages get queue offset 0 and are not dispatched to consume queues. In
// FlushSync mode Put waits for the group commit unless m's WAIT property is
// "false". A non-nil error means nothing was stored.
func (s *Store) Put(ctx context.Context, m *record.Message) (PutResult, error) {
	return s.PutWait(ctx, m, waitStore(m.Properties))
}

// PutWait is Put with the wait for the group commit (FlushSync mode)
// chosen by the caller instead of read from m's WAIT property: a broker
// strips WAIT before storing, as RocketMQ does, and passes its value here.
func (s *Store) PutWait(ctx context.Context, m *record.Message, wait bool) (PutResult, error) {
	start := monoNow()
	res, ap, err := s.put(m, wait, nil, true, start)
	if err != nil {
		return res, err
	}
	if ap.wait {
		if res.Status = s.waitDurable(ctx, ap); res.Status != PutOK && res.Status != PutFlushDiskTimeout {
			s.stats.putErrors.Add(1)
			return PutResult{Status: res.Status}, s.notStored()
		}
	}
	res.Latency = monoNow() - start
	s.stats.recordPut(1, res.WroteBytes, res.Latency)
	return res, nil
}

// PutAsync is PutWait without a waiting goroutine. When the put needs no
// wait (FlushAsync, or wait false) it returns the final result, pending
// false, and never calls done. Otherwise it returns at once with pending
// true, and done is called once, later, from the store's flusher, with
// what PutWait would have returned: when the group commit covers the
// record, or after SyncFlushTimeout (PutFlushDiskTimeout, the record
// stored), or when the store failed, closed or took the record back.
// done must not block: the flusher runs the callbacks of every put a
// sync covered. A pending put's res is not its result (zero for one
// written behind): done gets that.
//
// A put that waits for no flush is written behind (writebehind.go) unless
// Options.AsyncWrites is AsyncWriteMapped: PutAsync returns pending, and
// done is called by the dispatcher once the record is in the page cache
// (PutOK), or the store failed or closed first.
func (s *Store) PutAsync(m *record.Message, wait bool, done func(PutResult, error)) (res PutResult, pending bool, err error) {
	var d PutDone
	if done != nil {
		d = putFunc(done)
	}
	return s.putAsync(m, wait, d, true, monoNow())
}

// PutAsyncDeferred is PutAsync for a caller that puts in batches and
// calls Drain at the end of each (see Drain): done is an interface (a
// pointer the caller has anyway, where a method value would be allocated),
// and a put written behind does not wake the dispatcher: it waits for the
// caller's Drain, which writes it out and calls done on the caller's
// goroutine.
func (s *Store) PutAsyncDeferred(m *record.Message, wait bool, done PutDone) (res PutResult, pending bool, err error) {
	return s.putAsync(m, wait, done, false, monoNow())
}

// PutAsyncDeferredAt is PutAsyncDeferred for a put that began at began, a
// clock reading (time.Now) the caller took anyway and shares between the
// puts of its batch (a connection reader's remoting.Conn.BatchTime):
// the store reads no clock for the put. The put's store time is taken
// from began, and its latency (PutResult.Latency) counts from began. A
// zero began reads the clock.
func (s *Store) PutAsyncDeferredAt(m *record.Message, wait bool, done PutDone, began time.Time) (res PutResult, pending bool, err error) {
	return s.putAsync(m, wait, done, false, monoAt(began))
}

func (s *Store) putAsync(m *record.Message, wait bool, done PutDone, wake bool, start time.Duration) (res PutResult, pending bool, err error) {
	ap, err := s.putTo(m, wait, done, wake, start, &res)
	if ap.behind {
		return PutResult{}, true, nil
	}
	if err != nil || !ap.wait {
		if err == nil {
			res.Latency = monoNow() - start
			s.stats.recordPut(1, res.WroteBytes, res.Latency)
		}
		return res, false, err
	}
	return s.whenPutDurable(res, ap, start, done)
}

// whenPutDurable is PutAsync's wait for the group commit (the variables
// its callback captures live on the heap: a put not waiting allocates
// nothing).
func (s *Store) whenPutDurable(res PutResult, ap appended, start time.Duration, done PutDone) (PutResult, bool, error) {
	finish := func(st PutStatus) (PutResult, error) {
		if st != PutOK && st != PutFlushDiskTimeout {
			s.stats.putErrors.Add(1)
			return PutResult{Status: st}, s.notStored()
		}
		r := res
		r.Status = st
		r.Latency = monoNow() - start
		s.stats.recordPut(1, r.WroteBytes, r.Latency)
		return r, nil
	}
	st, pending := s.whenDurable(ap, func(st PutStatus) { done.PutDone(finish(st)) })
	if pending {
		return res, true, nil
	}
	res, err := finish(st)
	return res, false, err
}

// appended is where the records of a put went, for its wait: the bytes
// [start, end), appended after gen pend discards (see discardLog), and
// whether the putter is to wait for the group commit, or is answered
// once its records are written behind (behind).
type appended struct {
	start, end, gen int64
	wait            bool
	behind          bool
}

// put appends m (the part of PutWait under the writer lock). With later
// set (PutAsync), a put that waits for no flush is written behind: later
// is called once its record is in the page cache (writebehind.go), and
// the result has behind set; wake false leaves the dispatcher asleep for
// it (the caller drains: PutAsyncDeferred).
func (s *Store) put(m *record.Message, wait bool, later PutDone, wake bool, start time.Duration) (PutResult, appended, error) {
	var res PutResult
	ap, err := s.putTo(m, wait, later, wake, start, &res)
	return res, ap, err
}

// putTo is put with the result set in *res, and none for a put written
// behind (its result is made when it is answered: behindPut.result).
// A written-behind put's caller then copies no result: put's was copied
// through every return with 16-byte moves over 8-byte stores, which the
// CPU does not forward.
func (s *Store) putTo(m *record.Message, wait bool, later PutDone, wake bool, start time.Duration, res *PutResult) (appended, error) {
	if st, err := s.checkWritableAt(start); err != nil {
		s.stats.putErrors.Add(1)
		*res = PutResult{Status: st}
		return appended{}, err
	}
	m.StoreHost = s.opts.StoreHost // before sizing: an IPv6 host is wider
	// A message read back from a sealed record (a retry, a delayed
	// message) is sealed afresh: its old CRC property goes.
	m.Properties = record.StripCRCProperty(m.Properties)
	size := record.SealedSize(m)
	if err := s.opts.sizeError(-1, len(m.Body), size); err != nil {
		s.stats.putErrors.Add(1)
		*res = PutResult{Status: PutMessageIllegal}
		return appended{}, err
	}
	excluded := isTxExcluded(m.SysFlag)
	s.putMu.Lock()
	if st, err := s.stillWritable(); err != nil {
		s.putMu.Unlock()
		s.stats.putErrors.Add(1)
		*res = PutResult{Status: st}
		return appended{}, err
	}
	key := cqKey{m.Topic, m.QueueID}
	qoff := int64(0)
	var next *queueNext // the queue's next offset, nil for a new queue
	if !excluded {
		if next = s.nextLocked(key); next != nil {
			qoff = next.off
		}
	}
	m.QueueOffset = qoff
	m.StoreTimestamp = s.storeTimeLocked(start)
	s.putLockedAt.Store(m.StoreTimestamp)
	wait = wait && s.opts.FlushMode == FlushSync
	behind := later != nil && !wait && s.cl.writeBehind
	viaPend := behind || s.cl.viaPendLocked(false, m.StoreTimestamp)
	phy, err := s.cl.appendLocked(m, size, viaPend)
	if err != nil {
		s.unlockPut()
		r, err := s.putFailed(err)
		*res = r
		return appended{}, err
	}
	gen := s.cl.discards.gen.Load()
	switch {
	case excluded:
	case next != nil:
		next.off = qoff + 1 // one lookup per put
	default:
		s.setQueueOffsetLocked(key, qoff+1)
	}
	ap := appended{start: phy, end: phy + int64(size), gen: gen, wait: wait, behind: behind}
	if behind {
		// Its result is made when it is answered (behindPut.result):
		// none is returned. The entry's fields are set in place (a
		// literal copied in would be 16-byte loads over 8-byte stores,
		// which the CPU does not forward).
		s.behind = append(s.behind, behindPut{})
		p := &s.behind[len(s.behind)-1]
		p.start, p.end, p.gen, p.queueOff = ap.start, ap.end, gen, qoff
		p.storeTs, p.began, p.done = m.StoreTimestamp, start, later
		s.unlockPut()
		if wake {
			s.wakeDispatcher()
		}
		return ap, nil
	}
	*res = PutResult{Status: PutOK, PhysicalOffset: phy, QueueOffset: qoff, WroteBytes: size,
		StoreTimestamp: m.StoreTimestamp, MsgCount: 1, StoreHost: s.opts.StoreHost}
	if err := s.afterAppendLocked(wait, viaPend); err != nil {
		s.unlockPut()
		r, err := s.putFailed(err)
		*res = r
		return appended{}, err
	}
	s.unlockPut()
	return ap, nil
}

// putClock gives single puts their store time without reading the wall
// clock for each: from the put's monotonic start time (which it reads
// anyway, for its latency) and a wall-clock reading at most
// putClockResync old. A store whose Options.Now was set (a test's clock)
// reads that clock for every put instead.
type putClock struct {
	wall   bool          // Options.Now is the wall clock (not set by the caller)
	wallNs int64         // a wall-clock reading (Unix ns)
	mono   time.Duration // monoNow at that reading
	last   int64         // the store time given last (ms)
}

// putClockResync bounds how long store times follow the monotonic clock
// from one wall-clock reading (a step of the wall clock shows within it).
const putClockResync = 100 * time.Millisecond

// storeTimeLocked is the store time (ms) of a put that started at mono
// (monoNow): the wall clock at that instant, but not before the time
// given to the put before it (a put may take putMu after one that
// started later) unless the wall clock went back by a second or more.
// Caller holds putMu.
func (s *Store) storeTimeLocked(mono time.Duration) int64 {
	c := &s.clock
	if !c.wall {
		return s.opts.Now().UnixMilli()
	}
	// A put may have started before the reading (mono < c.mono): the
	// reading of another put that took putMu first, or a batch's clock
	// (PutAsyncDeferredAt) read before it. Within putClockResync either
	// way the same reading serves.
	d := mono - c.mono
	if c.mono == 0 || d <= -putClockResync || d >= putClockResync {
		now := time.Now()
		c.wallNs, c.mono = now.UnixNano(), now.Sub(monoBase)
		d = mono - c.mono // the put began before this reading
	}
	ts := (c.wallNs + int64(d)) / int64(time.Millisecond)
	if ts < c.last && c.last-ts < 1000 {
		ts = c.last
	}
	c.last = ts
	return ts
}

// unlockPut releases putMu taken by Put or PutBatch.
func (s *Store) unlockPut() {
	s.putLockedAt.Store(0)
	s.putMu.Unlock()
}

// PutLockHeld reports how long the put in progress has held the writer
// lock (0 when no put holds it), by the store's clock in milliseconds:
// RocketMQ's pageCacheLockTimeMills, which grows when writes to the page
// cache stall.
func (s *Store) PutLockHeld() time.Duration {
	at := s.putLockedAt.Load()
	if at == 0 {
		return 0
	}
	return max(0, time.Duration(s.opts.Now().UnixMilli()-at)*time.Millisecond)
}

// afterAppendLocked finishes an append under putMu: records a putter will
// not wait for are written out at once (FlushSync buffers the records of
// waiting putters until the flusher's next fdatasync), and the dispatcher
// is woken for bytes that are readable.
func (s *Store) afterAppendLocked(wait, viaPend bool) error {
	if !viaPend {
		s.wakeDispatcher()
		return nil
	}
	if !wait {
		return s.cl.drainLocked()
	}
	return nil
}

// waitDurable waits for the group commit covering the records of ap (see
// failedWait for when it ends without it).
func (s *Store) waitDurable(ctx context.Context, ap appended) PutStatus {
	ok := s.waitFlushed(ctx, ap.start, ap.end, ap.gen)
	if s.cl.discards.discarded(ap.gen, ap.start) {
		return PutServiceNotAvailable
	}
	if ok {
		return PutOK
	}
	return s.failedWait(ap)
}

// failedWait is the status of a put whose wait for the group commit ended
// without it (timeout, ctx, close, failure): the records are written out
// so that a FLUSH_DISK_TIMEOUT put is still stored and readable; if even
// that fails (the store failed, or the disk was full and the records were
// taken back: discardPendLocked), the put is reported as not stored.
func (s *Store) failedWait(ap appended) PutStatus {
	s.cl.drain()
	if s.cl.committed.Load() < ap.end || s.cl.discards.discarded(ap.gen, ap.start) {
		return PutServiceNotAvailable
	}
	return PutFlushDiskTimeout
}

// notStored is the error of a put that waited and was not stored: the
// sticky write error, or the disk being full.
func (s *Store) notStored() error {
	if err := s.Err(); err != nil {
		return err
	}
	if _, err := s.checkWritable(); err != nil {
		return err
	}
	return fmt.Errorf("%w: records taken back, not stored", ErrDiskFull)
}

// setQueueOffsetLocked stores next for key; new keys get their own copy
// of the topic string (the caller's may be backed by a reused buffer).
// Caller holds putMu.
func (s *Store) setQueueOffsetLocked(key cqKey, next int64) {
	if p := s.nextLocked(key); p != nil {
		p.off = next
		return
	}
	key.topic = strings.Clone(key.topic)
	s.queueOffsets[key] = &queueNext{off: next, topic: key.topic}
}

// queueOffsetLocked is the next queue offset of key (0 for a queue never
// put to). Caller holds putMu.
func (s *Store) queueOffsetLocked(key cqKey) int64 {
	if p := s.nextLocked(key); p != nil {
		return p.off
	}
	return 0
}

// queueNext is the next queue offset of a queue (queueOffsets).
type queueNext struct {
	off   int64
	topic string // the map key's topic: the store's own copy
}

// nextLocked returns the queueOffsets entry of key, nil when it has none.
// Caller holds putMu.
func (s *Store) nextLocked(key cqKey) *queueNext {
	c := &s.lastQueues
	if p := c.lookup(key.topic == c.topic, key.queueID); p != nil {
		return p
	}
	p := s.queueOffsets[key]
	if p != nil {
		c.keep(p.topic, key.queueID, p)
	}
	return p
}

func (s *Store) putFailed(err error) (PutResult, error) {
	s.stats.putErrors.Add(1)
	if errors.Is(err, record.ErrTopicTooLong) || errors.Is(err, record.ErrPropertiesTooLong) ||
		errors.Is(err, record.ErrBadHost) || errors.Is(err, record.ErrRecordTooLong) || errors.Is(err, record.ErrBadProperties) {
		return PutResult{Status: PutMessageIllegal}, fmt.Errorf("%w: %w", ErrIllegalMessage, err)
	}
	if isNoSpace(err) {
		// Nothing of this put is in the log and nothing acknowledged is
		// lost: refuse, do not fail the store (space.go).
		s.noSpace(err)
		if !errors.Is(err, ErrDiskFull) {
			err = fmt.Errorf("%w: %w", ErrDiskFull, err)
		}
		return PutResult{Status: PutServiceNotAvailable}, err
	}
	if errors.Is(err, errNotWritten) {
		return PutResult{Status: PutServiceNotAvailable}, err
	}
	s.setWriteErr(err)
	return PutResult{Status: PutServiceNotAvailable}, s.Err()
}

// errNotWritten marks an append that failed before writing anything
// (allocating blocks or creating a segment): the put fails, the store
// does not.
var errNotWritten = errors.New("store: nothing written")

// waitStore reports whether the WAIT property asks to wait (default yes).
func waitStore(props string) bool {
	v, ok := record.LookupPropertyString(props, record.PropertyWaitStoreMsgOK)
	return !ok || v != "false"
}

// MaxPhysicalOffset is the end of the commitlog (next write position).
func (s *Store) MaxPhysicalOffset() int64 { return s.cl.committed.Load() }

// MinPhysicalOffset is the first commitlog offset still stored.
func (s *Store) MinPhysicalOffset() int64 { return s.cl.minOffset() }

// FlushedPhysicalOffset is the commitlog offset up to which data is durable.
func (s *Store) FlushedPhysicalOffset() int64 { return s.cl.flushed.Load() }

// DispatchedPhysicalOffset is the commitlog offset up to which consume
// queues are built.
func (s *Store) DispatchedPhysicalOffset() int64 { return s.dispatched.Load() }

// WaitDispatched waits until the consume queues cover the commitlog up
// to end (DispatchedPhysicalOffset() >= end) and returns nil. It returns
// early the dispatcher's stall (DispatchStalled: an entry it cannot
// write, a full disk) while the queues are behind end, ctx's error when
// ctx ends first, and ErrClosed when the store closes. It waits on the
// dispatcher's notice, not by polling.
func (s *Store) WaitDispatched(ctx context.Context, end int64) error {
	for {
		ch := s.dispWake.Wait()
		if s.dispatched.Load() >= end {
			return nil
		}
		if err := s.DispatchStalled(); err != nil {
			return err
		}
		select {
		case <-ch:
		case <-ctx.Done():
			return ctx.Err()
		case <-s.done:
			return ErrClosed
		}
	}
}

// DispatchStalled returns why the dispatcher is stopped at a record whose
// consume-queue entry it cannot write, nil while it is not. The error
// names the file; it matches ErrDiskFull when the disk has no room for
// the entry (the dispatcher goes on once it has).
func (s *Store) DispatchStalled() error {
	if p := s.dispStall.Load(); p != nil {
		return *p
	}
	return nil
}

// IndexedPhysicalOffset is the commitlog offset up to which the key index
// is built (it trails DispatchedPhysicalOffset).
func (s *Store) IndexedPhysicalOffset() int64 { return s.indexed.Load() }

// RecoveryReport returns what Open found and cut.
func (s *Store) RecoveryReport() RecoveryReport { return s.report }

// Options returns the effective options (defaults applied).
func (s *Store) Options() Options { return s.opts }

// lookupCQ returns the queue or nil.
func (s *Store) lookupCQ(topic string, queueID int32) *consumeQueue {
	s.cqMu.RLock()
	cq := s.cqs[topic][queueID]
	s.cqMu.RUnlock()
	return cq
}

// cqForDispatch returns (creating) the queue for a topic given as bytes.
// Dispatcher-only (it keeps the dispatcher's queue cache).
func (s *Store) cqForDispatch(topic []byte, queueID int32) *consumeQueue {
	c := &s.disp.queues
	if cq := c.lookup(string(topic) == c.topic, queueID); cq != nil {
		return cq
	}
	cq := s.cqLookup(topic, queueID)
	c.keep(cq.topic, queueID, cq)
	return cq
}

// cqLookup returns (creating) the queue for a topic given as bytes from
// the queue table.
func (s *Store) cqLookup(topic []byte, queueID int32) *consumeQueue {
	s.cqMu.RLock()
	cq := s.cqs[string(topic)][queueID]
	s.cqMu.RUnlock()
	if cq != nil {
		return cq
	}
	s.cqMu.Lock()
	defer s.cqMu.Unlock()
	qs := s.cqs[string(topic)]
	if qs == nil {
		qs = make(map[int32]*consumeQueue)
		s.cqs[string(topic)] = qs
	}
	if cq = qs[queueID]; cq == nil {
		cq = newConsumeQueue(s.fs, s.opts.Root, string(topic), queueID, s.opts.CQEntriesPerFile)
		qs[queueID] = cq
	}
	return cq
}

// allCQs returns a snapshot of every queue.
func (s *Store) allCQs() []*consumeQueue {
	s.cqMu.RLock()
	defer s.cqMu.RUnlock()
	var out []*consumeQueue
	for _, qs := range s.cqs {
		for _, cq := range qs {
			out = append(out, cq)
		}
	}
	return out
}

// Topics returns the topics that have consume queues, sorted.
func (s *Store) Topics() []string {
	s.cqMu.RLock()
	out := make([]string, 0, len(s.cqs))
	for t := range s.cqs {
		out = append(out, t)
	}
	s.cqMu.RUnlock()
	sort.Strings(out)
	return out
}

// QueueIDs returns the queue ids of topic that have consume queues, sorted.
func (s *Store) QueueIDs(topic string) []int32 {
	s.cqMu.RLock()
	out := make([]int32, 0, len(s.cqs[topic]))
	for id := range s.cqs[topic] {
		out = append(out, id)
	}
	s.cqMu.RUnlock()
	sort.Slice(out, func(i, j int) bool { return out[i] < out[j] })
	return out
}

// DeleteTopic removes the consume queues of topic and resets its queue
// offsets. Its records stay in the commitlog until retention removes them.
// Readers holding results keep their mappings until they release them.
func (s *Store) DeleteTopic(topic string) error {
	if s.closed.Load() {
		return ErrClosed
	}
	var qs map[int32]*consumeQueue
	// The queues' rebuilds under way go too, once dispMu is released
	// (cqRepairMu is taken before it).
	defer func() { s.dropRepairs(qs) }()
	s.dispMu.Lock()
	defer s.dispMu.Unlock()
	s.putMu.Lock()
	for k := range s.queueOffsets {
		if k.topic == topic {
			delete(s.queueOffsets, k)
		}
	}
	s.lastQueues.reset()
	s.cqMu.Lock()
	qs = s.cqs[topic]
	delete(s.cqs, topic)
	s.cqMu.Unlock()
	s.disp.queues.reset() // under dispMu
	s.putMu.Unlock()
	for _, cq := range qs {
		cq.closeAll(true)
	}
	dir := filepath.Join(s.opts.Root, "consumequeue", topic)
	if err := s.fs.RemoveAll(dir); err != nil {
		return fmt.Errorf("store: remove %s: %w", dir, err)
	}
	return nil
}
