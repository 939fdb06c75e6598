package beat

import (
	"testing"
	"time"
)

// Tickers started at different moments tick at the same instants (the
// shared clock's multiples of their period), a ticker of twice the period
// ticks with every other one of them, and a stopped ticker never ticks.
func TestTickersShareInstants(t *testing.T) {
	const d = 40 * time.Millisecond
	a := NewTicker(d)
	defer a.Stop()
	time.Sleep(d / 3)
	b := NewTicker(d)
	defer b.Stop()
	c := NewTicker(2 * d)
	defer c.Stop()
	stopped := NewTicker(d)
	stopped.Stop()
	for range 3 {
		meet(t, a, b, tick(t, a), tick(t, b))
	}
	// c's ticks are sent at one of a's instants (the same timer's run).
	meet(t, c, a, tick(t, c), tick(t, a))
	select {
	case <-stopped.C:
		t.Fatal("a stopped ticker ticked")
	default:
	}
}

// meet takes the ticks of x and y, from tx and ty on, until the two
// tickers have sent the same instant. A tick one of them missed (a slow
// reader) is dropped: the one behind takes its next instead of failing
// on it. Tickers that keep sending different instants fail the test
// after maxMeetTicks ticks instead of looping until its timeout.
func meet(t *testing.T, x, y *Ticker, tx, ty time.Time) {
	t.Helper()
	for n := 0; !tx.Equal(ty); n++ {
		if n == maxMeetTicks {
			t.Fatalf("no common instant in %d ticks: the last were %v and %v", n, tx, ty)
		}
		if tx.Before(ty) {
			tx = tick(t, x)
		} else {
			ty = tick(t, y)
		}
	}
}

// maxMeetTicks bounds the ticks meet takes: tickers on the shared clock
// meet at the first instant both send, a dropped tick or two later
// under load; a hundred means they never will.
const maxMeetTicks = 100

// tickWait is how long tick waits for a tick (periods here are 20-80
// ms): a ticker that stops sending fails the test instead of hanging it.
const tickWait = 30 * time.Second

// tick takes tk's next tick.
func tick(t *testing.T, tk *Ticker) time.Time {
	t.Helper()
	select {
	case at := <-tk.C:
		return at
	case <-time.After(tickWait):
		t.Fatalf("no tick in %v from a ticker of period %v", tickWait, tk.every)
		return time.Time{}
	}
}

// A reader that does not keep up gets one pending tick, not a queue:
// after the pending one, the next is sent after it was taken.
func TestTickerDropsUnreadTicks(t *testing.T) {
	const d = 20 * time.Millisecond
	tk := NewTicker(d)
	defer tk.Stop()
	time.Sleep(5 * d)
	tick(t, tk)
	took := time.Now()
	// A queued tick would be one of the sleep's, 3 periods or more before
	// took. The one sent next carries the instant its run began, which
	// can precede took by the moment between that and the send (the
	// timer's goroutine held there while this one took the pending
	// tick), so a period of slack separates the two.
	if next := tick(t, tk); next.Before(took.Add(-d)) {
		t.Fatalf("a tick of %v was queued behind the one taken at %v", next, took)
	}
}

func TestNewTickerRefusesNonPositive(t *testing.T) {
	defer func() {
		if recover() == nil {
			t.Fatal("NewTicker(0) did not panic")
		}
	}()
	NewTicker(0)
}
