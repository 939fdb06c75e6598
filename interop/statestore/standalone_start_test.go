package statestore

import (
	"fmt"
	"runtime"
	"strings"
	"sync"
	"testing"
)

// fatalRecorder is a testing.TB whose Fatalf and Errorf are recorded
// (Fatalf ends the calling goroutine as the real one does) instead of
// failing the test, to check a helper's own failure.
type fatalRecorder struct {
	testing.TB
	mu     sync.Mutex
	fatal  string
	errors []string
}

func (f *fatalRecorder) Fatalf(format string, args ...any) {
	f.mu.Lock()
	f.fatal = fmt.Sprintf(format, args...)
	f.mu.Unlock()
	runtime.Goexit()
}

func (f *fatalRecorder) Errorf(format string, args ...any) {
	f.mu.Lock()
	f.errors = append(f.errors, fmt.Sprintf(format, args...))
	f.mu.Unlock()
}

// A smartgo process that exits at once (here: a bad -set) fails the start
// with its log as soon as it exits: the start used to wait out the whole
// 30 s readiness deadline and then say only that it did not come up.
func TestStandaloneStartFailsFastWhenProcessExits(t *testing.T) {
	bin := smartgoBinary(t)
	rec := &fatalRecorder{TB: t}
	done := make(chan struct{})
	go func() {
		defer close(done)
		startStandaloneBin(rec, bin, nil, "nosuch.key=1")
	}()
	<-done
	rec.mu.Lock()
	defer rec.mu.Unlock()
	if !strings.Contains(rec.fatal, "exited") || !strings.Contains(rec.fatal, `unknown section "nosuch"`) {
		t.Fatalf("start of a process that exits at once failed with %q, want its exit and log", rec.fatal)
	}
}
