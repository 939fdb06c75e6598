package store

import (
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"

	"github.com/smartgo/smartgo/store/vfs"
)

// ringFDs counts the process's io_uring descriptors and returns twice
// that: each sync ring holds one and its eventfd (the runtime's own
// eventfds are not told apart from those, so they are counted by ring).
func ringFDs(t testing.TB) int {
	t.Helper()
	ents, err := os.ReadDir("/proc/self/fd")
	if err != nil {
		t.Skipf("no /proc/self/fd: %v", err)
	}
	n := 0
	for _, e := range ents {
		if p, err := os.Readlink(filepath.Join("/proc/self/fd", e.Name())); err == nil && p == "anon_inode:[io_uring]" {
			n++
		}
	}
	return 2 * n
}

// TestStoreDescriptorsCountSyncRings: the descriptors of the process's
// io_uring sync rings (a ring and its eventfd each, kept idle between
// syncs) count in a store's MaxOpenFiles: with rings set up by
// concurrent syncs before, the store's files and the rings together stay
// within MaxOpenFiles (plus the same slack as TestStoreDescriptorsBounded)
// while 1,200 queues are written. The store's files alone filled
// MaxOpenFiles before, the rings' descriptors on top.
func TestStoreDescriptorsCountSyncRings(t *testing.T) {
	const queues = 1200
	const maxOpen = 64
	const slack = 2 + 4 // as TestStoreDescriptorsBounded
	// Concurrent syncs set rings up; up to four stay idle for the next.
	dir := t.TempDir()
	var wg sync.WaitGroup
	for i := range 16 {
		f, err := vfs.Default.OpenFile(filepath.Join(dir, strconv.Itoa(i)), os.O_RDWR|os.O_CREATE, 0o644)
		if err != nil {
			t.Fatal(err)
		}
		wg.Add(1)
		go func() {
			defer wg.Done()
			defer func() { _ = f.Close() }()
			for range 20 {
				if _, err := f.WriteAt([]byte("x"), 0); err != nil {
					t.Error(err)
					return
				}
				if err := f.Datasync(); err != nil {
					t.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	rings := ringFDs(t)
	if rings == 0 {
		t.Skip("no io_uring sync ring in this process (io_uring unavailable)")
	}
	root := t.TempDir()
	s := openTest(t, root, func(o *Options) { o.MaxOpenFiles = maxOpen })
	bound := func(when string) {
		t.Helper()
		n, kinds := storeFDs(t, root)
		r := ringFDs(t)
		t.Logf("%s: %d store descriptors %v, %d of sync rings", when, n, kinds, r)
		if n+r > maxOpen+slack {
			t.Fatalf("%s: %d store descriptors (%v) and %d of sync rings, want <= %d together", when, n, kinds, r, maxOpen+slack)
		}
	}
	putEveryQueue(t, s, queues, 0)
	waitIndexed(t, s)
	bound("after one message to each queue")
	putEveryQueue(t, s, queues, 1)
	waitIndexed(t, s)
	bound("after a second round")
	checkEveryQueue(t, s, queues, 2)
}
