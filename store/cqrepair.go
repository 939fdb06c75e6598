package store

import (
	"errors"
	"fmt"
	"log/slog"
	"slices"

	"github.com/smartgo/smartgo/store/record"
)

// Consume-queue repair. A consume queue is derived data: every entry is
// (phy, size, tagsCode) of a record the commitlog holds, which carries its
// own topic, queue id and queue offset. Recovery re-checks the last files
// of each queue and re-dispatches what it cuts there; damage in an older
// file (bytes flipped or zeroed in place, a file cut short and extended
// with zeros at open) is met by a read instead. That read rebuilds the
// damaged run of entries from the commitlog before it goes on:
//
//   - the run is every entry around the damaged one that does not point
//     at its own record (holes and entries of records retention removed
//     are neither damaged nor a bound), at most maxRepairRun entries;
//   - the commitlog range to walk lies between the end of the record of
//     the last good entry before the run (else the commitlog's start) and
//     the record of the first good entry after it (else what the
//     dispatcher has reached);
//   - each record of the queue found there with a queue offset in the run
//     makes its entry again, exactly as the dispatcher made it; an offset
//     whose record is not found (damaged or lost in the commitlog too)
//     becomes a hole, so reads skip it without looking again.
//
// The entries are written to the file (pwrite through the shared mapping,
// so readers see them at once) and synced; a reader that meets an entry
// half written refuses it as before. Repairs of a store are serialised
// (cqRepairMu) and write under dispMu, after checking that the run still
// lies below the queue's end: entries in the queue's tail (in memory,
// written by the dispatcher) and entries a truncation rewrote are never
// touched.

// maxRepairRun bounds the entries one repair looks at on each side of the
// damaged entry (a whole default-sized file is 300,000).
const maxRepairRun = 1 << 20

// maxRepairScan bounds the commitlog bytes one pull walks for a rebuild
// (a variable for tests). A run whose range is longer (one with no
// intact entry after it walks up to what the dispatcher has reached) is
// walked over several pulls: repairCQ keeps where it got to
// (cqRepairScans) and answers repairLater, and the pull returns what it
// has before the entry (or nothing: NO_MATCHED_MSG, which clients answer
// by pulling again at once) with the entry's offset as the next one to
// pull. The entries are written when the walk is done, all at once.
// A queue keeps up to maxRepairScans walks (consumers of several groups
// may meet different runs of one queue): a pull at one run does not
// throw another's walk away, which would leave both unfinished for ever.
// DeleteTopic drops the walks of the topic's queues.
var maxRepairScan int64 = 32 << 20

// maxRepairScans bounds the walks under way a queue keeps; past it the
// oldest is dropped (its next pull starts it again).
const maxRepairScans = 4

// repairResult is what repairCQ did for the entry asked about.
type repairResult int

const (
	repairNone  repairResult = iota // a hole now, or nothing could be done
	repairDone                      // rebuilt: read it again
	repairLater                     // the walk goes on at the next call
)

// repairScan is a rebuild under way: entries from..to of cq, found in the
// commitlog walked from lo up to pos so far, to go up to hi.
type repairScan struct {
	from, to int64
	pos, hi  int64
	found    []cqEntry
	rebuilt  int
}

// repairCQ rebuilds the damaged entries around logical offset off of cq
// from the commitlog and reports whether the entry at off was rebuilt
// (false: it is a hole now, or nothing could be done). why is what the
// read found wrong with it. It walks the whole range at once.
func (s *Store) repairCQ(cq *consumeQueue, off int64, why string) bool {
	return s.repairCQWithin(cq, off, why, 0) == repairDone
}

// repairCQWithin is repairCQ walking at most budget bytes of the
// commitlog (0: no bound): repairLater when the walk is not over.
func (s *Store) repairCQWithin(cq *consumeQueue, off int64, why string, budget int64) repairResult {
	s.cqRepairMu.Lock()
	defer s.cqRepairMu.Unlock()
	for _, sc := range s.cqRepairScans[cq] {
		if off >= sc.from && off < sc.to {
			return s.walkRepair(cq, sc, off, why, budget)
		}
	}
	clMin := s.cl.minOffset()
	good := func(o int64) (cqEntry, int) {
		e, ok := cq.entry(o)
		switch {
		case !ok:
			return e, -2 // no file: the run ends
		case e.isHole() || (e.phy >= 0 && e.phy < clMin && e.size > 0):
			return e, 0
		case e.phy < 0 || e.size <= 0 || s.checkEntry(cq, o, e, clMin) != "":
			return e, -1
		}
		return e, 1
	}
	if e, g := good(off); g == 1 || e.isHole() {
		if g == 1 {
			return repairDone // repaired meanwhile by another read
		}
		return repairNone // gone
	} // g == 0 and no hole: below clMin, which the read knows is damage
	limit := cq.maxOff.Load()
	if t := cq.tail.Load(); t != nil {
		limit = min(limit, t.start)
	}
	if off >= limit || off < cq.minOff.Load() {
		return repairNone
	}
	// The run of damaged entries, and the commitlog range holding them.
	from, to := off, off+1
	lo, hi := clMin, s.dispatched.Load()
	for o := off - 1; o >= cq.minOff.Load() && off-o <= maxRepairRun; o-- {
		e, g := good(o)
		if g == -2 {
			break
		}
		if g == 1 {
			lo = e.phy + int64(e.size)
			break
		}
		if g == -1 {
			from = o
		}
	}
	for o := off + 1; o < cq.maxOff.Load() && o-off <= maxRepairRun; o++ {
		e, g := good(o)
		if g == -2 || (g == -1 && o >= limit) {
			break // the tail's entries are the dispatcher's
		}
		if g == 1 {
			hi = e.phy
			break
		}
		if g == -1 {
			to = o + 1
		}
	}
	if lo >= hi {
		return repairNone
	}
	sc := &repairScan{from: from, to: to, pos: lo, hi: hi, found: make([]cqEntry, to-from)}
	for i := range sc.found {
		sc.found[i] = cqEntry{phy: holePhy}
	}
	return s.walkRepair(cq, sc, off, why, budget)
}

// walkRepair walks sc's commitlog range on (records starting within
// budget bytes, 0: to its end) and, once it is walked, writes the
// entries found; else it keeps sc for the next call (repairLater).
// Called with cqRepairMu held.
func (s *Store) walkRepair(cq *consumeQueue, sc *repairScan, off int64, why string, budget int64) repairResult {
	start, stopped := sc.pos, false
	var c segCursor
	c.walk(s.cl, &sc.pos, sc.hi, func(v *record.View, phy int64, size int32) bool {
		if budget > 0 && phy-start >= budget {
			stopped = true // this record is the next call's first
			return false
		}
		if v.QueueID != cq.queueID || v.QueueOffset < sc.from || v.QueueOffset >= sc.to || string(v.Topic) != cq.topic {
			return true
		}
		e := s.dispEntryOf(v)
		if !e.queued() || sc.found[v.QueueOffset-sc.from].phy != holePhy {
			return true
		}
		sc.found[v.QueueOffset-sc.from] = cqEntry{phy: phy, size: size, tags: e.tags}
		sc.rebuilt++
		return true
	}, nil)
	c.releaseCur()
	scans := slices.DeleteFunc(s.cqRepairScans[cq], func(o *repairScan) bool { return o == sc })
	if stopped && !s.liveQueue(cq) {
		// Its topic was deleted meanwhile (DeleteTopic drops the walks
		// it finds; this one was not kept yet).
		delete(s.cqRepairScans, cq)
		return repairNone
	}
	if stopped {
		if s.cqRepairScans == nil {
			s.cqRepairScans = map[*consumeQueue][]*repairScan{}
		}
		if len(scans) >= maxRepairScans {
			scans = slices.Delete(scans, 0, 1) // the oldest
		}
		s.cqRepairScans[cq] = append(scans, sc)
		return repairLater
	}
	if len(scans) == 0 {
		delete(s.cqRepairScans, cq)
	} else {
		s.cqRepairScans[cq] = scans
	}
	from, to, found, rebuilt := sc.from, sc.to, sc.found, sc.rebuilt
	// Against the dispatcher, a truncation and DeleteTopic (which hold
	// dispMu): the run must still lie below the queue's end and tail.
	s.dispMu.Lock()
	qend := cq.maxOff.Load()
	if t := cq.tail.Load(); t != nil {
		qend = min(qend, t.start)
	}
	err := errors.New("the queue was cut below the run meanwhile")
	if to <= qend {
		err = cq.rewrite(from, found)
	}
	s.dispMu.Unlock()
	if err != nil {
		// Pulls meet the entry again: at most one line per interval.
		s.rlog.Log(s.log, slog.LevelError, "cq repair", "store: damaged consume-queue entries not rebuilt",
			"queue", cq.dir, "from", from, "to", to, "err", err)
		return repairNone
	}
	s.stats.cqRebuilt.Add(int64(rebuilt))
	s.stats.cqLost.Add(int64(len(found) - rebuilt))
	s.log.Warn("store: damaged consume-queue entries rebuilt from the commitlog", "queue", cq.dir,
		"from", from, "to", to, "rebuilt", rebuilt, "lost", len(found)-rebuilt, "damage", why)
	if found[off-from].phy != holePhy {
		return repairDone
	}
	return repairNone
}

// liveQueue reports whether cq is still its topic's queue (not deleted).
func (s *Store) liveQueue(cq *consumeQueue) bool {
	s.cqMu.RLock()
	defer s.cqMu.RUnlock()
	return s.cqs[cq.topic][cq.queueID] == cq
}

// dropRepairs drops the rebuilds under way of qs, the queues of a topic
// DeleteTopic removed: they would never be finished nor met again.
func (s *Store) dropRepairs(qs map[int32]*consumeQueue) {
	if len(qs) == 0 {
		return
	}
	s.cqRepairMu.Lock()
	defer s.cqRepairMu.Unlock()
	for _, cq := range qs {
		delete(s.cqRepairScans, cq)
	}
}

// rewrite writes es at logical offsets from.. (below the tail) to the
// queue's files and syncs them.
func (cq *consumeQueue) rewrite(from int64, es []cqEntry) error {
	for len(es) > 0 {
		m, rel := cq.acquireFile(from)
		if m == nil {
			return fmt.Errorf("store: %s: no file holds entry %d", cq.dir, from)
		}
		n := min(int64(len(es)), (m.size-rel)/cqEntrySize)
		buf := make([]byte, n*cqEntrySize)
		for i := range n {
			putCQEntry(buf[i*cqEntrySize:], es[i])
		}
		_, err := m.writeAt(buf, rel)
		if err == nil {
			err = m.datasync()
		}
		m.flushed(m.flushedTo.Load()) // a full file gives its descriptor back
		m.fsys.fds.giveBack(m)
		m.release()
		if err != nil {
			return fmt.Errorf("store: rewrite %s: %w", m.path, err)
		}
		from, es = from+n, es[n:]
	}
	return nil
}
