package store

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"

	"github.com/smartgo/smartgo/store/vfs"
	"golang.org/x/sys/unix"
)

// mappedFile is one fixed-size file mapped MAP_SHARED read-write: a
// commitlog segment, a consume-queue file or an index file.
//
// Lifetime: the owner (the file list it sits in) holds one reference.
// Readers take more with acquire and give them back with release. destroy
// unlinks the file and drops the owner's reference; the mapping is removed
// only when the last reference is released, so a reader never touches an
// unmapped page.
type mappedFile struct {
	path string
	base int64 // logical start offset (commitlog offset, CQ byte offset, ...)
	size int64
	fsys *fileSys
	fd   fdSlot // the descriptor, when the cache holds one (pin, fdcache.go)
	data []byte

	refs     atomic.Int64 // owner + readers; 0 = unmapped
	removed  atomic.Bool  // destroy called
	unmapped atomic.Bool
	// wrote is the number of valid bytes written from the start (commitlog
	// and consume queue); published after the bytes themselves.
	wrote atomic.Int64
	// flushedTo is the byte position up to which the file was fdatasynced.
	flushedTo atomic.Int64
	// allocated: the blocks of [0, allocated) are reserved (Allocate) and,
	// for warmed segments, written and synced; nothing is written through
	// the mapping at or beyond it (a store to a page without a block
	// faults with SIGBUS when the disk is full). Raised under allocMu.
	allocated atomic.Int64
	allocMu   sync.Mutex // serialises extending allocated (leaf lock)
}

// fileNameFor renders the 20-digit zero-padded file name of a start offset.
func fileNameFor(base int64) string { return fmt.Sprintf("%020d", base) }

// parseFileName parses a 20-digit file name; ok=false for anything else.
func parseFileName(name string) (int64, bool) {
	if len(name) != 20 {
		return 0, false
	}
	var v int64
	for i := 0; i < len(name); i++ {
		c := name[i]
		if c < '0' || c > '9' {
			return 0, false
		}
		if v > (1<<63-1-int64(c-'0'))/10 {
			return 0, false
		}
		v = v*10 + int64(c-'0')
	}
	return v, true
}

// warmMode says how a new segment is prepared before the writer reaches it.
type warmMode int

const (
	warmNone  warmMode = iota // allocate only
	warmTouch                 // allocate, then read-fault every page of the range
	warmZero                  // allocate, write zeros, fdatasync, then read-fault (commitlog segments)
)

// createMappedFile creates (or reuses an existing short or empty) file of
// exactly size bytes, sparse, allocates and warms its first alloc bytes
// (all of it when alloc >= size; none when alloc is 0) and maps it. Blocks
// beyond are allocated later, ahead of the writer (mappedFile.allocate).
//
// Commitlog segments use warmZero with FlushSync: zeros are written through
// the file descriptor over each allocated range and made durable with
// fdatasync BEFORE the writer reaches it. Allocation alone leaves
// unwritten extents: the first write to each block converts it, and every
// group-commit fdatasync then carries that conversion through the journal.
// Zeros that are written but not yet synced are worse still: the first
// fdatasync after the writer starts flushes them all (this is why an
// earlier, unsynced pre-write looked ~3x slower). Written and synced, later
// fdatasyncs carry only the new record pages and no metadata (measured in
// the store benchmarks: BenchmarkStorePutSync, msgs/s and µs/fsync).
func createMappedFile(fs *fileSys, path string, base, size, alloc int64, warm warmMode) (*mappedFile, error) {
	f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("store: create %s: %w", path, err)
	}
	if err := f.Truncate(size); err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("store: size %s: %w", path, err)
	}
	m, err := mapFile(fs, f, path, base, size)
	if err != nil {
		return nil, err
	}
	if alloc > 0 {
		if err := m.allocate(min(alloc, size), warm); err != nil {
			m.close()
			_ = fs.Remove(path)
			return nil, err
		}
	}
	return m, nil
}

// allocate makes sure the blocks of [0, to) are reserved and warmed (see
// warmMode), extending allocated. A failure (ENOSPC: the disk is full)
// leaves allocated where it was; nothing was written through the mapping.
func (m *mappedFile) allocate(to int64, warm warmMode) error {
	to = min(to, m.size)
	if to <= m.allocated.Load() {
		return nil
	}
	m.allocMu.Lock()
	defer m.allocMu.Unlock()
	from := m.allocated.Load()
	if to <= from {
		return nil
	}
	f, err := m.pin()
	if err != nil {
		return err
	}
	defer m.unpin()
	err = f.Allocate(from, to-from)
	if errors.Is(err, vfs.ErrNotSupported) && warm != warmZero {
		// No fallocate here: writing zeros gives the range its blocks.
		err = writeZeros(f, from, to, false)
	}
	if err != nil && !errors.Is(err, vfs.ErrNotSupported) {
		return fmt.Errorf("store: allocate %s [%d, %d): %w", m.path, from, to, err)
	}
	if warm == warmZero {
		if err := writeZeros(f, from, to, true); err != nil {
			return fmt.Errorf("store: pre-write %s: %w", m.path, err)
		}
	}
	if warm == warmTouch || warm == warmZero {
		m.touchPages(from, to)
	}
	m.allocated.Store(to)
	return nil
}

// zeroChunk is the write size of the segment pre-write.
const zeroChunk = 1 << 20

var zeroBuf = make([]byte, zeroChunk)

// writeZeros overwrites [from, to) of f with zeros, and with sync
// fdatasyncs it. It runs beside a writer that group-commits on the same
// disk, so it keeps at most zeroWindow bytes in writeback at a time
// (sync_file_range write and wait per window): a commitlog fdatasync never
// queues behind a whole chunk of zeros.
func writeZeros(f vfs.File, from, to int64, sync bool) error {
	const zeroWindow = 4 << 20
	started := from
	for off := from; off < to; {
		n := min(int64(zeroChunk), to-off)
		if _, err := f.WriteAt(zeroBuf[:n], off); err != nil {
			return err
		}
		off += n
		if sync && (off-started >= zeroWindow || off == to) {
			if err := f.WriteBack(started, off-started); err != nil && !errors.Is(err, vfs.ErrNotSupported) {
				return err
			}
			started = off
		}
	}
	if !sync {
		return nil
	}
	return f.Datasync()
}

// touchPages asks for readahead and read-faults every page of [from, to).
func (m *mappedFile) touchPages(from, to int64) {
	b := m.data[from:to]
	_ = unix.Madvise(b, unix.MADV_WILLNEED)
	var sink byte
	for i := 0; i < len(b); i += 4096 {
		sink |= b[i]
	}
	touchSink.Store(int32(sink))
}

var touchSink atomic.Int32

// openMappedFile maps an existing file; a file shorter than size is
// extended with zeros first, its new blocks reserved (the caller reports
// that as damage; no room for them fails the open). Nothing
// counts as allocated: whoever writes to it allocates first (the blocks
// that exist already cost nothing), and a segment made active counts
// what lies below its write position as allocated (raiseAllocated).
func openMappedFile(fs *fileSys, path string, base, size int64) (*mappedFile, error) {
	f, err := fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return nil, fmt.Errorf("store: open %s: %w", path, err)
	}
	st, err := f.Stat()
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("store: stat %s: %w", path, err)
	}
	if st.Size() < size {
		if err := f.Truncate(size); err != nil {
			_ = f.Close()
			return nil, fmt.Errorf("store: extend %s: %w", path, err)
		}
		// The extension gets its blocks now: on a file system that
		// cannot give them later (a full tmpfs), reading a hole
		// through the mapping raises SIGBUS and kills the process;
		// refusing to open is the clear error.
		if err := f.Allocate(st.Size(), size-st.Size()); err != nil && !errors.Is(err, vfs.ErrNotSupported) {
			_ = f.Close()
			return nil, fmt.Errorf("store: extend %s: reserve [%d, %d): %w", path, st.Size(), size, err)
		}
	}
	m, err := mapFile(fs, f, path, base, size)
	if err != nil {
		return nil, err
	}
	// Most files opened are old, full and only read from now on: the
	// descriptor goes (the few that are written again reopen it).
	fs.fds.drop(m)
	return m, nil
}

// raiseAllocated records that [0, to) needs no allocation from the
// writer's side: it holds data already, never written again (a segment
// made active at its write position).
func (m *mappedFile) raiseAllocated(to int64) {
	m.allocMu.Lock()
	if m.allocated.Load() < to {
		m.allocated.Store(min(to, m.size))
	}
	m.allocMu.Unlock()
}

// mapFile maps f, which the mapped file then owns: its descriptor goes to
// the cache (on failure it is closed).
func mapFile(fs *fileSys, f vfs.File, path string, base, size int64) (*mappedFile, error) {
	data, err := unix.Mmap(int(f.Fd()), 0, int(size), unix.PROT_READ|unix.PROT_WRITE, unix.MAP_SHARED)
	if err != nil {
		_ = f.Close()
		return nil, fmt.Errorf("store: mmap %s: %w", path, err)
	}
	m := &mappedFile{path: path, base: base, size: size, fsys: fs, data: data}
	m.refs.Store(1)
	fs.fds.add(m, f)
	return m, nil
}

// acquire takes a reader reference; false if the file is already unmapped
// or being destroyed.
func (m *mappedFile) acquire() bool {
	for {
		r := m.refs.Load()
		if r <= 0 || m.removed.Load() {
			return false
		}
		if m.refs.CompareAndSwap(r, r+1) {
			return true
		}
	}
}

// release drops a reference; the last one unmaps and closes the file.
func (m *mappedFile) release() {
	if m.refs.Add(-1) == 0 {
		_ = unix.Munmap(m.data)
		m.fsys.fds.forget(m)
		m.unmapped.Store(true)
	}
}

// destroy unlinks the file (if remove) and drops the owner reference.
// Idempotent.
func (m *mappedFile) destroy(remove bool) error {
	if !m.removed.CompareAndSwap(false, true) {
		return nil
	}
	var err error
	if remove {
		if e := m.fsys.Remove(m.path); e != nil && !errors.Is(e, os.ErrNotExist) {
			err = fmt.Errorf("store: remove %s: %w", m.path, e)
		}
	}
	m.release()
	return err
}

// close drops the owner reference without removing the file.
func (m *mappedFile) close() { _ = m.destroy(false) }

// sync fdatasyncs the file (data written through the mapping included) and
// records that everything up to pos is durable.
func (m *mappedFile) sync(pos int64) error {
	if err := m.datasync(); err != nil {
		return err
	}
	m.flushed(pos)
	return nil
}

// flushed records that everything up to pos is durable; a file flushed
// to its end gives its descriptor back (it is only read from then on; a
// later write reopens it).
func (m *mappedFile) flushed(pos int64) {
	for {
		cur := m.flushedTo.Load()
		if pos <= cur || m.flushedTo.CompareAndSwap(cur, pos) {
			break
		}
	}
	if pos >= m.size {
		m.fsys.fds.drop(m)
	}
}

// datasync fdatasyncs the file.
func (m *mappedFile) datasync() error {
	f, err := m.pin()
	if err != nil {
		return err
	}
	err = f.Datasync()
	m.unpin()
	if err != nil {
		return fmt.Errorf("store: fdatasync %s: %w", m.path, err)
	}
	return nil
}

// syncAll fdatasyncs the whole file (recovery, after it changed bytes
// through the mapping).
func (m *mappedFile) syncAll() error { return m.datasync() }

// syncRange makes [flushedTo, pos) durable with msync(MS_SYNC) of that
// range (from its page): on Linux the same data sync as fdatasync
// (vfs_fsync_range with datasync, device cache flush included), limited to
// the range. Pages beyond pos, which the write pre-faulter has made dirty
// and writable ahead of the writer, are then neither written out nor
// write-protected at every flush, and the writer does not fault on them
// again while the flush has them under writeback.
func (m *mappedFile) syncRange(pos int64) error {
	from := m.flushedTo.Load() &^ (4096 - 1)
	if pos > m.size {
		pos = m.size
	}
	if from < pos {
		f, err := m.pin()
		if err != nil {
			return err
		}
		err = f.Msync(m.data[from:pos])
		m.unpin()
		if err != nil {
			return fmt.Errorf("store: msync %s: %w", m.path, err)
		}
	}
	m.flushed(pos)
	return nil
}

// writeAt pwrites b at off of the file (the tail of a commitlog segment,
// consume-queue or index file), reopening it if its descriptor was
// closed.
func (m *mappedFile) writeAt(b []byte, off int64) (int, error) {
	f, err := m.pin()
	if err != nil {
		return 0, err
	}
	n, err := f.WriteAt(b, off)
	m.unpin()
	return n, err
}

// writeAtZeros is writeAt of b followed by zeros zero bytes
// (vfs.File.WriteAtZeros).
func (m *mappedFile) writeAtZeros(b []byte, zeros int, off int64) (int, error) {
	f, err := m.pin()
	if err != nil {
		return 0, err
	}
	n, err := f.WriteAtZeros(b, zeros, off)
	m.unpin()
	return n, err
}

// readAt preads b from off of the file.
func (m *mappedFile) readAt(b []byte, off int64) (int, error) {
	f, err := m.pin()
	if err != nil {
		return 0, err
	}
	n, err := f.ReadAt(b, off)
	m.unpin()
	return n, err
}

// seek is lseek on the file's descriptor (SEEK_DATA, SEEK_HOLE).
func (m *mappedFile) seek(off int64, whence int) (int64, error) {
	f, err := m.pin()
	if err != nil {
		return 0, err
	}
	n, err := unix.Seek(int(f.Fd()), off, whence)
	m.unpin()
	return n, err
}

// zeroFrom clears [from, size) page by page, writing only pages that are not
// already zero, so stale bytes after a truncation point can never be read as
// records again. It reports whether anything was cleared.
func (m *mappedFile) zeroFrom(from int64) bool {
	const page = 4096
	dirty := false
	for off := from; off < m.size; {
		if off%page == 0 {
			// Skip the file's holes: nothing to clear, nothing to read.
			d, ok := dataFrom(m, off)
			if !ok {
				break
			}
			if p := d &^ (page - 1); p > off {
				off = p
				continue
			}
		}
		end := min((off/page+1)*page, m.size)
		seg := m.data[off:end]
		if !allZero(seg) {
			clear(seg)
			dirty = true
		}
		off = end
	}
	return dirty
}

// dataAllZero reports whether the file's data regions are all zero. It
// reads only them (lseek SEEK_DATA/SEEK_HOLE): on a full tmpfs, reading a
// hole through the shared mapping raises SIGBUS (the page cannot be
// allocated), which killed a restart that found a segment made ahead of
// the log's end.
func (m *mappedFile) dataAllZero() bool {
	for off := int64(0); off < m.size; {
		d, ok := dataFrom(m, off)
		if !ok || d >= m.size {
			return true
		}
		h, err := m.seek(d, unix.SEEK_HOLE)
		if err != nil || h > m.size {
			h = m.size
		}
		if !allZero(m.data[d:h]) {
			return false
		}
		off = h
	}
	return true
}

func allZero(b []byte) bool {
	for len(b) >= 8 {
		if b[0]|b[1]|b[2]|b[3]|b[4]|b[5]|b[6]|b[7] != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c != 0 {
			return false
		}
	}
	return true
}
