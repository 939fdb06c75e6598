package store

import (
	"fmt"
	"log/slog"
	"math"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/store/record"
)

// The key index follows the dispatcher through the commitlog. A dispatch
// round that ends with the records' notes at hand and room in the newest
// index file indexes them itself (indexAfterRound): adding a key is a few
// writes to memory (indexFile keeps its slot table and new entries out of
// the mapping), cheaper than waking another thread. What costs more (records to
// read back, as on a slave; a new index file to make; a long round) is
// left to the indexer goroutine, which the dispatcher wakes then, so that
// consume queues, and so every consumer, never wait for it. The index
// only ever trails the dispatcher, so it reads records that were already
// validated.
//
// Progress survives a restart through the newest index file's header:
// its endPhy is the last record walked (keys or not), and recovery walks
// again from there.

// segCursor holds a reader reference on the commitlog segment a follower
// (dispatcher or indexer) is reading, across rounds.
type segCursor struct {
	cur *mappedFile
	// view is the record next parsed last. It lives here because handing
	// a local to walk's visit (an unknown function) moves it to the heap,
	// once per record (TestStorePutBatchAllocs).
	view record.View
	// verify: check each record's integrity (record.Verify), not only its
	// structure. The dispatcher does for bytes that did not come from this
	// store's writer in this run: at recovery and for replicated bytes.
	verify bool
}

func (c *segCursor) releaseCur() {
	if c.cur != nil {
		c.cur.release()
		c.cur = nil
	}
}

// segmentFor returns the segment holding off, keeping a reference across
// calls.
func (c *segCursor) segmentFor(cl *commitLog, off int64) *mappedFile {
	if c.cur != nil && c.cur.base <= off && off < c.cur.base+c.cur.size && !c.cur.removed.Load() {
		return c.cur
	}
	c.releaseCur()
	c.cur = cl.acquireAt(off)
	return c.cur
}

// step is what segCursor.next found.
type step int

const (
	stepRecord step = iota // a complete record
	stepMoved              // the position moved past a segment filler or a deleted segment: call again
	stepStop               // nothing complete before end (no segment, or a record still arriving)
	stepSkip               // bytes that are not a record were skipped: call again
)

// next reads the record at *pos for a follower of the commitlog, taking
// only what lies below end (raw replication can end mid-record). On
// stepRecord, c.view is the record and size its length (the caller advances
// *pos). Bytes that are not a valid record (damage, a hole of zeros) are
// skipped up to the next valid record (nextValid), or to the end of their
// segment when the log goes on after it: stepSkip, with seg/rel locating
// them, *pos moved past them and err saying why. When nothing valid follows
// them yet, it returns stepStop at them (a replicated record may still be
// arriving).
func (c *segCursor) next(cl *commitLog, pos *int64, end int64) (size int32, seg *mappedFile, rel int64, st step, err error) {
	seg = c.segmentFor(cl, *pos)
	if seg == nil {
		if min := cl.minOffset(); *pos < min {
			*pos = min
			return 0, nil, 0, stepMoved, nil
		}
		return 0, nil, 0, stepStop, nil
	}
	rel = *pos - seg.base
	if *pos+record.BlankHeaderSize > end {
		return 0, seg, rel, stepStop, nil // header not complete yet
	}
	size, magic, _ := record.PeekHeader(seg.data[rel:])
	if magic == record.MagicBlank && int64(size) == seg.size-rel {
		*pos = seg.base + seg.size
		return 0, seg, rel, stepMoved, nil
	}
	limit := min(seg.size, end-seg.base)
	if magic == record.MagicMessage && size >= record.MinRecordSize && int64(size) <= seg.size-rel {
		if *pos+int64(size) > end {
			if _, ok := nextValid(seg, rel+1, limit); !ok {
				return 0, seg, rel, stepStop, nil // record not complete yet
			}
			err = fmt.Errorf("record of %d bytes overruns the next valid record", size)
		} else if c.view, err = record.Parse(seg.data[rel:rel+int64(size)], c.verify); err == nil {
			if c.view.PhysicalOffset == *pos {
				return size, seg, rel, stepRecord, nil
			}
			err = fmt.Errorf("PHYSICALOFFSET %d, record is at %d", c.view.PhysicalOffset, *pos)
		}
	} else {
		err = fmt.Errorf("bad record header size=%d magic=0x%08X", size, magic)
	}
	q, ok := nextValid(seg, rel+1, limit)
	switch {
	case ok:
		*pos = seg.base + q
	case end >= seg.base+seg.size:
		*pos = seg.base + seg.size
	default:
		return 0, seg, rel, stepStop, err
	}
	return 0, seg, rel, stepSkip, err
}

// walk calls visit for each complete record from *pos up to end, moving
// *pos past it, and stops at end, at the first record not yet complete, or
// when visit returns false (*pos stays at that record). Bytes that are not
// a record are skipped; skip (if not nil) is told where they were ([rel,
// to) of seg) and why.
func (c *segCursor) walk(cl *commitLog, pos *int64, end int64, visit func(v *record.View, phy int64, size int32) bool,
	skip func(seg *mappedFile, rel, to int64, err error)) {
	for *pos < end {
		size, seg, rel, st, err := c.next(cl, pos, end)
		switch st {
		case stepMoved:
			continue
		case stepStop:
			return
		case stepSkip:
			if skip != nil {
				skip(seg, rel, *pos-seg.base, err)
			}
			continue
		}
		if !visit(&c.view, *pos, size) {
			return
		}
		*pos += int64(size)
	}
}

// indexer is the index follower's state, owned by whoever holds run: the
// indexer goroutine, or recovery and shutdown when it is not running.
type indexer struct {
	run sync.Mutex // held while indexing (and by HA's startAt)
	segCursor
	pos    int64        // next commitlog offset to index
	q      wroteQueue   // notes of dispatched records (wrote.go)
	noted  int64        // records indexed from notes (tests)
	read   int64        // records read back (tests)
	lastTs int64        // store timestamp of the last record walked
	last   int64        // phy of the last record walked, -1 if none this round
	loops  atomic.Int64 // rounds of the indexer goroutine (tests)
	held   *indexFile   // the newest index file, locked while a range is indexed (indexService.addHeld)

	wake chan struct{} // capacity 1: the dispatcher moved on

	mu sync.Mutex
	// gen is closed when the current round ends, made by the first waiter
	// (nil while nobody waits: a round allocates nothing); protected by mu.
	gen chan struct{}
}

func (ix *indexer) init() {
	ix.wake = make(chan struct{}, 1)
}

// round returns the channel closed when the index next finishes a round.
func (ix *indexer) round() chan struct{} {
	ix.mu.Lock()
	defer ix.mu.Unlock()
	if ix.gen == nil {
		ix.gen = make(chan struct{})
	}
	return ix.gen
}

func (ix *indexer) endRound() {
	ix.mu.Lock()
	if ix.gen != nil {
		close(ix.gen)
		ix.gen = nil
	}
	ix.mu.Unlock()
}

func (s *Store) wakeIndexer() {
	select {
	case s.ix.wake <- struct{}{}:
	default:
	}
}

// indexLoop is the indexer goroutine; the dispatcher wakes it after a
// round that moved and that it did not index itself, and a key query
// waiting for the index wakes it too.
func (s *Store) indexLoop() {
	for {
		select {
		case <-s.done:
			return
		case <-s.ix.wake:
		}
		s.ix.loops.Add(1)
		s.indexAvailable()
	}
}

// indexAvailable indexes everything dispatched so far.
func (s *Store) indexAvailable() {
	s.ix.run.Lock()
	s.markMu.Lock()
	m := s.dispMark
	s.ixq.moveTo(&s.ix.q, math.MaxInt64)
	s.markMu.Unlock()
	s.indexTo(m)
	s.ix.run.Unlock()
	s.ix.endRound()
}

// maxInlineIndex bounds the notes a dispatch round indexes itself.
const maxInlineIndex = 1024

// indexAfterRound brings the index up to the round the dispatcher just
// ended, on the dispatcher itself when that is cheap: when none of the
// round's records has keys (the index only notes how far it walked), or
// when the writer noted them all (at most maxInlineIndex) and the newest
// index file has room for their keys (adding them is a few writes to
// memory each, see indexFile). Otherwise (the indexer is busy, records
// must be read back, a new index file must be made, a long round) it
// wakes the indexer. A round indexed here costs no thread wake-up.
func (s *Store) indexAfterRound() {
	ix := &s.ix
	if !ix.run.TryLock() {
		s.wakeIndexer() // it looks again once its round ends
		return
	}
	s.markMu.Lock()
	m := s.dispMark
	keyless := m.keyedPhy < ix.pos && m.lastPhy >= ix.pos
	inline := keyless || !s.rawMode.Load() && s.ixq.len() <= maxInlineIndex &&
		s.idx.roomFor(s.ixq.len()+len(s.ixq.arena))
	if inline {
		s.ixq.moveTo(&ix.q, math.MaxInt64)
	}
	s.markMu.Unlock()
	if !inline {
		ix.run.Unlock()
		s.wakeIndexer()
		return
	}
	s.indexTo(m)
	ix.run.Unlock()
	ix.endRound()
}

// indexTo indexes up to the dispatch round m (the indexer's notes taken
// up to it). When no record since the indexer's position has keys, it
// moves on without reading them. Caller holds ix.run.
func (s *Store) indexTo(m dispatchMark) {
	ix := &s.ix
	if m.keyedPhy < ix.pos && m.lastPhy >= ix.pos {
		ix.pos = m.end
		ix.q.dropBelow(ix.pos)
		s.idx.walked(m.lastPhy, m.lastTs)
		s.indexTs.Store(m.lastTs)
		s.indexed.Store(m.end)
	} else {
		// Up to the round whose notes were just taken, not a later one.
		s.indexRange(m.end)
	}
}

// indexRange adds the keys of records in [ix.pos, end) to the index; end
// must be a record boundary the dispatcher reached. It takes them from the
// writer's notes the dispatcher passed on (wrote.go) and reads back the
// records it has none for. It reports false if it met bytes that are not
// a record (skipped, as the dispatcher skips them).
func (s *Store) indexRange(end int64) bool {
	ix := &s.ix
	ix.last = -1
	ok := true
	var e dispEntry // each noted record's (entryTo sets every field)
	for ix.pos < end && !s.rstop.stopped() {
		ix.q.dropBelow(ix.pos)
		r := ix.q.first()
		if r == nil || r.phy > ix.pos {
			to := end
			if r != nil {
				to = min(end, r.phy)
			}
			ix.walk(s.cl, &ix.pos, to, s.indexRead, func(*mappedFile, int64, int64, error) { ok = false }) // the dispatcher reports damage
			if ix.pos < to {
				ix.pos = to // bad bytes: the dispatcher has the same view
				ok = false
			}
			continue
		}
		if r.end() > end {
			break
		}
		ix.q.entryTo(r, &e)
		s.indexEntry(&e, r.phy)
		ix.noted++
		ix.pos = r.end()
		ix.q.pop()
	}
	release(&ix.held)
	if ix.last >= 0 {
		s.idx.walked(ix.last, ix.lastTs)
		s.indexTs.Store(ix.lastTs)
	}
	s.indexed.Store(ix.pos)
	return ok
}

// indexRead indexes a record read back (walk's visitor).
func (s *Store) indexRead(v *record.View, phy int64, _ int32) bool {
	if s.rstop.stopped() {
		return false // recovery was stopped (OpenContext)
	}
	s.ix.read++
	e := s.indexEntryOf(v)
	s.indexEntry(&e, phy)
	return true
}

// indexEntry adds a record's KEYS (space separated) and UNIQ_KEY.
func (s *Store) indexEntry(e *dispEntry, phy int64) {
	ix := &s.ix
	ix.last, ix.lastTs = phy, e.ts
	if e.sysFlag&record.TxMask == record.TxRollback || phy <= s.idx.skipPhy {
		return
	}
	forEachIndexKey(e, func(k []byte) { s.indexKey(e, k, phy) })
	s.idx.skipPhy = phy
}

func (s *Store) indexKey(e *dispEntry, key []byte, phy int64) {
	if len(key) == 0 {
		return
	}
	if err := s.idx.addHeld(&s.ix.held, e.topic, key, phy, e.ts); err != nil {
		s.indexFailed(err)
	}
}

// indexFailed reports an index write that failed (a full disk): the keys
// of the records being indexed are not found by key queries; messages
// and their queues are not affected, and the store keeps taking writes.
func (s *Store) indexFailed(err error) {
	s.noSpace(err)
	s.rlog.Log(s.log, slog.LevelError, "index write", "store: index write failed; keys of the records being indexed are not found by key", "err", err)
}

// recoverIndex brings the index up to end (the dispatcher's position after
// recovery) before the goroutines start. It walks from the last record the
// index had walked; with no index file at all, from dispatchFrom, as
// nothing before it had keys to index; when damaged files were removed
// and no file before them is left, from the commitlog start. It returns
// false when recovery was stopped (recoverStop): the index is then left
// uncommitted, as after a crash.
func (s *Store) recoverIndex(dispatchFrom, end int64, reindex bool) bool {
	clMin := s.cl.minOffset()
	from := dispatchFrom
	switch {
	case s.idx.skipPhy >= 0:
		from = s.idx.skipPhy
		if reindex {
			// The record there may have had keys in the removed files.
			s.idx.skipPhy--
		}
	case reindex:
		from = clMin
	}
	from = max(min(from, end), clMin)
	if s.idx.skipPhy >= end {
		// The log lost its tail (a power loss before it was flushed) or
		// the newest index file's header end is damaged.
		name := ""
		if l := s.idx.list(); len(l) > 0 {
			name = l[len(l)-1].mf.path
		}
		s.log.Warn("store: the index covers log offsets past the commitlog's end; records from the end on are indexed into a new file",
			"file", name, "indexEnd", s.idx.skipPhy, "commitlogEnd", end)
	}
	s.idx.cutAt(end) // the log ends before what the index walked (its tail was cut)
	s.ix.pos = from
	ok := s.indexRange(end)
	if s.rstop.check() {
		s.ix.releaseCur()
		return false
	}
	if !ok && from != dispatchFrom {
		// The resume point was not a record boundary of this commitlog.
		from = max(min(dispatchFrom, end), clMin)
		s.ix.pos = from
		s.indexRange(end)
		if s.rstop.check() {
			s.ix.releaseCur()
			return false
		}
	}
	if err := s.idx.commit(); err != nil {
		s.indexFailed(err)
	}
	s.report.IndexFrom = from
	s.ix.pos = end
	s.indexed.Store(end)
	s.ix.releaseCur()
	return true
}

// indexCatchUpWait bounds how long a key query waits for the indexer.
const indexCatchUpWait = 2 * time.Second

// waitIndexed waits (at most d) until the indexer has reached target.
func (s *Store) waitIndexed(target int64, d time.Duration) {
	if s.indexed.Load() >= target {
		return
	}
	t := time.NewTimer(d)
	defer t.Stop()
	for {
		ch := s.ix.round()
		if s.indexed.Load() >= target {
			return
		}
		s.wakeIndexer()
		select {
		case <-ch:
		case <-t.C:
			return
		case <-s.done:
			return
		}
	}
}
