package mqtt

import (
	"math/rand/v2"
	"testing"
	"time"
)

// testWheel is a running wheel of 64 slots of tick on a pool of workers,
// both closed when t ends.
func testWheel(t *testing.T, tick time.Duration, workers int) *wheel {
	p := newPool(workers)
	w := newWheel(tick, 64, p)
	t.Cleanup(func() {
		w.close()
		p.close()
	})
	return w
}

// TestWheelSleepsUntilDue pins the wheel's wake-ups: with nothing armed
// it does not wake at all, a timer far ahead costs one wake-up when due
// (not one a tick), and a timer armed earlier than the one the wheel
// sleeps for still fires on time.
func TestWheelSleepsUntilDue(t *testing.T) {
	const tick = 10 * time.Millisecond
	w := testWheel(t, tick, 2)

	// Idle: 30 ticks pass with at most the goroutine's first round.
	time.Sleep(30 * tick)
	if n := w.woke.Load(); n > 1 {
		t.Fatalf("idle wheel woke %d times in 30 ticks, want at most 1", n)
	}

	// A timer 100 ticks ahead (beyond one turn of 64 slots) and one 5
	// ticks ahead, armed after it: the near one fires first and on time.
	far, near := make(chan time.Time, 1), make(chan time.Time, 1)
	var tf, tn timer
	armed := time.Now()
	w.arm(&tf, 100*tick, func() { far <- time.Now() })
	w.arm(&tn, 5*tick, func() { near <- time.Now() })
	got := <-near
	if d := got.Sub(armed); d < 4*tick {
		t.Fatalf("near timer fired after %v, before its 5 ticks", d)
	}
	select {
	case <-far:
		t.Fatal("far timer fired with the near one")
	default:
	}
	before := w.woke.Load()
	got = <-far
	if d := got.Sub(armed); d < 99*tick {
		t.Fatalf("far timer fired after %v, before its 100 ticks", d)
	}
	// Between the two: a few rounds (the fire, the arm, scheduling),
	// never one per tick (95 ticks passed).
	if n := w.woke.Load() - before; n > 10 {
		t.Fatalf("wheel woke %d times waiting 95 ticks for one timer", n)
	}

	// A disarmed timer never runs. Its 2 ticks can pass between the arm
	// and the disarm when this goroutine is held (a loaded machine, a
	// GC): then it ran, as it should, and the check starts again.
	ran := make(chan struct{}, 1)
	for try := 0; ; try++ {
		armed := time.Now()
		w.arm(&tn, 2*tick, func() { ran <- struct{}{} })
		if w.disarm(&tn) {
			break
		}
		if held := time.Since(armed); held < tick || try == 20 {
			t.Fatalf("disarm of an armed timer reported it was not armed (%v after the arm, try %d)", held, try)
		}
		<-ran
	}
	w.arm(&tf, 4*tick, func() { far <- time.Now() })
	<-far
	select {
	case <-ran:
		t.Fatal("disarmed timer ran")
	default:
	}
}

// TestWheelEvery: a periodic timer fires once a period, each firing
// costs the goroutine one wake-up (it arms the next firing itself, so no
// kick), a disarm stops it, and arming it again makes it periodic anew.
func TestWheelEvery(t *testing.T) {
	const tick = 10 * time.Millisecond
	// One worker: the pool runs what the wheel hands it in order.
	w := testWheel(t, tick, 1)

	fired := make(chan time.Time, 1024)
	var tm timer
	fire := func() { fired <- time.Now() }
	start := time.Now()
	w.armEvery(&tm, 3*tick, fire)
	<-fired
	before := w.woke.Load()
	const n = 10
	for range n {
		<-fired
	}
	// Each firing is one wake-up; a loaded machine can add a late round
	// or two, never one per firing more (a kick after each callback).
	if got := w.woke.Load() - before; got > n+3 {
		t.Fatalf("%d firings took %d wake-ups of the wheel", n, got)
	}
	if d := time.Since(start); d < (n+1)*3*tick-tick {
		t.Fatalf("%d firings of a 3-tick timer in %v", n+1, d)
	}
	if !w.disarm(&tm) {
		t.Fatal("periodic timer not armed after firing")
	}
	// A one-shot timer armed now fires in a later round of the wheel than
	// any firing collected before the disarm, and the one worker runs it
	// after them: once it ran, the periodic timer has fired for the last
	// time.
	var sentinel timer
	sentinel.slot = -1
	done := make(chan struct{})
	w.arm(&sentinel, tick, func() { close(done) })
	<-done
	for len(fired) > 0 {
		<-fired
	}
	notArmed := func() bool {
		w.mu.Lock()
		defer w.mu.Unlock()
		return tm.slot == -1 && tm.every == 0 && w.armed == 0
	}
	time.Sleep(6 * tick)
	if !notArmed() || len(fired) != 0 {
		t.Fatalf("disarmed periodic timer fired %d more times (armed again: %v)", len(fired), !notArmed())
	}
	// Armed once: fires once and is not armed after.
	w.arm(&tm, tick, fire)
	<-fired
	time.Sleep(6 * tick)
	if !notArmed() || len(fired) != 0 {
		t.Fatalf("a one-shot arm of a once periodic timer fired %d more times", len(fired))
	}
}

// bareWheel is a wheel without its goroutine, for nextLocked: a tick
// of an hour, so that arm counts from w.now.
func bareWheel(nslots int) *wheel {
	return &wheel{tick: time.Hour, slots: make([]*timer, nslots), occ: make([]uint64, nslots/64),
		wake: wheelIdle, kick: make(chan struct{}, 1), start: time.Now()}
}

// TestWheelNextLocked: the tick the goroutine sleeps until is the
// earliest armed timer's, whichever slots the timers hash to (within one
// turn of the wheel or beyond, several in a slot, slots emptied by
// disarming), and wheelIdle with none armed.
func TestWheelNextLocked(t *testing.T) {
	rng := rand.New(rand.NewPCG(1, 2))
	for round := range 300 {
		w := bareWheel(64 * (1 + rng.IntN(4)))
		n := len(w.slots)
		w.now = int64(rng.IntN(1 << 20))
		ts := make([]timer, 1+rng.IntN(40))
		for i := range ts {
			ts[i].slot = -1
			// Mostly within a turn or two, some far beyond.
			d := 1 + rng.IntN(2*n)
			if rng.IntN(8) == 0 {
				d = 1 + rng.IntN(100*n)
			}
			w.arm(&ts[i], time.Duration(d)*w.tick, func() {})
		}
		for i := range ts {
			if rng.IntN(3) == 0 {
				w.disarm(&ts[i])
			}
		}
		want := int64(wheelIdle)
		for i := range ts {
			if ts[i].slot >= 0 {
				want = min(want, ts[i].at)
			}
		}
		if got := w.nextLocked(); got != want {
			t.Fatalf("round %d: nextLocked %d, want %d (now %d, %d slots)", round, got, want, w.now, n)
		}
		// The bitmap holds exactly the non-empty slots.
		for i := range n {
			if occ := w.occ[i/64]&(1<<(i%64)) != 0; occ != (w.slots[i] != nil) {
				t.Fatalf("round %d: slot %d occupied bit %v with list %v", round, i, occ, w.slots[i] != nil)
			}
		}
	}
}

// BenchmarkWheelNextFar: the wheel's next wake-up with a single timer
// beyond one turn (the server's wheel: 4096 slots), which walked every
// slot.
func BenchmarkWheelNextFar(b *testing.B) {
	w := bareWheel(4096)
	var tm timer
	tm.slot = -1
	w.arm(&tm, 5000*w.tick, func() {})
	for b.Loop() {
		if w.nextLocked() != tm.at {
			b.Fatal("wrong tick")
		}
	}
}
