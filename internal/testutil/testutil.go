// Package testutil holds the helpers SmartGo's tests share. It is imported
// by test files only.
package testutil

import (
	"bytes"
	"errors"
	"sync"
	"testing"
	"time"
)

// The pause between two checks of a condition starts at pollFirst, so a
// test waits little past the moment a quick condition holds, and doubles
// up to pollMax, so a condition that takes long (a process starting, a
// failover) is not checked thousands of times on a busy machine.
const (
	pollFirst = time.Millisecond
	pollMax   = 20 * time.Millisecond
)

// Eventually calls fn until it returns nil and fails the test with fn's
// last error when timeout passes first. It is the one way SmartGo's tests
// wait for a condition: never a sleep.
func Eventually(t testing.TB, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	pause := pollFirst
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", timeout, err)
		}
		time.Sleep(pause)
		pause = min(2*pause, pollMax)
	}
}

// WaitFor is Eventually for a condition without an error to tell: it
// calls cond until it returns true, and fails the test naming what it
// waited for when timeout passes first.
func WaitFor(t testing.TB, timeout time.Duration, what string, cond func() bool) {
	t.Helper()
	if what == "" {
		what = "condition"
	}
	notYet := errors.New(what + " not reached")
	Eventually(t, timeout, func() error {
		if cond() {
			return nil
		}
		return notYet
	})
}

// LogBuffer is a bytes.Buffer that a logger's goroutines write to while
// the test reads it.
type LogBuffer struct {
	mu sync.Mutex
	b  bytes.Buffer
}

// Write appends p.
func (l *LogBuffer) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

// String returns what was written so far.
func (l *LogBuffer) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}
