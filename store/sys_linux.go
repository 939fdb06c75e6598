package store

import "golang.org/x/sys/unix"

// The Linux system calls the store relies on. sys_other.go has the
// portable stand-ins used elsewhere (development on macOS): the store
// works there, with weaker write-behind and durability tuning.

// madvPopulateWrite maps pages writable without changing their contents.
const madvPopulateWrite = unix.MADV_POPULATE_WRITE

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
