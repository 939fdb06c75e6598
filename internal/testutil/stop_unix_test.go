//go:build unix

package testutil

import (
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// StopProcess returns once the process is stopped, and it runs again
// after SIGCONT.
func TestStopProcess(t *testing.T) {
	cmd := exec.Command("sleep", "60")
	if err := cmd.Start(); err != nil {
		t.Skip("no sleep command:", err)
	}
	t.Cleanup(func() { _ = cmd.Process.Kill(); _ = cmd.Wait() })
	StopProcess(t, cmd.Process)
	if err := allStopped(cmd.Process.Pid); err != nil {
		t.Fatalf("after StopProcess: %v", err)
	}
	if err := cmd.Process.Signal(syscall.SIGCONT); err != nil {
		t.Fatal(err)
	}
	WaitFor(t, 10*time.Second, "the process running again", func() bool { return allStopped(cmd.Process.Pid) != nil })
}
