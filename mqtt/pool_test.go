package mqtt

import (
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestPoolNoStarvationBehindSignalledWorker: a task submitted right after
// another one was handed to the only idle worker must get a worker of its
// own while the first blocks (the pool is below its maximum).
func TestPoolNoStarvationBehindSignalledWorker(t *testing.T) {
	p := newPool(4)
	defer p.close()
	for range 50 {
		warm := make(chan struct{})
		p.submit(func() { close(warm) })
		<-warm
		testutil.WaitFor(t, 10*time.Second, "idle worker", func() bool {
			p.mu.Lock()
			defer p.mu.Unlock()
			return p.idle == p.running
		})
		release := make(chan struct{})
		ran := make(chan struct{})
		p.submit(func() { <-release })
		p.submit(func() { close(ran) })
		select {
		case <-ran:
			close(release)
		case <-time.After(10 * time.Second):
			close(release)
			t.Fatal("second task starved behind a blocked one")
		}
	}
}

// TestPoolFIFOAcrossQueueReuse: with one worker, tasks run in submission
// order while the queue is drained, refilled and compacted (tasks submitted
// from inside running tasks keep a consumed front in the array), and the
// queue's array is kept, not regrown, once drained.
func TestPoolFIFOAcrossQueueReuse(t *testing.T) {
	p := newPool(1)
	defer p.close()
	const total = 600 // the queue stays under poolQueueKeep
	var got []int     // written only by the single worker
	done := make(chan struct{})
	submitted := 1 // task 0, below
	var task func(n int) func()
	task = func(n int) func() {
		return func() {
			got = append(got, n)
			if len(got) == total {
				close(done)
				return
			}
			// Each task queues up to three more behind earlier ones.
			for range 3 {
				if submitted < total {
					p.submit(task(submitted))
					submitted++
				}
			}
		}
	}
	p.submit(task(0))
	select {
	case <-done:
	case <-time.After(10 * time.Second):
		t.Fatalf("%d of %d tasks ran", len(got), total)
	}
	for i, n := range got {
		if n != i {
			t.Fatalf("the %dth task to run was submitted %dth", i, n)
		}
	}
	testutil.WaitFor(t, 10*time.Second, "drained queue with its array kept", func() bool {
		p.mu.Lock()
		defer p.mu.Unlock()
		return p.head == 0 && len(p.queue) == 0 && p.queue != nil
	})
}
