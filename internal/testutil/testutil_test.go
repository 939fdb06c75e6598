package testutil

import (
	"errors"
	"fmt"
	"runtime"
	"strings"
	"testing"
	"time"
)

// fatalTB records a Fatalf and ends the calling goroutine, as testing does.
type fatalTB struct {
	testing.TB
	msg string
}

func (f *fatalTB) Helper() {}

func (f *fatalTB) Fatalf(format string, args ...any) {
	f.msg = fmt.Sprintf(format, args...)
	runtime.Goexit()
}

// run calls fn with a fatalTB on its own goroutine and returns the fatal
// message ("" when fn returned).
func run(fn func(tb testing.TB)) string {
	tb := &fatalTB{}
	done := make(chan struct{})
	go func() {
		defer close(done)
		fn(tb)
	}()
	<-done
	return tb.msg
}

func TestTestutilWaitForAndEventually(t *testing.T) {
	calls := 0
	if msg := run(func(tb testing.TB) {
		WaitFor(tb, 5*time.Second, "three calls", func() bool { calls++; return calls == 3 })
	}); msg != "" || calls != 3 {
		t.Fatalf("WaitFor of a condition met at the third call: %q after %d calls", msg, calls)
	}
	start := time.Now()
	msg := run(func(tb testing.TB) {
		WaitFor(tb, 50*time.Millisecond, "the impossible", func() bool { return false })
	})
	if !strings.Contains(msg, "the impossible") || time.Since(start) < 50*time.Millisecond {
		t.Fatalf("WaitFor of a condition never met: %q after %v", msg, time.Since(start))
	}
	msg = run(func(tb testing.TB) {
		Eventually(tb, 30*time.Millisecond, func() error { return errors.New("still 7 left") })
	})
	if !strings.Contains(msg, "still 7 left") {
		t.Fatalf("Eventually does not report the last error: %q", msg)
	}
}
