package testutil

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"os/exec"
	"syscall"
	"testing"
	"time"
)

// MountTmpfs mounts a tmpfs of size (mount's syntax: "64m") at a new temp
// dir and unmounts it at cleanup, which runs after the cleanups the test
// registers later (a process using it stops first). It skips the test
// where mounting is not allowed (not root).
func MountTmpfs(t testing.TB, size string) string {
	t.Helper()
	dir := t.TempDir()
	if out, err := exec.Command("mount", "-t", "tmpfs", "-o", "size="+size, "tmpfs", dir).CombinedOutput(); err != nil {
		t.Skipf("cannot mount a tmpfs (needs root): %v %s", err, out)
	}
	t.Cleanup(func() {
		// Lazily (-l): a file a process still holds there, say one
		// started by a test that failed half way, must not leave the
		// mount behind.
		if out, err := exec.Command("umount", "-l", dir).CombinedOutput(); err != nil {
			t.Errorf("umount %s: %v %s", dir, err, out)
		}
	})
	return dir
}

// FillDisk writes the file at path until its file system has no page
// left (ENOSPC), as another process filling the disk would.
func FillDisk(t testing.TB, path string) {
	t.Helper()
	f, err := os.Create(path)
	if err != nil {
		t.Fatal(err)
	}
	defer f.Close()
	buf := make([]byte, 64<<10)
	for n := len(buf); n >= 4096; n /= 16 {
		for {
			if _, err := f.Write(buf[:n]); err != nil {
				if !errors.Is(err, syscall.ENOSPC) {
					t.Fatalf("filling the disk: %v", err)
				}
				break
			}
		}
	}
}

// RemoveOnceLogged removes the file at victim once the file at log (a
// process's log, which may not exist yet) contains text, within timeout:
// to free a full disk at a chosen point of a process's start. The
// channel gets the outcome.
func RemoveOnceLogged(log, text, victim string, timeout time.Duration) <-chan error {
	done := make(chan error, 1)
	go func() {
		deadline := time.Now().Add(timeout)
		for {
			if data, err := os.ReadFile(log); err == nil && bytes.Contains(data, []byte(text)) {
				done <- os.Remove(victim)
				return
			}
			if time.Now().After(deadline) {
				done <- fmt.Errorf("%q not in %s within %v", text, log, timeout)
				return
			}
			time.Sleep(pollMax)
		}
	}()
	return done
}
