package store

import (
	"sync/atomic"
	"testing"
	"time"
)

// PutLockHeld is 0 between puts and, while a put holds the writer lock,
// the time since it took it by the store's clock.
func TestStorePutLockHeld(t *testing.T) {
	var clock atomic.Int64
	clock.Store(1_700_000_000_000)
	s := openTest(t, t.TempDir(), func(o *Options) { o.Now = func() time.Time { return time.UnixMilli(clock.Load()) } })
	mustPut(t, s, msgSpec{topic: "T", body: "a"})
	if d := s.PutLockHeld(); d != 0 {
		t.Fatalf("lock held %v between puts", d)
	}
	// A put that stalls inside the lock (as a page-cache stall would).
	s.putMu.Lock()
	s.putLockedAt.Store(clock.Load())
	clock.Add(1500)
	if d := s.PutLockHeld(); d != 1500*time.Millisecond {
		t.Fatalf("lock held %v, want 1.5s", d)
	}
	s.unlockPut()
	if d := s.PutLockHeld(); d != 0 {
		t.Fatalf("lock held %v after unlock", d)
	}
	mustPut(t, s, msgSpec{topic: "T", body: "b"})
	if d := s.PutLockHeld(); d != 0 {
		t.Fatalf("lock held %v after a put", d)
	}
}
