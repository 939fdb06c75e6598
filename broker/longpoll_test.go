package broker

import (
	"context"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

type fired struct {
	mu  sync.Mutex
	ids []int
	to  map[int]bool
}

func (f *fired) fn(id int) func(bool) {
	return func(timedOut bool) {
		f.mu.Lock()
		defer f.mu.Unlock()
		f.ids = append(f.ids, id)
		if f.to == nil {
			f.to = map[int]bool{}
		}
		f.to[id] = timedOut
	}
}

func (f *fired) snapshot() ([]int, map[int]bool) {
	f.mu.Lock()
	defer f.mu.Unlock()
	to := map[int]bool{}
	for k, v := range f.to {
		to[k] = v
	}
	return append([]int(nil), f.ids...), to
}

func startHold(t *testing.T, workers int) (*HoldService, context.CancelFunc, chan struct{}) {
	t.Helper()
	h := NewHoldService(workers, nil)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	return h, cancel, done
}

func TestBrokerHoldNotifyWakesOnlyPullsBelowMax(t *testing.T) {
	h, _, _ := startHold(t, 2)
	var f fired
	far := time.Now().Add(time.Hour)
	h.Hold("T", 0, 5, far, f.fn(1))
	h.Hold("T", 0, 7, far, f.fn(2))
	h.Hold("T", 1, 5, far, f.fn(3))
	h.Hold("U", 0, 5, far, f.fn(4))
	h.Notify("T", 0, 6) // offset 5 now readable: wakes 1 only
	testutil.WaitFor(t, time.Second, "", func() bool { ids, _ := f.snapshot(); return len(ids) == 1 })
	ids, to := f.snapshot()
	if ids[0] != 1 || to[1] {
		t.Fatalf("fired %v (timed out %v), want 1 woken", ids, to)
	}
	if h.Len() != 3 {
		t.Fatalf("held %d, want 3", h.Len())
	}
	h.Notify("T", 0, 6) // no new data: nothing more
	h.Notify("T", 0, 8)
	testutil.WaitFor(t, time.Second, "", func() bool { ids, _ := f.snapshot(); return len(ids) == 2 })
	if ids, _ := f.snapshot(); ids[1] != 2 {
		t.Fatalf("fired %v", ids)
	}
	time.Sleep(20 * time.Millisecond)
	if ids, _ := f.snapshot(); len(ids) != 2 || h.Len() != 2 {
		t.Fatalf("other queues fired: %v, held %d", ids, h.Len())
	}
}

func TestBrokerHoldDeadlinesFireInOrder(t *testing.T) {
	h, _, _ := startHold(t, 1)
	var f fired
	now := time.Now()
	h.Hold("T", 0, 0, now.Add(60*time.Millisecond), f.fn(3))
	h.Hold("T", 0, 0, now.Add(20*time.Millisecond), f.fn(1))
	h.Hold("T", 0, 0, now.Add(40*time.Millisecond), f.fn(2))
	h.Hold("T", 0, 0, now.Add(time.Hour), f.fn(9))
	testutil.WaitFor(t, 2*time.Second, "", func() bool { ids, _ := f.snapshot(); return len(ids) == 3 })
	ids, to := f.snapshot()
	if ids[0] != 1 || ids[1] != 2 || ids[2] != 3 || !to[1] || !to[2] || !to[3] {
		t.Fatalf("fired %v timedOut %v", ids, to)
	}
	if h.Len() != 1 {
		t.Fatalf("held %d", h.Len())
	}
	// A timed-out pull is gone: a later notify does not fire it again.
	h.Notify("T", 0, 100)
	testutil.WaitFor(t, time.Second, "", func() bool { ids, _ := f.snapshot(); return len(ids) == 4 })
	if ids, to := f.snapshot(); ids[3] != 9 || to[9] {
		t.Fatalf("fired %v %v", ids, to)
	}
}

func TestBrokerHoldShutdownAnswersEveryone(t *testing.T) {
	h, cancel, done := startHold(t, 2)
	var n atomic.Int32
	for i := 0; i < 100; i++ {
		h.Hold("T", int32(i%4), 0, time.Now().Add(time.Hour), func(timedOut bool) {
			if timedOut {
				n.Add(1)
			}
		})
	}
	cancel()
	<-done
	if n.Load() != 100 {
		t.Fatalf("%d of 100 held pulls answered at shutdown", n.Load())
	}
	if h.Hold("T", 0, 0, time.Now().Add(time.Hour), func(bool) {}) {
		t.Fatal("Hold accepted after shutdown")
	}
}

// Many held pulls cost no CPU while nothing happens: no scan, no polling.
func TestBrokerHoldIdleCostsNothing(t *testing.T) {
	h, _, _ := startHold(t, 2)
	const n = 20000
	for i := 0; i < n; i++ {
		h.Hold("T", int32(i%1000), 0, time.Now().Add(time.Hour), func(bool) {})
	}
	before := cpuTime()
	time.Sleep(300 * time.Millisecond)
	used := cpuTime() - before
	if used > 60*time.Millisecond {
		t.Fatalf("%d idle held pulls used %v of CPU in 300 ms", n, used)
	}
	// And a notification reaches exactly its queue's pulls.
	h.Notify("T", 7, 1)
	testutil.WaitFor(t, time.Second, "", func() bool { return h.Len() == n-n/1000 })
}

func cpuTime() time.Duration {
	var ru syscall.Rusage
	_ = syscall.Getrusage(syscall.RUSAGE_SELF, &ru)
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

func TestBrokerHoldConcurrent(t *testing.T) {
	h, _, _ := startHold(t, 4)
	var got atomic.Int32
	var wg sync.WaitGroup
	for g := 0; g < 8; g++ {
		wg.Add(1)
		go func(g int) {
			defer wg.Done()
			for i := 0; i < 500; i++ {
				h.Hold("T", int32(g), int64(i), time.Now().Add(time.Duration(i%50)*time.Millisecond), func(bool) { got.Add(1) })
				if i%10 == 0 {
					h.Notify("T", int32(g), int64(i))
				}
			}
		}(g)
	}
	wg.Wait()
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return got.Load() == 4000 })
	if h.Len() != 0 {
		t.Fatalf("held %d after all fired", h.Len())
	}
}

// Notifications racing the shutdown neither panic nor lose a pull.
func TestBrokerHoldNotifyRacesShutdown(t *testing.T) {
	for round := 0; round < 20; round++ {
		h := NewHoldService(2, nil)
		ctx, cancel := context.WithCancel(context.Background())
		done := make(chan struct{})
		go func() { h.Run(ctx); close(done) }()
		var answered atomic.Int32
		for i := 0; i < 50; i++ {
			h.Hold("T", 0, 0, time.Now().Add(time.Hour), func(bool) { answered.Add(1) })
		}
		stop := make(chan struct{})
		notifierDone := make(chan struct{})
		go func() {
			defer close(notifierDone)
			for {
				select {
				case <-stop:
					return
				default:
					h.Notify("T", 0, 1)
				}
			}
		}()
		cancel()
		<-done
		close(stop)
		// A Notify that took pulls just before the shutdown answers them
		// itself, possibly after Run returned: wait for it.
		<-notifierDone
		if answered.Load() != 50 {
			t.Fatalf("round %d: %d of 50 held pulls answered", round, answered.Load())
		}
	}
}
