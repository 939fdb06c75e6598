package wake

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

// A change made after Wait is never missed, however Notify and the waiter
// interleave, and every waiter of a round is woken.
func TestWakeNoLostWakeups(t *testing.T) {
	var n Notifier
	var state atomic.Int64
	const rounds, waiters = 2000, 4
	var wg sync.WaitGroup
	for range waiters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for want := int64(1); want <= rounds; want++ {
				for {
					ch := n.Wait()
					if state.Load() >= want {
						break
					}
					select {
					case <-ch:
					case <-time.After(10 * time.Second):
						t.Errorf("waiter stuck at %d (state %d)", want, state.Load())
						return
					}
				}
			}
		}()
	}
	for range rounds {
		state.Add(1)
		n.Notify()
	}
	wg.Wait()
}

// Notify without waiters does nothing (and allocates nothing).
func TestWakeNotifyWithoutWaiters(t *testing.T) {
	var n Notifier
	if a := testing.AllocsPerRun(100, n.Notify); a != 0 {
		t.Fatalf("Notify without waiters allocates %v", a)
	}
	ch := n.Wait()
	n.Notify()
	select {
	case <-ch:
	default:
		t.Fatal("waiter not woken")
	}
}
