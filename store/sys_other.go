//go:build !linux

package store

import "golang.org/x/sys/unix"

// Portable stand-ins for the Linux calls of sys_linux.go.

// madvPopulateWrite has no equivalent: the pre-faulter sees EINVAL from
// madvise and stops, as on an old Linux kernel.
const madvPopulateWrite = -1

// fallocate is not available: the caller falls back to ftruncate.
func fallocate(int, int64) error { return unix.EOPNOTSUPP }

// writeBack is not available: the caller skips write-behind pacing.
func writeBack(int, int64, int64) error { return unix.ENOSYS }

// fdatasync falls back to fsync.
func fdatasync(fd int) error { return unix.Fsync(fd) }

// TotalMemory returns 0 (unknown) here.
func TotalMemory() uint64 { return 0 }
