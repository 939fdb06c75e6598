package store

import (
	"fmt"
	"io"
	"os"
)

// A consume-queue file longer than its configured size. Two things make
// one: a change of CQEntriesPerFile (the file was written with more
// entries per file: its bytes past the configured size are entries, or
// the zeros of entries not written yet), which stays ErrSegmentSize, since
// cutting would lose entries or read the queue on the wrong grid; and
// bytes appended to the file outside the store (a copy gone wrong, a tool
// writing to the wrong file). Those are not entries: they are cut off at
// open, reported as a corruption (logged), and the queue opens with the
// entries it had.

// cqExcessGarbage reports whether the bytes of file f past size are not
// consume-queue entries: their length is not a whole number of entries,
// or an entry there is neither a hole, nor zeros followed only by zeros,
// nor a record after the entry before it (a positive size and a commitlog
// offset above the previous entry's).
func (cq *consumeQueue) cqExcessGarbage(f numberedFile, size int64) (bool, error) {
	if (f.size-size)%cqEntrySize != 0 {
		return true, nil
	}
	fh, err := cq.fs.OpenFile(f.path, os.O_RDONLY, 0)
	if err != nil {
		return false, fmt.Errorf("store: open %s: %w", f.path, err)
	}
	defer fh.Close()
	// The last entry within size is where the excess must go on from.
	from := max(size-cqEntrySize, 0)
	b := make([]byte, f.size-from)
	if _, err := fh.ReadAt(b, from); err != nil && err != io.EOF {
		return false, fmt.Errorf("store: read %s: %w", f.path, err)
	}
	prev := int64(-1)
	if size > 0 {
		if e := getCQEntry(b[:cqEntrySize]); !allZero(b[:cqEntrySize]) && !e.isHole() {
			prev = e.phy
		}
		b = b[cqEntrySize:]
	}
	zeros := false
	for ; len(b) >= cqEntrySize; b = b[cqEntrySize:] {
		x := b[:cqEntrySize]
		switch e := getCQEntry(x); {
		case allZero(x):
			zeros = true
		case zeros:
			return true, nil // an entry after the end of the queue's entries
		case e.isHole():
		case e.size <= 0 || e.phy <= prev:
			return true, nil
		default:
			prev = e.phy
		}
	}
	return false, nil
}

// cutExcess truncates file f to size and returns the corruption to report.
func (cq *consumeQueue) cutExcess(f numberedFile, size int64) (*CorruptError, error) {
	fh, err := cq.fs.OpenFile(f.path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", f.path, err)
	}
	err = fh.Truncate(size)
	if cerr := fh.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return nil, fmt.Errorf("store: cut %s to %d bytes: %w", f.path, size, err)
	}
	return &CorruptError{File: f.path, Offset: size, Reason: fmt.Sprintf(
		"consume-queue file is %d bytes, expected %d: the %d bytes past it are not entries (cut off)", f.size, size, f.size-size)}, nil
}
