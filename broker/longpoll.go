package broker

import (
	"container/heap"
	"context"
	"sync"
	"time"
)

// HoldService parks pull requests that found nothing new (RocketMQ's
// PullRequestHoldService). A held pull is woken when the store dispatches a
// message to its queue past the pulled offset, or when its deadline passes;
// either way its fire function runs once, on one of the service's workers,
// so the store's dispatcher never waits for a pull to be re-run.
//
// Costs: Hold and Notify are O(log n) and O(k) for the k pulls of the
// notified queue; there is no periodic scan over held pulls. Deadlines sit
// in one min-heap served by a single timer.
type HoldService struct {
	mu      sync.Mutex
	byQueue map[queueKey][]*heldPull // protected by mu
	dl      deadlineHeap             // protected by mu
	wakeup  chan struct{}            // the heap's head changed
	closed  bool                     // protected by mu

	work chan *heldPull
	// sendMu orders sends on work against its close: senders hold it for
	// reading; shutdown takes it for writing to close the channel.
	sendMu     sync.RWMutex
	workClosed bool // protected by sendMu
	workers    int
	wg         sync.WaitGroup
	now        func() time.Time
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
	idx      int  // index in the heap, -1 when out
	done     bool // fired or about to be; protected by HoldService.mu
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
	return &HoldService{byQueue: map[queueKey][]*heldPull{}, wakeup: make(chan struct{}, 1),
		work: make(chan *heldPull, 1024), workers: workers, now: now}
}

// Run serves deadlines and fires until ctx ends; then every pull still
// held is fired as timed out (so its client gets an answer) and Run
// returns after the workers finish.
func (h *HoldService) Run(ctx context.Context) {
	for i := 0; i < h.workers; i++ {
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			for p := range h.work {
				p.fire(p.timedOut)
			}
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

// expire fires every pull whose deadline passed and returns the next
// deadline (zero if none).
func (h *HoldService) expire() time.Time {
	now := h.now()
	var due []*heldPull
	h.mu.Lock()
	for h.dl.Len() > 0 && !h.dl[0].deadline.After(now) {
		p := heap.Pop(&h.dl).(*heldPull)
		h.removeFromQueueLocked(p)
		p.done, p.timedOut = true, true
		due = append(due, p)
	}
	var next time.Time
	if h.dl.Len() > 0 {
		next = h.dl[0].deadline
	}
	h.mu.Unlock()
	h.dispatch(due)
	return next
}

// dispatch hands fired pulls to the workers; after shutdown closed the
// work channel it runs them inline, so no pull goes unanswered and no send
// hits a closed channel.
func (h *HoldService) dispatch(ps []*heldPull) {
	if len(ps) == 0 {
		return
	}
	h.sendMu.RLock()
	defer h.sendMu.RUnlock()
	if h.workClosed {
		for _, p := range ps {
			p.fire(p.timedOut)
		}
		return
	}
	for _, p := range ps {
		h.work <- p
	}
}

func (h *HoldService) shutdown() {
	h.mu.Lock()
	h.closed = true
	var all []*heldPull
	for _, ps := range h.byQueue {
		for _, p := range ps {
			p.done, p.timedOut = true, true
			all = append(all, p)
		}
	}
	h.byQueue = map[queueKey][]*heldPull{}
	h.dl = nil
	h.mu.Unlock()
	h.dispatch(all)
	h.sendMu.Lock()
	h.workClosed = true
	close(h.work)
	h.sendMu.Unlock()
	h.wg.Wait()
}

// Hold parks a pull of (topic, queueID) that wants messages at or after
// offset, until Notify reports the queue grew past it or deadline passes.
// It reports false when the service has stopped (the caller must answer
// the pull itself).
func (h *HoldService) Hold(topic string, queueID int32, offset int64, deadline time.Time, fire func(timedOut bool)) bool {
	p := &heldPull{key: queueKey{topic, queueID}, offset: offset, deadline: deadline, fire: fire}
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
// maxOffset: every pull held there for an offset below it is fired.
func (h *HoldService) Notify(topic string, queueID int32, maxOffset int64) {
	key := queueKey{topic, queueID}
	var due []*heldPull
	h.mu.Lock()
	ps := h.byQueue[key]
	if len(ps) == 0 {
		h.mu.Unlock()
		return
	}
	kept := ps[:0]
	for _, p := range ps {
		if p.offset < maxOffset {
			p.done = true
			heap.Remove(&h.dl, p.idx)
			due = append(due, p)
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
	h.mu.Unlock()
	h.dispatch(due)
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
