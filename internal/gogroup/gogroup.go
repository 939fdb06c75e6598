// Package gogroup runs goroutines that their owner's Close waits for.
//
// A Group refuses new goroutines once Close has begun, so a goroutine
// started by a callback racing the owner's shutdown is either refused or
// waited for, never left running after Wait returns.
package gogroup

import (
	"sync"
	"sync/atomic"
)

// Group is a set of goroutines with one owner. The zero value is ready.
type Group struct {
	mu     sync.Mutex // orders Go against Close
	closed atomic.Bool
	wg     sync.WaitGroup
}

// Go runs fn on a new goroutine of the group. It returns false, and does
// not run fn, once Close has been called.
func (g *Group) Go(fn func()) bool {
	g.mu.Lock()
	defer g.mu.Unlock()
	if g.closed.Load() {
		return false
	}
	g.wg.Add(1)
	go func() {
		defer g.wg.Done()
		fn()
	}()
	return true
}

// Close refuses new goroutines from now on. It does not wait: call Wait
// once whatever the goroutines wait for has been closed too.
func (g *Group) Close() {
	g.mu.Lock()
	g.closed.Store(true)
	g.mu.Unlock()
}

// Closed reports whether Close has been called (one atomic load).
func (g *Group) Closed() bool { return g.closed.Load() }

// Wait waits for every goroutine the group started.
func (g *Group) Wait() { g.wg.Wait() }
