// Package wake is a broadcast wake-up for goroutines waiting for a change
// together with other events (a context, a timer): the signal SmartGo
// uses instead of polling shared state.
package wake

import (
	"sync"
	"sync/atomic"
)

// Notifier wakes every goroutine waiting at the time of a Notify. The
// zero value is ready to use. A waiter calls Wait first, then checks the
// state it waits for, then selects on the channel (and its other events):
// a change made after Wait cannot be missed.
type Notifier struct {
	mu      sync.Mutex
	ch      chan struct{} // closed by the next Notify; protected by mu
	waiting atomic.Bool   // a channel was handed out since the last Notify
}

// Wait returns a channel that the next Notify closes.
func (n *Notifier) Wait() <-chan struct{} {
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.ch == nil {
		n.ch = make(chan struct{})
	}
	n.waiting.Store(true)
	return n.ch
}

// Notify wakes the current waiters. It costs one atomic load when nobody
// waits.
func (n *Notifier) Notify() {
	if !n.waiting.Load() {
		return
	}
	n.mu.Lock()
	if n.waiting.Load() {
		close(n.ch)
		n.ch = nil
		n.waiting.Store(false)
	}
	n.mu.Unlock()
}
