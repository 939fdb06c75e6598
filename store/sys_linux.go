package store

import "golang.org/x/sys/unix"

// The Linux system calls the store relies on. sys_other.go has the
// portable stand-ins used elsewhere (development on macOS): the store
// works there, with weaker write-behind and durability tuning.

// madvPopulateWrite maps pages writable without changing their contents.
const madvPopulateWrite = unix.MADV_POPULATE_WRITE

// fallocate reserves size bytes of f's blocks.
func fallocate(fd int, size int64) error { return unix.Fallocate(fd, 0, 0, size) }

// writeBack starts writeback of [off, off+n) and waits for it.
func writeBack(fd int, off, n int64) error {
	return unix.SyncFileRange(fd, off, n,
		unix.SYNC_FILE_RANGE_WAIT_BEFORE|unix.SYNC_FILE_RANGE_WRITE|unix.SYNC_FILE_RANGE_WAIT_AFTER)
}

// fdatasync makes the file's data (not its metadata) durable.
func fdatasync(fd int) error { return unix.Fdatasync(fd) }

// TotalMemory returns the machine's RAM in bytes, or 0 if unknown (the
// base of the memory-residency rule: Options.MemoryResidentBytes is 40 %
// of it by default).
func TotalMemory() uint64 {
	var si unix.Sysinfo_t
	if err := unix.Sysinfo(&si); err != nil {
		return 0
	}
	return uint64(si.Totalram) * uint64(si.Unit)
}
