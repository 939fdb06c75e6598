package mqtt

import (
	"sync"
	"time"
)

// pool is a bounded worker pool: tasks queue in FIFO order and run on at
// most max goroutines, started on demand. Connection handlers, timer
// callbacks and deferred deliveries all run here, so the number of
// goroutines does not grow with the number of connections.
type pool struct {
	mu      sync.Mutex
	cond    sync.Cond
	queue   []func() // protected by mu: queue[head:] waits
	head    int      // protected by mu
	running int      // protected by mu
	idle    int      // protected by mu: waiting workers not yet signalled
	max     int
	closed  bool // protected by mu
	wg      sync.WaitGroup
}

// poolQueueKeep is the largest queue array an idle pool keeps.
const poolQueueKeep = 1024

func newPool(max int) *pool {
	p := &pool{max: max}
	p.cond.L = &p.mu
	return p
}

// submit queues f; after close it is dropped.
func (p *pool) submit(f func()) {
	p.mu.Lock()
	defer p.mu.Unlock()
	if p.closed {
		return
	}
	if p.head > 0 && len(p.queue) == cap(p.queue) {
		// Full behind a consumed front: move the waiting tasks down
		// rather than grow.
		n := copy(p.queue, p.queue[p.head:])
		clear(p.queue[n:])
		p.queue, p.head = p.queue[:n], 0
	}
	p.queue = append(p.queue, f)
	if p.idle > 0 {
		// The woken worker stops counting as idle now, not when it gets
		// the lock back: a task submitted before it wakes must start
		// another worker rather than wait behind this one's task.
		p.idle--
		p.cond.Signal()
	} else if p.running < p.max {
		p.running++
		p.wg.Add(1)
		go p.run()
	}
}

func (p *pool) run() {
	defer p.wg.Done()
	p.mu.Lock()
	for {
		for p.head == len(p.queue) {
			if p.closed {
				p.running--
				p.mu.Unlock()
				return
			}
			p.idle++ // submit decrements it when it signals
			p.cond.Wait()
		}
		f := p.queue[p.head]
		p.queue[p.head] = nil
		p.head++
		if p.head == len(p.queue) {
			// Drained: the array is kept for the next tasks (no
			// allocation per submit) unless a burst grew it large.
			p.head = 0
			p.queue = p.queue[:0]
			if cap(p.queue) > poolQueueKeep {
				p.queue = nil
			}
		}
		p.mu.Unlock()
		f()
		p.mu.Lock()
	}
}

// close runs the queued tasks, then stops the workers and waits for them.
func (p *pool) close() {
	p.mu.Lock()
	p.closed = true
	p.cond.Broadcast()
	p.mu.Unlock()
	p.wg.Wait()
}

// timer is an entry of a wheel, embedded in the object it times (a
// connection's keep alive, a session's expiry) so that arming it allocates
// nothing.
type timer struct {
	at         int64 // tick at which it fires
	fn         func()
	slot       int // -1 when not armed
	prev, next *timer
}

// wheel is a hashed timing wheel: timers hash by their due tick into one
// of len(slots) doubly linked lists; one goroutine advances a tick at a
// time and fires what is due, handing callbacks to the pool. Arm and stop
// are O(1); a tick costs the length of one slot's list.
type wheel struct {
	mu    sync.Mutex
	tick  time.Duration
	slots []*timer // list heads, protected by mu
	now   int64    // current tick, protected by mu
	start time.Time
	pool  *pool
	stop  chan struct{}
	done  chan struct{}
}

func newWheel(tick time.Duration, nslots int, p *pool) *wheel {
	w := &wheel{tick: tick, slots: make([]*timer, nslots), start: time.Now(), pool: p,
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// arm (re)schedules t to run fn after d.
func (w *wheel) arm(t *timer, d time.Duration, fn func()) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removeLocked(t)
	ticks := int64((d + w.tick - 1) / w.tick)
	if ticks < 1 {
		ticks = 1
	}
	// Count from the real current tick: w.now lags when the wheel's
	// goroutine was late (a loaded machine), and a timer armed on it
	// would fire early by the lag when run catches up.
	t.at = max(w.now, int64(time.Since(w.start)/w.tick)) + ticks
	t.fn = fn
	t.slot = int(t.at % int64(len(w.slots)))
	t.prev, t.next = nil, w.slots[t.slot]
	if t.next != nil {
		t.next.prev = t
	}
	w.slots[t.slot] = t
}

// disarm stops t; it reports whether t was armed.
func (w *wheel) disarm(t *timer) bool {
	w.mu.Lock()
	defer w.mu.Unlock()
	armed := t.fn != nil && t.slot >= 0
	w.removeLocked(t)
	return armed
}

func (w *wheel) removeLocked(t *timer) {
	if t.fn == nil || t.slot < 0 {
		return
	}
	if t.prev != nil {
		t.prev.next = t.next
	} else {
		w.slots[t.slot] = t.next
	}
	if t.next != nil {
		t.next.prev = t.prev
	}
	t.prev, t.next, t.slot, t.fn = nil, nil, -1, nil
}

func (w *wheel) run() {
	defer close(w.done)
	tk := time.NewTicker(w.tick)
	defer tk.Stop()
	var due []func()
	for {
		select {
		case <-w.stop:
			return
		case <-tk.C:
		}
		target := int64(time.Since(w.start) / w.tick)
		w.mu.Lock()
		for w.now < target {
			w.now++
			slot := int(w.now % int64(len(w.slots)))
			for t := w.slots[slot]; t != nil; {
				next := t.next
				if t.at <= w.now {
					due = append(due, t.fn)
					w.removeLocked(t)
				}
				t = next
			}
		}
		w.mu.Unlock()
		for i, f := range due {
			w.pool.submit(f)
			due[i] = nil
		}
		due = due[:0]
	}
}

func (w *wheel) close() {
	close(w.stop)
	<-w.done
}
