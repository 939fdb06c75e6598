package broker

import (
	"bytes"
	"cmp"
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"hash/crc32"
	"io"
	"io/fs"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/internal/fsutil"
	"github.com/smartgo/smartgo/internal/wake"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// An engine shard hosted on the log: a deterministic engine (a state
// store or twin shard) whose entries are the records of one queue of a
// system topic. The owner (the master) appends an entry and applies it; a
// slave, or a restart, applies the queue from where its snapshot ends.
// shardLog holds what the hosts of the two kinds of engines share: the
// append with its offset check, the replay, the snapshot files and the
// loops.

// snapshotter is what a hosted engine offers for snapshots.
type snapshotter interface {
	Snapshot(w io.Writer) error
	Restore(r io.Reader) error
}

// freezer is a snapshotter that can copy its state (under mu, paired with
// the shard's log position) and encode it after mu is released, so that
// requests do not wait for the encoding (statestore.Engine.Freeze).
type freezer interface {
	freeze() io.WriterTo
}

// logShard is one hosted shard: its engine's snapshot side, how an entry
// is applied on replay, and its log position.
type logShard struct {
	id   int32
	snap snapshotter
	// replay applies an entry read back from the queue (on a slave, at a
	// restart) at queue offset off with the record's store time.
	replay func(entry []byte, storeTime time.Time, off int64) error

	// snapMu serializes writing the snapshot file with another write and
	// with a reload; it is taken before mu, which a snapshot holds only
	// while the engine copies its state (freezer) or serializes it, not
	// while the state is encoded or the file written and synced (a
	// request waits for mu, on a poller).
	snapMu  sync.Mutex
	mu      sync.Mutex // serializes appends and applies and snapshots; reads do not take it
	next    int64      // queue offset of the next entry to apply; protected by mu
	lastEnd int64      // commitlog offset past the last record the shard wrote or applied; protected by mu
	snapAt  int64      // next when the last snapshot was written; protected by mu
	// snapSize is the size of the last snapshot an engine without
	// freezer serialized, the next one's buffer's first size; protected
	// by snapMu.
	snapSize int
	applied  atomic.Int64 // lastEnd, readable without mu (the read barrier, logshard_role.go)
	failed   error        // set on an apply or log error: the shard stops (fail-stop); protected by mu
	down     atomic.Bool  // failed != nil, readable without mu
	putDone  shardPutDone // answers the shard's put written behind (put); protected by mu
}

// fail stops the shard with err. Called with mu held.
func (sh *logShard) fail(err error) {
	sh.failed = err
	sh.down.Store(true)
}

// failure returns the error that stopped the shard, if any.
func (sh *logShard) failure() error {
	sh.mu.Lock()
	defer sh.mu.Unlock()
	return sh.failed
}

// shardLog is the log side of one kind of hosted engine.
type shardLog struct {
	b      *Broker
	topic  string
	dir    string // snapshot files <dir>/shard-<n>.snap
	magic  string // the snapshot file's 8-byte magic
	what   string // "state store", "twin": in errors and logs
	log    *slog.Logger
	shards []*logShard

	// Controller mode (logshard_role.go): slave while the shards follow
	// the log; wantMaster once the broker became master, until every
	// shard applied its whole queue; empty is the snapshot of an empty
	// engine (to reset a shard the log was cut under).
	slave      atomic.Bool
	wantMaster atomic.Bool
	roleWake   atomic.Pointer[wake.Notifier] // replicateLoop's wake-up, for role changes
	roleMu     sync.Mutex
	empty      []byte

	// onTakeOver, when set, runs for each healthy shard (mu held) when a
	// promotion completes, before the host serves as master.
	onTakeOver func(sh *logShard)

	// Lifetime of the host's loops (goFunc), shared by its engines.
	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error

	opening shardOpen // loaded yet, or why not (logshard_open.go)

	errUnavailable error // wrapped when an append fails (nothing changed)
	errNotOwner    error // wrapped when this broker may not serve (controller mode)
	errFailed      error // wrapped when a shard stopped
}

// Shard snapshot file <dir>/shard-<n>.snap (format 1). Integers
// big-endian.
//
//	size  field
//	   8  MAGIC     "SGSSHARD" (state store) or "SGTSHARD" (twins)
//	   4  FORMAT    1
//	   4  SHARD     uint32 shard number
//	   8  NEXT      int64 queue offset of the first log entry NOT in the snapshot
//	   n  STATE     the engine's Snapshot bytes (own format and CRC)
//	   4  CRC       CRC32-C (Castagnoli) of every byte before it
//
// It is written with fsutil.WriteFileAtomicFunc (writeShardSnapshot
// streams it into the temp file), only when every record the
// shard wrote up to NEXT is flushed in the commitlog, so the log never
// lacks an entry below NEXT. Restart: Restore(STATE), then apply the
// queue from NEXT. TestStateStoreSnapshotFilePinned pins the header.
const (
	shardSnapFormat = 1
	shardSnapHead   = 8 + 4 + 4 + 8
	ssSnapMagic     = "SGSSHARD"
	twinSnapMagic   = "SGTSHARD"
)

var ssCastagnoli = crc32.MakeTable(crc32.Castagnoli)

func (h *shardLog) snapPath(id int32) string {
	return filepath.Join(h.dir, fmt.Sprintf("shard-%d.snap", id))
}

// writeShardSnapshot writes the snapshot file of a shard at next to w:
// the header, the STATE that state writes, then the CRC of both, summed
// as the bytes go out, so that the file is never held in memory (a
// shard of a million keys is hundreds of megabytes).
func writeShardSnapshot(w io.Writer, magic string, id int32, next int64, state func(io.Writer) error) error {
	cw := &crcWriter{w: w}
	var head [shardSnapHead]byte
	copy(head[:8], magic)
	binary.BigEndian.PutUint32(head[8:], shardSnapFormat)
	binary.BigEndian.PutUint32(head[12:], uint32(id))
	binary.BigEndian.PutUint64(head[16:], uint64(next))
	if _, err := cw.Write(head[:]); err != nil {
		return err
	}
	if err := state(cw); err != nil {
		return err
	}
	var sum [4]byte
	binary.BigEndian.PutUint32(sum[:], cw.sum)
	_, err := w.Write(sum[:])
	return err
}

// crcWriter passes writes on to w and sums what w took (CRC32-C).
type crcWriter struct {
	w   io.Writer
	sum uint32
}

func (c *crcWriter) Write(p []byte) (int, error) {
	n, err := c.w.Write(p)
	c.sum = crc32.Update(c.sum, ssCastagnoli, p[:n])
	return n, err
}

// encodeShardSnapshot returns the snapshot file of a shard at next
// (writeShardSnapshot into memory).
func encodeShardSnapshot(magic string, id int32, next int64, state []byte) []byte {
	var b bytes.Buffer
	_ = writeShardSnapshot(&b, magic, id, next, func(w io.Writer) error {
		_, err := w.Write(state)
		return err
	}) // a bytes.Buffer takes every write
	return b.Bytes()
}

// decodeShardSnapshot checks a snapshot file and returns NEXT and STATE.
func decodeShardSnapshot(b []byte, magic string, id int32) (next int64, state []byte, err error) {
	if len(b) < shardSnapHead+4 || string(b[:8]) != magic {
		return 0, nil, errors.New("bad magic or too short")
	}
	body, sum := b[:len(b)-4], binary.BigEndian.Uint32(b[len(b)-4:])
	if crc32.Checksum(body, ssCastagnoli) != sum {
		return 0, nil, errors.New("checksum mismatch")
	}
	if f := binary.BigEndian.Uint32(b[8:]); f != shardSnapFormat {
		return 0, nil, fmt.Errorf("unsupported format %d", f)
	}
	if got := int32(binary.BigEndian.Uint32(b[12:])); got != id {
		return 0, nil, fmt.Errorf("snapshot of shard %d", got)
	}
	next = int64(binary.BigEndian.Uint64(b[16:]))
	if next < 0 {
		return 0, nil, fmt.Errorf("negative offset %d", next)
	}
	return next, body[shardSnapHead:], nil
}

// loadSnapshot restores a shard from its snapshot file, if there is a
// usable one, and sets its position to the snapshot's NEXT. A snapshot
// that cannot be read, or that covers entries the log no longer has (a
// tail the store's recovery cut, a cut that a crash kept from reloading
// the shard), is set aside (setAside) while the whole log is there, and
// the log is replayed from its start: the log is what slaves hold, and a snapshot
// ahead of it would put the next entries at offsets the shard has already
// passed (and be loaded again, stale, once the log grew past it).
func (h *shardLog) loadSnapshot(sh *logShard) error {
	data, err := os.ReadFile(h.snapPath(sh.id))
	switch {
	case errors.Is(err, fs.ErrNotExist):
		return nil
	case err != nil:
		return fmt.Errorf("broker: %s shard %d: %w", h.what, sh.id, err)
	}
	next, state, derr := decodeShardSnapshot(data, h.magic, sh.id)
	if logEnd := h.logEnd(sh); derr == nil && next > logEnd {
		derr = fmt.Errorf("%w: it covers queue offsets up to %d, the log ends at %d", errSnapshotAhead, next, logEnd)
	}
	if derr == nil {
		derr = sh.snap.Restore(bytes.NewReader(state))
	}
	if derr != nil {
		// A bad snapshot is survivable while the whole log is there.
		if h.b.store.MinOffset(h.topic, sh.id) > 0 {
			return fmt.Errorf("broker: %s shard %d: snapshot unusable and log truncated: %w", h.what, sh.id, derr)
		}
		return h.setAside(sh, derr)
	}
	sh.next, sh.snapAt = next, next
	return nil
}

// snapAsideKeep is how many set-aside snapshots of a shard are kept.
const snapAsideKeep = 3

// setAside moves a shard's unusable snapshot out of the way, to
// <name>.ahead-<unix nanoseconds>, rather than deleting it: a snapshot
// ahead of its log may be the only copy of acknowledged writes from a
// tail the store's recovery cut (docs/durability.md says how an operator
// gets them back). The newest snapAsideKeep are kept per shard; where it
// went is logged.
func (h *shardLog) setAside(sh *logShard, why error) error {
	path := h.snapPath(sh.id)
	aside := fmt.Sprintf("%s.ahead-%d", path, time.Now().UnixNano())
	if err := os.Rename(path, aside); err != nil {
		if errors.Is(err, fs.ErrNotExist) {
			return nil
		}
		return fmt.Errorf("broker: %s shard %d: set the snapshot aside: %w", h.what, sh.id, err)
	}
	h.log.Warn("snapshot unusable, set aside; replaying the whole log", "shard", sh.id, "err", why, "aside", aside)
	old, _ := filepath.Glob(path + ".ahead-*")
	if len(old) > snapAsideKeep {
		slices.SortFunc(old, func(a, b string) int {
			return cmp.Compare(asideStamp(a), asideStamp(b))
		})
		for _, o := range old[:len(old)-snapAsideKeep] {
			if err := os.Remove(o); err != nil && !errors.Is(err, fs.ErrNotExist) {
				h.log.Warn("old set-aside snapshot not removed", "path", o, "err", err)
			}
		}
	}
	return nil
}

// asideStamp is the time in a set-aside snapshot's name (0 if none).
func asideStamp(name string) int64 {
	i := strings.LastIndex(name, ".ahead-")
	if i < 0 {
		return 0
	}
	n, _ := strconv.ParseInt(name[i+len(".ahead-"):], 10, 64)
	return n
}

// errSnapshotAhead: a shard's snapshot covers queue offsets past the end
// of its log.
var errSnapshotAhead = errors.New("snapshot ahead of the log")

// logEnd is the end of the shard's queue, or the largest int64 when the
// queue may not show the whole log yet (controller mode at start, whose
// dispatch limit hides what the sync state set lacks: a cut there reaches
// the shard through truncated).
func (h *shardLog) logEnd(sh *logShard) int64 {
	if h.b.controlled() && h.b.store.DispatchedPhysicalOffset() < h.b.store.MaxPhysicalOffset() {
		return math.MaxInt64
	}
	return h.b.store.MaxOffset(h.topic, sh.id)
}

// replayAll applies the log after the snapshot; a shard whose log cannot
// be replayed stops (it answers errors until an operator repairs its
// log) and the others serve.
func (h *shardLog) replayAll(sh *logShard, start time.Time) {
	from := sh.next
	if err := h.catchUpLocked(sh); err != nil {
		sh.fail(err)
		h.log.Error("shard stopped at replay", "shard", sh.id, "err", err)
		return
	}
	if sh.next > 0 {
		h.log.Info("shard restored", "shard", sh.id, "snapshot", from, "replayed", sh.next-from, "took", time.Since(start))
	}
}

// catchUpLocked applies the shard's queue from sh.next to its end.
// Called with sh.mu held.
func (h *shardLog) catchUpLocked(sh *logShard) error {
	st := h.b.store
	for {
		maxOff := st.MaxOffset(h.topic, sh.id)
		if sh.next >= maxOff {
			return nil
		}
		if minOff := st.MinOffset(h.topic, sh.id); sh.next < minOff {
			return fmt.Errorf("broker: %s shard %d: log starts at %d, snapshot needs %d (retention removed entries not in a snapshot)",
				h.what, sh.id, minOff, sh.next)
		}
		res, err := st.GetMessages(h.topic, sh.id, sh.next, 256, nil)
		if err != nil {
			return fmt.Errorf("broker: %s shard %d: read log: %w", h.what, sh.id, err)
		}
		if len(res.Buffers) == 0 {
			status := res.Status
			res.Release()
			return fmt.Errorf("broker: %s shard %d: read log at %d: %s", h.what, sh.id, sh.next, status.String())
		}
		for i, buf := range res.Buffers {
			off, phy := res.QueueOffsets[i], res.PhysicalOffsets[i]
			m, _, err := record.Decode(buf, true)
			if err == nil {
				err = sh.replay(m.Body, time.UnixMilli(m.StoreTimestamp), off)
			}
			if err != nil {
				res.Release()
				return fmt.Errorf("broker: %s shard %d: entry at queue offset %d: %w", h.what, sh.id, off, err)
			}
			sh.next = off + 1
			sh.lastEnd = max(sh.lastEnd, phy+int64(len(buf)))
			sh.applied.Store(sh.lastEnd)
		}
		res.Release()
	}
}

// appendLocked appends entry to the shard's queue and, once stored, calls
// apply with the record's store time and queue offset. Called with sh.mu
// held. An append failure changes nothing (errUnavailable); an entry
// stored at an unexpected offset or an apply error stops the shard
// (errFailed). ctx bounds only a sync flush's wait for the group commit,
// which the store bounds itself (SyncFlushTimeout): no timer of its own
// per append.
func (h *shardLog) appendLocked(ctx context.Context, sh *logShard, entry []byte, apply func(storeTime time.Time, off int64) error) error {
	m := &record.Message{}
	h.entryRecord(m, sh, entry, h.b.now())
	res, err := h.put(ctx, sh, m)
	if err != nil {
		return fmt.Errorf("%w: append to shard %d: %w", h.errUnavailable, sh.id, err)
	}
	if err := h.storedAtLocked(sh, res); err != nil {
		return err
	}
	if err := apply(time.UnixMilli(res.StoreTimestamp), res.QueueOffset); err != nil {
		return h.applyFailedLocked(sh, res, err)
	}
	h.appliedLocked(sh, res)
	return nil
}

// entryRecord sets m to the record of a shard's entry.
func (h *shardLog) entryRecord(m *record.Message, sh *logShard, entry []byte, now time.Time) {
	*m = record.Message{Topic: h.topic, QueueID: sh.id, Body: entry, BornTimestamp: now.UnixMilli(),
		BornHost: h.b.storeHost, StoreHost: h.b.storeHost}
}

// storedAtLocked checks that the store took the shard's entry at the
// queue offset the shard applies next, and stops the shard otherwise
// (someone else wrote to the queue: the engine would diverge). Called
// with sh.mu held.
func (h *shardLog) storedAtLocked(sh *logShard, res store.PutResult) error {
	if res.QueueOffset == sh.next {
		return nil
	}
	sh.fail(fmt.Errorf("broker: %s shard %d: entry stored at queue offset %d, expected %d", h.what, sh.id, res.QueueOffset, sh.next))
	h.log.Error("shard stopped", "shard", sh.id, "err", sh.failed)
	return fmt.Errorf("%w: %w", h.errFailed, sh.failed)
}

// applyFailedLocked stops the shard after the apply of the entry stored
// at res failed. Called with sh.mu held.
func (h *shardLog) applyFailedLocked(sh *logShard, res store.PutResult, err error) error {
	sh.fail(fmt.Errorf("broker: %s shard %d: apply offset %d: %w", h.what, sh.id, res.QueueOffset, err))
	h.log.Error("shard stopped", "shard", sh.id, "err", sh.failed)
	return fmt.Errorf("%w: %w", h.errFailed, sh.failed)
}

// appliedLocked moves the shard's position past the entry stored at res,
// applied. Called with sh.mu held.
func (h *shardLog) appliedLocked(sh *logShard, res store.PutResult) {
	sh.next = res.QueueOffset + 1
	sh.lastEnd = max(sh.lastEnd, res.PhysicalOffset+int64(res.WroteBytes))
	sh.applied.Store(sh.lastEnd)
	if res.Status != store.PutOK {
		h.log.Warn("entry stored with status", "shard", sh.id, "status", res.Status.String())
	}
}

// putBehind stores an entry's record written behind without draining
// (store.PutAsyncDeferred), for a caller that drains once for a batch of
// puts (the state store's deferred mutations): done is told the result
// by the caller's Drain, or by a drain or dispatch round under way, or
// here when the store did not write the record behind (it is in the page
// cache already). Only under async flush. Called with sh.mu held, so the
// shard's records are put in the order their entries were prepared. An
// error is a put refused at once: done is not told. began is the put's
// start, a wall clock reading the caller took anyway (the record's store
// time and the put's latency follow from it: store.PutAsyncDeferredAt);
// zero reads the clock.
func (h *shardLog) putBehind(sh *logShard, m *record.Message, done store.PutDone, began time.Time) error {
	res, pending, err := h.b.store.PutAsyncDeferredAt(m, false, done, began)
	if err != nil {
		return fmt.Errorf("%w: append to shard %d: %w", h.errUnavailable, sh.id, err)
	}
	if !pending {
		done.PutDone(res, nil)
	}
	return nil
}

// put stores an entry's record. Under async flush, where a put waits for
// no flush, the record is written behind and drained at once on the
// caller's goroutine (store.Drain): one pwrite, the put answered and the
// round dispatched here, instead of a copy into the mapping that wakes the
// store's dispatcher (a thread wake-up per entry). Either way the put
// returns once the record is in the page cache, as before. Called with
// sh.mu held, which keeps one put per shard outstanding.
func (h *shardLog) put(ctx context.Context, sh *logShard, m *record.Message) (store.PutResult, error) {
	st := h.b.store
	if h.b.opts.Store.FlushMode != store.FlushAsync {
		return st.Put(ctx, m) // sync flush: waits for the group commit
	}
	if sh.putDone == nil {
		sh.putDone = make(shardPutDone, 1)
	}
	res, pending, err := st.PutAsyncDeferred(m, false, sh.putDone)
	if err != nil || !pending {
		return res, err
	}
	st.Drain()
	// Answered by the drain above, or, when another drain or a dispatch
	// round was under way, by that round: waiting for it is waiting for
	// a lock held across one pwrite.
	r := <-sh.putDone
	return r.res, r.err
}

// shardPutDone receives the answer of a shard's put written behind (at
// most one is outstanding per shard).
type shardPutDone chan shardPutResult

type shardPutResult struct {
	res store.PutResult
	err error
}

// PutDone implements store.PutDone; it never blocks (one put per shard).
func (d shardPutDone) PutDone(res store.PutResult, err error) { d <- shardPutResult{res, err} }

// snapshotShard writes the shard's snapshot if it changed and every
// record it covers is flushed. The engine's state is taken under sh.mu,
// the file written after releasing it.
func (h *shardLog) snapshotShard(sh *logShard) error {
	sh.snapMu.Lock()
	defer sh.snapMu.Unlock()
	sh.mu.Lock()
	if sh.failed != nil || sh.next == sh.snapAt {
		sh.mu.Unlock()
		return nil
	}
	if sh.lastEnd > h.b.store.FlushedPhysicalOffset() {
		sh.mu.Unlock()
		return nil // not durable yet; the next round (or the log) covers it
	}
	if h.b.controlled() && sh.lastEnd > h.b.store.DispatchedPhysicalOffset() {
		sh.mu.Unlock()
		return nil // not on the whole sync state set yet: a failover could cut it
	}
	next := sh.next
	// The engine's state is copied under mu (freezer) and encoded into
	// the file after; an engine that cannot copy it serializes it under
	// mu, into memory, written after.
	var state func(io.Writer) error
	if f, ok := sh.snap.(freezer); ok {
		frozen := f.freeze()
		sh.mu.Unlock()
		state = func(w io.Writer) error {
			_, err := frozen.WriteTo(w)
			return err
		}
	} else {
		var buf bytes.Buffer
		buf.Grow(sh.snapSize)
		err := sh.snap.Snapshot(&buf)
		sh.mu.Unlock()
		if err != nil {
			return fmt.Errorf("broker: %s shard %d snapshot: %w", h.what, sh.id, err)
		}
		sh.snapSize = buf.Len()
		state = func(w io.Writer) error {
			_, err := w.Write(buf.Bytes())
			return err
		}
	}
	if err := fsutil.WriteFileAtomicFunc(h.snapPath(sh.id), 0o644, func(w io.Writer) error {
		return writeShardSnapshot(w, h.magic, sh.id, next, state)
	}); err != nil {
		return fmt.Errorf("broker: %s shard %d snapshot: %w", h.what, sh.id, err)
	}
	sh.mu.Lock()
	sh.snapAt = next // a reload, which would reset it, waits for snapMu
	sh.mu.Unlock()
	return nil
}

// snapshotAll writes every healthy shard's snapshot (when its records
// are flushed).
func (h *shardLog) snapshotAll() error {
	if h.notOpen() != nil {
		return nil // nothing loaded, nothing to write
	}
	var errs []error
	for _, sh := range h.shards {
		errs = append(errs, h.snapshotShard(sh))
	}
	return errors.Join(errs...)
}

func (h *shardLog) snapshotLoop(ctx context.Context, every time.Duration) {
	t := time.NewTicker(every)
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			if err := h.snapshotAll(); err != nil {
				h.log.Error("snapshot", "err", err)
			}
		}
	}
}

// syncAll (slave) applies every replicated entry already dispatched, and
// returns the first shard's failure.
func (h *shardLog) syncAll() error {
	if err := h.notOpen(); err != nil {
		return err
	}
	var first error
	for _, sh := range h.shards {
		sh.mu.Lock()
		if sh.failed == nil {
			if err := h.catchUpLocked(sh); err != nil {
				sh.fail(err)
				h.log.Error("shard stopped", "shard", sh.id, "err", err)
			}
		}
		if first == nil {
			first = sh.failed
		}
		sh.mu.Unlock()
	}
	return first
}

// replicateLoop (slave) applies the entries the master's log brought. It
// is woken by the broker's arrival listener whenever entries of its topic
// are dispatched (and by role changes); there is no polling.
func (h *shardLog) replicateLoop(ctx context.Context) {
	n := &wake.Notifier{}
	h.b.arrivalWakes.Store(h.topic, n)
	defer h.b.arrivalWakes.CompareAndDelete(h.topic, n)
	h.roleWake.Store(n)
	for {
		ch := n.Wait()
		if h.slave.Load() { // controller mode: a master applies its own entries
			_ = h.syncAll()
			if h.wantMaster.Load() {
				h.tryTakeOver()
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-ch:
		}
	}
}

// err joins the errors that stopped shards; before the shards are open,
// why they are not.
func (h *shardLog) err() error {
	if err := h.notOpen(); err != nil {
		return err
	}
	var errs []error
	for _, sh := range h.shards {
		errs = append(errs, sh.failure())
	}
	return errors.Join(errs...)
}

// goFunc runs fn as one of the host's loops, waited for by stop.
func (h *shardLog) goFunc(fn func()) {
	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		fn()
	}()
}

// stop ends the loops without a snapshot (close, and tests that simulate
// a crash).
func (h *shardLog) stop() {
	if h.cancel != nil {
		h.cancel()
	}
	h.wg.Wait()
}

// close stops following the controller's role changes (l is the engine
// registered as listener), ends the loops and writes a final snapshot of
// every healthy shard. It is idempotent.
func (h *shardLog) close(l roleListener) error {
	h.closeOnce.Do(func() {
		if h.b.controlled() {
			h.b.removeRoleListener(l)
		}
		h.stop()
		h.closeErr = h.snapshotAll()
	})
	return h.closeErr
}
