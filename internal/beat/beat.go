// Package beat is one shared clock for the process's periodic
// housekeeping: a Ticker whose ticks fall on multiples of its period
// counted from one process-wide epoch, all driven by a single runtime
// timer. Loops that tick every second (disk checks, statistics, expiry
// scans, replication tracking) then wake the process together, once a
// second, instead of each at its own phase: an idle server pays one
// thread wake-up (and the runtime monitor's naps after it) per beat, not
// one per loop.
//
// A Ticker behaves like time.Ticker: C has a buffer of one and a tick the
// reader has not taken yet is dropped, not queued.
package beat

import (
	"sync"
	"time"
)

// Ticker delivers the time on C at each multiple of its period.
type Ticker struct {
	C <-chan time.Time

	c     chan time.Time
	every time.Duration
	due   time.Duration // next tick, since the epoch; protected by clock.mu
	index int           // in clock.tickers, -1 when stopped; protected by clock.mu
}

// clock is the process's one driver of every Ticker.
var clock struct {
	mu      sync.Mutex
	epoch   time.Time
	tickers []*Ticker     // protected by mu
	timer   *time.Timer   // created on first use; protected by mu
	armed   time.Duration // when timer fires, since the epoch; -1: stopped
}

// NewTicker returns a Ticker ticking every d (d > 0) on the shared clock.
// Its first tick is at the next multiple of d, at most d from now.
func NewTicker(d time.Duration) *Ticker {
	if d <= 0 {
		panic("beat: non-positive interval for NewTicker")
	}
	c := make(chan time.Time, 1)
	t := &Ticker{C: c, c: c, every: d}
	clock.mu.Lock()
	defer clock.mu.Unlock()
	if clock.timer == nil {
		clock.epoch = time.Now()
		clock.timer = time.AfterFunc(time.Hour, fire)
		clock.timer.Stop()
		clock.armed = -1
	}
	now := time.Since(clock.epoch)
	t.due = (now/d + 1) * d
	t.index = len(clock.tickers)
	clock.tickers = append(clock.tickers, t)
	armLocked(now)
	return t
}

// Stop turns the ticker off; no tick is sent after it returns. C is not
// closed.
func (t *Ticker) Stop() {
	clock.mu.Lock()
	defer clock.mu.Unlock()
	i := t.index
	if i < 0 {
		return
	}
	last := len(clock.tickers) - 1
	clock.tickers[i] = clock.tickers[last]
	clock.tickers[i].index = i
	clock.tickers[last] = nil
	clock.tickers = clock.tickers[:last]
	t.index = -1
	if len(clock.tickers) == 0 {
		clock.timer.Stop()
		clock.armed = -1
	}
}

// armLocked sets the timer for the earliest due tick (now: since the
// epoch), unless it is already set for that instant.
func armLocked(now time.Duration) {
	if len(clock.tickers) == 0 {
		return
	}
	next := clock.tickers[0].due
	for _, t := range clock.tickers[1:] {
		next = min(next, t.due)
	}
	if next == clock.armed {
		return
	}
	clock.armed = next
	clock.timer.Reset(next - now)
}

// fire runs on the timer: every ticker whose tick is due gets it (or
// keeps the one it has not read), and moves to its next multiple.
func fire() {
	clock.mu.Lock()
	defer clock.mu.Unlock()
	now := time.Since(clock.epoch)
	at := clock.epoch.Add(now)
	for _, t := range clock.tickers {
		if t.due > now {
			continue
		}
		select {
		case t.c <- at:
		default:
		}
		t.due = (now/t.every + 1) * t.every
	}
	clock.armed = -1
	armLocked(now)
}
