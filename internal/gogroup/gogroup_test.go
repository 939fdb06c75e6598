package gogroup

import (
	"sync"
	"sync/atomic"
	"testing"
)

// Wait returns only after every goroutine started before Close has ended,
// and Go refuses (and does not run) what comes after Close.
func TestGoGroupCloseRefusesWaitWaits(t *testing.T) {
	var g Group
	release := make(chan struct{})
	var ended atomic.Int32
	for range 4 {
		if !g.Go(func() { <-release; ended.Add(1) }) {
			t.Fatal("Go refused before Close")
		}
	}
	g.Close()
	if !g.Closed() {
		t.Fatal("Closed false after Close")
	}
	ran := false
	if g.Go(func() { ran = true }) {
		t.Fatal("Go accepted after Close")
	}
	done := make(chan struct{})
	go func() { g.Wait(); close(done) }()
	select {
	case <-done:
		t.Fatal("Wait returned while goroutines were running")
	default:
	}
	close(release)
	<-done
	if n := ended.Load(); n != 4 {
		t.Fatalf("Wait returned with %d of 4 goroutines ended", n)
	}
	if ran {
		t.Fatal("a refused fn ran")
	}
}

// Go racing Close: every goroutine Go accepted has ended when Wait
// returns (an accepted one is counted before Close takes effect).
func TestGoGroupRaceWithClose(t *testing.T) {
	for range 200 {
		var g Group
		var accepted, ended atomic.Int32
		var callers sync.WaitGroup
		start := make(chan struct{})
		for range 8 {
			callers.Add(1)
			go func() {
				defer callers.Done()
				<-start
				if g.Go(func() { ended.Add(1) }) {
					accepted.Add(1)
				}
			}()
		}
		close(start)
		g.Close()
		g.Wait()
		atWait := ended.Load()
		callers.Wait()
		if a := accepted.Load(); atWait != a {
			t.Fatalf("Wait returned with %d of %d accepted goroutines ended", atWait, a)
		}
	}
}
