package broker

import (
	"container/heap"
	"context"
	"strings"
	"sync"
	"time"
)

// HoldService parks pull requests that found nothing new (RocketMQ's
// PullRequestHoldService). A held pull is woken when the store dispatches a
// message to its queue past the pulled offset, or when its deadline passes;
// either way its fire function runs once, on one of the service's workers.
//
// Nothing the store's dispatcher calls waits: Notify only records, under
// one short lock, that the queue grew (notifications of one queue
// coalesce into one entry holding the highest offset) and wakes a worker;
// the workers take the ready queues in order, pick their pulls below the
// offset and fire them. A fire re-runs the pull and answers with
// Conn.WriteResponse, which does not wait for the socket either, so a
// consumer that stops reading delays nobody.
//
// Costs: Hold is O(log n); Notify O(1); a worker's turn O(k log n) for the
// k pulls of the queue it serves. There is no periodic scan over held
// pulls. Deadlines sit in one min-heap served by a single timer.
type HoldService struct {
	mu      sync.Mutex
	work    *sync.Cond               // on mu: ready or due work, or closed
	byQueue map[queueKey][]*heldPull // protected by mu
	dl      deadlineHeap             // protected by mu
	ready   map[queueKey]int64       // queues grown past their pulls: highest offset notified; protected by mu
	order   []queueKey               // the keys of ready in notification order; protected by mu
	due     []*heldPull              // pulls to fire now (timed out); protected by mu
	closed  bool                     // protected by mu
	wakeup  chan struct{}            // the heap's head changed

	workers int
	wg      sync.WaitGroup
	now     func() time.Time
}

type queueKey struct {
	topic   string
	queueID int32
}

type heldPull struct {
	key      queueKey
	offset   int64
	deadline time.Time
	fire     func(timedOut bool)
	idx      int // index in the heap, -1 when out
	timedOut bool
}

// NewHoldService returns a hold service that runs fires on workers
// goroutines (at least 1); now may be nil.
func NewHoldService(workers int, now func() time.Time) *HoldService {
	if workers < 1 {
		workers = 1
	}
	if now == nil {
		now = time.Now
	}
	h := &HoldService{byQueue: map[queueKey][]*heldPull{}, ready: map[queueKey]int64{},
		wakeup: make(chan struct{}, 1), workers: workers, now: now}
	h.work = sync.NewCond(&h.mu)
	return h
}

// Run serves deadlines and fires until ctx ends; then every pull still
// held is fired as timed out (so its client gets an answer) and Run
// returns after the workers finish.
func (h *HoldService) Run(ctx context.Context) {
	for i := 0; i < h.workers; i++ {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			h.serve()
		}()
	}
	timer := time.NewTimer(time.Hour)
	defer timer.Stop()
	for {
		next := h.expire()
		if !next.IsZero() {
			timer.Reset(max(next.Sub(h.now()), time.Millisecond))
		}
		select {
		case <-ctx.Done():
			h.shutdown()
			return
		case <-h.wakeup:
		case <-timer.C:
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// serve is a worker: it fires due pulls and the pulls of ready queues
// until the service is closed and nothing is left.
func (h *HoldService) serve() {
	h.mu.Lock()
	defer h.mu.Unlock()
	var batch []*heldPull
	for {
		for len(h.due) == 0 && len(h.order) == 0 && !h.closed {
			h.work.Wait()
		}
		switch {
		case len(h.due) > 0:
			batch = append(batch[:0], h.due...)
			clear(h.due)
			h.due = h.due[:0]
		case len(h.order) > 0:
			key := h.order[0]
			h.order[0] = queueKey{}
			h.order = h.order[1:]
			batch = h.takeBelowLocked(batch[:0], key, h.ready[key])
			delete(h.ready, key)
		default: // closed, nothing left
			return
		}
		h.mu.Unlock()
		for i, p := range batch {
			p.fire(p.timedOut)
			batch[i] = nil
		}
		h.mu.Lock()
	}
}

// takeBelowLocked removes the pulls of key waiting for an offset below
// maxOffset and appends them to dst.
func (h *HoldService) takeBelowLocked(dst []*heldPull, key queueKey, maxOffset int64) []*heldPull {
	ps := h.byQueue[key]
	kept := ps[:0]
	for _, p := range ps {
		if p.offset < maxOffset {
			heap.Remove(&h.dl, p.idx)
			dst = append(dst, p)
		} else {
			kept = append(kept, p)
		}
	}
	clear(ps[len(kept):])
	if len(kept) == 0 {
		delete(h.byQueue, key)
	} else {
		h.byQueue[key] = kept
	}
	return dst
}

// expire moves every pull whose deadline passed to the workers and
// returns the next deadline (zero if none).
func (h *HoldService) expire() time.Time {
	now := h.now()
	h.mu.Lock()
	defer h.mu.Unlock()
	n := len(h.due)
	for h.dl.Len() > 0 && !h.dl[0].deadline.After(now) {
		p := heap.Pop(&h.dl).(*heldPull)
		h.removeFromQueueLocked(p)
		p.timedOut = true
		h.due = append(h.due, p)
	}
	if len(h.due) > n {
		h.work.Signal()
	}
	if h.dl.Len() > 0 {
		return h.dl[0].deadline
	}
	return time.Time{}
}

// shutdown fires every held pull as timed out and waits for the workers
// to finish the work left.
func (h *HoldService) shutdown() {
	h.mu.Lock()
	h.closed = true
	for _, ps := range h.byQueue {
		for _, p := range ps {
			p.timedOut = true
			h.due = append(h.due, p)
		}
	}
	h.byQueue = map[queueKey][]*heldPull{}
	h.dl = nil
	h.work.Broadcast()
	h.mu.Unlock()
	h.wg.Wait()
}

// Hold parks a pull of (topic, queueID) that wants messages at or after
// offset, until Notify reports the queue grew past it or deadline passes.
// It reports false when the service has stopped (the caller must answer
// the pull itself). topic may be a request's header string, valid only
// until the request is recycled: the service keeps a copy.
func (h *HoldService) Hold(topic string, queueID int32, offset int64, deadline time.Time, fire func(timedOut bool)) bool {
	p := &heldPull{key: queueKey{strings.Clone(topic), queueID}, offset: offset, deadline: deadline, fire: fire}
	h.mu.Lock()
	if h.closed {
		h.mu.Unlock()
		return false
	}
	h.byQueue[p.key] = append(h.byQueue[p.key], p)
	heap.Push(&h.dl, p)
	head := h.dl[0] == p
	h.mu.Unlock()
	if head {
		select {
		case h.wakeup <- struct{}{}:
		default:
		}
	}
	return true
}

// Notify tells the service that (topic, queueID) now holds messages below
// maxOffset: every pull held there for an offset below it is fired soon,
// on a worker. Notify never waits for them. topic is not kept (it may be
// a request's header string, valid only until the request is recycled):
// the queue is recorded under the key of a pull held there, which the
// service owns.
func (h *HoldService) Notify(topic string, queueID int32, maxOffset int64) {
	h.mu.Lock()
	ps := h.byQueue[queueKey{topic, queueID}]
	if len(ps) == 0 {
		h.mu.Unlock()
		return
	}
	// A key whose bytes change after it went into ready and order is
	// found by neither: its worker would fire nothing, and once the
	// bytes read as the topic again, ready would swallow every later
	// notification of the queue (its pulls then wait for their deadline).
	key := ps[0].key
	if old, ok := h.ready[key]; !ok {
		h.ready[key] = maxOffset
		h.order = append(h.order, key)
		h.work.Signal()
	} else if maxOffset > old {
		h.ready[key] = maxOffset
	}
	h.mu.Unlock()
}

// Len returns the number of held pulls.
func (h *HoldService) Len() int {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dl.Len()
}

func (h *HoldService) removeFromQueueLocked(p *heldPull) {
	ps := h.byQueue[p.key]
	for i, q := range ps {
		if q == p {
			ps = append(ps[:i], ps[i+1:]...)
			break
		}
	}
	if len(ps) == 0 {
		delete(h.byQueue, p.key)
	} else {
		h.byQueue[p.key] = ps
	}
}

// deadlineHeap is a min-heap of held pulls by deadline.
type deadlineHeap []*heldPull

func (d deadlineHeap) Len() int           { return len(d) }
func (d deadlineHeap) Less(i, j int) bool { return d[i].deadline.Before(d[j].deadline) }
func (d deadlineHeap) Swap(i, j int) {
	d[i], d[j] = d[j], d[i]
	d[i].idx, d[j].idx = i, j
}
func (d *deadlineHeap) Push(x any) {
	p := x.(*heldPull)
	p.idx = len(*d)
	*d = append(*d, p)
}
func (d *deadlineHeap) Pop() any {
	old := *d
	p := old[len(old)-1]
	old[len(old)-1] = nil
	*d = old[:len(old)-1]
	p.idx = -1
	return p
}
