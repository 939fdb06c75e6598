package store

import (
	"os"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"
)

// dropCaches makes every page of an open store cold: it drops the store's
// own page-table entries for each mapped file (madvise DONTNEED: the page
// cache keeps the data), syncs the file and asks the kernel to evict its
// cached pages (fadvise DONTNEED evicts only pages no process maps). It
// returns the fraction of the files' pages still resident afterwards, from
// mincore on the mappings, so a benchmark can show it really read cold.
func dropCaches(b *testing.B, s *Store) float64 {
	b.Helper()
	files := append([]*mappedFile(nil), s.cl.list()...)
	s.cqMu.Lock()
	for _, qs := range s.cqs {
		for _, cq := range qs {
			files = append(files, cq.list()...)
		}
	}
	s.cqMu.Unlock()
	var pages, resident int
	for _, m := range files {
		if err := unix.Madvise(m.data, unix.MADV_DONTNEED); err != nil {
			b.Fatal(err)
		}
		fd := int(m.f.Fd())
		if err := fdatasync(fd); err != nil {
			b.Fatal(err)
		}
		if err := unix.Fadvise(fd, 0, 0, unix.FADV_DONTNEED); err != nil {
			b.Fatal(err)
		}
		vec := make([]byte, (len(m.data)+4095)/4096)
		_, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&m.data[0])),
			uintptr(len(m.data)), uintptr(unsafe.Pointer(&vec[0])))
		if errno != 0 {
			b.Fatal(errno)
		}
		for _, v := range vec {
			pages++
			resident += int(v & 1)
		}
	}
	return float64(resident) / float64(max(1, pages))
}

// evictFile asks the kernel to drop f's cached pages.
func evictFile(b *testing.B, f *os.File) {
	if err := unix.Fadvise(int(f.Fd()), 0, 0, unix.FADV_DONTNEED); err != nil {
		b.Fatal(err)
	}
}
