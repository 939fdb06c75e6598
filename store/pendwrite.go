package store

import (
	"fmt"
	"sync"
	"sync/atomic"

	"github.com/smartgo/smartgo/store/record"
	"github.com/smartgo/smartgo/store/vfs"
)

// The write-behind buffer (commitLog.pend, see writebehind.go and
// commitlog.go) is written out here: one pwritev of the whole run, padded
// with zeros to a 64 KiB boundary, or taken back when the disk is full.

// maxPend bounds the write-behind buffer: a putter that would grow it
// beyond this writes it out first (puts that do not wait for the flush).
const maxPend = 256 << 10

// drainLocked writes the records buffered in pend with one pwrite and
// makes them visible to readers (committed). When the disk is full
// (ENOSPC), nothing of pend was written: its records are taken back
// (discardPendLocked) and the error wraps ErrDiskFull; the putters that
// waited for them are told they were not stored. On any other failure
// the bytes are dropped and the caller makes the error sticky, so nothing
// after them is ever acknowledged. Caller holds Store.putMu.
func (cl *commitLog) drainLocked() error {
	if len(cl.pend) == 0 {
		return nil
	}
	// The dispatcher dispatches what was written and answers the puts
	// written behind, or fails them when the write failed.
	defer cl.s.wakeDispatcher()
	return cl.writePendLocked()
}

// writePendLocked is drainLocked without waking the dispatcher (the
// dispatcher itself writes pend out at the start of a round).
func (cl *commitLog) writePendLocked() error {
	if len(cl.pend) == 0 {
		return nil
	}
	seg, rel, n := cl.pendSeg, cl.pendRel, int64(len(cl.pend))
	err := cl.writePadded(seg, rel)
	cl.s.stats.pendWrites.Add(1)
	if err != nil && isNoSpace(err) {
		cl.discardPendLocked()
		cl.s.noSpace(err)
		return fmt.Errorf("%w: write %s: %w", ErrDiskFull, seg.path, err)
	}
	cl.pend, cl.pendSeg = cl.pend[:0], nil
	if cap(cl.pend) > 4*maxPend {
		cl.pend = nil // one huge record: do not keep its buffer
	}
	if err != nil {
		return fmt.Errorf("store: write %s: %w", seg.path, err)
	}
	seg.wrote.Store(rel + n)
	cl.committed.Store(seg.base + rel + n)
	return nil
}

// padAlign is the boundary a write of pend is padded to with zeros
// (writePadded).
const padAlign = 64 << 10

// writePadded writes pend at rel in seg, followed by zeros up to the next
// padAlign boundary within the segment's allocated blocks: one pwritev.
//
// The bytes past the log's end are zeros already (fallocated blocks read
// as zeros, and a cut log is zeroed from the cut), so the padding changes
// nothing a reader or recovery sees; the next write overwrites it. What
// it changes is the page cache: the kernel allocates each written range's
// folios by the alignment of its first page, so a write that starts at a
// padAlign boundary gets 64 KiB folios, and one that starts anywhere
// else small ones, each with its own allocation, buffer heads and block
// reservation. Padded, every write starts in folios the previous write
// made and makes its new ones from a padAlign boundary. A Go program on
// ext4 (kernel 6.18), 40,000-byte pwrites through 512 MiB of a fallocated
// file: 316-340 ns of CPU per KiB of data plain, 208-217 padded to 64 KiB
// (docs/performance-broker.md, ninth session).
//
// Not with FlushSync: there every group commit's fdatasync would write
// the padding's zeros to the disk and the next commit the records over
// them, each page twice; an asynchronous flush (every FlushInterval)
// writes at most padAlign bytes of zeros once more.
//
// A write that ends below the padding of an earlier one (cl.padded) is
// not padded: its folios exist. A padded write that fails with a full
// disk is tried again without the padding, so records that fit are
// written.
func (cl *commitLog) writePadded(seg *mappedFile, rel int64) error {
	end := rel + int64(len(cl.pend))
	to := min((end+padAlign-1)/padAlign*padAlign, seg.allocated.Load(), seg.size)
	if at := seg.base + to; cl.s.opts.FlushMode != FlushSync && at > cl.padded && to > end && to-end <= int64(vfs.MaxZeros) && seg.base+end == cl.writePos {
		_, err := seg.writeAtZeros(cl.pend, int(to-end), rel)
		if err == nil {
			cl.padded = at
		}
		if err == nil || !isNoSpace(err) {
			return err
		}
	}
	_, err := seg.writeAt(cl.pend, rel)
	return err
}

// drain writes out pend under Store.putMu; a failure other than a full
// disk is sticky.
func (cl *commitLog) drain() {
	if !cl.writeBehind {
		return // AsyncWriteMapped: pend is never used
	}
	cl.s.putMu.Lock()
	err := cl.drainLocked()
	cl.s.putMu.Unlock()
	if err != nil && !isNoSpace(err) {
		cl.s.setWriteErr(err)
	}
}

// discardPendLocked takes back the records of pend, which could not be
// written: the log ends where pend began again, and each record's queue
// offset is given back, so the next puts take the same offsets. Putters
// waiting for them learn it from the discard history (discarded). Caller
// holds Store.putMu; pend is the tail of the log.
func (cl *commitLog) discardPendLocked() {
	at := cl.pendSeg.base + cl.pendRel
	for b := cl.pend; len(b) > 0; {
		v, err := record.Parse(b, false)
		if err != nil {
			break // our own encoding: cannot happen
		}
		if !isTxExcluded(v.SysFlag) {
			key := cqKey{string(v.Topic), v.QueueID}
			if cur := cl.s.nextLocked(key); cur != nil && v.QueueOffset < cur.off {
				cur.off = v.QueueOffset
			}
		}
		b = b[v.TotalSize:]
	}
	cl.pend, cl.pendSeg = cl.pend[:0], nil
	cl.s.wq.dropFrom(at)
	cl.writePos = at
	cl.appended.Store(at)
	cl.discards.mu.Lock()
	cl.discards.cuts = append(cl.discards.cuts, at)
	if len(cl.discards.cuts) > maxDiscards {
		cl.discards.cuts = cl.discards.cuts[1:]
		cl.discards.dropped++
	}
	cl.discards.gen.Add(1)
	cl.discards.mu.Unlock()
}

// maxDiscards bounds the discard history; a putter older than it is told
// its record was not stored.
const maxDiscards = 1024

// discardLog is the history of pend discards: cuts[i] is where discard
// number dropped+i took the log back to.
type discardLog struct {
	gen     atomic.Int64 // discards so far
	mu      sync.Mutex   // leaf lock
	cuts    []int64      // protected by mu
	dropped int64        // cuts forgotten from the front; protected by mu
}

// discarded reports whether a record at start, appended when gen discards
// had happened, was taken back by a later one.
func (d *discardLog) discarded(gen, start int64) bool {
	if d.gen.Load() == gen {
		return false
	}
	d.mu.Lock()
	defer d.mu.Unlock()
	if gen < d.dropped {
		return true
	}
	for _, cut := range d.cuts[gen-d.dropped:] {
		if cut <= start {
			return true
		}
	}
	return false
}
