package store

import (
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// A clean Close on a disk another process filled to its last page (a
// small tmpfs), in a run that has not written its checkpoint yet: the
// checkpoint cannot be replaced by a new file, so it is overwritten in
// place, and the queue manifest, only a hint, is left out (the abort
// file stays). Close returns nil, the checkpoint records the last
// flush, and the next open, with space freed, recovers as after a crash
// with every message. (Close failed with ENOSPC: the broker exited 1.)
func TestStoreCloseOnFullDiskKeepsCheckpoint(t *testing.T) {
	root := filepath.Join(testutil.MountTmpfs(t, "8m"), "store")
	s := openTest(t, root, nil)
	putN(t, s, 20, "a")
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	// The next run writes its first checkpoint only at Close.
	s = openTest(t, root, func(o *Options) { o.LogicFlushInterval = time.Hour })
	putN(t, s, 20, "b")
	waitDispatched(t, s)
	waitIndexed(t, s)
	end := s.MaxPhysicalOffset()
	before, _, err := readCheckpoint(root)
	if err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(filepath.Dir(root), "filler")
	testutil.FillDisk(t, filler)
	if err := s.Close(); err != nil {
		t.Fatalf("Close on the full disk: %v", err)
	}
	after, ok, err := readCheckpoint(root)
	if err != nil || !ok || after.Logics <= before.Logics {
		t.Fatalf("checkpoint after Close on the full disk: %+v (%v, %v), before %+v", after, ok, err, before)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, root, nil)
	if rep := s.RecoveryReport(); !rep.Abnormal {
		t.Fatalf("recovery after a Close without its queue manifest: %+v, want abnormal", rep)
	}
	if s.MaxPhysicalOffset() != end {
		t.Fatalf("log end %d after the restart, want %d", s.MaxPhysicalOffset(), end)
	}
	n := 0
	for _, bodies := range queueContents(t, s) {
		n += len(bodies)
	}
	if n != 40 {
		t.Fatalf("%d messages in the queues after the restart, want 40", n)
	}
}

// The same Close in a store whose checkpoint was never written (a crash
// before the first one): nothing can be written in place either. Close
// still returns nil, saying so (WARN), the abort file stays, and the
// next open, with space freed, recovers as after a crash with every
// message.
func TestStoreCloseOnFullDiskWithoutCheckpoint(t *testing.T) {
	root := filepath.Join(testutil.MountTmpfs(t, "8m"), "store")
	s := openTest(t, root, func(o *Options) { o.LogicFlushInterval = time.Hour })
	putN(t, s, 20, "a")
	waitDispatched(t, s)
	end := s.MaxPhysicalOffset()
	if _, ok, _ := readCheckpoint(root); ok {
		t.Fatal("a checkpoint before the first logic flush")
	}
	filler := filepath.Join(filepath.Dir(root), "filler")
	testutil.FillDisk(t, filler)
	if err := s.Close(); err != nil {
		t.Fatalf("Close on the full disk: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, "abort")); err != nil {
		t.Fatalf("abort file after a Close that could not flush its checkpoint: %v", err)
	}
	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, root, nil)
	if rep := s.RecoveryReport(); !rep.Abnormal || s.MaxPhysicalOffset() != end {
		t.Fatalf("recovery: %+v, log end %d, want abnormal and %d", rep, s.MaxPhysicalOffset(), end)
	}
	n := 0
	for _, bodies := range queueContents(t, s) {
		n += len(bodies)
	}
	if n != 20 {
		t.Fatalf("%d messages in the queues after the restart, want 20", n)
	}
}
