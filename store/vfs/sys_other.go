//go:build !linux

package vfs

import (
	"fmt"
	"os"

	"golang.org/x/sys/unix"
)

// Portable stand-ins for the Linux calls of sys_linux.go.

func statfs(path string) (Space, error) {
	var st unix.Statfs_t
	if err := unix.Statfs(path, &st); err != nil {
		return Space{}, fmt.Errorf("vfs: statfs %s: %w", path, err)
	}
	bs := uint64(st.Bsize)
	return Space{Total: uint64(st.Blocks) * bs, Avail: uint64(st.Bavail) * bs, Free: uint64(st.Bfree) * bs}, nil
}

func datasync(f *os.File) error { return f.Sync() }

// SyncDescriptors is the number of descriptors syncs hold: none here.
func SyncDescriptors() int { return 0 }

func allocate(*os.File, int64, int64) error { return ErrNotSupported }

func writeBack(*os.File, int64, int64) error { return ErrNotSupported }

func msync(b []byte) error { return unix.Msync(b, unix.MS_SYNC) }
