package testutil

import (
	"os"
	"runtime"
	"syscall"
	"testing"
	"time"
)

// rusageCPU is the calling process's user + system time from getrusage.
func rusageCPU(t *testing.T) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		t.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// burn spins until getrusage says the process used d more CPU.
func burn(t *testing.T, d time.Duration) {
	end := rusageCPU(t) + d
	for x := 0; rusageCPU(t) < end; x++ {
		for i := 0; i < 100000; i++ {
			x ^= i
		}
	}
}

// ProcessCPU's difference follows the process's CPU time to far better
// than the 10 ms ticks of /proc/<pid>/stat. The samples take CPU time
// themselves (a file per thread, more under the race detector and on a
// loaded machine), and each thread is read at its own moment of the
// call: the measure is compared with getrusage's readings just inside
// and just outside the two calls. Compared with those outside alone, it
// came 2.4 ms short of them once under load (the calls' own time).
func TestProcessCPUFollowsWork(t *testing.T) {
	for _, d := range []time.Duration{15 * time.Millisecond, 45 * time.Millisecond} {
		outer0 := rusageCPU(t)
		s0, err := ProcessCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		inner0 := rusageCPU(t)
		burn(t, d)
		inner1 := rusageCPU(t)
		s1, err := ProcessCPU(os.Getpid())
		if err != nil {
			t.Fatal(err)
		}
		outer1 := rusageCPU(t)
		lo, hi := inner1-inner0, outer1-outer0
		got := s1.Since(s0)
		if s0.threads == nil {
			t.Logf("no per-thread schedstat here: ticks only")
			if got < lo-2*clockTick || got > hi+2*clockTick {
				t.Fatalf("burned %v to %v, measured %v", lo, hi, got)
			}
			continue
		}
		if got < lo-2*time.Millisecond || got > hi+2*time.Millisecond {
			t.Fatalf("burned %v to %v (getrusage), measured %v (ticks %v)", lo, hi, got, s1.ticks-s0.ticks)
		}
	}
}

// A thread that exits between two samples takes its time out of the
// threads' sum; Since then answers from the ticks, which keep it.
func TestProcessCPUThreadExit(t *testing.T) {
	s0, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	// A goroutine that ends locked to its thread ends the thread, unless
	// the thread is the process's first (which the runtime keeps): that
	// one is left, and another goroutine tries.
	tid := 0
	for tid == 0 {
		done := make(chan int)
		go func() {
			runtime.LockOSThread() // not unlocked: the thread exits with the goroutine
			if syscall.Gettid() == os.Getpid() {
				runtime.UnlockOSThread()
				done <- 0
				return
			}
			burn(t, 60*time.Millisecond)
			done <- syscall.Gettid()
		}()
		tid = <-done
	}
	WaitFor(t, 10*time.Second, "the locked thread's exit", func() bool {
		_, err := os.Stat("/proc/self/task/" + itoa(tid))
		return os.IsNotExist(err)
	})
	s1, err := ProcessCPU(os.Getpid())
	if err != nil {
		t.Fatal(err)
	}
	if got := s1.Since(s0); got < 60*time.Millisecond-2*clockTick {
		t.Fatalf("measured %v across a thread that burned 60 ms and exited", got)
	}
}

func itoa(n int) string {
	var b [20]byte
	i := len(b)
	for {
		i--
		b[i] = byte('0' + n%10)
		n /= 10
		if n == 0 {
			return string(b[i:])
		}
	}
}
