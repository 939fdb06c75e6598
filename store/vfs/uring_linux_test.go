package vfs

import (
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"syscall"
	"testing"
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
	r, w, err := os.Pipe()
	if err != nil {
		t.Fatal(err)
	}
	defer r.Close()
	defer w.Close()
	if err := datasync(w); !errors.Is(err, syscall.EINVAL) {
		t.Fatalf("datasync of a pipe: %v, want EINVAL", err)
	}
	if uringPool.off.Load() {
		t.Fatal("a sync's own error turned the ring off")
	}
}
