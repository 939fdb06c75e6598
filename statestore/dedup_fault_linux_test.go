package statestore

import (
	"runtime/debug"
	"syscall"
	"testing"
)

// BenchmarkDedupCacheFill fills an empty response cache to its bound
// (10,000 replies, as a shard's after a busy minute) in memory the
// process has just returned to the kernel, as a new or long-idle
// shard's cache meets it, and reports the page faults it takes per fill
// (faults/op, from getrusage) next to the time.
func BenchmarkDedupCacheFill(b *testing.B) {
	const n = 10000
	ids := make([]dedupID, n)
	for i := range ids {
		ids[i] = dedupIDOf([]byte{byte(i), byte(i >> 8), 7})
	}
	r := Reply{Payload: []byte("+OK\r\n")}
	var faults int64
	b.ReportAllocs()
	for i := 0; i < b.N; i++ {
		b.StopTimer()
		debug.FreeOSMemory()
		var before, after syscall.Rusage
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &before); err != nil {
			b.Fatal(err)
		}
		b.StartTimer()
		c := newDedupCache(n)
		for j := range ids {
			t := c.tagOf(&ids[j])
			c.add(c.find(&ids[j], t), &ids[j], t, r, 1<<40)
		}
		b.StopTimer()
		if err := syscall.Getrusage(syscall.RUSAGE_SELF, &after); err != nil {
			b.Fatal(err)
		}
		if c.len() != n {
			b.Fatalf("%d entries", c.len())
		}
		faults += after.Minflt - before.Minflt
		b.StartTimer()
	}
	b.ReportMetric(float64(faults)/float64(b.N), "faults/op")
}
