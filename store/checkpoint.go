package store

import (
	"errors"
	"fmt"
	"hash/crc32"
	"os"
	"path/filepath"

	"github.com/smartgo/smartgo/internal/fsutil"
	"golang.org/x/sys/unix"
)

// Checkpoint file layout (frozen, see doc.go): three big-endian int64 store
// timestamps and a CRC32-IEEE of those 24 bytes.
const (
	checkpointSize   = 28
	checkpointName   = "checkpoint"
	abortName        = "abort"
	lockName         = "lock"
	cpPhysicOffset   = 0
	cpLogicsOffset   = 8
	cpIndexOffset    = 16
	cpChecksumOffset = 24
)

// checkpoint holds the store timestamps of the newest commitlog, consume
// queue and index data known to be flushed.
type checkpoint struct {
	Physic, Logics, Index int64
}

func (c checkpoint) min() int64 { return min(c.Physic, c.Logics, c.Index) }

func (c checkpoint) encode() []byte {
	b := make([]byte, checkpointSize)
	be.PutUint64(b[cpPhysicOffset:], uint64(c.Physic))
	be.PutUint64(b[cpLogicsOffset:], uint64(c.Logics))
	be.PutUint64(b[cpIndexOffset:], uint64(c.Index))
	be.PutUint32(b[cpChecksumOffset:], crc32.ChecksumIEEE(b[:cpChecksumOffset]))
	return b
}

// decodeCheckpoint parses checkpoint bytes; torn or altered files fail.
func decodeCheckpoint(b []byte) (checkpoint, error) {
	if len(b) != checkpointSize {
		return checkpoint{}, fmt.Errorf("checkpoint is %d bytes, expected %d", len(b), checkpointSize)
	}
	if got, want := be.Uint32(b[cpChecksumOffset:]), crc32.ChecksumIEEE(b[:cpChecksumOffset]); got != want {
		return checkpoint{}, fmt.Errorf("checkpoint checksum 0x%08x, computed 0x%08x", got, want)
	}
	return checkpoint{
		Physic: int64(be.Uint64(b[cpPhysicOffset:])),
		Logics: int64(be.Uint64(b[cpLogicsOffset:])),
		Index:  int64(be.Uint64(b[cpIndexOffset:])),
	}, nil
}

// readCheckpoint returns the checkpoint, ok=false if missing; a damaged file
// is returned as a *CorruptError.
func readCheckpoint(root string) (checkpoint, bool, error) {
	path := filepath.Join(root, checkpointName)
	b, err := os.ReadFile(path)
	if errors.Is(err, os.ErrNotExist) {
		return checkpoint{}, false, nil
	}
	if err != nil {
		return checkpoint{}, false, fmt.Errorf("store: read %s: %w", path, err)
	}
	cp, err := decodeCheckpoint(b)
	if err != nil {
		return checkpoint{}, false, &CorruptError{File: path, Reason: err.Error()}
	}
	return cp, true, nil
}

// writeCheckpoint records c in the checkpoint file. The first write of a
// run replaces the file atomically (temp file, fsync, rename, directory
// fsync: internal/fsutil), so that the file is whole and 28 bytes long
// whatever an earlier run or a hand left there, and keeps it open; every
// later write overwrites its 28 bytes in place (one pwrite at offset 0)
// and fdatasyncs it (store/vfs: through io_uring where the kernel has it).
// A replacement per write made a new inode and freed the old one, and
// synced the new file and the directory, each a journal commit: on ext4
// about a millisecond of the process's CPU a round, once a second under
// load, where the overwrite changes no metadata that fdatasync writes.
//
// What a crash can leave is unchanged but for one case: the old
// timestamps or the new ones, each of which claims only what was synced
// before it was written (flushLogic). The 28 bytes lie in the file's first
// 512-byte sector, which a device writes whole, so a torn overwrite is
// not expected; should one happen, the CRC fails, recovery reports it and
// scans from the first segment (doc.go), as for any damaged checkpoint:
// slower, nothing lost. Only the goroutine doing the logic rounds, and
// Close after it stopped, call it (flushLogic).
//
// On a disk full to its last page the replacement fails (a new file needs
// a block); a whole checkpoint file there is then overwritten in place
// like the later writes, which needs none: a shutdown on a full disk
// still records how far the queues and the index were flushed.
func (s *Store) writeCheckpoint(c checkpoint) error {
	b := c.encode()
	if s.cpFile == nil {
		path := filepath.Join(s.opts.Root, checkpointName)
		err := fsutil.WriteFileAtomic(path, b, 0o644)
		if err != nil && !s.reuseCheckpoint(path) {
			return err
		}
		if err == nil {
			f, err := s.fs.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				return fmt.Errorf("store: open %s: %w", path, err)
			}
			s.cpFile = f
			return nil
		}
	}
	if _, err := s.cpFile.WriteAt(b, 0); err != nil {
		s.closeCheckpoint() // the next write replaces the file
		return fmt.Errorf("store: write checkpoint: %w", err)
	}
	if err := s.cpFile.Datasync(); err != nil {
		s.closeCheckpoint()
		return fmt.Errorf("store: fdatasync checkpoint: %w", err)
	}
	return nil
}

// reuseCheckpoint opens the checkpoint file at path for writes in place
// when it is whole (checkpointSize bytes), and reports whether it did.
func (s *Store) reuseCheckpoint(path string) bool {
	f, err := s.fs.OpenFile(path, os.O_RDWR, 0)
	if err != nil {
		return false
	}
	if st, err := f.Stat(); err != nil || st.Size() != checkpointSize {
		_ = f.Close()
		return false
	}
	s.cpFile = f
	return true
}

// closeCheckpoint closes the checkpoint file writeCheckpoint keeps open.
func (s *Store) closeCheckpoint() error {
	if s.cpFile == nil {
		return nil
	}
	err := s.cpFile.Close()
	s.cpFile = nil
	if err != nil {
		return fmt.Errorf("store: close checkpoint: %w", err)
	}
	return nil
}

// lockRoot takes an exclusive flock on <root>/lock.
func lockRoot(root string) (*os.File, error) {
	path := filepath.Join(root, lockName)
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRoot, err)
	}
	if err := unix.Flock(int(f.Fd()), unix.LOCK_EX|unix.LOCK_NB); err != nil {
		_ = f.Close()
		if errors.Is(err, unix.EWOULDBLOCK) {
			return nil, fmt.Errorf("%w: %s", ErrLocked, path)
		}
		return nil, fmt.Errorf("store: flock %s: %w", path, err)
	}
	return f, nil
}

// createAbort creates the abort marker (durably) and reports whether one
// was already there (the previous run did not shut down cleanly).
func createAbort(root string) (existed bool, err error) {
	path := filepath.Join(root, abortName)
	if _, err := os.Stat(path); err == nil {
		existed = true
	}
	f, err := os.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		return existed, fmt.Errorf("%w: %v", ErrBadRoot, err)
	}
	if err := f.Close(); err != nil {
		return existed, fmt.Errorf("store: close %s: %w", path, err)
	}
	return existed, fsutil.SyncDir(root)
}

func removeAbort(root string) error {
	if err := os.Remove(filepath.Join(root, abortName)); err != nil && !errors.Is(err, os.ErrNotExist) {
		return fmt.Errorf("store: remove abort: %w", err)
	}
	return fsutil.SyncDir(root)
}
