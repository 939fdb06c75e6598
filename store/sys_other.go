//go:build !linux

package store

import "golang.org/x/sys/unix"

// Portable stand-ins for the Linux calls of sys_linux.go.

// madvPopulateWrite has no equivalent: the pre-faulter sees EINVAL from
// madvise and stops, as on an old Linux kernel.
const madvPopulateWrite = -1

// fdatasync falls back to fsync.
func fdatasync(fd int) error { return unix.Fsync(fd) }

// TotalMemory returns 0 (unknown) here.
func TotalMemory() uint64 { return 0 }
