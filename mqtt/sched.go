package mqtt

import "sync"

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
