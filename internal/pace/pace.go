// Package pace lets a thing that many goroutines may ask for at once (a
// route lookup after a request timed out) happen at most once per
// interval, without a lock.
package pace

import (
	"sync/atomic"
	"time"
)

// Gate admits one caller per interval. The zero value admits the first
// caller at once.
type Gate struct {
	last atomic.Int64 // unix ns of the last admitted call
}

// Allow reports whether the caller may go ahead now: true at most once
// every interval, however many goroutines ask.
func (g *Gate) Allow(every time.Duration) bool {
	return g.AllowAt(time.Now(), every)
}

// AllowAt is Allow with the time given.
func (g *Gate) AllowAt(now time.Time, every time.Duration) bool {
	n := now.UnixNano()
	last := g.last.Load()
	if last != 0 && n-last < int64(every) {
		return false
	}
	return g.last.CompareAndSwap(last, n)
}

// RouteAfterTimeout spaces the route lookups that requests which ran out
// of time ask for (client core, state store router, twin client): a
// master that hangs or is cut off closes no connection, so a timeout is
// the first sign that the route may have moved.
const RouteAfterTimeout = time.Second
