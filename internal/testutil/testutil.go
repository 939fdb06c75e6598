// Package testutil holds the helpers SmartGo's tests share. It is imported
// by test files only.
package testutil

import (
	"testing"
	"time"
)

// pollEvery is the pause between two checks of a condition: short enough
// that a test waits little past the moment the condition holds, long
// enough that polling costs nothing measurable beside the code under test.
const pollEvery = 2 * time.Millisecond

// Eventually calls fn until it returns nil and fails the test with fn's
// last error when timeout passes first. It is the one way SmartGo's tests
// wait for a condition: never a sleep.
func Eventually(t testing.TB, timeout time.Duration, fn func() error) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		err := fn()
		if err == nil {
			return
		}
		if time.Now().After(deadline) {
			t.Fatalf("condition not met after %v: %v", timeout, err)
		}
		time.Sleep(pollEvery)
	}
}
