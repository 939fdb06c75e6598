package store

import (
	"encoding/binary"
	"fmt"
	"math"
	"path/filepath"
	"sort"
	"strconv"
	"sync"
	"sync/atomic"
)

// Consume-queue entry layout (frozen, see doc.go).
const (
	cqEntrySize = 20
	holePhy     = -1 // phy offset of a hole entry (a queue offset with no record)
)

// cqAllocChunk is how many bytes of a consume-queue file are allocated at
// a time ahead of its entries (the file itself is sparse).
const cqAllocChunk = 64 << 10

var be = binary.BigEndian

// cqEntry is one decoded consume-queue entry.
type cqEntry struct {
	phy  int64
	size int32
	tags int64
}

func (e cqEntry) isHole() bool { return e.phy == holePhy && e.size == 0 }

func putCQEntry(b []byte, e cqEntry) {
	be.PutUint64(b[0:], uint64(e.phy))
	be.PutUint32(b[8:], uint32(e.size))
	be.PutUint64(b[12:], uint64(e.tags))
}

func getCQEntry(b []byte) cqEntry {
	return cqEntry{phy: int64(be.Uint64(b[0:])), size: int32(be.Uint32(b[8:])), tags: int64(be.Uint64(b[12:]))}
}

// consumeQueue is the logical queue (topic, queueID): fixed 20-byte entries
// in files of CQEntriesPerFile entries named by their start byte offset.
// Only the dispatcher appends (and recovery truncates); retention removes
// head files under listMu; readers use the atomic file list and refcounts.
type consumeQueue struct {
	topic    string
	queueID  int32
	dir      string
	fileSize int64
	fs       *fileSys

	files  atomic.Pointer[[]*mappedFile]
	listMu sync.Mutex // serialises replacements of files

	maxOff atomic.Int64 // next logical offset to be written (= entry count)
	minOff atomic.Int64 // first logical offset whose record is still stored

	// tail holds the newest entries (nil: none), not yet written to the
	// file; tailMu serialises writing them out (the dispatcher when it
	// starts a new tail or truncates, the logic flusher).
	tail   atomic.Pointer[cqTail]
	tailMu sync.Mutex
	// spare is a replaced tail's buffer no reader held when it was
	// replaced, for the next tail (dispatcher-owned, under tailMu).
	spare []byte
	// tailRoom is the entries the next tail takes (0: cqTailEntries),
	// grown and shrunk by nextTailRoom (dispatcher-owned, under tailMu).
	tailRoom int64

	touched uint64 // dispatcher-owned: last dispatch round that appended
	// staged is the dispatcher's maxOff ahead of the published one while
	// a round appends (0: nothing staged): a round's entries are shown to
	// readers once, at its end (publish), not each with an atomic store
	// (on amd64 an XCHG, which waits for the CPU's store buffer to drain:
	// 1.4 % of the broker's CPU under compare-cpu). Dispatcher-owned.
	staged int64
}

// next is the logical offset the dispatcher appends next: the staged
// maxOff, else the published one. Dispatcher-only.
func (cq *consumeQueue) next() int64 {
	if cq.staged != 0 {
		return cq.staged
	}
	return cq.maxOff.Load()
}

// publish shows the entries staged by appendEntry to readers (maxOff).
// The dispatcher publishes every queue a round appended to at the round's
// end, before it tells arrival listeners, and before a tail is written
// out or replaced (writeTailLocked reads maxOff). Dispatcher-only.
func (cq *consumeQueue) publish() {
	if cq.staged != 0 {
		cq.maxOff.Store(cq.staged)
		cq.staged = 0
	}
}

// The newest entries of a queue are kept in memory (a tail of at most
// cqTailEntries to cqTailMaxEntries, see below, within one file) and written to the file with one pwrite
// when the tail is full, at every logic flush, and before a truncation.
// Readers take entries from the tail while they are there. Writing them
// through the mapping, one at a time, cost a page fault on every page
// after every flush, and the flush a write-protect with a TLB shootdown
// per dirty page (folio_mkclean): about 5 % of a broker's CPU under
// single-message sends. A tail, once replaced, is never written again
// (a reader may still hold it), and every entry below maxOff in it is
// final.
//
// A replaced tail's buffer becomes the next tail's when no reader held it
// at the replacement (cqTail.readers): a fresh 4 KiB every 204 entries
// was most of a broker's page faults (the runtime hands freed memory back
// to the kernel, and the next tail faults it in again).
//
// A queue's tail starts at cqTailEntries and doubles, up to
// cqTailMaxEntries, each time a tail fills before any logic flush wrote
// part of it (a queue taking more than a tail's entries a logic flush
// interval); it halves when a flush wrote part of it before it filled.
// Each replacement writes the old tail with one pwrite, and a pwrite's
// fixed cost (the call, the file's mtime through ext4's journal, the
// partial pages at both ends) weighs on every entry of a 4 KiB tail:
// BenchmarkStoreCQAppendRound, task-clock over 6,000,000 entries, median
// of four, about 47 ns an entry with 4 KiB tails, 36 with 16 KiB and 27
// with 64 KiB. A queue's tail memory stays 4 KiB unless it is busy; 64
// KiB is reached at about 3,300 entries a second.
//
// A killed process loses the entries of its tails (not the records):
// recovery re-dispatches them from the commitlog, as it does for a
// machine crash, from the checkpoint, which a logic flush only moves
// past entries it wrote.
const (
	cqTailEntries    = 4096 / cqEntrySize
	cqTailMaxEntries = 16 * cqTailEntries
)

type cqTail struct {
	m     *mappedFile // the file the entries belong to
	start int64       // logical offset of buf's first entry
	buf   []byte      // room for the entries up to the queue's tailRoom or the file's end
	// readers counts the readers in buf (entryIn). A reader counts
	// itself, then reads buf only while the tail is still the queue's;
	// the dispatcher replaces the tail, then reuses buf only when no
	// reader was counted. Either the reader's count comes first (the
	// buffer is left to the collector) or its check sees the new tail
	// (it reads nothing).
	readers atomic.Int32
}

// ends is the logical offset after the tail's room.
func (t *cqTail) ends() int64 { return t.start + int64(len(t.buf))/cqEntrySize }

func newConsumeQueue(fs *fileSys, root, topic string, queueID int32, entriesPerFile int) *consumeQueue {
	cq := &consumeQueue{
		fs:       fs,
		topic:    topic,
		queueID:  queueID,
		dir:      filepath.Join(root, "consumequeue", topic, strconv.Itoa(int(queueID))),
		fileSize: int64(entriesPerFile) * cqEntrySize,
	}
	empty := []*mappedFile{}
	cq.files.Store(&empty)
	return cq
}

func (cq *consumeQueue) list() []*mappedFile { return *cq.files.Load() }

func (cq *consumeQueue) setList(l []*mappedFile) { cq.files.Store(&l) }

// acquireFile returns the file holding logical offset off, with a reader
// reference, and the byte position of the entry within it.
func (cq *consumeQueue) acquireFile(off int64) (*mappedFile, int64) {
	pos := off * cqEntrySize
	for range 3 {
		m := findSeg(cq.list(), pos, cq.fileSize)
		if m == nil {
			return nil, 0
		}
		if m.acquire() {
			return m, pos - m.base
		}
	}
	return nil, 0
}

// entry reads the entry at logical offset off (which must be below maxOff).
func (cq *consumeQueue) entry(off int64) (cqEntry, bool) {
	m, rel := cq.acquireFile(off)
	if m == nil {
		return cqEntry{}, false
	}
	e := cq.entryIn(m, off, rel)
	m.release()
	return e, true
}

// entryIn reads the entry at logical offset off (below maxOff), at rel of
// m, the file holding it (with a reference): from the tail while it is
// there, else from the mapping. A tail replaced after it was loaded holds
// only entries written to the file before the replacement was published;
// one that ends at or below off was replaced since (the entry is in a
// newer one).
func (cq *consumeQueue) entryIn(m *mappedFile, off, rel int64) cqEntry {
	var last *cqTail
	for {
		t := cq.tail.Load()
		if t == nil || off < t.start || t == last {
			return getCQEntry(m.data[rel : rel+cqEntrySize])
		}
		if off < t.ends() {
			t.readers.Add(1)
			if cq.tail.Load() == t {
				i := (off - t.start) * cqEntrySize
				e := getCQEntry(t.buf[i : i+cqEntrySize])
				t.readers.Add(-1)
				return e
			}
			t.readers.Add(-1) // replaced since: the entry is in the file
		}
		last = t
	}
}

// appendEntry writes e at logical offset qoff, staged: readers see it once
// the dispatcher publishes the queue (publish). Offsets below next are
// duplicates from a replay and are skipped. A queue with no entries at all
// starts at qoff (a slave that began replicating mid-log, or a queue whose
// files were lost): earlier offsets of qoff's file become holes and earlier
// files simply do not exist. A jump ahead of at most maxGap entries is
// padded with holes; a larger one means the record's QUEUEOFFSET is not
// trustworthy and the record is refused (ok=false). Dispatcher-only.
func (cq *consumeQueue) appendEntry(qoff int64, e cqEntry, maxGap int64) (holes int64, ok bool, err error) {
	max := cq.next()
	if qoff < max {
		return 0, true, nil
	}
	fresh := max == 0 && qoff > 0 && len(cq.list()) == 0
	if fresh {
		per := cq.fileSize / cqEntrySize
		max = qoff - qoff%per
		cq.maxOff.Store(max)
	} else if qoff-max > maxGap {
		return 0, false, nil
	}
	for ; max < qoff; max++ {
		if err := cq.writeAt(max, cqEntry{phy: holePhy}); err != nil {
			cq.publish() // the holes written so far
			return holes, false, err
		}
		holes++
		cq.staged = max + 1
	}
	if err := cq.writeAt(qoff, e); err != nil {
		cq.publish()
		return holes, false, err
	}
	if fresh {
		cq.minOff.Store(qoff)
	}
	cq.staged = qoff + 1 // published at the round's end (publish)
	return holes, true, nil
}

// nextFileOffset returns the first logical offset of the first file after
// logical offset off, or limit.
func (cq *consumeQueue) nextFileOffset(off, limit int64) int64 {
	pos := off * cqEntrySize
	for _, m := range cq.list() {
		if m.base > pos {
			return min(m.base/cqEntrySize, limit)
		}
	}
	return limit
}

// writeAt makes the entry at logical offset off, which is maxOff (entries
// are made in order), in the queue's tail, starting a new tail when off
// is past the current one. Dispatcher-only.
func (cq *consumeQueue) writeAt(off int64, e cqEntry) error {
	t := cq.tail.Load()
	if t == nil || off < t.start || off >= t.ends() {
		cq.publish() // newTail writes the tail out up to maxOff
		var err error
		if t, err = cq.newTail(off); err != nil {
			return err
		}
	}
	i := (off - t.start) * cqEntrySize
	putCQEntry(t.buf[i:i+cqEntrySize], e)
	return nil
}

// PrepareQueue makes the first file of a queue that has none yet and
// whose first record will take queue offset 0 (a new queue of a store
// that writes its own log), so that the queue's first entry finds its
// file. Otherwise the dispatch round of the queue's first record makes
// the queue's directories and file: a few file creations, each a
// journaled metadata change (a millisecond or more on a busy ext4), on
// whatever goroutine dispatches, which for a caller of Drain is the
// caller's (the MQTT poller, for the state store's first SET of each
// shard). A caller that knows it will write a queue (the state store's
// shards) prepares it when it opens.
//
// It does nothing for a queue that has files or entries, when the put
// side has given out an offset of the queue already, and on a store that
// replicates (raw mode: a queue starts at whatever offset the master's
// records carry, see appendEntry). Nothing is written but the empty file
// (zeros, which recovery reads as no entries, as it reads a file whose
// entries were not flushed yet).
func (s *Store) PrepareQueue(topic string, queueID int32) error {
	s.dispMu.Lock()
	defer s.dispMu.Unlock()
	if s.disp.closed || s.rawMode.Load() {
		return nil
	}
	s.putMu.Lock()
	taken := s.queueOffsetLocked(cqKey{topic, queueID}) != 0
	s.putMu.Unlock()
	if taken {
		return nil
	}
	// Under dispMu: no dispatch round makes the queue's tail meanwhile.
	cq := s.cqLookup([]byte(topic), queueID)
	if cq.next() != 0 || len(cq.list()) != 0 || cq.tail.Load() != nil {
		return nil
	}
	if _, err := cq.newTail(0); err != nil {
		return fmt.Errorf("store: prepare queue %s/%d: %w", topic, queueID, err)
	}
	return nil
}

// newTail writes out the current tail and starts one at logical offset
// off (maxOff), in its file (made here when it is the first entry of the
// file). The old tail is written before a new file appears in the list:
// retention reads the last entry of every file but the newest from the
// mapping. Dispatcher-only.
func (cq *consumeQueue) newTail(off int64) (*cqTail, error) {
	cq.tailMu.Lock()
	defer cq.tailMu.Unlock()
	room := cq.nextTailRoom(off)
	if err := cq.writeTailLocked(off); err != nil {
		return nil, err
	}
	pos := off * cqEntrySize
	fileBase := pos - pos%cq.fileSize
	l := cq.list()
	var m *mappedFile
	if n := len(l); n > 0 && l[n-1].base == fileBase {
		m = l[n-1]
	} else {
		if err := cq.fs.MkdirAll(cq.dir, 0o755); err != nil {
			return nil, fmt.Errorf("store: create %s: %w", cq.dir, err)
		}
		nm, err := createMappedFile(cq.fs, filepath.Join(cq.dir, fileNameFor(fileBase)), fileBase, cq.fileSize, cqAllocChunk, warmNone)
		if err != nil {
			return nil, err
		}
		nm.adviseRandom()
		cq.listMu.Lock()
		l = cq.list()
		nl := make([]*mappedFile, len(l), len(l)+1)
		copy(nl, l)
		cq.setList(append(nl, nm))
		cq.listMu.Unlock()
		m = nm
	}
	rel := pos - m.base
	n := min(room, (m.size-rel)/cqEntrySize)
	if rel+n*cqEntrySize > m.allocated.Load() {
		// The tail's blocks first: a full disk refuses the entry here,
		// not when the tail is written out.
		if err := m.allocate(rel+max(n*cqEntrySize, cqAllocChunk), warmNone); err != nil {
			return nil, err
		}
	}
	var buf []byte
	if size := int(n * cqEntrySize); cap(cq.spare) >= size && cap(cq.spare) < 2*size {
		buf, cq.spare = cq.spare[:size], nil
	} else {
		// None, or one twice the room or more (the queue's tails shrank,
		// or this is a short tail at a file's end): left to the collector.
		buf, cq.spare = make([]byte, size), nil
	}
	t := &cqTail{m: m, start: off, buf: buf}
	cq.retireTailLocked(t)
	return t, nil
}

// nextTailRoom returns the entries of the tail that replaces the current
// one at logical offset off, and remembers it: twice the current room
// (up to cqTailMaxEntries) when the current tail is full and no flush
// wrote any of it, half (down to cqTailEntries) when a flush wrote part
// of it. Caller holds tailMu, before the tail is written out.
func (cq *consumeQueue) nextTailRoom(off int64) int64 {
	room := cq.tailRoom
	if room == 0 {
		room = cqTailEntries
	}
	if t := cq.tail.Load(); t != nil {
		flushed := t.m.wrote.Load() > t.start*cqEntrySize-t.m.base
		switch {
		case flushed:
			room = max(room/2, cqTailEntries)
		case off == t.ends():
			room = min(room*2, cqTailMaxEntries)
		}
	}
	cq.tailRoom = room
	return room
}

// retireTailLocked makes t the queue's tail (nil: none) and keeps the
// replaced tail's buffer as the spare when no reader holds it (see
// cqTail.readers). Caller holds tailMu.
func (cq *consumeQueue) retireTailLocked(t *cqTail) {
	old := cq.tail.Swap(t)
	if old != nil && old.readers.Load() == 0 && cap(old.buf) >= cap(cq.spare) {
		cq.spare = old.buf
	}
}

// writeTailLocked writes the current tail's entries below end (and below
// maxOff) to its file. Caller holds tailMu.
func (cq *consumeQueue) writeTailLocked(end int64) error {
	t := cq.tail.Load()
	if t == nil {
		return nil
	}
	end = min(end, cq.maxOff.Load(), t.ends())
	if end <= t.start {
		return nil
	}
	rel := t.start*cqEntrySize - t.m.base
	to := rel + (end-t.start)*cqEntrySize
	if to <= t.m.wrote.Load() {
		return nil // written already (by a flush)
	}
	if _, err := t.m.writeAt(t.buf[:(end-t.start)*cqEntrySize], rel); err != nil {
		return fmt.Errorf("store: write %s: %w", t.m.path, err)
	}
	t.m.wrote.Store(to)
	return nil
}

// dropTail writes out the tail and drops it, so that the file alone holds
// the entries (before a truncation changes them through the mapping).
// Dispatcher-only.
func (cq *consumeQueue) dropTail() error {
	cq.tailMu.Lock()
	defer cq.tailMu.Unlock()
	if err := cq.writeTailLocked(math.MaxInt64); err != nil {
		return err
	}
	cq.retireTailLocked(nil)
	return nil
}

// flush writes out the tail's entries and fdatasyncs files with unflushed
// entries.
func (cq *consumeQueue) flush() error {
	cq.tailMu.Lock()
	err := cq.writeTailLocked(math.MaxInt64)
	cq.tailMu.Unlock()
	if err != nil {
		return err
	}
	for _, m := range cq.list() {
		w := m.wrote.Load()
		if w <= m.flushedTo.Load() || !m.acquire() {
			continue
		}
		err := m.sync(w)
		m.fsys.fds.giveBack(m)
		m.release()
		if err != nil {
			return err
		}
	}
	return nil
}

// lastPhyEnd returns phy+size of the newest non-hole entry, or -1.
func (cq *consumeQueue) lastPhyEnd() int64 {
	min := cq.minOff.Load()
	for off := cq.maxOff.Load() - 1; off >= min && off >= 0; off-- {
		e, ok := cq.entry(off)
		if !ok {
			return -1
		}
		if !e.isHole() {
			return e.phy + int64(e.size)
		}
	}
	return -1
}

// correctMin moves minOff to the first entry whose record is at or above
// clMin (records below were deleted by retention).
func (cq *consumeQueue) correctMin(clMin int64) {
	l := cq.list()
	if len(l) == 0 {
		return
	}
	min := max(cq.minOff.Load(), l[0].base/cqEntrySize)
	maxOff := cq.maxOff.Load()
	for min < maxOff {
		e, ok := cq.entry(min)
		if !ok {
			break
		}
		if !e.isHole() && e.phy >= clMin {
			break
		}
		min++
	}
	cq.minOff.Store(min)
}

// deleteBelow removes head files (never the last) whose entries all point
// below clMin, then corrects minOff. Returns the number of files removed.
func (cq *consumeQueue) deleteBelow(clMin int64) int {
	cq.listMu.Lock()
	l := cq.list()
	n := 0
	for n < len(l)-1 {
		m := l[n]
		lastPos := m.size - cqEntrySize
		e := getCQEntry(m.data[lastPos : lastPos+cqEntrySize])
		if e.phy+int64(e.size) > clMin && !e.isHole() {
			break
		}
		n++
	}
	if n > 0 {
		for _, m := range l[:n] {
			_ = m.destroy(true)
		}
		nl := append([]*mappedFile(nil), l[n:]...)
		cq.setList(nl)
	}
	cq.listMu.Unlock()
	cq.correctMin(clMin)
	return n
}

func (cq *consumeQueue) closeAll(remove bool) {
	cq.listMu.Lock()
	for _, m := range cq.list() {
		_ = m.destroy(remove)
	}
	cq.setList(nil)
	cq.listMu.Unlock()
}

// loadFiles maps a queue's files. A file larger than the configured size
// whose bytes past it are not entries is cut to the size and reported
// (cqexcess.go); any other file larger than the size or off the size grid
// is ErrSegmentSize; short files are extended and reported; a file missing between two others is made again, empty, and
// reported (its entries are rebuilt from the commitlog when read).
func (cq *consumeQueue) loadFiles() (damaged []*CorruptError, err error) {
	files, err := listNumberedFiles(cq.fs, cq.dir)
	if err != nil {
		return nil, err
	}
	for i, f := range files {
		if f.base%cq.fileSize == 0 && f.size > cq.fileSize {
			// Bytes appended outside the store are cut off
			// (cqexcess.go); entries past the size are a changed
			// CQEntriesPerFile.
			garbage, err := cq.cqExcessGarbage(f, cq.fileSize)
			if err != nil {
				return nil, err
			}
			if garbage {
				c, err := cq.cutExcess(f, cq.fileSize)
				if err != nil {
					return nil, err
				}
				damaged = append(damaged, c)
				files[i].size = cq.fileSize
				continue
			}
		}
		if f.size > cq.fileSize || f.base%cq.fileSize != 0 {
			return nil, fmt.Errorf("%w: consume-queue file %s (%d bytes) does not match %d-byte files", ErrSegmentSize, f.path, f.size, cq.fileSize)
		}
	}
	var l []*mappedFile
	for i, f := range files {
		// A queue may start mid-log (see appendEntry), but its files
		// are contiguous from its first on (retention removes the
		// oldest only): a file missing between two others was lost
		// outside the store. It is made again, empty, so that a read
		// rebuilds its entries from the commitlog (cqrepair.go) instead
		// of reporting OFFSET_FOUND_NULL and skipping them.
		for base := files[max(i-1, 0)].base + cq.fileSize; i > 0 && base < f.base; base += cq.fileSize {
			path := filepath.Join(cq.dir, fileNameFor(base))
			m, err := createMappedFile(cq.fs, path, base, cq.fileSize, cq.fileSize, warmNone)
			if err != nil {
				for _, x := range l {
					x.close()
				}
				return nil, err
			}
			l = append(l, m)
			damaged = append(damaged, &CorruptError{File: path, Reason: "consume-queue file missing between two others (made again empty; its entries are rebuilt from the commitlog)"})
		}
		if f.size < cq.fileSize {
			damaged = append(damaged, &CorruptError{File: f.path, Offset: f.size, Reason: fmt.Sprintf("consume-queue file is %d bytes, expected %d (extended with zeros)", f.size, cq.fileSize)})
		}
		m, err := openMappedFile(cq.fs, f.path, f.base, cq.fileSize)
		if err != nil {
			for _, x := range l {
				x.close()
			}
			return nil, err
		}
		l = append(l, m)
	}
	cq.setList(l)
	if len(l) > 0 {
		cq.minOff.Store(l[0].base / cqEntrySize)
		cq.maxOff.Store(l[0].base / cqEntrySize)
	}
	return damaged, nil
}

// recoverEntries walks the last files and finds the end of the valid
// entries: the first all-zero entry ends the queue; an entry that is not a
// hole and fails check (bad size, offsets going backwards, record
// mismatch) is damage; entries at or beyond clEnd were never made durable
// in the commitlog. Everything from the cut on is zeroed and later files
// removed. It returns the cut (if any) as a CorruptError (nil for a clean
// end or a plain truncation beyond clEnd) and the phy end of the last good
// entry (-1 if none was seen).
func (cq *consumeQueue) recoverEntries(scanFiles int, clEnd int64, check func(off int64, e cqEntry) string) (cut *CorruptError, beyondEnd bool) {
	l := cq.list()
	if len(l) == 0 {
		return nil, false
	}
	start := max(0, len(l)-scanFiles)
	prevEnd := int64(-1)
	cutFile, cutRel := -1, int64(0)
outer:
	for i := start; i < len(l); i++ {
		m := l[i]
		for rel := int64(0); rel < m.size; rel += cqEntrySize {
			b := m.data[rel : rel+cqEntrySize]
			if allZero(b) {
				cutFile, cutRel = i, rel
				break outer
			}
			e := getCQEntry(b)
			if e.isHole() {
				continue
			}
			reason := ""
			switch {
			case e.phy < 0 || e.size <= 0:
				reason = fmt.Sprintf("invalid entry phy=%d size=%d", e.phy, e.size)
			case e.phy < prevEnd:
				reason = fmt.Sprintf("entry phy=%d goes below previous end %d", e.phy, prevEnd)
			case e.phy+int64(e.size) > clEnd:
				beyondEnd = true
			default:
				reason = check((m.base+rel)/cqEntrySize, e)
			}
			if reason != "" {
				cut = &CorruptError{File: m.path, Offset: rel, Reason: reason}
			}
			if reason != "" || beyondEnd {
				cutFile, cutRel = i, rel
				break outer
			}
			prevEnd = e.phy + int64(e.size)
		}
	}
	if cutFile < 0 {
		// Every scanned file is full of valid entries.
		last := l[len(l)-1]
		cq.maxOff.Store((last.base + last.size) / cqEntrySize)
		last.wrote.Store(last.size)
		return nil, false
	}
	m := l[cutFile]
	m.zeroFrom(cutRel)
	m.wrote.Store(cutRel)
	for _, x := range l[start:cutFile] {
		x.wrote.Store(x.size)
	}
	if cutFile+1 < len(l) {
		cq.listMu.Lock()
		for _, x := range l[cutFile+1:] {
			_ = x.destroy(true)
		}
		cq.setList(append([]*mappedFile(nil), l[:cutFile+1]...))
		cq.listMu.Unlock()
	}
	cq.maxOff.Store((m.base + cutRel) / cqEntrySize)
	return cut, beyondEnd
}

// entriesIn counts the entries whose record starts in [from, to) of the
// commitlog. Entries are in commitlog order (holes aside), so it searches
// for the first entry at or after each bound.
func (cq *consumeQueue) entriesIn(from, to int64) int {
	lo, hi := cq.minOff.Load(), cq.maxOff.Load()
	first := cq.firstAtOrAfter(lo, hi, from)
	last := cq.firstAtOrAfter(first, hi, to)
	return int(last - first)
}

// firstAtOrAfter returns the first logical offset in [lo, hi) whose entry
// (the next non-hole entry from there) points at or after phy, or hi.
func (cq *consumeQueue) firstAtOrAfter(lo, hi, phy int64) int64 {
	return lo + int64(sort.Search(int(hi-lo), func(i int) bool {
		for off := lo + int64(i); off < hi; off++ {
			e, ok := cq.entry(off)
			if !ok {
				return true
			}
			if !e.isHole() {
				return e.phy >= phy
			}
		}
		return true
	}))
}
