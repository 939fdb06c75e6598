package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"runtime"
	"sync"
	"syscall"
	"testing"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"

	"github.com/smartgo/smartgo/internal/testutil"
)

// Datasync goes through io_uring where the kernel offers it: syncs from
// many goroutines at once each get their own result, and an fdatasync
// error (a pipe cannot be synced) comes back as the system call's.
func TestVFSDatasyncRing(t *testing.T) {
	dir := t.TempDir()
	var wg sync.WaitGroup
	errs := make(chan error, 8)
	for g := range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			f, err := Default.OpenFile(filepath.Join(dir, fmt.Sprint(g)), os.O_RDWR|os.O_CREATE, 0o644)
			if err != nil {
				errs <- err
				return
			}
			defer f.Close()
			for i := range 20 {
				if _, err := f.WriteAt([]byte("record"), int64(i)*4096); err != nil {
					errs <- err
					return
				}
				if err := f.Datasync(); err != nil {
					errs <- fmt.Errorf("sync %d of file %d: %w", i, g, err)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	if uringPool.off.Load() {
		t.Skip("io_uring unavailable here: fdatasync is called directly")
	}
	uringPool.mu.Lock()
	idle := len(uringPool.idle)
	uringPool.mu.Unlock()
	if idle == 0 || idle > uringIdle {
		t.Fatalf("%d idle rings after the syncs, want 1..%d", idle, uringIdle)
	}
	syncPipe(t)
	if uringPool.off.Load() {
		t.Fatal("a sync's own error turned the ring off")
	}
}

// Syncs submitted from one thread run side by side: the kernel's worker
// pool of a thread (io-wq, made at its first submission) allows as many
// bound workers as the ring it was made for has entries (at most 4 a
// CPU), and a fsync of a regular file is bound work. A ring of one entry
// allowed one: every sync a thread submitted waited for the one before
// it, a commitlog group commit behind a consume queue's or an index
// file's sync. The pool's limit is read back with
// IORING_REGISTER_IOWQ_MAX_WORKERS (Linux 5.15), zeros asking for it.
func TestVFSDatasyncRingWorkers(t *testing.T) {
	runtime.LockOSThread() // the submission and the query on one thread
	defer runtime.UnlockOSThread()
	f := writtenFile(t)
	if err := datasync(f); err != nil {
		t.Fatal(err)
	}
	if uringPool.off.Load() {
		t.Skip("io_uring unavailable here: fdatasync is called directly")
	}
	r := getURing()
	if r == nil {
		t.Fatal("no ring after a sync through one")
	}
	defer putURing(r)
	const registerIOWQMaxWorkers = 19
	var limits [2]uint32 // bound, unbound; zero: report, do not change
	_, _, errno := unix.Syscall6(unix.SYS_IO_URING_REGISTER, uintptr(r.fd), registerIOWQMaxWorkers,
		uintptr(unsafe.Pointer(&limits)), 2, 0, 0)
	if errno == unix.EINVAL {
		t.Skip("kernel without IORING_REGISTER_IOWQ_MAX_WORKERS")
	}
	if errno != 0 {
		t.Fatal(errno)
	}
	if limits[0] < 2 {
		t.Fatalf("a thread's syncs run %d at a time, want several", limits[0])
	}
}

// Where io_uring is off, datasync calls fdatasync directly: data syncs
// and an fdatasync error still comes back as the system call's.
func TestVFSDatasyncWithoutRing(t *testing.T) {
	was := uringPool.off.Swap(true)
	defer uringPool.off.Store(was)
	f := writtenFile(t)
	if err := datasync(f); err != nil {
		t.Fatal(err)
	}
	syncPipe(t)
}

// writtenFile is a temporary file with a record written and not synced.
func writtenFile(t *testing.T) *os.File {
	t.Helper()
	f, err := os.Create(filepath.Join(t.TempDir(), "f"))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { f.Close() })
	if _, err := f.WriteAt([]byte("record"), 0); err != nil {
		t.Fatal(err)
	}
	return f
}

// syncPipe checks that a datasync of a pipe fails with fdatasync's EINVAL.
func syncPipe(t *testing.T) {
	t.Helper()
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := datasync(w); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("datasync of a pipe: %v, want EINVAL", err)
	}
}

// A ring setup that fails for want of descriptors (EMFILE: the process's
// limit reached for now) does not turn io_uring off: the sync is made
// directly, setups pause, and once descriptors are back a later sync sets
// a ring up again.
func TestVFSDatasyncRingSetupRetried(t *testing.T) {
	f := writtenFile(t)
	if err := datasync(f); err != nil {
		t.Fatal(err)
	}
	if uringPool.off.Load() {
		t.Skip("io_uring unavailable here: fdatasync is called directly")
	}
	// No idle ring: the next sync must set one up.
	uringPool.mu.Lock()
	idle := uringPool.idle
	uringPool.idle = nil
	uringPool.mu.Unlock()
	for _, r := range idle {
		discardURing(r)
	}
	// The lowest free descriptor becomes the limit: every new one fails
	// with EMFILE.
	var lim unix.Rlimit
	if err := unix.Getrlimit(unix.RLIMIT_NOFILE, &lim); err != nil {
		t.Fatal(err)
	}
	low, err := unix.Dup(0)
	if err != nil {
		t.Fatal(err)
	}
	_ = unix.Close(low)
	short := lim
	short.Cur = uint64(low)
	if err := unix.Setrlimit(unix.RLIMIT_NOFILE, &short); err != nil {
		t.Fatal(err)
	}
	err = datasync(f)
	if rerr := unix.Setrlimit(unix.RLIMIT_NOFILE, &lim); rerr != nil {
		t.Fatal(rerr)
	}
	if err != nil {
		t.Fatalf("sync while out of descriptors: %v", err)
	}
	if uringPool.off.Load() {
		t.Fatal("a setup that failed with EMFILE turned io_uring off for the process")
	}
	uringPool.mu.Lock()
	paused, n := !uringPool.pause.IsZero(), len(uringPool.idle)
	uringPool.mu.Unlock()
	if !paused || n != 0 {
		t.Fatalf("after the failed setup: paused %v, %d idle rings; want a pause and none", paused, n)
	}
	testutil.WaitFor(t, 30*time.Second, "a ring set up again once descriptors came back", func() bool {
		if err := datasync(f); err != nil {
			t.Fatal(err)
		}
		uringPool.mu.Lock()
		defer uringPool.mu.Unlock()
		return len(uringPool.idle) > 0
	})
	syncPipe(t)
}

// At most uringMax rings exist (two descriptors each): with all of them
// serving, a sync is made directly, and given back they serve again.
func TestVFSDatasyncRingsBounded(t *testing.T) {
	f := writtenFile(t)
	if err := datasync(f); err != nil {
		t.Fatal(err)
	}
	if uringPool.off.Load() {
		t.Skip("io_uring unavailable here: fdatasync is called directly")
	}
	var held []*uring
	for r := getURing(); r != nil; r = getURing() {
		held = append(held, r)
		if len(held) > uringMax {
			break
		}
	}
	if len(held) != uringMax {
		t.Fatalf("%d rings taken, want the bound %d", len(held), uringMax)
	}
	if err := datasync(f); err != nil {
		t.Fatalf("sync with every ring busy: %v", err)
	}
	for _, r := range held {
		putURing(r)
	}
	uringPool.mu.Lock()
	rings, idle := int(uringPool.rings.Load()), len(uringPool.idle)
	uringPool.mu.Unlock()
	if rings != uringIdle || idle != uringIdle {
		t.Fatalf("%d rings, %d idle after giving them back; want %d and %d", rings, idle, uringIdle, uringIdle)
	}
	if err := datasync(f); err != nil {
		t.Fatal(err)
	}
}

// SyncDescriptors counts two descriptors a ring, and reads the count
// without the pool's lock: the store's descriptor cache asks at every
// file it opens or reopens, and must not queue behind the syncs taking
// and giving back rings.
func TestVFSSyncDescriptorsWithoutPoolLock(t *testing.T) {
	f := writtenFile(t)
	if err := datasync(f); err != nil {
		t.Fatal(err)
	}
	if uringPool.off.Load() {
		t.Skip("io_uring unavailable here: no rings to count")
	}
	r := getURing()
	if r == nil {
		t.Fatal("no ring to take")
	}
	defer putURing(r)
	uringPool.mu.Lock()
	want := 2 * int(uringPool.rings.Load())
	got := make(chan int, 1)
	go func() { got <- SyncDescriptors() }()
	select {
	case n := <-got:
		uringPool.mu.Unlock()
		if n != want || n < 2 {
			t.Fatalf("SyncDescriptors = %d with %d rings set up, want %d", n, want/2, want)
		}
	case <-time.After(10 * time.Second):
		uringPool.mu.Unlock()
		<-got
		t.Fatal("SyncDescriptors waited for the ring pool's lock")
	}
}
