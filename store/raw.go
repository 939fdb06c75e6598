package store

import (
	"errors"
	"fmt"
)

// ReadRaw returns up to maxBytes of raw commitlog bytes starting at offset,
// never crossing a segment end or the commitlog end (the master side of
// replication, package store/ha), ending at a record boundary unless a
// single record is larger than maxBytes. Every record in it is verified;
// bytes that are not a valid record are sent as zeros (rawread.go).
// Release the result. An empty result means offset is the end of the log
// (or the rest of a record not complete yet).
func (s *Store) ReadRaw(offset int64, maxBytes int) (*GetResult, error) {
	if s.closed.Load() {
		return nil, ErrClosed
	}
	end := s.cl.committed.Load()
	if offset < s.cl.minOffset() || offset > end {
		return nil, fmt.Errorf("%w: %d outside [%d, %d]", ErrNotFound, offset, s.cl.minOffset(), end)
	}
	r := s.newResult()
	if offset == end || maxBytes <= 0 {
		return r, nil
	}
	m := s.cl.acquireAt(offset)
	if m == nil {
		r.Release()
		return nil, fmt.Errorf("%w: %d (segment gone)", ErrNotFound, offset)
	}
	r.held = append(r.held, m)
	rel := offset - m.base
	n := min(int64(maxBytes), m.size-rel, end-offset)
	s.rawChunk(r, m, rel, n, end-m.base) // verified: see rawread.go
	return r, nil
}

// LastSegmentOffset returns the base offset of the last commitlog segment
// (where a master starts streaming to an empty slave), or the commitlog
// end when there is no segment yet.
func (s *Store) LastSegmentOffset() int64 {
	l := s.cl.list()
	if len(l) == 0 {
		return s.cl.committed.Load()
	}
	return l[len(l)-1].base
}

// startAt makes an empty store begin at a segment boundary (a slave that
// starts replicating from the master's last segment).
func (s *Store) startAt(offset int64) {
	s.dispMu.Lock()
	defer s.dispMu.Unlock()
	s.putMu.Lock()
	defer s.putMu.Unlock()
	if s.cl.writePos != 0 || len(s.cl.list()) != 0 {
		return
	}
	s.cl.writePos = offset
	s.cl.appended.Store(offset)
	s.cl.committed.Store(offset)
	s.cl.flushed.Store(offset)
	s.disp.pos = offset
	s.dispatched.Store(offset)
	s.dispWake.Notify()
	s.ix.run.Lock()
	s.dropNotes()
	s.ix.pos = offset
	s.indexed.Store(offset)
	s.ix.run.Unlock()
}

// AppendRaw copies replicated commitlog bytes to offset, which must equal
// MaxPhysicalOffset (the slave side of
// replication, package store/ha); an empty store
// also accepts any segment boundary, so a slave can start from the
// master's last segment. data may end in the
// middle of a record; the dispatcher only dispatches complete records. It
// must not cross a segment end. Queue offsets for later local puts follow
// the dispatched records.
func (s *Store) AppendRaw(offset int64, data []byte) error {
	if _, err := s.checkWritable(); err != nil {
		return err
	}
	s.rawMode.Store(true)
	if offset > 0 && s.cl.committed.Load() == 0 && offset%s.cl.segSize == 0 {
		s.startAt(offset)
	}
	s.putMu.Lock()
	defer s.putMu.Unlock()
	if _, err := s.checkWritable(); err != nil {
		return err
	}
	if offset != s.cl.writePos {
		return fmt.Errorf("%w: got %d, end is %d", ErrBadOffset, offset, s.cl.writePos)
	}
	if err := s.cl.drainLocked(); err != nil {
		return s.drainFailed(err)
	}
	for len(data) > 0 {
		if s.cl.active == nil || s.cl.writePos >= s.cl.active.base+s.cl.segSize {
			if err := s.cl.rollLocked(); err != nil {
				return s.rawFailed(err)
			}
		}
		seg := s.cl.active
		rel := s.cl.writePos - seg.base
		if int64(len(data)) > seg.size-rel {
			return fmt.Errorf("%w: %d bytes at %d cross the segment end %d", ErrBadOffset, len(data), offset, seg.base+seg.size)
		}
		if err := s.cl.reserveLocked(seg, rel+int64(len(data))); err != nil {
			return s.rawFailed(err) // nothing of data copied: the slave retries it
		}
		n := copy(seg.data[rel:], data)
		data = data[n:]
		s.cl.writePos += int64(n)
		s.cl.appended.Store(s.cl.writePos)
		seg.wrote.Store(rel + int64(n))
		s.cl.committed.Store(s.cl.writePos)
		s.cl.moveReadaheadEdgeLocked(false)
	}
	s.wakeDispatcher()
	return nil
}

// rawFailed is AppendRaw's answer to an append that wrote nothing: a full
// disk or a failed allocation refuses these bytes (replication sends them
// again), anything else fails the store.
func (s *Store) rawFailed(err error) error {
	if isNoSpace(err) || errors.Is(err, errNotWritten) {
		s.noSpace(err)
		return err
	}
	s.setWriteErr(err)
	return s.Err()
}
