package store

import (
	"errors"
	"fmt"
	"os"
	"sync"
	"sync/atomic"
	"syscall"

	"github.com/smartgo/smartgo/store/vfs"
)

// Descriptor policy (see doc.go, "Open descriptors"): a mapped file's
// reads go through its mapping, which keeps the file's pages reachable
// without a descriptor. A descriptor is needed only to pwrite the tail of
// the file, to fdatasync or msync it, to allocate its blocks and for
// lseek SEEK_DATA/SEEK_HOLE at recovery. The store's descriptors of its
// mapped files sit in one fdCache of at most Options.MaxOpenFiles: a file
// whose descriptor the cache closed is reopened by path the next time one
// of those calls needs it, and a file that is full and flushed gives its
// descriptor back at once (it is only read from then on).
//
// Durability does not change: the page cache belongs to the file, not to
// the descriptor, so an fdatasync through a reopened descriptor writes
// out pages written through an earlier one, and a writeback error that no
// descriptor has seen yet is reported to the next fdatasync of the file
// (Linux errseq, since 4.13), whichever descriptor makes it.

// fileSys is the store's file layer (Options.FS) with the descriptor cache
// of the files it maps.
type fileSys struct {
	vfs.FS
	fds *fdCache
}

func newFileSys(fs vfs.FS, maxOpen int) *fileSys {
	return &fileSys{FS: fs, fds: &fdCache{max: max(maxOpen, 1)}}
}

// fdCache bounds the descriptors the store's mapped files hold. It
// evicts with the clock algorithm: a file used since the hand last passed
// it is spared once; a file in use (pinned) is never closed, and neither
// is the active commitlog segment (kept, see keepOpen): it is written at
// every put, and with more busy files than descriptors (thousands of
// queues written in turn) the clock would close it between two puts, and
// every write would reopen it (open, fstat and an eviction's close, ~3 us).
// A kept file's descriptor counts towards the bound like any other.
//
// A file's descriptor is taken (pin) without the cache lock while it is
// open: fdSlot.pins goes from n >= 0 to n+1 by compare-and-swap, and
// closing it takes it from 0 to -1 under the lock, so a pinned
// descriptor stays open until unpinned. Only reopening takes the lock.
type fdCache struct {
	max int

	mu   sync.Mutex    // leaf lock (a reopen calls FS.OpenFile under it)
	ring []*mappedFile // files with a descriptor; protected by mu
	hand int           // clock hand into ring; protected by mu
	open atomic.Int64  // len(ring), for Stats
	reop atomic.Int64  // descriptors reopened
}

// fdSlot is a mapped file's descriptor as the cache sees it.
type fdSlot struct {
	// pins: -1 while the file has no descriptor; n >= 0 while it has
	// one, n the calls using it.
	pins atomic.Int32
	ref  atomic.Bool // used since the clock hand last passed
	gone atomic.Bool // unmapped: never reopened
	f    vfs.File    // valid while pins >= 0
	at   int         // index in fdCache.ring, -1 when closed; protected by fdCache.mu
	kept bool        // never evicted (the active commitlog segment); protected by fdCache.mu
	id   fileID      // the file mapped (zero: unknown); set before the mapping is shared

	// transient: reopened while the cache was full; a flush that
	// reopened it gives it back when done (giveBack).
	transient atomic.Bool
}

// fileID identifies a file (device and inode): a reopen by path must find
// the file that was mapped, not one created at that path since (a topic
// deleted and created again while a flush still held its old queue).
type fileID struct{ dev, ino uint64 }

// errFileReplaced: the path of a mapped file names another file now.
var errFileReplaced = errors.New("another file took its path since it was mapped")

func idOf(f vfs.File) fileID {
	st, err := f.Stat()
	if err != nil {
		return fileID{}
	}
	if sys, ok := st.Sys().(*syscall.Stat_t); ok {
		return fileID{dev: uint64(sys.Dev), ino: uint64(sys.Ino)}
	}
	return fileID{}
}

// pin returns m's descriptor, reopening the file if the cache closed it.
// The caller calls unpin when done with it, and keeps no copy.
func (m *mappedFile) pin() (vfs.File, error) {
	s := &m.fd
	for {
		n := s.pins.Load()
		if n < 0 {
			return m.fsys.fds.reopen(m)
		}
		if s.pins.CompareAndSwap(n, n+1) {
			if !s.ref.Load() {
				s.ref.Store(true)
			}
			return s.f, nil
		}
	}
}

// unpin ends a use of the descriptor pin returned.
func (m *mappedFile) unpin() {
	if m.fd.pins.Add(-1) == 0 && m.fd.gone.Load() {
		m.fsys.fds.forget(m) // unmapped while in use: close it now
	}
}

// reopen opens m's file again and pins the new descriptor.
func (c *fdCache) reopen(m *mappedFile) (vfs.File, error) {
	c.mu.Lock()
	defer c.mu.Unlock()
	s := &m.fd
	if s.pins.Load() >= 0 { // reopened meanwhile; nobody closes it while mu is held
		s.pins.Add(1)
		s.ref.Store(true)
		return s.f, nil
	}
	if s.gone.Load() {
		return nil, fmt.Errorf("store: reopen %s: %w", m.path, os.ErrClosed)
	}
	f, err := m.fsys.FS.OpenFile(m.path, os.O_RDWR, 0)
	for err != nil && (errors.Is(err, syscall.EMFILE) || errors.Is(err, syscall.ENFILE)) && c.closeOneLocked() {
		// The process (sockets, ...) or the system ran out of
		// descriptors: give back one of the store's and try again.
		f, err = m.fsys.FS.OpenFile(m.path, os.O_RDWR, 0)
	}
	if err != nil {
		return nil, fmt.Errorf("store: reopen %s: %w", m.path, err)
	}
	if id := idOf(f); s.id != (fileID{}) && id != s.id {
		_ = f.Close()
		return nil, fmt.Errorf("store: reopen %s: %w", m.path, errFileReplaced)
	}
	c.reop.Add(1)
	full := len(c.ring)+1 >= c.limit() // with it the cache is full
	c.addLocked(m, f, 1)
	s.transient.Store(full)
	return f, nil
}

// limit is the descriptors the cache may hold now: max less those of
// the process's sync rings (vfs.SyncDescriptors: io_uring fds and their
// eventfds, up to 16), so that the store's files and the rings together
// keep to Options.MaxOpenFiles; never less than minOpenFiles (nor than
// max, when max is smaller), the files a busy store writes at once.
func (c *fdCache) limit() int {
	r := vfs.SyncDescriptors()
	if r == 0 {
		return c.max
	}
	return max(c.max-r, min(c.max, minOpenFiles))
}

// add gives a newly mapped file's descriptor to the cache.
func (c *fdCache) add(m *mappedFile, f vfs.File) {
	m.fd.id = idOf(f)
	c.mu.Lock()
	c.addLocked(m, f, 0)
	c.mu.Unlock()
}

func (c *fdCache) addLocked(m *mappedFile, f vfs.File, pins int32) {
	s := &m.fd
	s.f = f
	s.ref.Store(true)
	s.at = len(c.ring)
	c.ring = append(c.ring, m)
	s.pins.Store(pins) // publishes f
	c.open.Store(int64(len(c.ring)))
	c.evictLocked()
}

// evictLocked closes unpinned descriptors until at most max are open (or
// every open one is in use: the bound is then exceeded by the calls
// running, until the next reopen).
func (c *fdCache) evictLocked() {
	limit := c.limit()
	for steps := 2 * len(c.ring); len(c.ring) > limit && steps > 0; steps-- {
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		v := c.ring[c.hand]
		if v.fd.kept {
			c.hand++
			continue
		}
		if v.fd.ref.Load() {
			v.fd.ref.Store(false)
			c.hand++
			continue
		}
		if !v.fd.pins.CompareAndSwap(0, -1) {
			c.hand++
			continue
		}
		c.closeLocked(v) // the last file of the ring moves to hand
	}
}

// closeOneLocked closes one descriptor nobody is using, the next the
// clock hand finds, used recently or not, but never a kept one; false if
// all are in use.
func (c *fdCache) closeOneLocked() bool {
	for range len(c.ring) {
		if c.hand >= len(c.ring) {
			c.hand = 0
		}
		if v := c.ring[c.hand]; !v.fd.kept && v.fd.pins.CompareAndSwap(0, -1) {
			c.closeLocked(v)
			return true
		}
		c.hand++
	}
	return false
}

// closeLocked closes v's descriptor (v.fd.pins was just set to -1) and
// takes v out of the ring.
func (c *fdCache) closeLocked(v *mappedFile) {
	s := &v.fd
	i, last := s.at, len(c.ring)-1
	c.ring[i] = c.ring[last]
	c.ring[i].fd.at = i
	c.ring[last] = nil
	c.ring = c.ring[:last]
	c.open.Store(int64(len(c.ring)))
	s.at = -1
	s.transient.Store(false)
	f := s.f
	s.f = nil
	_ = f.Close() // nothing unsynced is lost: the pages stay in the file's page cache
}

// keepOpen makes m the one file whose descriptor the cache never evicts
// (the active commitlog segment), in place of the previous one, prev
// (nil: none). A kept file whose descriptor is closed (drop, or before
// it was kept) is reopened at its next use and then stays open.
func (c *fdCache) keepOpen(prev, m *mappedFile) {
	c.mu.Lock()
	if prev != nil {
		prev.fd.kept = false
	}
	if m != nil {
		m.fd.kept = true
	}
	c.mu.Unlock()
}

// drop closes m's descriptor if nobody is using it: the file is full and
// flushed, it is read through its mapping from now on.
func (c *fdCache) drop(m *mappedFile) {
	if m.fd.pins.Load() != 0 {
		return
	}
	c.mu.Lock()
	if m.fd.pins.CompareAndSwap(0, -1) {
		c.closeLocked(m)
	}
	c.mu.Unlock()
}

// giveBack closes m's descriptor, when nobody is using it, if it was
// reopened while the cache was full (a flush of more files with
// unflushed data than descriptors, each needing one for its pwrite and
// fdatasync): the files that kept their descriptor keep it, and those
// beyond the bound take turns in the room left, instead of the clock
// closing, at every reopen, one that the same flush needs next (with a
// flush's files in any order, every file of a round would be reopened).
func (c *fdCache) giveBack(m *mappedFile) {
	if !m.fd.transient.Load() || m.fd.pins.Load() != 0 {
		return
	}
	c.mu.Lock()
	if m.fd.transient.Load() && !m.fd.kept && m.fd.pins.CompareAndSwap(0, -1) {
		c.closeLocked(m)
	}
	c.mu.Unlock()
}

// forget closes m's descriptor for good (m was unmapped), or leaves that
// to the last unpin if it is in use.
func (c *fdCache) forget(m *mappedFile) {
	c.mu.Lock()
	m.fd.gone.Store(true)
	if m.fd.pins.CompareAndSwap(0, -1) {
		c.closeLocked(m)
	}
	c.mu.Unlock()
}

// setActive makes m the segment the commitlog writes (nil: none yet),
// keeping its descriptor open in the cache (keepOpen).
func (cl *commitLog) setActive(m *mappedFile) {
	if cl.active == m {
		return
	}
	cl.s.fs.fds.keepOpen(cl.active, m)
	cl.active = m
}
