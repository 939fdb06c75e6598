package main

import (
	"os"
	"strconv"
	"testing"
)

// Memory the host backs, for every server's page cache alike.
//
// The development VM reports free memory to its host: free blocks of
// 2 MiB and more (order 9: /sys/module/page_reporting/parameters/
// page_reporting_order reads 9, as the command line's
// page_reporting.page_reporting_order=11 is past the kernel's largest
// order, 10, and is refused) lose their backing once a reporting pass
// takes them (this kernel's passes: the same directory's min_free_ms and
// max_waiting_mib), and the next write to such a page faults on the
// host, charged to the guest instruction that writes it. A server whose page
// cache grows into such memory pays for it in the kernel's copy of its
// file writes: perf of the SmartGo server in make compare-cpu's runs put
// 25-29 % of its samples in copy_folio_from_iter_atomic, against 3-5 %
// when the memory had just been freed. JetStream's server did not show it
// (its copy 1.0-1.5 %, ext4_da_write_begin 6-10 %, either way): its Go
// runtime returns the heap its garbage frees to the kernel all along,
// and its page cache grows into those pages, backed and just freed.
// SmartGo's broker allocates nothing per message, so its page cache takes
// the memory the host took back, and how much of that there was decided
// up to a quarter of its CPU per message from one run to the next.
//
// So right before each slice of a server's messages (cpuRound),
// writeBallast writes a scratch file of about twice what the server
// writes in the slice and removes it: every server's page cache then
// grows into pages just freed, whatever the machine did before, in each
// slice (a reporting pass can run between two slices: the machine's
// other work frees memory too). The file's pages
// are dropped unwritten (removed before writeback) and cost only the
// benchmark process's time, which is not measured.

// ballastPerMsg is the scratch bytes per measured message: a 1 KiB body
// is about 1.3 KiB in SmartGo's log, its consume queue and index, and in
// JetStream's message blocks; twice that.
const ballastPerMsg = 3 << 10

// writeBallast writes the scratch file for a slice of n messages
// (COMPARE_CPU_BALLAST_MB sets its size a slice, 0 none) and returns the
// func that removes it. A ballast that cannot be written is left out, with a
// note: the benchmark runs without it.
func writeBallast(b *testing.B, n int64) func() {
	size := min(n*ballastPerMsg, 1<<30)
	if v := os.Getenv("COMPARE_CPU_BALLAST_MB"); v != "" {
		mb, err := strconv.Atoi(v)
		if err != nil || mb < 0 {
			b.Fatalf("COMPARE_CPU_BALLAST_MB=%q: want a number of MiB", v)
		}
		size = int64(mb) << 20
	}
	if size < 8<<20 {
		return func() {} // a short window (b.N's first run) needs none
	}
	f, err := os.CreateTemp("", "compare-cpu-ballast")
	if err != nil {
		b.Logf("no ballast: %v", err)
		return func() {}
	}
	remove := func() {
		_ = f.Close()
		_ = os.Remove(f.Name())
	}
	b.Cleanup(remove) // when the benchmark stops early
	buf := make([]byte, 1<<20)
	for i := range buf {
		buf[i] = byte(i)
	}
	for off := int64(0); off < size; off += int64(len(buf)) {
		if _, err := f.Write(buf); err != nil {
			b.Logf("ballast cut at %d MiB: %v", off>>20, err)
			break
		}
	}
	return remove
}
