package store

import (
	"errors"
	"fmt"
	"log/slog"
	"math"

	"github.com/smartgo/smartgo/store/record"
)

// dispatcher follows the commitlog behind the writer and builds consume
// queues (the indexer follows it, see indexer.go). Its state is owned by whoever holds Store.dispMu:
// the dispatcher goroutine, or recovery before the goroutines start.
type dispatcher struct {
	segCursor
	pos      int64 // next commitlog offset to dispatch
	round    uint64
	touched  []*consumeQueue
	fillGaps bool            // false during the first recovery pass: gaps are only noted
	gapSeen  bool            // a record skipped ahead of its queue's end
	skips    []SkippedRange  // bytes skipped (not records) while recovering, reported by recovery
	lost     bool            // bytes were skipped: queues may have gaps of any size
	recovery bool            // recovery runs the dispatcher (skips are collected, not logged)
	count    int64           // records dispatched (recovery statistics)
	lastPhy  int64           // newest record dispatched, -1 if none yet
	lastTs   int64           // its store timestamp
	keyedPhy int64           // newest record dispatched that the index wants (keys), -1 if none
	refused  []*CorruptError // records refused during recovery (reported)
	stalled  bool            // an entry could not be written (no room, say): the dispatcher stopped at its record
	wq       wroteQueue      // the writer's notes of committed records not dispatched yet (wrote.go)
	toIndex  wroteQueue      // notes of the records dispatched this round, for the indexer
	noted    int64           // records dispatched from notes (tests)
	closed   bool            // the store is closing: Drain dispatches no more
	// The queues of the topic dispatched to last (cqForDispatch): a run
	// of one topic's records finds its queue without the queue table's
	// read lock and two map lookups. DeleteTopic resets it.
	queues queueCache[consumeQueue]
}

// dispatchLoop is the dispatcher goroutine. The writer wakes it through
// dispatchWake after every append; there is no polling.
func (s *Store) dispatchLoop() {
	for {
		select {
		case <-s.done:
			return
		case <-s.dispatchWake:
		}
		s.dispatchAvailable()
	}
}

// dispatchAvailable writes out the puts written behind and answers them
// (writebehind.go), dispatches everything committed and tells arrival
// listeners which queues grew, after releasing dispMu (a listener never
// holds up DeleteTopic or the next round). arriveMu, taken before dispMu
// is released, keeps the notifications of concurrent callers in dispatch
// order.
func (s *Store) dispatchAvailable() {
	s.answerWritten()
	s.dispMu.Lock()
	s.dispatchLocked()
}

// dispatchLocked is dispatchAvailable after the answers, called with
// dispMu held; it releases dispMu.
func (s *Store) dispatchLocked() {
	from := s.disp.pos
	s.dispatchRangeLocked(min(s.cl.committed.Load(), s.dispatchLimit.Load()))
	s.arriveMu.Lock()
	fn := s.arrival.Load()
	if fn != nil {
		for _, cq := range s.disp.touched {
			s.arrived = append(s.arrived, arrivedQueue{cq.topic, cq.queueID, cq.maxOff.Load()})
		}
	}
	s.disp.touched = s.disp.touched[:0]
	moved := s.disp.pos != from
	s.dispMu.Unlock()
	for i, a := range s.arrived {
		(*fn)(a.topic, a.queueID, a.maxOffset)
		s.arrived[i] = arrivedQueue{}
	}
	s.arrived = s.arrived[:0]
	s.arriveMu.Unlock()
	// Consumers first: the index follows after the waiting pulls.
	if moved {
		s.indexAfterRound()
	}
}

// arrivedQueue is a queue a dispatch round grew, for the arrival listener.
type arrivedQueue struct {
	topic     string
	queueID   int32
	maxOffset int64
}

// SetDispatchLimit makes the dispatcher stop at limit: records at or past
// it stay out of the consume queues (consumers do not see them) until the
// limit moves past them. A master whose master is chosen by a controller
// sets it to the offset every replica of its sync state set has, so that
// no consumer reads a record a failover could still take back. A limit
// below what was dispatched already hides nothing; math.MaxInt64 (the
// default) means none.
func (s *Store) SetDispatchLimit(limit int64) {
	if s.dispatchLimit.Swap(limit) < limit {
		s.wakeDispatcher()
	}
}

// dispatchRangeLocked dispatches complete records in [disp.pos, end).
func (s *Store) dispatchRangeLocked(end int64) {
	d := &s.disp
	d.round++
	count := d.count
	// Records this store's writer wrote in this run are not checked again;
	// replicated ones are (and everything at recovery).
	d.verify = d.recovery || s.rawMode.Load()
	if d.verify {
		d.wq.reset() // every record is read back and checked
		d.walk(s.cl, &d.pos, end, s.dispatchRecord, s.dispatchSkipped)
	} else {
		s.dispatchNoted(end)
	}
	// What the round appended is shown at once: one atomic store per
	// queue, one for the store time (not one each per entry).
	for _, cq := range d.touched {
		cq.publish()
	}
	if d.count != count {
		s.dispatchTs.Store(d.lastTs)
	}
	s.dispatched.Store(d.pos)
	s.dispWake.Notify() // after a stall too: it ended the round
	s.markMu.Lock()
	s.dispMark = dispatchMark{end: d.pos, lastPhy: d.lastPhy, lastTs: d.lastTs, keyedPhy: d.keyedPhy}
	d.toIndex.moveTo(&s.ixq, math.MaxInt64)
	s.markMu.Unlock()
}

// dispatchMark is what a dispatch round tells the indexer: where it ended
// and which of its records need the index at all, so that a run of
// records without keys is not parsed a second time.
type dispatchMark struct {
	end      int64 // the dispatched offset
	lastPhy  int64 // newest record before end, -1 if none
	lastTs   int64 // its store timestamp
	keyedPhy int64 // newest record before end with keys to index, -1 if none
}

// dispatchSkipped notes bytes of seg ([rel, to)) that are not a record:
// the records they held (if any) get no consume-queue entries, and their
// queue offsets become holes when later records of the queue arrive.
func (s *Store) dispatchSkipped(seg *mappedFile, rel, to int64, err error) {
	d := &s.disp
	d.lost = true
	r := SkippedRange{File: seg.path, From: seg.base + rel, To: seg.base + to, Err: err}
	if d.recovery {
		d.skips = append(d.skips, r)
		return
	}
	ce := &CorruptError{File: seg.path, Offset: rel, Reason: fmt.Sprintf("%d bytes that are not a record skipped by the dispatcher", to-rel), Err: err}
	s.rlog.Log(s.log, slog.LevelError, "dispatch skip", "store: dispatcher skipped bytes that are not a record",
		"file", seg.path, "from", r.From, "to", r.To, "err", err)
	s.emit(Event{Kind: EventCorruption, File: seg.path, Offset: rel, Err: ce})
}

// dispatchRecord makes the consume-queue entry of a record read back
// (walk's visitor).
func (s *Store) dispatchRecord(v *record.View, phy int64, size int32) bool {
	if s.disp.recovery && s.rstop.stopped() {
		return false // OpenContext's context ended
	}
	e := s.dispEntryOf(v)
	// A sealed record's CRC vouches for its QUEUEOFFSET (checked when
	// verifying only).
	return s.dispatchEntry(&e, phy, size, s.disp.verify && record.IsSealed(v.Properties))
}

// dispatchEntry makes the consume-queue entry of the record at phy. It
// returns false when the entry could not be written (the disk is full, or
// another failure of the file layer, such as the descriptor limit):
// the dispatcher stops at the record and tries it again at its next round
// (the disk watcher wakes it every second).
func (s *Store) dispatchEntry(e *dispEntry, phy int64, size int32, sealed bool) bool {
	d := &s.disp
	if e.queued() {
		cq := s.cqForDispatch(e.topic, e.queueID)
		if !d.fillGaps && e.qoff > cq.next() {
			d.gapSeen = true
		} else {
			maxGap := int64(s.opts.CQEntriesPerFile)
			if d.lost || sealed {
				// Records were lost to damage, or this record's CRC vouches
				// for its QUEUEOFFSET: a gap of any size is real.
				maxGap = math.MaxInt64
			}
			holes, ok, err := cq.appendEntry(e.qoff, cqEntry{phy: phy, size: size, tags: e.tags}, maxGap)
			if err != nil {
				msg := "store: consume-queue entry not written; dispatching waits for disk space"
				stall := fmt.Errorf("consume queue %s/%d: %w", cq.topic, cq.queueID, err)
				if !s.noSpace(err) {
					// Not the disk: say so (a descriptor limit, say).
					msg = "store: consume-queue entry not written; dispatching retries it next round"
				} else if !errors.Is(err, ErrDiskFull) {
					stall = fmt.Errorf("%w: %w", ErrDiskFull, stall)
				}
				s.rlog.Log(s.log, slog.LevelError, "dispatch write", msg,
					"topic", cq.topic, "queue", cq.queueID, "err", err)
				s.dispStall.Store(&stall)
				d.stalled = true
				return false
			} else if !ok {
				ce := &CorruptError{File: s.cl.dir, Offset: phy, Reason: fmt.Sprintf(
					"record claims queue offset %d, queue %s/%d is at %d; not dispatched", e.qoff, cq.topic, cq.queueID, cq.next())}
				s.log.Error("store: implausible queue offset", "err", ce)
				s.emit(Event{Kind: EventCorruption, File: ce.File, Offset: phy, Err: ce})
				if len(d.refused) < 100 {
					d.refused = append(d.refused, ce)
				}
			}
			if s.dispStall.Load() != nil {
				s.dispStall.Store(nil)
			}
			if holes > 0 {
				s.log.Warn("store: consume queue gap filled with holes", "topic", cq.topic, "queue", cq.queueID, "holes", holes)
				s.emit(Event{Kind: EventQueueGap, File: cq.dir, Offset: e.qoff})
			}
			if cq.touched != d.round {
				cq.touched = d.round
				d.touched = append(d.touched, cq)
			}
		}
		if s.rawMode.Load() {
			s.putMu.Lock()
			key := cqKey{cq.topic, cq.queueID}
			if s.queueOffsetLocked(key) < e.qoff+1 {
				s.setQueueOffsetLocked(key, e.qoff+1)
			}
			s.putMu.Unlock()
		}
	}
	d.count++
	d.lastPhy, d.lastTs = phy, e.ts
	if e.keyed() {
		d.keyedPhy = phy
	}
	if s.rawMode.Load() {
		s.cl.lastTs.Store(e.ts)
	}
	return true
}

// dispatchNoted dispatches the records in [disp.pos, end) from the
// writer's notes (wrote.go), reading back only what it has no note for,
// and queues the notes it used for the indexer: in one piece, as they
// leave the front of disp.wq (done counts them), and without a copy when
// the indexer's queue is empty.
func (s *Store) dispatchNoted(end int64) {
	d := &s.disp
	s.putMu.Lock()
	s.wq.moveTo(&d.wq, s.cl.committed.Load())
	s.putMu.Unlock()
	done := 0
	var e dispEntry // each noted record's (entryTo sets every field)
	for d.pos < end {
		var r *wroteRec
		if i := d.wq.head + done; i < len(d.wq.recs) {
			r = &d.wq.recs[i]
		}
		if r == nil || r.phy != d.pos {
			// No note for the record at pos: read it back (notes of
			// records below pos were overtaken, they go).
			d.wq.moveFirst(&d.toIndex, done)
			done = 0
			d.wq.dropBelow(d.pos)
			if r = d.wq.first(); r != nil && r.phy == d.pos {
				continue
			}
			to := end
			if r != nil {
				to = min(end, r.phy)
			}
			d.walk(s.cl, &d.pos, to, s.dispatchRecord, s.dispatchSkipped)
			if d.pos < to {
				break // a record not complete yet, or no room for an entry
			}
			continue
		}
		if r.end() > end {
			break
		}
		d.wq.entryTo(r, &e)
		if !s.dispatchEntry(&e, r.phy, r.size, false) {
			break
		}
		d.pos = r.end()
		d.noted++
		done++
	}
	d.wq.moveFirst(&d.toIndex, done)
}
