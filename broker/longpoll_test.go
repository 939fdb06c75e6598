package broker

import (
	"context"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
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
	testutil.WaitFor(t, 10*time.Second, "", func() bool { ids, _ := f.snapshot(); return len(ids) == 1 })
	ids, to := f.snapshot()
	if ids[0] != 1 || to[1] {
		t.Fatalf("fired %v (timed out %v), want 1 woken", ids, to)
	}
	if h.Len() != 3 {
		t.Fatalf("held %d, want 3", h.Len())
	}
	h.Notify("T", 0, 6) // no new data: nothing more
	h.Notify("T", 0, 8)
	testutil.WaitFor(t, 10*time.Second, "", func() bool { ids, _ := f.snapshot(); return len(ids) == 2 })
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
	testutil.WaitFor(t, 10*time.Second, "", func() bool { ids, _ := f.snapshot(); return len(ids) == 3 })
	ids, to := f.snapshot()
	if ids[0] != 1 || ids[1] != 2 || ids[2] != 3 || !to[1] || !to[2] || !to[3] {
		t.Fatalf("fired %v timedOut %v", ids, to)
	}
	if h.Len() != 1 {
		t.Fatalf("held %d", h.Len())
	}
	// A timed-out pull is gone: a later notify does not fire it again.
	h.Notify("T", 0, 100)
	testutil.WaitFor(t, 10*time.Second, "", func() bool { ids, _ := f.snapshot(); return len(ids) == 4 })
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
	// The service reads its clock once per turn of its deadline loop, so
	// counting the reads counts the turns: unlike the process's CPU, the
	// count does not depend on how busy the machine is.
	var clock atomic.Int64
	h := NewHoldService(2, func() time.Time { clock.Add(1); return time.Now() })
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	t.Cleanup(func() { cancel(); <-done })
	const n = 20000
	var fires atomic.Int32
	for i := 0; i < n; i++ {
		h.Hold("T", int32(i%1000), 0, time.Now().Add(time.Hour), func(bool) { fires.Add(1) })
	}
	// Only the first pull became the heap's head: once its wakeup is
	// taken, the loop has at most that one turn (two clock reads) left
	// before it sleeps until the deadline an hour away.
	testutil.WaitFor(t, 10*time.Second, "hold loop took its wakeup", func() bool { return len(h.wakeup) == 0 })
	turns := clock.Load()
	time.Sleep(300 * time.Millisecond)
	if d := clock.Load() - turns; d > 2 || fires.Load() != 0 {
		t.Fatalf("%d idle held pulls: %d clock reads and %d fires in 300 ms, want at most 2 and none", n, d, fires.Load())
	}
	// The process's CPU over a 300 ms window also counts the runtime (a
	// GC cycle, the race detector) and what earlier tests left running,
	// which a loaded machine can stretch: a scan or poll of the held
	// pulls would cost CPU in every window, so one quiet window of five
	// is enough to show there is none.
	runtime.GC()
	var used []time.Duration
	for range 5 {
		before := cpuTime()
		time.Sleep(300 * time.Millisecond)
		used = append(used, cpuTime()-before)
		if used[len(used)-1] <= 60*time.Millisecond {
			break
		}
	}
	if slices.Min(used) > 60*time.Millisecond {
		t.Fatalf("%d idle held pulls used %v of CPU in each 300 ms window", n, used)
	}
	// And a notification reaches exactly its queue's pulls.
	h.Notify("T", 7, 1)
	testutil.WaitFor(t, 10*time.Second, "", func() bool { return h.Len() == n-n/1000 })
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

// nopRef is a receive buffer reference for decoding a frame in place.
type nopRef struct{}

func (nopRef) Unref() {}

// A pull's topic, as the broker decodes it, lives in the connection's
// receive buffer until the request is recycled, and the reader then
// reads the next frames over it. The pull processor notifies the hold
// service with that string when a message arrived between its read and
// its hold. The service must keep none of it: a worker that serves the
// queue after the buffer was reused still fires the pull, and once the
// buffer reads as the topic again (a later pull of the topic at the same
// place), later notifications of the queue still fire its pulls. Both
// failed when Notify recorded the caller's string: the first pull waited
// for its deadline, and the stale entry then swallowed every notification
// of the queue (one queue of `make compare`'s consumer answered only at
// its 15 s hold deadline: a p99 of 4.9 s, or messages missing).
func TestBrokerHoldNotifyKeepsNoRequestString(t *testing.T) {
	const topic = "Compare1024"
	req := protocol.NewRequest(protocol.PullMessage, &protocol.PullMessageRequestHeader{ConsumerGroup: "g", Topic: topic,
		QueueID: 1, QueueOffset: 5, MaxMsgNums: 32, SysFlag: pullFlagSuspend, SuspendTimeoutMillis: 15000}, nil)
	frame, err := protocol.EncodeFrame(req)
	if err != nil {
		t.Fatal(err)
	}
	frame = frame[4:] // the frame after its length word, as the reader passes it
	got, err := protocol.DecodeFrameWith(frame, nopRef{}, func(code int32) bool { return code == protocol.PullMessage })
	if err != nil {
		t.Fatal(err)
	}
	decoded := append([]byte(nil), frame...) // the field list written over the header
	var hdr protocol.PullMessageRequestHeader
	if err := got.DecodeHeader(&hdr); err != nil || hdr.Topic != topic {
		t.Fatalf("decoded %+v, %v", hdr, err)
	}

	// The workers start only after the buffer was reused: the order a
	// loaded machine may run them in.
	h := NewHoldService(1, nil)
	var f fired
	far := time.Now().Add(time.Hour)
	h.Hold(topic, 1, 5, far, f.fn(1))
	h.Notify(hdr.Topic, 1, 6)
	got.Recycle()
	for i := range frame {
		frame[i] = 'x' // the reader's next frames
	}
	if hdr.Topic == topic {
		t.Fatal("the decoded topic does not live in the frame: the test checks nothing")
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() { h.Run(ctx); close(done) }()
	defer func() { cancel(); <-done }()
	testutil.WaitFor(t, 5*time.Second, "the pull notified with a recycled topic fired", func() bool {
		ids, _ := f.snapshot()
		return len(ids) == 1
	})

	// A later pull of the topic is decoded where the first one was.
	copy(frame, decoded)
	if hdr.Topic != topic {
		t.Fatalf("the frame reads %q again, want %q", hdr.Topic, topic)
	}
	h.Hold(topic, 1, 6, far, f.fn(2))
	h.Notify(topic, 1, 7) // the store's arrival callback (its own string)
	testutil.WaitFor(t, 5*time.Second, "the next pull of the queue fired on its notification", func() bool {
		ids, _ := f.snapshot()
		return len(ids) == 2
	})

	// Hold keeps a copy of its topic too.
	h.Hold(hdr.Topic, 1, 7, far, f.fn(3))
	for i := range frame {
		frame[i] = 'x'
	}
	h.Notify(topic, 1, 8)
	testutil.WaitFor(t, 5*time.Second, "the pull held with a recycled topic fired on its notification", func() bool {
		ids, _ := f.snapshot()
		return len(ids) == 3
	})
	if ids, to := f.snapshot(); ids[0] != 1 || ids[1] != 2 || ids[2] != 3 || to[1] || to[2] || to[3] || h.Len() != 0 {
		t.Fatalf("fired %v (timed out %v), held %d", ids, to, h.Len())
	}
}
