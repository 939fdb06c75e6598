package testutil

import (
	"errors"
	"fmt"
	"os"
	"strconv"
	"strings"
	"time"
)

// CPUSample is what a process had used of the CPU at one moment, read by
// ProcessCPU; CPUSample.Since gives the CPU used between two samples.
//
// Two sources are read. /proc/<pid>/stat gives the process's user and
// system time, every thread's, the exited ones' too, but in USER_HZ
// ticks of 10 ms: 20,000 requests at 5 µs each are 10 ticks, so that
// reading alone is ±10 %. /proc/<pid>/task/<tid>/schedstat gives each
// live thread's run time in nanoseconds (its first field,
// sum_exec_runtime, the time the scheduler ran it: user and system), so
// the sum over threads is exact while no thread exits between two
// samples. Since uses the threads' sum when every thread of the earlier
// sample is still there and the ticks agree with it within a tick, and
// the ticks otherwise.
type CPUSample struct {
	ticks   time.Duration         // utime + stime from /proc/<pid>/stat
	threads map[int]time.Duration // tid -> sum_exec_runtime; nil when unreadable
}

// clockTick is USER_HZ's period, the unit of /proc/<pid>/stat's times (100
// Hz on every Linux architecture Go supports).
const clockTick = 10 * time.Millisecond

// ProcessCPU samples the CPU time process pid has used.
func ProcessCPU(pid int) (CPUSample, error) {
	ticks, err := statTicks(pid)
	if err != nil {
		return CPUSample{}, err
	}
	return CPUSample{ticks: ticks, threads: threadTimes(pid)}, nil
}

// Since returns the CPU time the process used from earlier to s.
func (s CPUSample) Since(earlier CPUSample) time.Duration {
	byTicks := s.ticks - earlier.ticks
	if s.threads == nil || earlier.threads == nil {
		return byTicks
	}
	var sum time.Duration
	for tid, t := range s.threads {
		sum += t - earlier.threads[tid]
	}
	for tid := range earlier.threads {
		if _, ok := s.threads[tid]; !ok {
			return byTicks // a thread exited: its time is only in the ticks
		}
	}
	// A thread that started and exited between the samples is in the
	// ticks alone. The ticks' utime and stime are each rounded down, so
	// a difference of two readings is up to two ticks off.
	if byTicks > sum+2*clockTick {
		return byTicks
	}
	return sum
}

// statTicks reads utime + stime from /proc/<pid>/stat.
func statTicks(pid int) (time.Duration, error) {
	b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid))
	if err != nil {
		return 0, err
	}
	// Fields after the command name (in parentheses, which may hold
	// spaces): state is field 3, utime 14, stime 15.
	s := string(b)
	i := strings.LastIndexByte(s, ')')
	if i < 0 {
		return 0, fmt.Errorf("bad /proc/%d/stat: %q", pid, s)
	}
	f := strings.Fields(s[i+1:])
	if len(f) < 13 {
		return 0, fmt.Errorf("short /proc/%d/stat: %q", pid, s)
	}
	ut, err1 := strconv.ParseInt(f[11], 10, 64)
	st, err2 := strconv.ParseInt(f[12], 10, 64)
	if err := errors.Join(err1, err2); err != nil {
		return 0, fmt.Errorf("/proc/%d/stat: %w", pid, err)
	}
	return time.Duration(ut+st) * clockTick, nil
}

// threadTimes reads each thread's sum_exec_runtime; nil when the task
// directory or any thread's schedstat cannot be read (a thread that exits
// while it is read makes the sample ticks-only).
func threadTimes(pid int) map[int]time.Duration {
	dir := fmt.Sprintf("/proc/%d/task", pid)
	ents, err := os.ReadDir(dir)
	if err != nil {
		return nil
	}
	m := make(map[int]time.Duration, len(ents))
	for _, e := range ents {
		tid, err := strconv.Atoi(e.Name())
		if err != nil {
			continue
		}
		b, err := os.ReadFile(dir + "/" + e.Name() + "/schedstat")
		if err != nil {
			return nil
		}
		f := strings.Fields(string(b))
		if len(f) < 1 {
			return nil
		}
		ns, err := strconv.ParseInt(f[0], 10, 64)
		if err != nil {
			return nil
		}
		m[tid] = time.Duration(ns)
	}
	return m
}
