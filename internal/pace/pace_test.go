package pace

import (
	"sync"
	"sync/atomic"
	"testing"
	"time"
)

func TestGateOncePerInterval(t *testing.T) {
	var g Gate
	t0 := time.Unix(1000, 0)
	steps := []struct {
		at   time.Duration
		want bool
	}{
		{0, true},                       // the first call goes
		{time.Millisecond, false},       // too soon
		{999 * time.Millisecond, false}, // still too soon
		{time.Second, true},             // a full interval later
		{time.Second + 1, false},
		{5 * time.Second, true},
	}
	for _, s := range steps {
		if got := g.AllowAt(t0.Add(s.at), time.Second); got != s.want {
			t.Fatalf("AllowAt(+%v) = %v, want %v", s.at, got, s.want)
		}
	}
}

func TestGateOneOfManyAtOnce(t *testing.T) {
	var g Gate
	var admitted atomic.Int32
	var wg sync.WaitGroup
	for range 64 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			if g.Allow(time.Hour) {
				admitted.Add(1)
			}
		}()
	}
	wg.Wait()
	if n := admitted.Load(); n != 1 {
		t.Fatalf("%d callers admitted at once, want 1", n)
	}
}
