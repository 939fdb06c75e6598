package statestore

import (
	"bufio"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"
)

// SMARTGO_SS_BENCH_PERF=<dir> has BenchmarkStateStoreAzureCPU count, with
// perf(1), what the kernel does for each server in each phase: one
// perf stat per server (smartgo, base, redis), phase (SET, GET) and
// iteration, written to <dir>/<server>-<iteration>-<verb>.txt, with the
// events perfPhaseEvents names (every system call by kind, context
// switches, page faults, task-clock). With SMARTGO_SS_BENCH_PERF_RECORD=1
// it is a perf record -g of the phase instead (<...>.data), for perf
// report. Each perf is attached before the phase starts and counts only
// between the phase's first and last request (perf's control fifo, with
// its acknowledgement: no sleep), so the counts are per phase and divide
// by azureOps. The tracepoints make system calls dearer, Redis's most:
// the CPU figures of such a run are not the target's.
const perfPhaseEvents = "syscalls:sys_enter_*,context-switches,cpu-migrations,page-faults,task-clock"

// perfPhaseWait bounds each exchange with perf (its start, an enable or
// disable acknowledged, its exit).
const perfPhaseWait = 30 * time.Second

// perfPhase starts counting (or recording) process pid as
// SMARTGO_SS_BENCH_PERF asks, under the name name; stop ends it and
// waits for perf to write its file. Without SMARTGO_SS_BENCH_PERF it does
// nothing.
func perfPhase(b *testing.B, name string, pid int) (stop func()) {
	b.Helper()
	dir := os.Getenv("SMARTGO_SS_BENCH_PERF")
	if dir == "" {
		return func() {}
	}
	tmp := b.TempDir()
	ctl, ack := filepath.Join(tmp, "ctl"), filepath.Join(tmp, "ack")
	for _, f := range []string{ctl, ack} {
		if err := syscall.Mkfifo(f, 0o600); err != nil {
			b.Fatalf("perf control fifo %s: %v", f, err)
		}
	}
	args := []string{"stat", "-e", perfPhaseEvents, "-o", filepath.Join(dir, name+".txt")}
	if os.Getenv("SMARTGO_SS_BENCH_PERF_RECORD") != "" {
		args = []string{"record", "-g", "-F", "4999", "-o", filepath.Join(dir, name+".data")}
	}
	args = append(args, "-p", strconv.Itoa(pid), "-D", "-1", "--control", "fifo:"+ctl+","+ack)
	cmd := exec.Command("perf", args...)
	var stderr strings.Builder
	cmd.Stderr = &stderr
	if err := cmd.Start(); err != nil {
		b.Fatalf("perf: %v", err)
	}
	exited := make(chan struct{}) // closed when perf has exited
	var waitErr error
	go func() {
		waitErr = cmd.Wait()
		close(exited)
	}()
	fail := func(format string, a ...any) {
		_ = cmd.Process.Kill()
		<-exited
		b.Fatalf("perf %s: %s (%s)", strings.Join(args, " "), fmt.Sprintf(format, a...), stderr.String())
	}
	// Opened read-write, neither open waits for perf to open its end.
	ctlf, err := os.OpenFile(ctl, os.O_RDWR, 0)
	if err != nil {
		fail("%v", err)
	}
	ackf, err := os.OpenFile(ack, os.O_RDWR, 0)
	if err != nil {
		ctlf.Close()
		fail("%v", err)
	}
	acks := make(chan string, 2)
	readerDone := make(chan struct{})
	go func() {
		defer close(readerDone)
		r := bufio.NewReader(ackf)
		for {
			line, err := r.ReadString('\n')
			if err != nil {
				close(acks)
				return
			}
			acks <- strings.Trim(line, "\x00\n ") // perf answers "ack\n\x00"
		}
	}()
	command := func(c string) {
		if _, err := ctlf.WriteString(c + "\n"); err != nil {
			fail("%s: %v", c, err)
		}
		select {
		case a := <-acks:
			if a != "ack" {
				fail("%s: answered %q", c, a)
			}
		case <-exited:
			fail("%s: perf exited: %v", c, waitErr)
		case <-time.After(perfPhaseWait):
			fail("%s: no acknowledgement within %v", c, perfPhaseWait)
		}
	}
	command("enable")
	return func() {
		command("disable")
		_ = cmd.Process.Signal(os.Interrupt)
		select {
		case <-exited:
		case <-time.After(perfPhaseWait):
			fail("no exit within %v of its interrupt", perfPhaseWait)
		}
		ctlf.Close()
		ackf.Close() // ends the reader of acks
		<-readerDone
		if waitErr != nil && !strings.Contains(waitErr.Error(), "interrupt") {
			b.Fatalf("perf %s: %v (%s)", strings.Join(args, " "), waitErr, stderr.String())
		}
	}
}
