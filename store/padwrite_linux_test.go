package store

import (
	"context"
	"os"
	"strings"
	"syscall"
	"testing"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/smartgo/smartgo/store/vfs"
)

// residentPages reports which of the first n pages of path are in the
// page cache (mincore on a fresh read-only mapping).
func residentPages(t *testing.T, path string, n int) []bool {
	t.Helper()
	f, err := os.Open(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	b, err := unix.Mmap(int(f.Fd()), 0, n*4096, unix.PROT_READ, unix.MAP_SHARED)
	if err != nil {
		t.Fatal(err)
	}
	defer unix.Munmap(b)
	vec := make([]byte, n)
	if _, _, errno := unix.Syscall(unix.SYS_MINCORE, uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)), uintptr(unsafe.Pointer(&vec[0]))); errno != 0 {
		t.Fatal(errno)
	}
	out := make([]bool, n)
	for i, v := range vec {
		out[i] = v&1 != 0
	}
	return out
}

// A write of the write-behind buffer is padded with zeros up to the next
// 64 KiB boundary (commitLog.writePadded): after one small put the
// segment's first 16 pages are in the page cache and the bytes after the
// record read as zeros; the next puts write over the padding, are not
// padded again until they pass it, and read back.
func TestStoreWriteBehindPadsTo64KiB(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.SegmentSize = 1 << 20 })
	body := strings.Repeat("x", 1000)
	first, err := putAsyncWait(s, newMsg(msgSpec{topic: "A", body: body}))
	if err != nil || first.Status != PutOK {
		t.Fatalf("put: %+v %v", first, err)
	}
	seg := s.cl.list()[0]
	res := residentPages(t, seg.path, 32)
	for i, r := range res {
		if want := i < padAlign/4096; r != want {
			t.Fatalf("page %d in the page cache: %v, want %v (pages %v)", i, r, want, res)
		}
	}
	tail := make([]byte, 8192)
	if _, err := seg.readAt(tail, int64(first.WroteBytes)); err != nil {
		t.Fatal(err)
	}
	for i, c := range tail {
		if c != 0 {
			t.Fatalf("byte %d after the record is %#x, want 0", first.WroteBytes+i, c)
		}
	}
	if got := s.cl.padded; got != padAlign {
		t.Fatalf("padded to %d, want %d", got, padAlign)
	}
	for range 100 {
		if res, err := putAsyncWait(s, newMsg(msgSpec{topic: "A", body: body})); err != nil || res.Status != PutOK {
			t.Fatalf("put: %+v %v", res, err)
		}
	}
	if got, end := s.cl.padded, s.cl.committed.Load(); got != (end+padAlign-1)/padAlign*padAlign {
		t.Fatalf("padded to %d with the log ending at %d", got, end)
	}
	waitDispatched(t, s)
	if got := readAll(t, s, "A", 0); len(got) != 101 {
		t.Fatalf("queue A/0 holds %d messages, want 101", len(got))
	}
}

// A padded write that meets a full disk is made again without the
// padding: the records fit, so the puts are stored and answered.
func TestStoreWriteBehindPaddingMeetsFullDisk(t *testing.T) {
	s, fs := faultStore(t, t.TempDir(), func(o *Options) { o.SegmentSize = 1 << 20 })
	fs.Inject(vfs.Rule{Op: vfs.OpWrite, Path: "commitlog", Count: 1, Err: syscall.ENOSPC})
	res, err := putAsyncWait(s, newMsg(msgSpec{topic: "A", body: "fits"}))
	if err != nil || res.Status != PutOK {
		t.Fatalf("put whose padded write met ENOSPC: %+v %v, want stored", res, err)
	}
	if got := fs.Failed(vfs.OpWrite); got != 1 {
		t.Fatalf("%d failed writes, want 1 (the padded one)", got)
	}
	if s.cl.padded != 0 {
		t.Fatalf("padded to %d after the padded write failed", s.cl.padded)
	}
	waitDispatched(t, s)
	if got := readAll(t, s, "A", 0); len(got) != 1 || string(got[0].Body) != "fits" {
		t.Fatalf("queue A/0 holds %d messages", len(got))
	}
}

// With FlushSync a write is not padded: each group commit would write the
// zeros to the disk, and the records over them at the next.
func TestStoreWriteBehindNotPaddedWithFlushSync(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.SegmentSize = 1 << 20; o.FlushMode = FlushSync })
	res, err := s.Put(context.Background(), newMsg(msgSpec{topic: "A", body: strings.Repeat("x", 1000)}))
	if err != nil || res.Status != PutOK {
		t.Fatalf("put: %+v %v", res, err)
	}
	if got := residentPages(t, s.cl.list()[0].path, 16); !got[0] || got[1] {
		t.Fatalf("pages in the page cache %v, want only the first", got)
	}
	if s.cl.padded != 0 {
		t.Fatalf("padded to %d with FlushSync", s.cl.padded)
	}
}
