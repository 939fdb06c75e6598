package store

import (
	"bytes"
	"errors"
	"fmt"
	"math"
	"os"
	"path/filepath"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/store/record"
	"github.com/smartgo/smartgo/store/vfs"
)

// Index file layout (frozen, see doc.go).
const (
	indexHeaderSize = 40
	indexSlotSize   = 4
	indexEntrySize  = 20
	indexTimeLayout = "20060102150405.000" // rendered without the dot: yyyyMMddHHmmssSSS
)

func indexFileSize(slots, entries int) int64 {
	return indexHeaderSize + int64(slots)*indexSlotSize + int64(entries)*indexEntrySize
}

// indexFile is one hash index file. The indexer adds entries under mu;
// queries read under mu.RLock.
//
// Index writes never go through the mapping. The newest file (the one
// entries are added to) keeps its header and slot table in anonymous
// memory (head), written to the file with pwrite at each index sync
// (dirty pages only); its new entries collect in pend and are written with
// one pwrite once maxIndexPend bytes wait, at each index sync, or when the
// file is retired (commit; until then queries read them from pend, see
// entryLocked). The mapping is
// only read. Writing through it cost a fault on every slot page after
// every sync and, at each sync, a write-protect with a TLB shootdown per
// page: at 150k puts/s, about 10% of the throughput and a CPU burst on
// every sync. A killed process loses the slot changes since the last
// sync; the header (count, endPhy) is written with them, so recovery
// re-indexes from a consistent point.
type indexFile struct {
	mf      *mappedFile
	slots   int
	entries int

	mu sync.RWMutex
	// Header mirror, protected by mu.
	beginTs, endTs, beginPhy, endPhy int64
	usedSlots                        int32
	count                            int32 // next entry number; starts at 1

	// Write state of the newest file, protected by mu; head is nil for a
	// full file, which is read through the mapping alone.
	head    []byte   // header and slot table, [0, entryPos(0))
	dirty   []uint64 // pages of head changed since they were last written
	pend    []byte   // entries [written, count), not yet in the file
	written int32    // entries below this number are in the file
}

func (f *indexFile) full() bool { return int(f.count) >= f.entries }

// openHead gives the newest file its in-memory header and slot table,
// read from the file unless it is new (all zeros).
func (f *indexFile) openHead(fresh bool) error {
	n := f.entryPos(0)
	f.head = make([]byte, n)
	f.dirty = make([]uint64, (n/indexPage+63)/64+1)
	f.pend = make([]byte, 0, maxIndexPend+indexEntrySize) // never grows: committed once maxIndexPend bytes wait
	f.written = max(f.count, 1)
	if fresh {
		return nil
	}
	if _, err := f.mf.readAt(f.head, 0); err != nil {
		return fmt.Errorf("store: read %s: %w", f.mf.path, err)
	}
	return nil
}

// retireLocked writes out a file that is no longer the newest and drops
// its in-memory state: from now on it is read through the mapping.
func (f *indexFile) retireLocked() error {
	if err := f.writeHeadLocked(); err != nil {
		return err
	}
	f.head, f.dirty, f.pend = nil, nil, nil
	return nil
}

const indexPage = 4096

func (f *indexFile) markDirty(pos int64) {
	p := pos / indexPage
	f.dirty[p/64] |= 1 << (p % 64)
}

func (f *indexFile) writeHeaderLocked() {
	h := f.head[:indexHeaderSize]
	be.PutUint64(h[0:], uint64(f.beginTs))
	be.PutUint64(h[8:], uint64(f.endTs))
	be.PutUint64(h[16:], uint64(f.beginPhy))
	be.PutUint64(h[24:], uint64(f.endPhy))
	be.PutUint32(h[32:], uint32(f.usedSlots))
	be.PutUint32(h[36:], uint32(f.count))
	f.markDirty(0)
}

// slotLocked reads slot position sp (caller holds mu).
func (f *indexFile) slotLocked(sp int64) int32 {
	if f.head != nil {
		return int32(be.Uint32(f.head[sp:]))
	}
	return int32(be.Uint32(f.mf.data[sp:]))
}

// entryLocked returns the 20 bytes of entry n < count (caller holds mu).
func (f *indexFile) entryLocked(n int32) []byte {
	if f.head != nil && n >= f.written {
		i := int64(n-f.written) * indexEntrySize
		return f.pend[i : i+indexEntrySize]
	}
	ep := f.entryPos(n)
	return f.mf.data[ep : ep+indexEntrySize]
}

// commitLocked writes the pending entries to the file with one pwrite.
func (f *indexFile) commitLocked() error {
	if len(f.pend) == 0 {
		return nil
	}
	if _, err := f.mf.writeAt(f.pend, f.entryPos(f.written)); err != nil {
		return fmt.Errorf("store: write %s: %w", f.mf.path, err)
	}
	f.written = f.count
	f.pend = f.pend[:0]
	return nil
}

// writeHeadLocked commits pending entries, then writes the pages of head
// that changed (runs of them with one pwrite each).
func (f *indexFile) writeHeadLocked() error {
	if err := f.commitLocked(); err != nil {
		return err
	}
	if f.head == nil {
		return nil
	}
	pages := (int64(len(f.head)) + indexPage - 1) / indexPage
	for p := int64(0); p < pages; {
		if f.dirty[p/64]&(1<<(p%64)) == 0 {
			p++
			continue
		}
		q := p
		for q < pages && f.dirty[q/64]&(1<<(q%64)) != 0 {
			f.dirty[q/64] &^= 1 << (q % 64)
			q++
		}
		from, to := p*indexPage, min(q*indexPage, int64(len(f.head)))
		if _, err := f.mf.writeAt(f.head[from:to], from); err != nil {
			return fmt.Errorf("store: write %s: %w", f.mf.path, err)
		}
		p = q
	}
	return nil
}

func (f *indexFile) readHeader() {
	h := f.mf.data[:indexHeaderSize]
	f.beginTs = int64(be.Uint64(h[0:]))
	f.endTs = int64(be.Uint64(h[8:]))
	f.beginPhy = int64(be.Uint64(h[16:]))
	f.endPhy = int64(be.Uint64(h[24:]))
	f.usedSlots = int32(be.Uint32(h[32:]))
	f.count = int32(be.Uint32(h[36:]))
}

// checkHeader validates the header read from disk; "" when plausible.
func (f *indexFile) checkHeader() string {
	if f.count == 0 && f.beginTs == 0 && f.endTs == 0 && f.beginPhy == 0 && f.endPhy == 0 && f.usedSlots == 0 {
		// Created, never written: then its first entry is zeros too. A
		// zeroed header over written entries (a zeroed page, a header
		// never synced before a crash) used to be taken for a new file,
		// and every key the file held was no longer found.
		if ep := f.entryPos(1); int64(len(f.mf.data)) >= ep+indexEntrySize && !allZero(f.mf.data[ep:ep+indexEntrySize]) {
			return "header zeroed, but the file holds entries"
		}
		f.count = 1
		return ""
	}
	switch {
	case f.count < 1 || int(f.count) > f.entries:
		return fmt.Sprintf("index count %d outside [1, %d]", f.count, f.entries)
	case f.usedSlots < 0 || int(f.usedSlots) > f.slots:
		return fmt.Sprintf("used slot count %d outside [0, %d]", f.usedSlots, f.slots)
	case f.count > 1 && (f.beginTs > f.endTs || f.beginPhy > f.endPhy || f.beginPhy < 0 || f.beginTs < 0):
		return fmt.Sprintf("header range inverted (ts %d..%d, phy %d..%d)", f.beginTs, f.endTs, f.beginPhy, f.endPhy)
	}
	return ""
}

func indexHash(key []byte) int32 { return indexHashFrom(0, key) }

// topicHashPrefix is JavaHashCode of topic+"#", which indexHashFrom
// continues over a key: indexHashFrom(topicHashPrefix(t), k) is
// indexHash of t+"#"+k.
func topicHashPrefix(topic []byte) int32 {
	return 31*record.JavaHashCode(topic) + '#'
}

// indexHashFrom is indexHash of a key whose topic+"#" hashed to prefix
// (topicHashPrefix).
func indexHashFrom(prefix int32, key []byte) int32 {
	h := record.JavaHashCodeFrom(prefix, key)
	if h < 0 {
		h = -h
	}
	if h < 0 { // MinInt32
		h = 0
	}
	return h
}

func (f *indexFile) slotPos(hash int32) int64 {
	return indexHeaderSize + int64(int(hash)%f.slots)*indexSlotSize
}

func (f *indexFile) entryPos(n int32) int64 {
	return indexHeaderSize + int64(f.slots)*indexSlotSize + int64(n)*indexEntrySize
}

// maxIndexPend bounds the entries a file buffers between commits.
const maxIndexPend = 256 << 10

// addLocked appends an entry for hash; caller holds mu and checked !full
// (and that the file has a head: it is the newest).
func (f *indexFile) addLocked(hash int32, phy, storeTs int64) error {
	sp := f.slotPos(hash)
	prev := f.slotLocked(sp)
	if prev <= 0 || prev >= f.count {
		prev = 0
	}
	if f.count <= 1 {
		f.beginTs, f.beginPhy = storeTs, phy
	}
	diff := (storeTs - f.beginTs) / 1000
	if diff < 0 {
		diff = 0
	} else if diff > math.MaxInt32 {
		diff = math.MaxInt32
	}
	n := f.count
	var e [indexEntrySize]byte
	be.PutUint32(e[0:], uint32(hash))
	be.PutUint64(e[4:], uint64(phy))
	be.PutUint32(e[12:], uint32(diff))
	be.PutUint32(e[16:], uint32(prev))
	f.pend = append(f.pend, e[:]...)
	if prev == 0 {
		f.usedSlots++
	}
	f.count = n + 1
	f.endTs, f.endPhy = storeTs, phy
	f.writeHeaderLocked()
	be.PutUint32(f.head[sp:], uint32(n))
	f.markDirty(sp)
	if len(f.pend) >= maxIndexPend {
		return f.commitLocked()
	}
	return nil
}

// lookup calls fn with the phy offset of each entry matching hash within
// [begin, end] (ms; entries carry second granularity, so one second of
// slack is allowed and fn must verify), newest first, until fn returns false.
func (f *indexFile) lookup(hash int32, begin, end int64, fn func(phy int64) bool) bool {
	f.mu.RLock()
	defer f.mu.RUnlock()
	// endTs+1000 must not wrap: a damaged endTs near MaxInt64 skipped
	// the file, its keys not found.
	if f.count <= 1 || f.endTs <= math.MaxInt64-1000 && f.endTs+1000 < begin || f.beginTs > end {
		return true
	}
	n := f.slotLocked(f.slotPos(hash))
	for steps := 0; n > 0 && n < f.count && steps < int(f.count); steps++ {
		e := f.entryLocked(n)
		h := int32(be.Uint32(e[0:]))
		phy := int64(be.Uint64(e[4:]))
		diff := int64(int32(be.Uint32(e[12:])))
		prev := int32(be.Uint32(e[16:]))
		ts := f.beginTs + diff*1000
		if h == hash && ts+1000 > begin && ts <= end && phy >= 0 {
			if !fn(phy) {
				return false
			}
		}
		if prev >= n { // chains only go backwards; anything else is damage
			break
		}
		n = prev
	}
	return true
}

// indexService owns the index files.
type indexService struct {
	s      *Store
	dir    string
	files  atomic.Pointer[[]*indexFile]
	listMu sync.Mutex
	// The topic of the last key added and the hash of its topic+"#"
	// (addHeld): a record's keys, and a run of one topic's records, hash
	// only their keys. Indexer-owned.
	hashTopic  []byte
	hashPrefix int32
	hashValid  bool
	skipPhy    int64 // indexer-owned: records at or below this phy are already indexed
	// forceNew makes the next add start a new file (re-indexing old records
	// must not extend a file whose range is newer). Indexer-owned.
	forceNew bool
	// repairs are the damaged files load found, for the repair goroutine
	// (owned by load, then by it).
	repairs []indexRepair
}

func newIndexService(s *Store) *indexService {
	x := &indexService{s: s, dir: filepath.Join(s.opts.Root, "index"), skipPhy: -1}
	empty := []*indexFile{}
	x.files.Store(&empty)
	return x
}

func (x *indexService) list() []*indexFile { return *x.files.Load() }

// indexRepair is a damaged index file waiting to be rebuilt from the
// commitlog: the records with from <= phy <= to (from is a record
// boundary). The records at either end may have had some of their keys in
// the neighbouring files (a file fills up between two keys of a record).
type indexRepair struct {
	f        *indexFile
	from, to int64
	why      string
}

// load maps the index files and checks them. A file of the wrong size or
// with an implausible header is damaged, and so is the newest (the one
// appended to, where a crash tears) when its slots and entries disagree
// (verifyLocked); the others are checked by the repair goroutine once the
// store serves (index_repair.go). A damaged file stays in the list, still
// answering what it can (queries check every record against its key), and
// is queued for a rebuild of the range it covered; one whose range is
// unknown (its header is damaged) covers what lies between its
// neighbours'. Damaged files at the end whose range is unknown are removed,
// and reindex reports that recovery must walk the commitlog again from the
// last range still known (skipPhy, or the commitlog start when it is -1).
func (x *indexService) load() (damaged []*CorruptError, reindex bool, err error) {
	fs := x.s.fs
	if err := fs.MkdirAll(x.dir, 0o755); err != nil {
		return nil, false, fmt.Errorf("%w: %v", ErrBadRoot, err)
	}
	ents, err := fs.ReadDir(x.dir)
	if err != nil {
		return nil, false, fmt.Errorf("store: read %s: %w", x.dir, err)
	}
	var names []string
	for _, e := range ents {
		if strings.HasSuffix(e.Name(), indexRebuildSuffix) {
			_ = fs.Remove(filepath.Join(x.dir, e.Name())) // a rebuild the last run did not finish
			continue
		}
		if _, err := parseIndexName(e.Name()); err == nil && e.Type().IsRegular() {
			names = append(names, e.Name())
		}
	}
	sort.Strings(names)
	want := indexFileSize(x.s.opts.IndexSlots, x.s.opts.IndexEntries)
	if other := x.otherSize(names, want); other > 0 {
		// Written with other IndexSlots or IndexEntries: files of this
		// size cannot hold the same ranges. Index everything again.
		x.s.log.Warn("store: index files were written with another index_slots or index_entries; the commitlog is indexed again",
			"size", other, "expected", want, "files", len(names))
		for _, name := range names {
			_ = fs.Remove(filepath.Join(x.dir, name))
		}
		x.skipPhy, x.forceNew = -1, true
		return nil, true, nil
	}
	var l []*indexFile
	var why []string // per file: why it is damaged, "" if not
	var known []bool // per file: its header's range can be trusted
	closeAll := func() {
		for _, f := range l {
			f.mf.close()
		}
	}
	for _, name := range names {
		path := filepath.Join(x.dir, name)
		st, err := fs.Stat(path)
		if err != nil {
			closeAll()
			return nil, false, fmt.Errorf("store: stat %s: %w", path, err)
		}
		bad := ""
		if st.Size() != want {
			bad = fmt.Sprintf("index file is %d bytes, expected %d", st.Size(), want)
			if err := resizeFile(fs, path, want); err != nil {
				closeAll()
				return nil, false, err
			}
		}
		// A file written before its head was reserved at creation, or
		// created just before a crash, may have holes there.
		if err := reserveIndexHeadAt(fs, path, x.s.opts.IndexSlots); err != nil {
			closeAll()
			return nil, false, err
		}
		mf, err := openMappedFile(fs, path, 0, want)
		if err != nil {
			closeAll()
			return nil, false, err
		}
		mf.adviseRandom()
		f := &indexFile{mf: mf, slots: x.s.opts.IndexSlots, entries: x.s.opts.IndexEntries}
		f.readHeader()
		hw := f.checkHeader()
		ok := hw == "" && f.count > 1 && st.Size() >= indexHeaderSize
		if hw == "" && bad == "" {
			bad = x.checkBegin(f)
		}
		if bad == "" {
			bad = hw
		}
		if hw != "" {
			f.count, f.usedSlots = 1, 0 // answers nothing until rebuilt
		}
		l = append(l, f)
		why = append(why, bad)
		known = append(known, ok)
	}
	// Damaged files at the end whose range is unknown: removed, and their
	// records indexed again by recovery's walk.
	for n := len(l); n > 0 && why[n-1] != "" && !known[n-1]; n = len(l) {
		f := l[n-1]
		damaged = append(damaged, &CorruptError{File: f.mf.path, Reason: why[n-1] + "; removed, its records are indexed again from the commitlog"})
		_ = f.mf.destroy(true)
		l, why, known = l[:n-1], why[:n-1], known[:n-1]
		reindex = true
	}
	if n := len(l); n > 0 && why[n-1] == "" {
		f := l[n-1]
		if err := f.openHead(false); err != nil {
			closeAll()
			return nil, false, err
		}
		if w := f.verifyLocked(); w != "" {
			why[n-1] = w
			f.head, f.dirty, f.pend = nil, nil, nil
		}
	}
	x.repairs = x.repairs[:0]
	for i, f := range l {
		if why[i] == "" {
			continue
		}
		r := repairOf(f, why[i])
		if !known[i] {
			// Between the neighbours' ranges; the last file's is known.
			r.from, r.to = 0, math.MaxInt64
			for j := i - 1; j >= 0; j-- {
				if known[j] {
					r.from = l[j].endPhy
					break
				}
			}
			for j := i + 1; j < len(l); j++ {
				if known[j] {
					r.to = l[j].beginPhy
					break
				}
			}
			f.beginPhy, f.endPhy = r.from, r.to
			f.beginTs, f.endTs = 0, 0
		}
		x.repairs = append(x.repairs, r)
		damaged = append(damaged, &CorruptError{File: f.mf.path, Reason: why[i] + "; rebuilt from the commitlog"})
	}
	x.files.Store(&l)
	x.skipPhy = -1
	for i := len(l) - 1; i >= 0; i-- {
		if l[i].count > 1 || (why[i] != "" && known[i]) {
			x.skipPhy = l[i].endPhy
			break
		}
	}
	if n := len(l); reindex || n > 0 && l[n-1].head == nil {
		x.forceNew = true // the newest file is not appended to
	}
	return damaged, reindex, nil
}

// repairOf is the repair of a damaged file whose header is sound.
func repairOf(f *indexFile, why string) indexRepair {
	return indexRepair{f: f, from: f.beginPhy, to: f.endPhy, why: why}
}

// otherSize returns the size shared by all of several index files when
// it is not want (the options changed), else 0.
func (x *indexService) otherSize(names []string, want int64) int64 {
	if len(names) < 2 {
		return 0
	}
	size := int64(-1)
	for _, name := range names {
		st, err := x.s.fs.Stat(filepath.Join(x.dir, name))
		if err != nil || st.Size() == want || size >= 0 && st.Size() != size {
			return 0
		}
		size = st.Size()
	}
	return size
}

// reserveIndexHead gives the header and slot table of the index file
// open as f their blocks (fallocate). Index files are sparse and written
// only with pwrite, but retired files, and every file at load, are read
// through the mapping: on a file system that allocates a page to read a
// hole through a shared mapping (tmpfs) and has no page left, that read
// raises SIGBUS and kills the process. The slot table is read for any
// key, so it gets its blocks up front; entries are read only below the
// count the header gives, and the header is written after them.
func reserveIndexHead(f vfs.File, path string, slots int) error {
	end := indexHeaderSize + int64(slots)*indexSlotSize
	if err := f.Allocate(0, end); err != nil && !errors.Is(err, vfs.ErrNotSupported) {
		return fmt.Errorf("store: reserve the header and slot table of %s [0, %d): %w", path, end, err)
	}
	return nil
}

// reserveIndexHeadAt is reserveIndexHead for the file at path.
func reserveIndexHeadAt(fs vfs.FS, path string, slots int) error {
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	err = reserveIndexHead(f, path, slots)
	if cerr := f.Close(); err == nil && cerr != nil {
		err = fmt.Errorf("store: close %s: %w", path, cerr)
	}
	return err
}

// resizeFile truncates or extends (with zeros) the file at path to size.
func resizeFile(fs vfs.FS, path string, size int64) error {
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return fmt.Errorf("store: open %s: %w", path, err)
	}
	err = f.Truncate(size)
	if cerr := f.Close(); err == nil {
		err = cerr
	}
	if err != nil {
		return fmt.Errorf("store: resize %s: %w", path, err)
	}
	return nil
}

func parseIndexName(name string) (time.Time, error) {
	if len(name) != 17 {
		return time.Time{}, fmt.Errorf("store: bad index name %q", name)
	}
	return time.ParseInLocation(indexTimeLayout, name[:14]+"."+name[14:], time.Local)
}

func formatIndexName(t time.Time) string {
	s := t.Local().Format(indexTimeLayout)
	return s[:14] + s[15:]
}

// roomFor reports whether the newest index file takes n more entries, so
// that adding them makes no new file. Indexer-owned.
func (x *indexService) roomFor(n int) bool {
	l := x.list()
	if len(l) == 0 || x.forceNew {
		return false
	}
	f := l[len(l)-1]
	f.mu.RLock()
	ok := f.head != nil && int(f.count)+n < f.entries
	f.mu.RUnlock()
	return ok
}

// current returns the index file to append to, creating one when needed.
func (x *indexService) current() (*indexFile, error) {
	l := x.list()
	if n := len(l); n > 0 && !x.forceNew {
		f := l[n-1]
		f.mu.RLock()
		full := f.full() || f.head == nil // a rebuilt or damaged file is not appended to
		f.mu.RUnlock()
		if !full {
			return f, nil
		}
	}
	if n := len(l); n > 0 {
		old := l[n-1]
		old.mu.Lock()
		err := old.retireLocked()
		old.mu.Unlock()
		if err != nil {
			return nil, err
		}
	}
	x.forceNew = false
	t := x.s.opts.Now().Truncate(time.Millisecond)
	if n := len(l); n > 0 {
		if last, err := parseIndexName(filepath.Base(l[n-1].mf.path)); err == nil && !t.After(last) {
			t = last.Add(time.Millisecond)
		}
	}
	path := filepath.Join(x.dir, formatIndexName(t))
	size := indexFileSize(x.s.opts.IndexSlots, x.s.opts.IndexEntries)
	f, err := x.s.fs.OpenFile(path, os.O_RDWR|os.O_CREATE|os.O_EXCL, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: create %s: %w", path, err)
	}
	if err := f.Truncate(size); err != nil { // sparse: the entries get their blocks as they are written
		_ = f.Close()
		_ = x.s.fs.Remove(path)
		return nil, fmt.Errorf("store: size %s: %w", path, err)
	}
	if err := reserveIndexHead(f, path, x.s.opts.IndexSlots); err != nil {
		_ = f.Close()
		_ = x.s.fs.Remove(path)
		return nil, err
	}
	mf, err := mapFile(x.s.fs, f, path, 0, size)
	if err != nil {
		return nil, err
	}
	mf.adviseRandom()
	nf := &indexFile{mf: mf, slots: x.s.opts.IndexSlots, entries: x.s.opts.IndexEntries, count: 1}
	_ = nf.openHead(true)
	nf.mu.Lock()
	nf.writeHeaderLocked()
	nf.mu.Unlock()
	x.listMu.Lock()
	l = x.list()
	nl := make([]*indexFile, len(l), len(l)+1)
	copy(nl, l)
	nl = append(nl, nf)
	x.files.Store(&nl)
	x.listMu.Unlock()
	return nf, nil
}

// addHeld indexes topic#key -> phy, for a run of keys (an indexing
// round): the newest file stays locked in *held from one call to the
// next, so a round takes its lock once instead of twice per key (a read
// lock to find it, a write lock to add); release(held) unlocks it. Nothing the caller does
// between calls may take that file's lock. Indexer-owned.
func (x *indexService) addHeld(held **indexFile, topic, key []byte, phy, storeTs int64) error {
	if len(key) == 0 {
		return nil
	}
	hash := x.keyHash(topic, key)
	f := *held
	if f == nil || x.forceNew || f.full() || f.head == nil {
		release(held)
		var err error
		if f, err = x.current(); err != nil {
			return err
		}
		f.mu.Lock()
		*held = f
	}
	return f.addLocked(hash, phy, storeTs)
}

// keyHash is indexHash of topic+"#"+key. Indexer-owned.
func (x *indexService) keyHash(topic, key []byte) int32 {
	if !x.hashValid || !bytes.Equal(topic, x.hashTopic) {
		x.hashTopic = append(x.hashTopic[:0], topic...)
		x.hashPrefix = topicHashPrefix(topic)
		x.hashValid = true
	}
	return indexHashFrom(x.hashPrefix, key)
}

// release unlocks the file addHeld held, if any.
func release(held **indexFile) {
	if f := *held; f != nil {
		*held = nil
		f.mu.Unlock()
	}
}

// commit writes the newest file's pending entries (after recovery).
// Indexer-only.
func (x *indexService) commit() error {
	l := x.list()
	if len(l) == 0 {
		return nil
	}
	f := l[len(l)-1]
	f.mu.Lock()
	defer f.mu.Unlock()
	return f.commitLocked()
}

// walked records that the indexer has walked the commitlog up to the
// record at phy (stored at storeTs), whether or not it had keys: the newest
// file's header range is extended to it, so recovery resumes there and not
// at the last record that had keys. Indexer-owned.
func (x *indexService) walked(phy, storeTs int64) {
	l := x.list()
	if len(l) == 0 {
		return
	}
	f := l[len(l)-1]
	f.mu.Lock()
	if f.head != nil && f.count > 1 && f.endPhy < phy {
		f.endPhy = phy
		f.endTs = max(f.endTs, storeTs)
		f.writeHeaderLocked()
	}
	f.mu.Unlock()
	x.skipPhy = max(x.skipPhy, phy)
}

// cutAt makes the records from end on (the log was cut there and is
// written again) be indexed, into a new file so that the offsets of each
// file's entries stay in order. Indexer-owned.
func (x *indexService) cutAt(end int64) {
	if x.skipPhy >= end {
		x.skipPhy = end - 1
		x.forceNew = true
	}
}

// query walks files newest first.
func (x *indexService) query(topic, key string, begin, end int64, fn func(phy int64) bool) {
	buf := make([]byte, 0, len(topic)+1+len(key))
	buf = append(append(append(buf, topic...), '#'), key...)
	hash := indexHash(buf)
	l := x.list()
	for i := len(l) - 1; i >= 0; i-- {
		f := l[i]
		if !f.mf.acquire() {
			continue
		}
		cont := f.lookup(hash, begin, end, fn)
		f.mf.release()
		if !cont {
			return
		}
	}
}

// lastUpdate returns the newest indexed store timestamp and phy offset.
func (x *indexService) lastUpdate() (ts, phy int64) {
	l := x.list()
	for i := len(l) - 1; i >= 0; i-- {
		f := l[i]
		f.mu.RLock()
		c, t, p := f.count, f.endTs, f.endPhy
		f.mu.RUnlock()
		if c > 1 {
			return t, p
		}
	}
	return 0, 0
}

func (x *indexService) flush() error {
	for _, f := range x.list() {
		if !f.mf.acquire() {
			continue
		}
		f.mu.Lock()
		err := f.writeHeadLocked()
		c := int64(f.count)
		f.mu.Unlock()
		if err == nil && c > f.mf.flushedTo.Load() {
			err = f.mf.sync(c)
		}
		f.mf.release()
		if err != nil {
			return err
		}
	}
	return nil
}

// deleteBelow removes index files (never the newest) whose entries all
// point below clMin.
func (x *indexService) deleteBelow(clMin int64) int {
	x.listMu.Lock()
	defer x.listMu.Unlock()
	l := x.list()
	n := 0
	for n < len(l)-1 {
		f := l[n]
		f.mu.RLock()
		endPhy := f.endPhy
		f.mu.RUnlock()
		if endPhy >= clMin {
			break
		}
		n++
	}
	if n == 0 {
		return 0
	}
	for _, f := range l[:n] {
		_ = f.mf.destroy(true)
	}
	nl := append([]*indexFile(nil), l[n:]...)
	x.files.Store(&nl)
	return n
}

func (x *indexService) closeAll() {
	x.listMu.Lock()
	for _, f := range x.list() {
		f.mf.close()
	}
	empty := []*indexFile{}
	x.files.Store(&empty)
	x.listMu.Unlock()
}
