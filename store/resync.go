package store

import (
	"bytes"
	"encoding/binary"

	"github.com/smartgo/smartgo/store/record"
)

// Finding good records again after bad bytes.
//
// Records are not aligned, so after bytes that are not a record (damage,
// or a hole of zeros) the next record can start at any byte. It is found by
// searching forward for a position where a record's fields agree with each
// other: the magic code, a TOTALSIZE that fits, PHYSICALOFFSET equal to the
// position itself, and the record's integrity (record.Verify: the
// whole-record CRC of a sealed record). A segment's closing filler is found
// the same way (blank magic with a TOTALSIZE that reaches the segment end
// exactly). Recovery, the dispatcher and indexer, and replication reads all
// resynchronise with nextValid.

var (
	magicMessage = binary.BigEndian.AppendUint32(nil, record.MagicMessage)
	magicBlank   = binary.BigEndian.AppendUint32(nil, record.MagicBlank)
)

// validAt reports whether a valid record of the commitlog, or the
// segment's closing filler, starts at rel in m with all its bytes below
// limit; size is its length (a filler's reaches the segment end).
func validAt(m *mappedFile, rel, limit int64) (size int64, ok bool) {
	return checkAt(m, rel, limit, true)
}

// checkAt is validAt; without verify, a record's integrity is not checked
// (only its structure and position).
func checkAt(m *mappedFile, rel, limit int64, verify bool) (size int64, ok bool) {
	if rel < 0 || rel+record.BlankHeaderSize > limit {
		return 0, false
	}
	n, magic, _ := record.PeekHeader(m.data[rel:])
	switch {
	case magic == record.MagicBlank:
		return m.size - rel, int64(n) == m.size-rel
	case magic != record.MagicMessage || n < record.MinRecordSize || rel+int64(n) > limit:
		return 0, false
	}
	b := m.data[rel : rel+int64(n)]
	if int64(be.Uint64(b[record.OffsetPhysicalOffset:])) != m.base+rel {
		return 0, false
	}
	var err error
	if verify {
		_, err = record.Verify(b)
	} else {
		_, err = record.Parse(b, false)
	}
	return int64(n), err == nil
}

// nextValid returns the first position in [from, limit) of m where a valid
// record or the closing filler starts (validAt), or ok=false.
func nextValid(m *mappedFile, from, limit int64) (rel int64, ok bool) {
	limit = min(limit, m.size)
	for pos := from; pos+record.BlankHeaderSize <= limit; {
		win := m.data[pos+4 : limit] // magic sits 4 bytes into a record
		i := bytes.Index(win, magicMessage)
		j := bytes.Index(win, magicBlank)
		switch {
		case i < 0 && j < 0:
			return 0, false
		case i < 0 || (j >= 0 && j < i):
			i = j
		}
		cand := pos + int64(i)
		if _, ok := validAt(m, cand, limit); ok {
			return cand, true
		}
		pos = cand + 1
	}
	return 0, false
}
