package store

import (
	"context"
	"errors"
	"testing"
	"time"
)

// WaitDispatched returns once the dispatcher reaches the offset (woken
// by it, not by a poll), ctx's error when ctx ends first, and ErrClosed
// when the store closes while it waits.
func TestStoreWaitDispatched(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	putN(t, s, 3, "a")
	if err := s.WaitDispatched(context.Background(), s.MaxPhysicalOffset()); err != nil {
		t.Fatal(err)
	}
	// Held behind the end by a dispatch limit.
	s.SetDispatchLimit(s.MaxPhysicalOffset())
	putN(t, s, 3, "b")
	end := s.MaxPhysicalOffset()
	ctx, cancel := context.WithTimeout(context.Background(), 50*time.Millisecond)
	defer cancel()
	if err := s.WaitDispatched(ctx, end); !errors.Is(err, context.DeadlineExceeded) {
		t.Fatalf("held dispatcher: %v, want the context's error", err)
	}
	// Released: the waiter returns.
	done := make(chan error, 1)
	go func() { done <- s.WaitDispatched(context.Background(), end) }()
	s.SetDispatchLimit(end + 1<<30)
	select {
	case err := <-done:
		if err != nil || s.DispatchedPhysicalOffset() < end {
			t.Fatalf("released: %v, dispatched %d of %d", err, s.DispatchedPhysicalOffset(), end)
		}
	case <-time.After(catchUpWait):
		t.Fatal("WaitDispatched not woken by the dispatcher")
	}
	// Closed while waiting for what will never come.
	go func() { done <- s.WaitDispatched(context.Background(), end+1<<40) }()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	select {
	case err := <-done:
		if !errors.Is(err, ErrClosed) {
			t.Fatalf("store closed: %v, want ErrClosed", err)
		}
	case <-time.After(catchUpWait):
		t.Fatal("WaitDispatched not ended by Close")
	}
}
