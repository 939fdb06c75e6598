package mqtt

import (
	"math"
	"math/bits"
	"sync"
	"sync/atomic"
	"time"
)

// timer is an entry of a wheel, embedded in the object it times (a
// connection's keep alive, a session's expiry) so that arming it allocates
// nothing.
type timer struct {
	at         int64 // tick at which it fires
	fn         func()
	slot       int32 // -1 when not armed
	every      int32 // ticks between firings of a periodic timer (armEvery); 0: fires once
	prev, next *timer
}

// wheel is a hashed timing wheel: timers hash by their due tick into one
// of len(slots) doubly linked lists; one goroutine fires what is due,
// handing callbacks to the pool. Arm and stop are O(1).
//
// The goroutine does not wake every tick: it sleeps until the earliest
// armed timer's tick (found by walking the occupied slots ahead of the
// current tick, at most one turn of the wheel, through a bitmap of the
// occupied slots), and an arm earlier than that wakes it. An idle server
// (no connections, no expiring sessions) has no timer armed and its
// wheel does not wake at all; a busy one wakes when a keep alive, a
// sweep or an expiry is due instead of ten times a second.
type wheel struct {
	mu    sync.Mutex
	tick  time.Duration
	slots []*timer // list heads, protected by mu
	occ   []uint64 // bit i%64 of occ[i/64]: slots[i] is not empty; protected by mu
	now   int64    // current tick (all ticks <= now fired), protected by mu
	armed int      // timers in slots, protected by mu
	wake  int64    // tick the goroutine sleeps until, protected by mu
	kick  chan struct{}
	woke  atomic.Int64 // the goroutine's rounds (its wake-ups), for tests
	start time.Time
	pool  *pool
	stop  chan struct{}
	done  chan struct{}
}

// wheelIdle is wheel.wake when no timer is armed.
const wheelIdle = math.MaxInt64

// newWheel starts a wheel of nslots slots (a multiple of 64) of tick each.
func newWheel(tick time.Duration, nslots int, p *pool) *wheel {
	if nslots <= 0 || nslots%64 != 0 || nslots > math.MaxInt32 {
		panic("mqtt: wheel slots not a multiple of 64")
	}
	w := &wheel{tick: tick, slots: make([]*timer, nslots), occ: make([]uint64, nslots/64), start: time.Now(), pool: p,
		wake: wheelIdle, kick: make(chan struct{}, 1),
		stop: make(chan struct{}), done: make(chan struct{})}
	go w.run()
	return w
}

// arm (re)schedules t to run fn once after d.
func (w *wheel) arm(t *timer, d time.Duration, fn func()) {
	w.armTicks(t, d, fn, 0)
}

// armEvery (re)schedules t to run fn every d, the first time after d,
// until it is disarmed (or armed again). The wheel's goroutine arms each
// next firing itself as it fires one, before it looks for its next wake:
// a callback that armed its own timer again (a periodic sweep) was
// earlier than that wake, and kicked the goroutine awake once more each
// period to sleep less.
func (w *wheel) armEvery(t *timer, d time.Duration, fn func()) {
	w.armTicks(t, d, fn, min(w.ticks(d), math.MaxInt32))
}

// ticks is d in ticks, at least one.
func (w *wheel) ticks(d time.Duration) int64 {
	return max(int64((d+w.tick-1)/w.tick), 1)
}

func (w *wheel) armTicks(t *timer, d time.Duration, fn func(), every int64) {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.removeLocked(t)
	// Count from the real current tick: w.now lags when the wheel's
	// goroutine was late (a loaded machine) or asleep, and a timer armed
	// on it would fire early by the lag when run catches up.
	w.insertLocked(t, max(w.now, w.elapsed())+w.ticks(d), fn, every)
	if t.at < w.wake {
		// Earlier than the goroutine's sleep: wake it to sleep less.
		w.wake = t.at
		select {
		case w.kick <- struct{}{}:
		default:
		}
	}
}

// insertLocked puts t (not armed) into the slot of tick at.
func (w *wheel) insertLocked(t *timer, at int64, fn func(), every int64) {
	t.at = at
	t.every = int32(every)
	t.fn = fn
	t.slot = int32(t.at % int64(len(w.slots)))
	t.prev, t.next = nil, w.slots[t.slot]
	if t.next != nil {
		t.next.prev = t
	}
	w.slots[t.slot] = t
	w.occ[t.slot/64] |= 1 << (t.slot % 64)
	w.armed++
}

// elapsed is the number of whole ticks since the wheel started.
func (w *wheel) elapsed() int64 { return int64(time.Since(w.start) / w.tick) }

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
	} else if w.slots[t.slot] = t.next; t.next == nil {
		w.occ[t.slot/64] &^= 1 << (t.slot % 64)
	}
	if t.next != nil {
		t.next.prev = t.prev
	}
	t.prev, t.next, t.slot, t.fn, t.every = nil, nil, -1, nil, 0
	w.armed--
}

// nextLocked returns the earliest tick after w.now at which a timer is
// due, or wheelIdle when none is armed. A disarmed timer can leave the
// goroutine waking once for nothing; it never makes it late.
func (w *wheel) nextLocked() int64 {
	if w.armed == 0 {
		return wheelIdle
	}
	n := int64(len(w.slots))
	later := int64(wheelIdle) // the earliest seen beyond one turn
	for k := w.now + 1; k <= w.now+n; k++ {
		d := w.occupiedFrom(int(k % n))
		if d < 0 {
			break
		}
		if k += int64(d); k > w.now+n {
			break
		}
		for t := w.slots[k%n]; t != nil; t = t.next {
			if t.at <= k {
				return k
			}
			later = min(later, t.at)
		}
	}
	return later
}

// occupiedFrom returns how many slots after slot i (0: i itself, going
// round) the first occupied one is, or -1 when every slot is empty.
func (w *wheel) occupiedFrom(i int) int {
	nw := len(w.occ)
	word, bit := i/64, i%64
	if m := w.occ[word] >> bit; m != 0 {
		return bits.TrailingZeros64(m)
	}
	for j := 1; j <= nw; j++ {
		k := (word + j) % nw
		if m := w.occ[k]; m != 0 {
			return 64*j - bit + bits.TrailingZeros64(m)
		}
	}
	return -1
}

func (w *wheel) run() {
	defer close(w.done)
	sleep := time.NewTimer(time.Hour)
	sleep.Stop()
	defer sleep.Stop()
	var due []func()
	for {
		w.woke.Add(1)
		target := w.elapsed()
		w.mu.Lock()
		for w.now < target {
			w.now++
			slot := int(w.now % int64(len(w.slots)))
			for t := w.slots[slot]; t != nil; {
				next := t.next
				if t.at <= w.now {
					fn, every := t.fn, int64(t.every)
					due = append(due, fn)
					w.removeLocked(t)
					if every > 0 {
						// Into a later slot than this one (every >= 1
						// tick): the walk of this slot does not meet it
						// again (a whole turn puts it at the head, which
						// the walk has passed).
						w.insertLocked(t, w.now+every, fn, every)
					}
				}
				t = next
			}
		}
		w.wake = w.nextLocked()
		wake := w.wake
		w.mu.Unlock()
		for i, f := range due {
			w.pool.submit(f)
			due[i] = nil
		}
		due = due[:0]
		if wake != wheelIdle {
			sleep.Reset(time.Until(w.start.Add(time.Duration(wake) * w.tick)))
		}
		select {
		case <-w.stop:
			return
		case <-sleep.C:
		case <-w.kick:
			sleep.Stop()
		}
	}
}

func (w *wheel) close() {
	close(w.stop)
	<-w.done
}
