package store

import (
	"errors"
	"fmt"
	"log/slog"

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

// repairCQ rebuilds the damaged entries around logical offset off of cq
// from the commitlog and reports whether the entry at off was rebuilt
// (false: it is a hole now, or nothing could be done). why is what the
// read found wrong with it.
func (s *Store) repairCQ(cq *consumeQueue, off int64, why string) bool {
	s.cqRepairMu.Lock()
	defer s.cqRepairMu.Unlock()
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
		return g == 1 // repaired meanwhile by another read (or gone)
	} // g == 0 and no hole: below clMin, which the read knows is damage
	limit := cq.maxOff.Load()
	if t := cq.tail.Load(); t != nil {
		limit = min(limit, t.start)
	}
	if off >= limit || off < cq.minOff.Load() {
		return false
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
		return false
	}
	found := make([]cqEntry, to-from)
	for i := range found {
		found[i] = cqEntry{phy: holePhy}
	}
	rebuilt := 0
	var c segCursor
	pos := lo
	c.walk(s.cl, &pos, hi, func(v *record.View, phy int64, size int32) bool {
		if v.QueueID != cq.queueID || v.QueueOffset < from || v.QueueOffset >= to || string(v.Topic) != cq.topic {
			return true
		}
		e := s.dispEntryOf(v)
		if !e.queued() || found[v.QueueOffset-from].phy != holePhy {
			return true
		}
		found[v.QueueOffset-from] = cqEntry{phy: phy, size: size, tags: e.tags}
		rebuilt++
		return true
	}, nil)
	c.releaseCur()
	// Against the dispatcher, a truncation and DeleteTopic (which hold
	// dispMu): the run must still lie below the queue's end and tail.
	s.dispMu.Lock()
	end := cq.maxOff.Load()
	if t := cq.tail.Load(); t != nil {
		end = min(end, t.start)
	}
	err := errors.New("the queue was cut below the run meanwhile")
	if to <= end {
		err = cq.rewrite(from, found)
	}
	s.dispMu.Unlock()
	if err != nil {
		// Pulls meet the entry again: at most one line per interval.
		s.rlog.Log(s.log, slog.LevelError, "cq repair", "store: damaged consume-queue entries not rebuilt",
			"queue", cq.dir, "from", from, "to", to, "err", err)
		return false
	}
	s.stats.cqRebuilt.Add(int64(rebuilt))
	s.stats.cqLost.Add(int64(len(found) - rebuilt))
	s.log.Warn("store: damaged consume-queue entries rebuilt from the commitlog", "queue", cq.dir,
		"from", from, "to", to, "rebuilt", rebuilt, "lost", len(found)-rebuilt, "damage", why)
	return found[off-from].phy != holePhy
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
