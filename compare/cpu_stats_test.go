package main

import (
	"bufio"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"
	"sync/atomic"
	"syscall"
	"testing"
	"time"
)

// What a measured window did, beside its CPU time.
//
// COMPARE_CPU_STATS=<file> appends one JSON line per measured window to
// the file: the server, its CPU per message, and the server process's
// counters over the window (its read and write system calls from
// /proc/<pid>/io, its faults from /proc/<pid>/stat, its threads' context
// switches from /proc/<pid>/task/*/status), the machine's CPU time by
// kind over the window (/proc/stat: busy, idle, steal), the VM's free
// page reporting passes, the load average, each slice's CPU per message,
// and how fast a fixed piece of work ran right before and after the
// window (speedProbe). COMPARE_CPU_PERF=<dir> also records each window with perf
// (task-clock every 250 µs, call graphs) into <dir>/<server>-<n>.data.
// Both are for finding what makes one window cost more than another;
// neither changes what the benchmark reports.

// procCounters are a process's counters at one moment.
type procCounters struct {
	Syscr, Syscw      int64 // read(2)-like and write(2)-like system calls
	Minflt, Majflt    int64
	Vcsw, Ivcsw       int64 // summed over the threads alive
	Threads           int
	Busy, Idle, Steal int64 // the machine's, in clock ticks
	Passes, Reported  int64 // the VM's free page reporting: passes, KiB reported
}

func readProcCounters(pid int) procCounters {
	var c procCounters
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/io", pid)); err == nil {
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, ": ")
			n, _ := strconv.ParseInt(v, 10, 64)
			switch k {
			case "syscr":
				c.Syscr = n
			case "syscw":
				c.Syscw = n
			}
		}
	}
	if b, err := os.ReadFile(fmt.Sprintf("/proc/%d/stat", pid)); err == nil {
		s := string(b)
		if i := strings.LastIndexByte(s, ')'); i >= 0 {
			f := strings.Fields(s[i+1:]) // f[0] is field 3 (state)
			if len(f) > 9 {
				c.Minflt, _ = strconv.ParseInt(f[7], 10, 64)
				c.Majflt, _ = strconv.ParseInt(f[9], 10, 64)
			}
		}
	}
	tasks, _ := filepath.Glob(fmt.Sprintf("/proc/%d/task/*/status", pid))
	c.Threads = len(tasks)
	for _, t := range tasks {
		b, err := os.ReadFile(t)
		if err != nil {
			continue
		}
		for _, l := range strings.Split(string(b), "\n") {
			k, v, _ := strings.Cut(l, ":")
			n, _ := strconv.ParseInt(strings.TrimSpace(v), 10, 64)
			switch k {
			case "voluntary_ctxt_switches":
				c.Vcsw += n
			case "nonvoluntary_ctxt_switches":
				c.Ivcsw += n
			}
		}
	}
	if b, err := os.ReadFile("/proc/stat"); err == nil {
		l, _, _ := strings.Cut(string(b), "\n")
		f := strings.Fields(l)
		for i, v := range f[1:] {
			n, _ := strconv.ParseInt(v, 10, 64)
			switch i {
			case 3, 4: // idle, iowait
				c.Idle += n
			case 7:
				c.Steal += n
			case 8, 9: // guest time is in user already
			default:
				c.Busy += n
			}
		}
	}
	for _, p := range []struct {
		name string
		to   *int64
	}{{"passes", &c.Passes}, {"reported_kib", &c.Reported}} {
		if b, err := os.ReadFile("/sys/module/page_reporting/parameters/" + p.name); err == nil {
			*p.to, _ = strconv.ParseInt(strings.TrimSpace(string(b)), 10, 64)
		}
	}
	return c
}

// windowStats records one window when COMPARE_CPU_STATS or
// COMPARE_CPU_PERF is set: start it right before the window; the func
// it returns ends it.
func windowStats(b *testing.B, sys string, pid int) func(cpu, el time.Duration, n int64, slices []float64) {
	statsFile, perfDir := os.Getenv("COMPARE_CPU_STATS"), os.Getenv("COMPARE_CPU_PERF")
	if statsFile == "" && perfDir == "" {
		return func(time.Duration, time.Duration, int64, []float64) {}
	}
	var perf *exec.Cmd
	var perfOut string
	if perfDir != "" {
		perfOut = filepath.Join(perfDir, fmt.Sprintf("%s-%d-%d.data", sys, os.Getpid(), windowSeq.Add(1)))
		perf = exec.Command("perf", "record", "-q", "-g", "-e", "task-clock", "-c", "250000", "-p", strconv.Itoa(pid), "-o", perfOut)
		if err := perf.Start(); err != nil {
			b.Logf("perf: %v", err)
			perf = nil
		} else {
			time.Sleep(300 * time.Millisecond) // perf attaches
		}
	}
	probe0 := speedProbe()
	c0 := readProcCounters(pid)
	return func(cpu, el time.Duration, n int64, slices []float64) {
		c1 := readProcCounters(pid)
		probe1 := speedProbe()
		if perf != nil {
			_ = perf.Process.Signal(syscall.SIGINT)
			_ = perf.Wait()
		}
		if statsFile == "" {
			return
		}
		load, _ := os.ReadFile("/proc/loadavg")
		per := func(a, b int64) float64 { return float64(b-a) / float64(n) }
		rec := map[string]any{
			"time": time.Now().UTC().Format("15:04:05"), "sys": sys, "n": n,
			"cpu_us": float64(cpu) / float64(time.Microsecond) / float64(n),
			"el_s":   el.Seconds(),
			"reads":  per(c0.Syscr, c1.Syscr), "writes": per(c0.Syscw, c1.Syscw),
			"minflt": c1.Minflt - c0.Minflt, "majflt": c1.Majflt - c0.Majflt,
			"vcsw": per(c0.Vcsw, c1.Vcsw), "ivcsw": per(c0.Ivcsw, c1.Ivcsw),
			"threads": c1.Threads, "probe0_ns": probe0, "probe1_ns": probe1,
			"passes": c1.Passes - c0.Passes, "reported_mib": (c1.Reported - c0.Reported) >> 10,
			"busy": c1.Busy - c0.Busy, "idle": c1.Idle - c0.Idle, "steal": c1.Steal - c0.Steal,
			"slices": slices, "load": strings.Join(strings.Fields(string(load))[:1], ""), "perf": perfOut,
		}
		line, _ := json.Marshal(rec)
		f, err := os.OpenFile(statsFile, os.O_APPEND|os.O_CREATE|os.O_WRONLY, 0o644)
		if err != nil {
			b.Logf("stats: %v", err)
			return
		}
		w := bufio.NewWriter(f)
		_, _ = w.Write(append(line, '\n'))
		_ = w.Flush()
		_ = f.Close()
	}
}

var windowSeq atomic.Int64

// speedProbe runs a fixed piece of work (sums over a 256 KiB buffer, in
// and out of the caches the way a server's code is) on one thread and
// returns its thread CPU time in ns per pass: how fast this CPU runs
// just now, beside the window.
func speedProbe() float64 {
	runtime.LockOSThread()
	defer runtime.UnlockOSThread()
	buf := make([]uint64, 32<<10)
	for i := range buf {
		buf[i] = uint64(i) * 0x9E3779B97F4A7C15
	}
	const passes = 400
	t0 := threadCPU()
	var sum uint64
	for p := 0; p < passes; p++ {
		for i := range buf {
			sum += buf[i] ^ (sum >> 7)
			buf[i] = sum
		}
	}
	probeSink.Store(sum)
	return float64(threadCPU()-t0) / passes
}

var probeSink atomic.Uint64

// threadCPU is the calling thread's run time in ns (/proc/thread-self/schedstat).
func threadCPU() int64 {
	b, err := os.ReadFile("/proc/thread-self/schedstat")
	if err != nil {
		return 0
	}
	f := strings.Fields(string(b))
	if len(f) == 0 {
		return 0
	}
	n, _ := strconv.ParseInt(f[0], 10, 64)
	return n
}
