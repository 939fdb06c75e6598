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
		meet(a, b, <-a.C, <-b.C)
	}
	// c's ticks are sent at one of a's instants (the same timer's run).
	meet(c, a, <-c.C, <-a.C)
	select {
	case <-stopped.C:
		t.Fatal("a stopped ticker ticked")
	default:
	}
}

// meet takes the ticks of x and y, from tx and ty on, until the two
// tickers have sent the same instant. A tick one of them missed (a slow
// reader) is dropped: the one behind takes its next instead of failing
// on it.
func meet(x, y *Ticker, tx, ty time.Time) {
	for !tx.Equal(ty) {
		if tx.Before(ty) {
			tx = <-x.C
		} else {
			ty = <-y.C
		}
	}
}

// A reader that does not keep up gets one pending tick, not a queue:
// after the pending one, the next is sent after it was taken.
func TestTickerDropsUnreadTicks(t *testing.T) {
	const d = 20 * time.Millisecond
	tk := NewTicker(d)
	defer tk.Stop()
	time.Sleep(5 * d)
	<-tk.C
	took := time.Now()
	// A queued tick would be one of the sleep's, 3 periods or more before
	// took. The one sent next carries the instant its run began, which
	// can precede took by the moment between that and the send (the
	// timer's goroutine held there while this one took the pending
	// tick), so a period of slack separates the two.
	if next := <-tk.C; next.Before(took.Add(-d)) {
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
