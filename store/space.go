package store

import (
	"errors"
	"fmt"
	"log/slog"
	"math"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/smartgo/smartgo/internal/beat"
	"github.com/smartgo/smartgo/store/vfs"
)

// Disk space.
//
// Writes are refused (ErrDiskFull, PutServiceNotAvailable) while the disk
// holding the root has no room below DiskFullRatio for the commitlog's next
// allocation (one Preallocate chunk), and accepted again by themselves once
// it has: a watcher checks every spaceCheckInterval. Refusal comes before
// the disk fills up:
//
//   - every allocation of commitlog blocks (a new segment, each chunk ahead
//     of the writer) first checks that it fits below the mark (roomFor);
//     the writer never writes where no block is allocated;
//   - a put made while usage is within spaceNearMargin of the mark checks
//     the disk itself (at most every spaceNearEvery), so another process
//     filling the disk is seen within milliseconds, not at the next round;
//   - an ENOSPC that happens all the same (the disk filled between two
//     checks) fails that put cleanly, marks the disk full, and is never a
//     sticky write error: writes resume when the watcher sees room again.
//
// Consume-queue and index growth of records already stored is not held to
// the mark (those records are acknowledged; their consumers need the
// entries), only to the disk's real end.

const (
	spaceCheckInterval = time.Second
	spaceNearMargin    = 0.02 // fraction of the disk
	spaceNearEvery     = 10 * time.Millisecond
)

// spaceState is the store's view of its disk; all fields are atomics.
type spaceState struct {
	usageBits atomic.Uint64 // math.Float64bits of the last used fraction seen
	checkedAt atomic.Int64  // monoNow of the last check, in ns
	reason    atomic.Pointer[string]
}

func (sp *spaceState) usage() float64 { return math.Float64frombits(sp.usageBits.Load()) }

// diskSpace returns the used fraction of the disk holding the root and,
// when the file system tells, its size (0 with an Options.DiskUsage hook).
func (s *Store) diskSpace() (usage float64, total uint64, err error) {
	if s.opts.DiskUsage != nil {
		usage, err = s.opts.DiskUsage(s.opts.Root)
		return usage, 0, err
	}
	var st vfs.Space
	st, err = s.fs.Statfs(s.opts.Root)
	return st.Used(), st.Usable(), err
}

// fullAt reports whether, at usage of a disk of total bytes, an allocation
// of n more bytes would go past the full mark.
func (s *Store) fullAt(usage float64, total uint64, n int64) bool {
	if total > 0 {
		usage += float64(n) / float64(total)
	}
	return usage > s.opts.DiskFullRatio
}

// checkSpace looks at the disk now and sets the refusal state from it:
// full when the commitlog's next chunk would not fit below the mark. It
// returns the usage.
func (s *Store) checkSpace() float64 {
	usage, total, err := s.diskSpace()
	s.space.checkedAt.Store(int64(monoNow()))
	if err != nil {
		s.rlog.Log(s.log, slog.LevelWarn, "disk usage", "store: cannot read disk usage", "err", err)
		return s.space.usage()
	}
	s.space.usageBits.Store(math.Float64bits(usage))
	full := s.fullAt(usage, total, s.cl.chunk)
	s.setDiskFull(full, usage, s.allocationCause(full, usage, s.cl.chunk))
	return usage
}

// allocationCause explains a refusal that the disk's use alone does not:
// the next allocation of n bytes would pass the mark (a small disk, or a
// large store.preallocate). "" when the use itself is past the mark.
func (s *Store) allocationCause(full bool, usage float64, n int64) string {
	if !full || usage > s.opts.DiskFullRatio {
		return ""
	}
	return fmt.Sprintf("%.1f%% used, and the commitlog's next allocation of %d bytes (store.preallocate, at most store.segment_size) would take the disk past %.0f%%",
		usage*100, n, s.opts.DiskFullRatio*100)
}

// setDiskFull switches the refusal state, reporting a change.
func (s *Store) setDiskFull(full bool, usage float64, cause string) {
	if !full {
		if s.diskFull.Swap(false) {
			s.log.Info("store: disk has room again, accepting writes", "usage", usage, "full_ratio", s.opts.DiskFullRatio)
			s.emit(Event{Kind: EventDiskOK})
		}
		return
	}
	// The reason is stored without a "disk full" prefix: a refused put
	// wraps it in ErrDiskFull (which says so) and WritesRefused prefixes it.
	reason := fmt.Sprintf("%.1f%% used, writes refused above %.0f%%", usage*100, s.opts.DiskFullRatio*100)
	if cause != "" {
		reason = cause
	}
	s.space.reason.Store(&reason)
	if !s.diskFull.Swap(true) {
		s.log.Error("store: disk full, refusing writes until space frees", "usage", usage, "full_ratio", s.opts.DiskFullRatio, "reason", reason)
		s.emit(Event{Kind: EventDiskFull})
	}
}

// roomFor checks, on the disk as it is now, that n more commitlog bytes fit
// below the full mark; else it marks the disk full and returns an error
// wrapping ErrDiskFull.
func (s *Store) roomFor(n int64) error {
	usage, total, err := s.diskSpace()
	if err != nil {
		return nil // unknown: let the allocation itself tell
	}
	s.space.usageBits.Store(math.Float64bits(usage))
	if !s.fullAt(usage, total, n) {
		return nil
	}
	s.setDiskFull(true, usage, s.allocationCause(true, usage, n))
	return fmt.Errorf("%w: %d more bytes would take the disk past %.0f%% (%.1f%% used)", ErrDiskFull, n, s.opts.DiskFullRatio*100, usage*100)
}

// noSpace marks the disk full when err is the file system's ENOSPC (or
// EDQUOT): the put that met it failed cleanly, later ones are refused
// until the watcher sees room. It reports whether err was one.
func (s *Store) noSpace(err error) bool {
	if !isNoSpace(err) {
		return false
	}
	s.setDiskFull(true, s.space.usage(), "no space left on the device")
	return true
}

func isNoSpace(err error) bool {
	return errors.Is(err, syscall.ENOSPC) || errors.Is(err, syscall.EDQUOT) || errors.Is(err, ErrDiskFull)
}

// nearFull refreshes the disk state from a put when usage is close to the
// mark and the last check is older than spaceNearEvery. now is the put's
// monoNow reading (< 0: none, read here when needed): a store near its
// mark reads no clock for it.
func (s *Store) nearFull(now time.Duration) {
	if s.space.usage() < s.opts.DiskFullRatio-spaceNearMargin {
		return
	}
	if now < 0 {
		now = monoNow()
	}
	last := s.space.checkedAt.Load()
	if int64(now)-last < int64(spaceNearEvery) || !s.space.checkedAt.CompareAndSwap(last, int64(now)) {
		return
	}
	s.checkSpace()
}

// spaceLoop is the disk watcher: it refreshes the refusal state every
// spaceCheckInterval, so writes resume by themselves once space frees,
// and wakes the dispatcher (which waits for room when a consume queue
// could not grow).
func (s *Store) spaceLoop() {
	t := beat.NewTicker(spaceCheckInterval)
	defer t.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-t.C:
			s.checkSpace()
			s.wakeDispatcher()
		}
	}
}

// DiskUsage returns the used fraction (0..1) of the file system holding
// path, as the store measures its own (Options.DiskUsage, else FS.Statfs).
func (s *Store) DiskUsage(path string) (float64, error) {
	if s.opts.DiskUsage != nil {
		return s.opts.DiskUsage(path)
	}
	st, err := s.fs.Statfs(path)
	return st.Used(), err
}

// DiskUsed returns the used fraction (0..1) of the disk holding the root,
// as last checked (at least every second).
func (s *Store) DiskUsed() float64 { return s.space.usage() }

// WritesRefused reports whether puts are refused now, and why: the store
// is closed, a write or sync failed (sticky), or the disk is full (until
// space frees). A broker tells clients and registries from it, and a
// readiness check can report it.
func (s *Store) WritesRefused() (bool, string) {
	switch {
	case s.closed.Load():
		return true, "store closed"
	case s.werr.Load() != nil:
		return true, s.Err().Error()
	case s.diskFull.Load():
		if r := s.space.reason.Load(); r != nil {
			return true, "disk full: " + *r
		}
		return true, "disk full"
	}
	return false, ""
}
