package vfs

import (
	"errors"
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

func statfs(path string) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Space{}, fmt.Errorf("vfs: statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return Space{Total: st.Blocks * bs, Avail: st.Bavail * bs, Free: st.Bfree * bs}, nil
}

func allocate(f *os.File, off, n int64) error {
	err := unix.Fallocate(int(f.Fd()), 0, off, n)
	if errors.Is(err, unix.EOPNOTSUPP) {
		return ErrNotSupported
	}
	return err
}

func writeBack(f *os.File, off, n int64) error {
	err := unix.SyncFileRange(int(f.Fd()), off, n,
		unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
	if errors.Is(err, unix.ENOSYS) || errors.Is(err, unix.EOPNOTSUPP) {
		return ErrNotSupported
	}
	return err
}

func msync(b []byte) error { return unix.Msync(b, unix.MS_SYNC) }
