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
		testutil.WaitFor(t, time.Second, "idle worker", func() bool {
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
		case <-time.After(2 * time.Second):
			close(release)
			t.Fatal("second task starved behind a blocked one")
		}
	}
}
