package bridge

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
)

// TestBridgePointChecksShared: resumes from one point at once share one
// check of it against its queue; a check older than checkTTL, or one
// that failed, is made again, and another point gets its own.
func TestBridgePointChecksShared(t *testing.T) {
	var p pointChecks
	k := pointKey{q: client.MessageQueue{Topic: "T", BrokerName: "b", QueueID: 1}, from: 20, prev: prevRecord{Store: 5, Born: 4, Size: 1}}
	var calls atomic.Int32
	release := make(chan struct{})
	check := func() (int64, bool) {
		calls.Add(1)
		<-release
		return 10, true
	}
	var wg sync.WaitGroup
	got := make([]int64, 8)
	for i := range got {
		wg.Add(1)
		go func() {
			defer wg.Done()
			got[i] = p.first(k, check)
		}()
	}
	// All but the first wait for the first's check.
	for deadline := time.Now().Add(10 * time.Second); calls.Load() == 0; {
		if time.Now().After(deadline) {
			t.Fatal("no check started")
		}
		time.Sleep(time.Millisecond)
	}
	close(release)
	wg.Wait()
	for i, f := range got {
		if f != 10 {
			t.Fatalf("resume %d got %d, want 10", i, f)
		}
	}
	if n := calls.Load(); n != 1 {
		t.Fatalf("%d checks for one point, want 1", n)
	}
	other := k
	other.from = 21
	if f := p.first(other, func() (int64, bool) { calls.Add(1); return 21, true }); f != 21 || calls.Load() != 2 {
		t.Fatalf("another point: %d after %d checks, want 21 after 2", f, calls.Load())
	}
	p.mu.Lock()
	p.m[k].at = time.Now().Add(-checkTTL)
	p.mu.Unlock()
	if f := p.first(k, func() (int64, bool) { calls.Add(1); return 20, false }); f != 20 || calls.Load() != 3 {
		t.Fatalf("an expired check: %d after %d checks, want 20 after 3", f, calls.Load())
	}
	// That check failed: the next resume checks again.
	if f := p.first(k, func() (int64, bool) { calls.Add(1); return 12, true }); f != 12 || calls.Load() != 4 {
		t.Fatalf("after a failed check: %d after %d checks, want 12 after 4", f, calls.Load())
	}
}
