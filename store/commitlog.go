package store

import (
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"os"
	"path/filepath"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/store/record"
	"github.com/smartgo/smartgo/store/vfs"
	"golang.org/x/sys/unix"
)

// commitLog is the queue of mapped segments holding every record.
//
// One writer (under Store.putMu) appends; the dispatcher, the flusher and
// readers only read bytes below committed. The segment list is an
// immutable slice swapped atomically (copy on write), so readers find a
// segment without a lock.
type commitLog struct {
	s       *Store
	dir     string
	segSize int64

	segs   atomic.Pointer[[]*mappedFile]
	listMu sync.Mutex // serialises replacements of segs (writer roll, retention, recovery, close)

	committed atomic.Int64 // end of the last complete write; readers stay below it
	appended  atomic.Int64 // end of the log including records still in pend (= writePos)
	flushed   atomic.Int64 // everything below is fdatasynced
	lastTs    atomic.Int64 // store timestamp of the last record written
	flushedTs atomic.Int64 // store timestamp of a record at or below flushed

	// Writer state, protected by Store.putMu.
	active   *mappedFile
	writePos int64
	// pwrite: records are written with pwrite(2) on the segment's
	// descriptor instead of through the mapping (FlushSync, and FlushAsync
	// with AsyncWritePwrite; with AsyncWriteHybrid, batches only: see
	// viaPendLocked). Writes through a
	// shared mapping make every later fdatasync several times dearer on
	// ext4 (page_mkwrite faults, write-protect on writeback); pwrite
	// leaves each fdatasync only the new data pages. Readers still read
	// the mapping: it shares the page cache with the descriptor.
	//
	// Records are not written one by one: appendLocked encodes them into
	// pend (write-behind), and drainLocked writes the whole run with one
	// pwrite just before the flusher's fdatasync, at the dispatcher's next
	// round for puts written behind (writebehind.go), or when a putter
	// does not wait for it (Put, PutWait), a segment rolls or pend grows
	// large. One pwrite per group commit instead of one per record
	// (~8 µs each, under putMu) is what lets many putters reach one
	// fdatasync. committed (what readers see) advances only when the bytes
	// are in the page cache; appended is the end of the log including pend.
	pwrite bool
	// batchPwrite (AsyncWriteHybrid): the records of a PutBatch, and of a
	// single Put within hybridWindow of the last PutBatch, take the
	// pend/pwrite path like pwrite's (viaPendLocked) and are written out
	// before putMu is released: pend is empty whenever putMu is free.
	// Other single puts write through the mapping. So a trickle of single
	// puts stays cheap (~1 µs against 3-4 µs for a lone pwrite), while
	// under batch traffic the log is not written through both paths at
	// once (a mapped write faults on pages the flush has under writeback).
	batchPwrite bool
	// writeBehind: puts answered asynchronously that wait for no flush
	// (PutAsync) are buffered in pend and written out by the dispatcher,
	// one pwrite for all of a round's (writebehind.go). Every mode but
	// AsyncWriteMapped.
	writeBehind bool
	lastBatchMs int64 // store time of the last PutBatch (batchPwrite); protected by Store.putMu
	// mappedDirty: a record was written through the mapping since the
	// flusher's last sync (syncTo then msyncs its range, see syncRange).
	mappedDirty atomic.Bool
	pend        []byte      // encoded records not yet written; protected by Store.putMu
	discards    discardLog  // pend taken back because the disk was full
	pendSeg     *mappedFile // segment pend belongs to; protected by Store.putMu
	pendRel     int64       // position of pend[0] in pendSeg; protected by Store.putMu
	padded      int64       // log offset up to which a write of pend was padded (writePadded); protected by Store.putMu
	// nextAt is the write position at which the next segment is requested
	// from the allocator (0: already requested); protected by Store.putMu.
	// Preparing a segment writes and syncs it whole, so it is asked for
	// only once the active one is half full: a fresh segment does not start
	// its life with a segment-sized pre-write competing with the
	// group-commit fdatasyncs on the same disk.
	nextAt int64

	// Write pre-faulting (FlushAsync, unless AsyncWritePwrite): the writer copies
	// records into the mapping, and the first store to each fresh page
	// costs a write fault (page_mkwrite, several µs: most of a 1 KiB put).
	// The prefaulter goroutine populates the pages ahead of the writer
	// writable (MADV_POPULATE_WRITE), prefaultChunk at a time, keeping
	// prefaultAhead bytes ready. faulted is the end of the range requested
	// so far in the active segment; protected by Store.putMu. Populated
	// pages are dirty zeros until the writer fills them: an async flush
	// that finds some ahead of the writer writes them out once more (at
	// most prefaultAhead per flush), the price of the fault-free appends.
	prefault   bool        // set at construction (mapped writes), never changed
	noPrefault atomic.Bool // MADV_POPULATE_WRITE unsupported: stop asking
	faulted    int64
	mappedRun  int64 // bytes written through the mapping since the last pwrite; protected by Store.putMu
	faultReq   chan faultRange

	// Readahead advice of the active segment (readahead.go), protected by
	// Store.putMu: raSeg's mapping is random from raEdge (relative) to its
	// end when raRandom; raWant is the last put's write path (pwrite).
	raSeg    *mappedFile
	raEdge   int64
	raRandom bool
	raWant   bool

	allocMu   sync.Mutex
	prepared  *mappedFile      // next segment made in the background; protected by allocMu
	allocReq  chan int64       // base offset of the segment to prepare
	extendReq chan *mappedFile // the active segment, to allocate one more chunk of
	// chunk is how far ahead of the writer a segment's blocks are
	// allocated (Options.Preallocate, at most the segment size): a new
	// segment gets its first chunk, and the allocator adds one more each
	// time the writer enters the last allocated chunk.
	chunk int64
	// extendAt is the write position at which the active segment's next
	// chunk is requested from the allocator (0: requested or none left);
	// protected by Store.putMu.
	extendAt int64
}

// hybridWindow is how long after a PutBatch single puts keep taking the
// pwrite path (AsyncWriteHybrid).
const hybridWindow = time.Second

// viaPendLocked reports whether the records of a put (batch: a PutBatch)
// at store time nowMs go through pend and pwrite rather than the mapping.
// A batch records nowMs for the single puts after it. Caller holds
// Store.putMu.
func (cl *commitLog) viaPendLocked(batch bool, nowMs int64) bool {
	if cl.pwrite {
		return true
	}
	if !cl.batchPwrite {
		return false
	}
	if batch {
		cl.lastBatchMs = nowMs
		return true
	}
	return nowMs-cl.lastBatchMs < hybridWindow.Milliseconds()
}

func newCommitLog(s *Store) *commitLog {
	cl := &commitLog{
		s:         s,
		dir:       filepath.Join(s.opts.Root, "commitlog"),
		segSize:   s.opts.SegmentSize,
		allocReq:  make(chan int64, 1),
		extendReq: make(chan *mappedFile, 1),
		chunk:     min(s.opts.Preallocate, s.opts.SegmentSize),
		pwrite:    s.opts.FlushMode == FlushSync || s.opts.AsyncWrites == AsyncWritePwrite,
		faultReq:  make(chan faultRange, 1),
	}
	cl.prefault = !cl.pwrite
	cl.batchPwrite = !cl.pwrite && s.opts.AsyncWrites == AsyncWriteHybrid
	cl.writeBehind = cl.pwrite || cl.batchPwrite
	empty := []*mappedFile{}
	cl.segs.Store(&empty)
	return cl
}

func (cl *commitLog) list() []*mappedFile { return *cl.segs.Load() }

func (cl *commitLog) setList(l []*mappedFile) { cl.segs.Store(&l) }

// findSeg locates the segment holding off in l, or nil.
func findSeg(l []*mappedFile, off, size int64) *mappedFile {
	if len(l) == 0 || off < l[0].base {
		return nil
	}
	i := int((off - l[0].base) / size)
	if i < len(l) && l[i].base <= off && off < l[i].base+l[i].size {
		return l[i]
	}
	j := sort.Search(len(l), func(k int) bool { return l[k].base+l[k].size > off })
	if j < len(l) && l[j].base <= off {
		return l[j]
	}
	return nil
}

// acquireAt returns the segment holding off with a reader reference.
func (cl *commitLog) acquireAt(off int64) *mappedFile {
	for range 3 {
		m := findSeg(cl.list(), off, cl.segSize)
		if m == nil {
			return nil
		}
		if m.acquire() {
			return m
		}
	}
	return nil
}

// minOffset is the first offset still stored.
func (cl *commitLog) minOffset() int64 {
	l := cl.list()
	if len(l) == 0 {
		return cl.committed.Load()
	}
	return l[0].base
}

// loadSegments maps the existing segment files in order. It fails with
// ErrSegmentSize when their sizes or spacing disagree with SegmentSize and
// reports (in damaged) files that were short and got extended with zeros
// and segments missing in the middle (recreated empty).
func (cl *commitLog) loadSegments() (damaged []*CorruptError, err error) {
	if err := cl.s.fs.MkdirAll(cl.dir, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRoot, err)
	}
	files, err := listNumberedFiles(cl.s.fs, cl.dir)
	if err != nil {
		return nil, err
	}
	for i, f := range files {
		if f.size > cl.segSize {
			return nil, fmt.Errorf("%w: %s is %d bytes, SegmentSize is %d", ErrSegmentSize, f.path, f.size, cl.segSize)
		}
		if f.base%cl.segSize != 0 {
			return nil, fmt.Errorf("%w: %s does not start at a multiple of SegmentSize %d", ErrSegmentSize, f.path, cl.segSize)
		}
		if i > 0 && f.base-files[i-1].base != cl.segSize && files[i-1].size == f.base-files[i-1].base {
			return nil, fmt.Errorf("%w: %s follows a %d-byte segment", ErrSegmentSize, f.path, files[i-1].size)
		}
	}
	var segs []*mappedFile
	fail := func(err error) ([]*CorruptError, error) {
		for _, s := range segs {
			s.close()
		}
		return nil, err
	}
	for i, f := range files {
		if i > 0 && f.base != files[i-1].base+cl.segSize {
			// Missing segments in the middle: their records are lost, but
			// the segments after them are kept. Each is recreated empty,
			// its blocks reserved, so the list stays contiguous; recovery
			// skips it. Recovery reads it through the mapping: on a file
			// system that gives a hole its page only then (a full tmpfs),
			// a sparse one raised SIGBUS; no room fails the open instead.
			missing := (f.base - files[i-1].base - cl.segSize) / cl.segSize
			if missing > maxMissingSegments {
				return fail(fmt.Errorf("%w: %d segments missing before %s; is it a stray file?", ErrSegmentSize, missing, f.path))
			}
			for base := files[i-1].base + cl.segSize; base < f.base; base += cl.segSize {
				path := filepath.Join(cl.dir, fileNameFor(base))
				m, err := createMappedFile(cl.s.fs, path, base, cl.segSize, cl.segSize, warmNone)
				if err != nil {
					return fail(err)
				}
				damaged = append(damaged, &CorruptError{File: path, Reason: "missing segment in the middle of the commitlog, recreated empty; its records are lost"})
				segs = append(segs, m)
			}
		}
		if f.size < cl.segSize && i == len(files)-1 && endsWithFiller(f.path, f.size) {
			return nil, fmt.Errorf("%w: %s is a complete %d-byte segment, SegmentSize is %d", ErrSegmentSize, f.path, f.size, cl.segSize)
		}
		if f.size < cl.segSize {
			damaged = append(damaged, &CorruptError{File: f.path, Offset: f.size, Reason: fmt.Sprintf("segment is %d bytes, expected %d (extended with zeros)", f.size, cl.segSize)})
		}
		m, err := openMappedFile(cl.s.fs, f.path, f.base, cl.segSize)
		if err != nil {
			return fail(err)
		}
		segs = append(segs, m)
	}
	cl.setList(segs)
	return damaged, nil
}

// maxMissingSegments bounds the segments recovery recreates for a gap in
// the sequence; a wider gap is a stray file, not lost segments.
const maxMissingSegments = 1024

// endsWithFiller reports whether the records of a file hop exactly to its
// end through a filler: a complete segment written with a smaller
// SegmentSize.
func endsWithFiller(path string, size int64) bool {
	b, err := os.ReadFile(path)
	if err != nil || int64(len(b)) != size {
		return false
	}
	for pos := int64(0); pos+record.BlankHeaderSize <= size; {
		n, magic, _ := record.PeekHeader(b[pos:])
		switch {
		case magic == record.MagicBlank:
			return int64(n) == size-pos
		case magic != record.MagicMessage || n < record.MinRecordSize:
			return false
		}
		pos += int64(n)
	}
	return false
}

// appendLocked writes m, sealed (record.EncodeSealedTo; size is
// record.SealedSize(m)), at the end of the log,
// preceded by a blank filler and a segment roll when it does not fit with 8
// bytes to spare. It sets m.PhysicalOffset. Caller holds Store.putMu.
func (cl *commitLog) appendLocked(m *record.Message, size int, viaPend bool) (int64, error) {
	if cl.active == nil || cl.writePos >= cl.active.base+cl.segSize {
		if err := cl.rollLocked(); err != nil {
			return 0, err
		}
	}
	seg := cl.active
	rel := cl.writePos - seg.base
	if rel+int64(size)+record.BlankHeaderSize > cl.segSize {
		if err := cl.drainLocked(); err != nil {
			return 0, err
		}
		if err := cl.reserveLocked(seg, rel+record.BlankHeaderSize); err != nil {
			return 0, err
		}
		if err := cl.putBlank(seg, rel); err != nil {
			return 0, err
		}
		seg.wrote.Store(cl.segSize)
		cl.writePos = seg.base + cl.segSize
		cl.appended.Store(cl.writePos)
		cl.committed.Store(cl.writePos)
		if err := cl.rollLocked(); err != nil {
			return 0, err
		}
		seg = cl.active
		rel = 0
	}
	if !viaPend && len(cl.pend) > 0 {
		// Records written behind come first (a mapped write never lands
		// after bytes not written yet).
		if err := cl.drainLocked(); err != nil {
			return 0, err
		}
	}
	if err := cl.reserveLocked(seg, rel+int64(size)); err != nil {
		return 0, err
	}
	m.PhysicalOffset = cl.writePos
	var n int
	var err error
	if viaPend {
		if len(cl.pend) > 0 && (cl.pendSeg != seg || len(cl.pend)+size > maxPend) {
			if err := cl.drainLocked(); err != nil {
				return 0, err
			}
		}
		if len(cl.pend) == 0 {
			cl.pendSeg, cl.pendRel = seg, rel
		}
		at := len(cl.pend)
		cl.pend = slices.Grow(cl.pend, size)[:at+size]
		n, err = record.EncodeSealedTo(cl.pend[at:], m)
		cl.pend = cl.pend[:at+n]
		if err != nil {
			return 0, err
		}
	} else if n, err = record.EncodeSealedTo(seg.data[rel:rel+int64(size)], m); err != nil {
		return 0, err
	}
	phy := cl.writePos
	if viaPend {
		cl.s.noteWrote(cl.pend[len(cl.pend)-n:], phy, m)
	} else {
		cl.s.noteWrote(seg.data[rel:rel+int64(n)], phy, m)
	}
	cl.writePos += int64(n)
	cl.appended.Store(cl.writePos)
	cl.lastTs.Store(m.StoreTimestamp)
	if !viaPend {
		cl.mappedDirty.Store(true)
		seg.wrote.Store(rel + int64(n))
		cl.committed.Store(cl.writePos)
		cl.mappedRun += int64(n)
		if cl.prefault && cl.mappedRun >= prefaultAfter && cl.writePos+prefaultAhead > cl.faulted {
			cl.requestFaultLocked(seg)
		}
	} else {
		cl.mappedRun = 0
	}
	cl.moveReadaheadEdgeLocked(viaPend)
	if cl.extendAt != 0 && cl.writePos >= cl.extendAt {
		cl.extendAt = 0
		cl.requestExtend(seg)
	}
	if cl.nextAt != 0 && cl.writePos >= cl.nextAt {
		cl.nextAt = 0
		cl.requestNext(seg.base + cl.segSize)
	}
	return phy, nil
}

// putBlank writes the filler that closes seg from rel to its end.
func (cl *commitLog) putBlank(seg *mappedFile, rel int64) error {
	if !cl.pwrite {
		if err := record.PutBlank(seg.data[rel:cl.segSize]); err != nil {
			return fmt.Errorf("store: filler: %w", err)
		}
		return nil
	}
	var hdr [record.BlankHeaderSize]byte
	if cl.segSize-rel > math.MaxInt32 {
		return fmt.Errorf("store: filler: %w", record.ErrRecordTooLong)
	}
	binary.BigEndian.PutUint32(hdr[record.OffsetTotalSize:], uint32(cl.segSize-rel))
	binary.BigEndian.PutUint32(hdr[record.OffsetMagic:], record.MagicBlank)
	if _, err := seg.writeAt(hdr[:], rel); err != nil {
		return fmt.Errorf("store: write filler %s: %w", seg.path, err)
	}
	return nil
}

// rollLocked makes the segment starting at writePos active, taking the
// background-prepared one when it matches, and asks for the next one. It
// holds allocMu for the whole roll so the allocator and the writer never
// create the same file twice.
func (cl *commitLog) rollLocked() error {
	base := cl.writePos
	if m := findSeg(cl.list(), base, cl.segSize); m != nil && m.base == base {
		cl.setActive(m)
		cl.scheduleNextLocked()
		return nil
	}
	cl.allocMu.Lock()
	m := cl.prepared
	cl.prepared = nil
	if m != nil && m.base != base {
		// Stale: never handed out, so not in the list; drop it.
		m.close()
		if findSeg(cl.list(), m.base, cl.segSize) == nil {
			_ = cl.s.fs.Remove(m.path)
		}
		m = nil
	}
	if m == nil {
		var err error
		if err = cl.s.roomFor(cl.chunk); err == nil {
			m, err = createMappedFile(cl.s.fs, filepath.Join(cl.dir, fileNameFor(base)), base, cl.segSize, cl.chunk, warmNone)
		}
		if err != nil {
			cl.allocMu.Unlock()
			return fmt.Errorf("%w: %w", errNotWritten, err)
		}
	}
	cl.listMu.Lock()
	l := cl.list()
	nl := make([]*mappedFile, len(l), len(l)+1)
	copy(nl, l)
	cl.setList(append(nl, m))
	cl.listMu.Unlock()
	cl.allocMu.Unlock()
	cl.setActive(m)
	cl.s.emit(Event{Kind: EventSegmentRolled, File: m.path, Offset: base})
	cl.scheduleNextLocked()
	return nil
}

// scheduleNextLocked arranges for the segment after the active one to be
// prepared once the writer is half way through the active one (at once if
// it already is). Caller holds Store.putMu (or owns the store exclusively).
func (cl *commitLog) scheduleNextLocked() {
	cl.faulted = cl.writePos
	cl.moveReadaheadEdgeLocked(cl.raWant)
	// Bytes below the write position hold records: never warmed (zeroed)
	// again by the allocator.
	cl.active.raiseAllocated(cl.writePos - cl.active.base)
	cl.scheduleExtendLocked()
	next := cl.active.base + cl.segSize
	cl.nextAt = max(1, cl.active.base+cl.segSize/2)
	if cl.writePos >= cl.nextAt {
		cl.nextAt = 0
		cl.requestNext(next)
	}
}

// Write pre-fault window (see commitLog.prefault).
const (
	prefaultChunk = 2 << 20
	prefaultAhead = 16 << 20
	// prefaultAfter: pre-faulting starts once this many bytes in a row
	// went through the mapping. A few single puts (hybrid writes before
	// the first batch, a trickle) are not worth populating prefaultAhead
	// bytes of dirty zero pages that every later sync has to write out.
	prefaultAfter = 1 << 20
)

// faultRange is a range of a segment to populate writable.
type faultRange struct {
	seg      *mappedFile
	from, to int64 // relative to seg
}

// requestFaultLocked asks the prefaulter for the next chunk of seg after
// faulted; when it is busy the writer asks again on a later append.
// Caller holds Store.putMu.
func (cl *commitLog) requestFaultLocked(seg *mappedFile) {
	if cl.noPrefault.Load() {
		return
	}
	r, ok := cl.nextFaultLocked(seg)
	if !ok {
		return
	}
	select {
	case cl.faultReq <- r:
		cl.faulted = seg.base + r.to
	default:
	}
}

// nextFaultLocked returns the next chunk of seg to populate: from the
// page holding max(faulted, writePos), at most prefaultChunk bytes.
func (cl *commitLog) nextFaultLocked(seg *mappedFile) (faultRange, bool) {
	from := (max(cl.faulted, cl.writePos) - seg.base) &^ (4096 - 1) // madvise wants page alignment
	to := min(from+prefaultChunk, seg.allocated.Load())             // never past the allocated blocks
	return faultRange{seg, from, to}, from < to
}

// populate maps r's pages writable (MADV_POPULATE_WRITE) without changing
// their contents.
func (r faultRange) populate() error {
	if !r.seg.acquire() {
		return nil
	}
	defer r.seg.release()
	return unix.Madvise(r.seg.data[r.from:r.to], madvPopulateWrite)
}

// prefaultLoop is the prefaulter goroutine (FlushAsync only).
func (cl *commitLog) prefaultLoop(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case r := <-cl.faultReq:
			if err := r.populate(); errors.Is(err, unix.EINVAL) || errors.Is(err, unix.ENOSYS) {
				cl.noPrefault.Store(true) // kernel older than 5.14
			}
		}
	}
}

func (cl *commitLog) requestNext(base int64) {
	select {
	case cl.allocReq <- base:
	default:
	}
}

// allocLoop prepares the next segment in the background (preallocated and,
// with WarmSegments, pre-written) so the writer rarely waits for file
// creation and first-touch page faults at a roll.
func (cl *commitLog) allocLoop(done <-chan struct{}) {
	for {
		select {
		case <-done:
			return
		case base := <-cl.allocReq:
			cl.prepare(base)
		case seg := <-cl.extendReq:
			cl.extend(seg)
		}
	}
}

func (cl *commitLog) warmMode() warmMode {
	switch {
	case !cl.s.opts.WarmSegments:
		return warmNone
	case cl.pwrite && cl.s.opts.FlushMode == FlushSync:
		return warmZero
	case cl.pwrite:
		// FlushAsync: the extent conversions of fallocated blocks ride on
		// a flush every FlushInterval, which costs less than a
		// segment-sized zero write (and sync) competing with the appends
		// (measured in e2e runs: rate and p99 both better without it), and
		// Open of a new store does not wait for one (~3 s per GiB).
		return warmNone
	case cl.prefault && !cl.noPrefault.Load():
		// The prefaulter populates pages writable just ahead of the
		// writer; read-faulting the whole segment first would only double
		// the faults.
		return warmNone
	default:
		// Async flush writes through the mapping and syncs rarely: faulting
		// the pages in is enough, and zero writes would only compete with
		// the appends for the disk and the CPUs.
		return warmTouch
	}
}

func (cl *commitLog) prepare(base int64) {
	cl.allocMu.Lock()
	defer cl.allocMu.Unlock()
	if (cl.prepared != nil && cl.prepared.base == base) || findSeg(cl.list(), base, cl.segSize) != nil {
		return
	}
	path := filepath.Join(cl.dir, fileNameFor(base))
	err := cl.s.roomFor(cl.chunk)
	var m *mappedFile
	if err == nil {
		m, err = createMappedFile(cl.s.fs, path, base, cl.segSize, cl.chunk, cl.warmMode())
	}
	if err != nil {
		cl.s.noSpace(err)
		cl.s.rlog.Log(cl.s.log, slog.LevelWarn, "prepare segment", "store: prepare segment failed", "file", path, "err", err)
		return
	}
	if cl.prepared != nil {
		cl.prepared.close()
		if findSeg(cl.list(), cl.prepared.base, cl.segSize) == nil {
			_ = cl.s.fs.Remove(cl.prepared.path)
		}
	}
	cl.prepared = m
}

// syncTo makes every segment's bytes in [flushed, target) durable and
// advances flushed: an msync of just that range (syncRange) when records
// were written through the mapping since the last sync, else fdatasync.
// Only the flusher (and Close) call it.
func (cl *commitLog) syncTo(target int64) error {
	from := cl.flushed.Load()
	if target <= from {
		return nil
	}
	// Writes since the last sync went through the mapping: sync the range
	// only. After pwrites alone fdatasync does as well (measured in e2e
	// runs), and a put landing between this load and the sync sets the
	// flag again for the next one.
	mapped := cl.mappedDirty.Swap(false)
	for _, m := range cl.list() {
		if m.base+m.size <= from || m.base >= target {
			continue
		}
		if !m.acquire() {
			continue
		}
		var err error
		if mapped {
			err = m.syncRange(min(target, m.base+m.size) - m.base)
		} else {
			err = m.sync(min(target, m.base+m.size) - m.base)
		}
		m.release()
		if err != nil {
			return err
		}
	}
	cl.flushed.Store(target)
	return nil
}

// flush syncs everything committed so far and returns the new flushed
// offset. The timestamp is sampled before the target, so it belongs to a
// record the sync covers.
func (cl *commitLog) flush() (int64, error) {
	ts := cl.lastTs.Load()
	cl.drain()
	target := cl.committed.Load()
	if err := cl.syncTo(target); err != nil {
		return target, err
	}
	if ts != 0 { // 0: nothing written since Open, the recovered value stands
		cl.flushedTs.Store(ts)
	}
	return target, nil
}

// closeAll drops the owner references of all segments (mappings go away
// once readers release theirs).
func (cl *commitLog) closeAll() {
	cl.listMu.Lock()
	for _, m := range cl.list() {
		m.close()
	}
	cl.setList(nil)
	cl.listMu.Unlock()
	cl.allocMu.Lock()
	if cl.prepared != nil {
		cl.prepared.close()
		cl.prepared = nil
	}
	cl.allocMu.Unlock()
}

// numberedFile is a commitlog segment or consume-queue file: its name is
// its 20-digit start offset.
type numberedFile struct {
	base, size int64
	path       string
}

// listNumberedFiles returns the regular files of dir whose names are
// 20-digit offsets, sorted by offset; other entries are ignored.
func listNumberedFiles(fs vfs.FS, dir string) ([]numberedFile, error) {
	ents, err := fs.ReadDir(dir)
	if err != nil {
		return nil, fmt.Errorf("store: read %s: %w", dir, err)
	}
	var files []numberedFile
	for _, e := range ents {
		base, ok := parseFileName(e.Name())
		if !ok || !e.Type().IsRegular() {
			continue
		}
		info, err := e.Info()
		if err != nil {
			return nil, fmt.Errorf("store: stat %s: %w", e.Name(), err)
		}
		files = append(files, numberedFile{base, info.Size(), filepath.Join(dir, e.Name())})
	}
	sort.Slice(files, func(i, j int) bool { return files[i].base < files[j].base })
	return files, nil
}

// reserveLocked makes sure the writer may write seg's bytes below to: if
// the allocator has not got that far, the writer allocates up to a chunk
// beyond them itself. Allocating checks the disk first (Store.roomFor):
// a put that would need blocks past the full mark fails with ErrDiskFull
// before anything is written. Caller holds Store.putMu.
func (cl *commitLog) reserveLocked(seg *mappedFile, to int64) error {
	if to <= seg.allocated.Load() {
		return nil
	}
	want := min(seg.size, max(to, seg.allocated.Load()+cl.chunk))
	if err := cl.s.roomFor(want - seg.allocated.Load()); err != nil {
		return err
	}
	if err := seg.allocate(want, warmNone); err != nil {
		cl.s.noSpace(err)
		return fmt.Errorf("%w: %w", errNotWritten, err)
	}
	cl.scheduleExtendLocked()
	return nil
}

// scheduleExtendLocked sets where the writer asks the allocator for the
// active segment's next chunk: when it enters the last allocated chunk.
// Caller holds Store.putMu.
func (cl *commitLog) scheduleExtendLocked() {
	seg := cl.active
	if seg == nil || seg.allocated.Load() >= seg.size {
		cl.extendAt = 0
		return
	}
	cl.extendAt = max(1, seg.base+seg.allocated.Load()-cl.chunk)
	if cl.writePos >= cl.extendAt {
		cl.extendAt = 0
		cl.requestExtend(seg)
	}
}

func (cl *commitLog) requestExtend(seg *mappedFile) {
	select {
	case cl.extendReq <- seg:
	default:
	}
}

// extend allocates (and warms) one more chunk of seg ahead of the writer,
// if the disk has room for it, and sets the next request point.
func (cl *commitLog) extend(seg *mappedFile) {
	if !seg.acquire() {
		return
	}
	defer seg.release()
	to := min(seg.size, seg.allocated.Load()+cl.chunk)
	err := cl.s.roomFor(to - seg.allocated.Load())
	if err == nil {
		err = seg.allocate(to, cl.warmMode())
	}
	if err != nil {
		// The writer allocates for itself when it gets there (and fails
		// its put cleanly while the disk is full); no retry loop here.
		cl.s.noSpace(err)
		cl.s.rlog.Log(cl.s.log, slog.LevelWarn, "extend segment", "store: allocate ahead of the writer failed", "file", seg.path, "err", err)
		return
	}
	cl.s.putMu.Lock()
	if cl.active == seg {
		cl.scheduleExtendLocked()
	}
	cl.s.putMu.Unlock()
}
