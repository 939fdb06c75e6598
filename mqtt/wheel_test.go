package mqtt

import (
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
