package vfs

import (
	"errors"
	"os"
	"path/filepath"
	"syscall"
	"testing"
)

func TestVFSDefaultFile(t *testing.T) {
	dir := t.TempDir()
	f, err := Default.OpenFile(filepath.Join(dir, "a"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Allocate(0, 1<<20); err != nil && !errors.Is(err, ErrNotSupported) {
		t.Fatal(err)
	}
	if _, err := f.WriteAt([]byte("hello"), 4096); err != nil {
		t.Fatal(err)
	}
	if err := f.Datasync(); err != nil {
		t.Fatal(err)
	}
	if err := f.WriteBack(0, 8192); err != nil && !errors.Is(err, ErrNotSupported) {
		t.Fatal(err)
	}
	b := make([]byte, 5)
	if _, err := f.ReadAt(b, 4096); err != nil || string(b) != "hello" {
		t.Fatalf("read %q %v", b, err)
	}
	sp, err := Default.Statfs(dir)
	if err != nil || sp.Total == 0 || sp.Avail > sp.Total || sp.Used() <= 0 || sp.Used() > 1 {
		t.Fatalf("statfs %+v %v", sp, err)
	}
}

func TestVFSFaultyRules(t *testing.T) {
	dir := t.TempDir()
	fs := NewFaulty(nil)
	eio := syscall.EIO
	fs.Inject(Rule{Op: OpSync, Path: "seg", After: 2, Count: 1, Err: eio})
	rm := fs.Inject(Rule{Op: OpWrite, Path: "cq", Err: eio})
	seg, err := fs.OpenFile(filepath.Join(dir, "seg"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer seg.Close()
	cq, err := fs.OpenFile(filepath.Join(dir, "cq"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer cq.Close()
	var got []bool
	for range 5 {
		got = append(got, seg.Datasync() == nil)
	}
	if want := []bool{true, true, false, true, true}; !equal(got, want) {
		t.Fatalf("sync results %v, want %v (after 2, once)", got, want)
	}
	if err := cq.Datasync(); err != nil {
		t.Fatal("a rule for another path failed this one")
	}
	for range 3 {
		if _, err := cq.WriteAt([]byte("x"), 0); !errors.Is(err, eio) {
			t.Fatalf("write with a permanent rule: %v", err)
		}
	}
	rm()
	if _, err := cq.WriteAt([]byte("x"), 0); err != nil {
		t.Fatalf("after removing the rule: %v", err)
	}
	if fs.Failed(OpSync) != 1 || fs.Failed(OpWrite) != 3 || fs.Calls(OpSync) != 6 {
		t.Fatalf("counts sync %d/%d write %d", fs.Failed(OpSync), fs.Calls(OpSync), fs.Failed(OpWrite))
	}
}

func equal(a, b []bool) bool {
	if len(a) != len(b) {
		return false
	}
	for i := range a {
		if a[i] != b[i] {
			return false
		}
	}
	return true
}

func TestVFSFaultyCapacity(t *testing.T) {
	dir := t.TempDir()
	fs := NewFaulty(nil)
	fs.SetCapacity(64 << 10)
	p := filepath.Join(dir, "f")
	f, err := fs.OpenFile(p, os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if err := f.Truncate(1 << 20); err != nil { // sparse: no blocks
		t.Fatal(err)
	}
	if fs.Used() != 0 {
		t.Fatalf("a sparse file uses %d", fs.Used())
	}
	if err := f.Allocate(0, 32<<10); err != nil && !errors.Is(err, ErrNotSupported) {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(make([]byte, 100), 1000); err != nil { // inside the allocation: no new block
		t.Fatal(err)
	}
	if fs.Used() != 32<<10 {
		t.Fatalf("used %d", fs.Used())
	}
	sp, _ := fs.Statfs(dir)
	if sp.Total != 64<<10 || sp.Avail != 32<<10 {
		t.Fatalf("statfs %+v", sp)
	}
	if err := f.Allocate(32<<10, 64<<10); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("allocation beyond the capacity: %v", err)
	}
	if _, err := f.WriteAt(make([]byte, 40<<10), 40<<10); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("write beyond the capacity: %v", err)
	}
	fs.Fill(16 << 10)
	if _, err := f.WriteAt(make([]byte, 20<<10), 32<<10); !errors.Is(err, syscall.ENOSPC) {
		t.Fatal("others' bytes not counted")
	}
	fs.Fill(-16 << 10)
	if _, err := f.WriteAt(make([]byte, 20<<10), 32<<10); err != nil {
		t.Fatalf("after Fill freed: %v", err)
	}
	if err := f.Truncate(8 << 10); err != nil {
		t.Fatal(err)
	}
	if fs.Used() != 8<<10 {
		t.Fatalf("after truncate used %d", fs.Used())
	}
	if err := fs.Remove(p); err != nil || fs.Used() != 0 {
		t.Fatalf("remove: %v, used %d", err, fs.Used())
	}
}

// WriteAtZeros writes its bytes and then its zeros, in place of what the
// file held there, and nothing beyond; through Faulty it claims the
// zeros' blocks too.
func TestVFSWriteAtZeros(t *testing.T) {
	for _, fs := range []FS{Default, NewFaulty(nil)} {
		path := filepath.Join(t.TempDir(), "a")
		f, err := fs.OpenFile(path, os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		old := make([]byte, 3*MaxZeros)
		for i := range old {
			old[i] = 0xFF
		}
		if _, err := f.WriteAt(old, 0); err != nil {
			t.Fatal(err)
		}
		for _, c := range []struct {
			b     string
			zeros int
			off   int64
		}{{"hello", 100, 10}, {"", 7, 500}, {"abc", 0, 700}, {"world", MaxZeros, 1000}} {
			n, err := f.WriteAtZeros([]byte(c.b), c.zeros, c.off)
			if err != nil || n != len(c.b)+c.zeros {
				t.Fatalf("%T WriteAtZeros(%q, %d, %d) = %d, %v", fs, c.b, c.zeros, c.off, n, err)
			}
			copy(old[c.off:], c.b)
			clear(old[c.off+int64(len(c.b)) : c.off+int64(len(c.b)+c.zeros)])
		}
		got := make([]byte, len(old))
		if _, err := f.ReadAt(got, 0); err != nil {
			t.Fatal(err)
		}
		for i := range got {
			if got[i] != old[i] {
				t.Fatalf("%T: byte %d is %#x, want %#x", fs, i, got[i], old[i])
			}
		}
		f.Close()
	}
	fs := NewFaulty(nil)
	fs.SetCapacity(2 * blockSize)
	f, err := fs.OpenFile(filepath.Join(t.TempDir(), "b"), os.O_RDWR|os.O_CREATE, 0o644)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	if _, err := f.WriteAtZeros([]byte("x"), 2*blockSize, 0); !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("zeros past the capacity: %v, want ENOSPC", err)
	}
	if _, err := f.WriteAtZeros([]byte("x"), blockSize, 0); err != nil {
		t.Fatal(err)
	}
	if got := fs.Used(); got != 2*blockSize {
		t.Fatalf("used %d, want %d", got, 2*blockSize)
	}
}

// The used fraction is df's Use%: blocks reserved for root count neither
// as used nor as available, so a disk reads as full as df says and the
// store's full mark (store.disk_full_ratio) means what df shows. It was
// 1 - Avail/Total, which on a file system with much reserved read far
// fuller than df (84 % against df's 57 % on one machine).
func TestVFSSpaceUsedIsDfs(t *testing.T) {
	const g = 1 << 30
	for _, tc := range []struct {
		sp     Space
		usable uint64
		used   float64
	}{
		{Space{Total: 252 * g, Avail: 42 * g, Free: 202 * g}, 92 * g, 50.0 / 92}, // 160 GiB reserved: df's 55 %
		{Space{Total: 100 * g, Avail: 25 * g, Free: 30 * g}, 95 * g, 70.0 / 95},  // 5 % reserved
		{Space{Total: 64 << 20, Avail: 16 << 20}, 64 << 20, 0.75},                // Free unknown (Faulty): Avail
		{Space{Total: 100 * g, Avail: 0, Free: 5 * g}, 95 * g, 1},                // only the reserve left: full
		{Space{Total: 100 * g, Avail: 100 * g, Free: 100 * g}, 100 * g, 0},       // empty
		{Space{}, 0, 0}, // unknown size
		{Space{Total: 10 * g, Avail: 4 * g, Free: 12 * g}, 10 * g, 0.6}, // inconsistent: no wrap
	} {
		if got := tc.sp.Usable(); got != tc.usable {
			t.Errorf("%+v: usable %d, want %d", tc.sp, got, tc.usable)
		}
		if got := tc.sp.Used(); got < tc.used-1e-9 || got > tc.used+1e-9 {
			t.Errorf("%+v: used %.4f, want %.4f", tc.sp, got, tc.used)
		}
	}
}
