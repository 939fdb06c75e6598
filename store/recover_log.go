package store

import (
	"errors"
	"fmt"
	"sort"

	"github.com/smartgo/smartgo/store/record"
	"golang.org/x/sys/unix"
)

// Commitlog recovery: find the end of the log and every range of bytes in
// it that holds no valid record, keeping every valid record around them.
//
// A record is valid when magic, TOTALSIZE, PHYSICALOFFSET and its
// integrity (record.Verify) agree (validAt). Scanning from a segment start,
// valid records are stepped over; at anything else the scan looks for the
// next valid record (nextValid, skipping the file's holes). If one follows,
// in this segment or a later one, the bytes in between are a skipped range
// (damage, zeros, a short or missing segment): reported, never cut. If none
// follows anywhere, the bytes are the torn tail of the log: the end is the
// last valid record, the rest of its segment is zeroed (durably, so stale
// records can never come back after a later hole) and later segments,
// which hold no valid record, are removed.

// scanCommitLog validates the records of segments idx.. and returns the
// end of the log, recording skipped ranges in the report. When recovery
// is stopped (recoverStop) it returns false at once, having cut nothing.
func (s *Store) scanCommitLog(idx int) (int64, bool) {
	segs := s.cl.list()
	end := segs[idx].base
	var skips []SkippedRange
	verify := s.opts.CheckCRCOnRecover
	for i := idx; i < len(segs); i++ {
		m := segs[i]
		for rel := int64(0); rel < m.size; {
			if s.rstop.stopped() {
				return end, false
			}
			if n, ok := checkAt(m, rel, m.size, verify); ok {
				rel += n
				end = m.base + rel
				continue
			}
			why := badBytesReason(m, rel)
			if q, ok := nextValidData(m, rel+1, m.size); ok {
				skips = append(skips, SkippedRange{File: m.path, From: m.base + rel, To: m.base + q, Err: why})
				rel = q
				continue
			}
			if !anyValidFrom(segs[i+1:]) {
				s.cutLog(end)
				s.addSkipped(skips...)
				return end, true
			}
			// The rest of this segment holds nothing valid; the log goes on.
			skips = append(skips, SkippedRange{File: m.path, From: m.base + rel, To: m.base + m.size, Err: why})
			end = m.base + m.size
			break
		}
	}
	s.cutLog(end)
	s.addSkipped(skips...)
	return end, true
}

// badBytesReason says why the bytes at rel are not a valid record.
func badBytesReason(m *mappedFile, rel int64) error {
	if rel+record.BlankHeaderSize > m.size {
		return errors.New("segment does not end with a filler")
	}
	size, magic, _ := record.PeekHeader(m.data[rel:])
	switch {
	case size == 0 && magic == 0:
		return errors.New("zeros")
	case magic == record.MagicBlank:
		return fmt.Errorf("filler of %d bytes, %d left in segment", size, m.size-rel)
	case magic != record.MagicMessage || size < record.MinRecordSize || int64(size) > m.size-rel:
		return fmt.Errorf("bad record header (size %d, magic 0x%08X)", size, magic)
	}
	b := m.data[rel : rel+int64(size)]
	if phy := int64(be.Uint64(b[record.OffsetPhysicalOffset:])); phy != m.base+rel {
		return fmt.Errorf("PHYSICALOFFSET %d, record is at %d", phy, m.base+rel)
	}
	if _, err := record.Verify(b); err != nil {
		return err
	}
	return errors.New("not a record")
}

// anyValidFrom reports whether any of segs holds a valid record.
func anyValidFrom(segs []*mappedFile) bool {
	for _, m := range segs {
		if _, ok := validAt(m, 0, m.size); ok {
			return true
		}
		if _, ok := nextValidData(m, 1, m.size); ok {
			return true
		}
	}
	return false
}

// nextValidData is nextValid that reads only the data regions of m's file
// (lseek SEEK_DATA/SEEK_HOLE): the unwritten rest of a preallocated
// segment is not read page by page.
func nextValidData(m *mappedFile, from, limit int64) (int64, bool) {
	for from < limit {
		d, ok := dataFrom(m, from)
		if !ok || d >= limit {
			return 0, false
		}
		h, err := m.seek(d, unix.SEEK_HOLE)
		if err != nil || h > limit {
			h = limit
		}
		// A record may start up to a header before its data region
		// begins only if those bytes are data too; start at from.
		if q, ok := nextValid(m, max(from, d), h); ok {
			return q, true
		}
		from = h
	}
	return 0, false
}

// cutLog makes end the end of the commitlog: the rest of its segment is
// zeroed and synced (so that nothing after it can be read as a record,
// even after a later crash), later segments are removed. Bytes that were
// not zero are reported.
func (s *Store) cutLog(end int64) {
	dirty := false
	var keep []*mappedFile
	for _, m := range s.cl.list() {
		switch {
		case m.base+m.size <= end:
			keep = append(keep, m)
		case m.base <= end:
			if m.zeroFrom(end - m.base) {
				dirty = true
				if err := m.syncAll(); err != nil {
					s.log.Error("store: sync after cutting the commitlog tail", "file", m.path, "err", err)
				}
			}
			keep = append(keep, m)
		default:
			if !m.dataAllZero() {
				dirty = true
			}
			_ = m.destroy(true)
		}
	}
	s.cl.setList(keep)
	if dirty {
		s.corruption(&CorruptError{File: s.cl.dir, Offset: end, Reason: "torn tail after the last valid record cut"})
	}
}

// addSkipped merges ranges into the report's skipped ranges (recovery's
// scan and its re-dispatch may both meet the same bytes).
func (s *Store) addSkipped(rs ...SkippedRange) {
	all := append(s.report.Skipped, rs...)
	sort.Slice(all, func(i, j int) bool { return all[i].From < all[j].From })
	var out []SkippedRange
	for _, r := range all {
		if n := len(out); n > 0 && r.From <= out[n-1].To {
			out[n-1].To = max(out[n-1].To, r.To)
			continue
		}
		out = append(out, r)
	}
	s.report.Skipped = out
}

// reportSkipped counts, for each skipped range, the consume-queue entries
// that point into it (stored records lost) and reports the range at ERROR.
func (s *Store) reportSkipped() {
	cqs := s.allCQs()
	for i := range s.report.Skipped {
		r := &s.report.Skipped[i]
		for _, cq := range cqs {
			r.Records += cq.entriesIn(r.From, r.To)
		}
		s.log.Error("store: commitlog range without valid records skipped; later records kept",
			"file", r.File, "from", r.From, "to", r.To, "bytes", r.To-r.From, "records", r.Records, "err", r.Err)
		ce := &CorruptError{File: r.File, Offset: r.From - segBase(r.From, s.cl.segSize),
			Reason: fmt.Sprintf("commitlog [%d, %d) skipped: %d bytes, %d records lost", r.From, r.To, r.To-r.From, r.Records), Err: r.Err}
		s.report.Corruptions = append(s.report.Corruptions, ce)
		s.emit(Event{Kind: EventCorruption, File: r.File, Offset: ce.Offset, Err: ce})
	}
}

// segBase is the start of the segment holding off.
func segBase(off, segSize int64) int64 { return off - off%segSize }

// dataFrom returns the first offset at or after off where m's file holds
// data (lseek SEEK_DATA), ok=false when only a hole follows. Where the
// file system cannot tell, everything is data.
func dataFrom(m *mappedFile, off int64) (int64, bool) {
	d, err := m.seek(off, unix.SEEK_DATA)
	switch {
	case errors.Is(err, unix.ENXIO):
		return 0, false
	case err != nil:
		return off, true
	}
	return d, true
}
