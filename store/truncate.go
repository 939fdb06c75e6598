package store

import (
	"errors"
	"fmt"
)

// ErrTruncate: TruncateTail was asked for an offset it cannot cut at
// (below the first stored offset, or past the end).
var ErrTruncate = errors.New("store: cannot truncate there")

// TruncateTail removes everything at and after offset: commitlog bytes
// (zeroed on disk, later segments deleted), consume-queue entries pointing
// there, and epoch entries starting there. A replica calls it before it
// replicates from a new master whose log differs from offset on (see
// ConsistentOffset); offset must be a record boundary of this log, at or
// above MinPhysicalOffset. Nobody may write while it runs (a slave
// between two replication sessions); readers are not stopped, and a read
// racing with the cut may still return a record from the removed tail.
// Index entries pointing into the tail stay: queries check the record
// they find.
func (s *Store) TruncateTail(offset int64) error {
	if s.closed.Load() {
		return ErrClosed
	}
	s.dispMu.Lock()
	defer s.dispMu.Unlock()
	s.putMu.Lock()
	defer s.putMu.Unlock()
	if _, err := s.checkWritable(); err != nil {
		return err
	}
	if err := s.cl.drainLocked(); err != nil {
		return s.drainFailed(err)
	}
	end := s.cl.writePos
	if offset == end {
		return s.epochsTruncate(offset)
	}
	if offset > end || offset < s.cl.minOffset() {
		return fmt.Errorf("%w: offset %d outside [%d, %d]", ErrTruncate, offset, s.cl.minOffset(), end)
	}
	s.ix.run.Lock()
	defer s.ix.run.Unlock()
	if err := s.cl.truncateLocked(offset); err != nil {
		s.setWriteErr(err)
		return s.Err()
	}
	for _, cq := range s.allCQs() {
		if err := cq.truncatePhy(offset); err != nil {
			s.setWriteErr(err)
			return s.Err()
		}
		s.setQueueOffsetLocked(cqKey{cq.topic, cq.queueID}, cq.maxOff.Load())
	}
	d := &s.disp
	s.dropNotes()
	d.releaseCur()
	if d.pos > offset {
		d.pos = offset
		s.dispatched.Store(offset)
		s.dispWake.Notify()
	}
	d.lastPhy, d.keyedPhy = -1, -1
	s.markMu.Lock()
	s.dispMark = dispatchMark{end: d.pos, lastPhy: -1, keyedPhy: -1}
	s.markMu.Unlock()
	s.ix.releaseCur()
	if s.ix.pos > offset {
		s.ix.pos = offset
		s.indexed.Store(offset)
	}
	s.idx.cutAt(offset)
	s.log.Warn("store: log truncated", "at", offset, "was", end, "bytes", end-offset)
	s.emit(Event{Kind: EventTruncated, File: s.cl.dir, Offset: offset})
	return s.epochsTruncate(offset)
}

func (s *Store) epochsTruncate(offset int64) error {
	s.epochs.mu.Lock()
	defer s.epochs.mu.Unlock()
	return s.epochs.truncateLocked(offset)
}

// truncateLocked cuts the commitlog at offset: the segment holding it is
// zeroed from there (and synced), later segments (and one starting at the
// cut) are deleted. Caller holds Store.putMu with pend drained.
func (cl *commitLog) truncateLocked(offset int64) error {
	cl.listMu.Lock()
	l := cl.list()
	keep := len(l)
	for keep > 0 && l[keep-1].base >= offset {
		keep-- // a segment starting at the cut goes too: the next put recreates it
	}
	gone := l[keep:]
	cl.setList(append([]*mappedFile(nil), l[:keep]...))
	cl.listMu.Unlock()
	for _, m := range gone {
		if err := m.destroy(true); err != nil {
			return err
		}
	}
	cl.setActive(nil)
	if m := findSeg(cl.list(), offset, cl.segSize); m != nil {
		rel := offset - m.base
		if m.zeroFrom(rel) {
			if err := m.sync(rel); err != nil {
				return err
			}
		}
		m.wrote.Store(rel)
		m.flushedTo.Store(min(m.flushedTo.Load(), rel))
		cl.setActive(m)
	}
	cl.writePos = offset
	cl.appended.Store(offset)
	cl.committed.Store(offset)
	if cl.flushed.Load() > offset {
		cl.flushed.Store(offset)
	}
	cl.flushedTs.Store(0) // unknown again: the next flush samples it
	cl.faulted = offset
	if cl.active != nil {
		cl.scheduleNextLocked()
	}
	return nil
}

// truncatePhy drops the entries (and trailing holes) pointing at offset
// or beyond. Caller holds Store.dispMu.
func (cq *consumeQueue) truncatePhy(offset int64) error {
	if err := cq.dropTail(); err != nil {
		return err
	}
	maxOff, minOff := cq.maxOff.Load(), cq.minOff.Load()
	off := maxOff
	for off > minOff {
		e, ok := cq.entry(off - 1)
		if !ok || (!e.isHole() && e.phy < offset) {
			break
		}
		off--
	}
	if off == maxOff {
		return nil
	}
	pos := off * cqEntrySize
	cq.listMu.Lock()
	l := cq.list()
	keep := len(l)
	for keep > 1 && l[keep-1].base >= pos {
		keep--
	}
	gone := l[keep:]
	cq.setList(append([]*mappedFile(nil), l[:keep]...))
	cq.listMu.Unlock()
	for _, m := range gone {
		if err := m.destroy(true); err != nil {
			return err
		}
	}
	if n := len(cq.list()); n > 0 {
		m := cq.list()[n-1]
		rel := max(0, pos-m.base)
		if rel < m.size {
			if m.zeroFrom(rel) {
				if err := m.sync(rel); err != nil {
					return err
				}
			}
			m.wrote.Store(rel)
			m.flushedTo.Store(min(m.flushedTo.Load(), rel))
		}
	}
	cq.maxOff.Store(off)
	return nil
}

// DropPartialTail removes an incomplete record at the end of a replicated
// log (a replication chunk may end inside a record) and returns the new
// end. A replica calls it when it becomes master, before its first write.
func (s *Store) DropPartialTail() (int64, error) {
	s.dispMu.Lock()
	s.dispatchRangeLocked(s.cl.committed.Load())
	pos := s.disp.pos // before a partial record, or bytes with no valid record after them
	s.dispMu.Unlock()
	end := s.MaxPhysicalOffset()
	if pos >= end {
		return end, nil
	}
	if err := s.TruncateTail(pos); err != nil {
		return end, err
	}
	return pos, nil
}
