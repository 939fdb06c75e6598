package mqtt

import (
	"math/rand/v2"
	"testing"
	"time"
)

// TestWheelSleepsUntilDue pins the wheel's wake-ups: with nothing armed
// it does not wake at all, a timer far ahead costs one wake-up when due
// (not one a tick), and a timer armed earlier than the one the wheel
// sleeps for still fires on time.
func TestWheelSleepsUntilDue(t *testing.T) {
	const tick = 10 * time.Millisecond
	p := newPool(2)
	defer p.close()
	w := newWheel(tick, 64, p)
	defer w.close()

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
