//go:build unix

package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"syscall"
	"testing"
	"time"
)

// StopProcess stops p (SIGSTOP) and waits until every thread of it is
// stopped, so that nothing sent to p from then on is read or answered.
// The signal alone does not promise that: kill(2) returns once the signal
// is pending, and until the thread the kernel picked for it runs, the
// other threads go on (on a busy machine, long enough to read and answer
// a request sent right after). The threads are read from /proc; where
// there is none, StopProcess returns after the signal.
func StopProcess(t testing.TB, p *os.Process) {
	t.Helper()
	if err := p.Signal(syscall.SIGSTOP); err != nil {
		t.Fatalf("stop process %d: %v", p.Pid, err)
	}
	if _, err := os.Stat("/proc/self/task"); err != nil {
		return
	}
	Eventually(t, 10*time.Second, func() error { return allStopped(p.Pid) })
}

// allStopped says whether every thread of pid is stopped (state T).
func allStopped(pid int) error {
	tasks, err := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/stat", pid))
	if err != nil || len(tasks) == 0 {
		return fmt.Errorf("threads of %d: %v", pid, err)
	}
	for _, f := range tasks {
		b, err := os.ReadFile(f)
		if errors.Is(err, os.ErrNotExist) {
			continue // the thread ended
		}
		if err != nil {
			return err
		}
		// The state follows the command name, which may hold spaces.
		if i := bytes.LastIndexByte(b, ')'); i < 0 || i+2 >= len(b) || b[i+2] != 'T' {
			return fmt.Errorf("%s not stopped yet", f)
		}
	}
	return nil
}
