package store

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkStoreIndexVerify measures the index file check (verifyLocked)
// on a file of the default size (5,000,000 slots) holding n entries, from
// memory: ns per entry and ms per file.
func BenchmarkStoreIndexVerify(b *testing.B) {
	for _, n := range []int{1 << 20, 4 << 20} {
		b.Run(fmt.Sprint(n), func(b *testing.B) {
			const slots = 5_000_000
			f := &indexFile{mf: &mappedFile{data: make([]byte, indexFileSize(slots, n+1))}, slots: slots, entries: n + 1, count: 1}
			_ = f.openHead(true)
			key := make([]byte, 0, 32)
			for i := range n {
				f.pend = f.pend[:0]
				key = fmt.Appendf(key[:0], "TopicTest#key-%d", i)
				if err := f.addLocked(indexHash(key), int64(i)*300, 1_700_000_000_000+int64(i)); err != nil {
					b.Fatal(err)
				}
				copy(f.mf.data[f.entryPos(int32(i+1)):], f.pend)
			}
			copy(f.mf.data, f.head)
			f.head, f.pend = nil, nil
			b.ResetTimer()
			start := time.Now()
			for range b.N {
				if why := f.verifyLocked(); why != "" {
					b.Fatal(why)
				}
			}
			el := time.Since(start)
			b.ReportMetric(float64(el.Nanoseconds())/float64(b.N)/float64(n), "ns/entry")
			b.ReportMetric(float64(el.Milliseconds())/float64(b.N), "ms/file")
		})
	}
}

// BenchmarkStoreOpenIndexed measures Open (after a clean Close) of a store
// whose index uses the default file size and holds 2 keys for each of
// 200,000 records: the start-up cost of checking the newest index file.
func BenchmarkStoreOpenIndexed(b *testing.B) {
	root := b.TempDir()
	mut := func(o *Options) {
		o.IndexSlots, o.IndexEntries = 5_000_000, 20_000_000
		o.SegmentSize = 64 << 20
	}
	s := openTest(b, root, mut)
	for i := range 200_000 {
		mustPut(b, s, msgSpec{topic: "T", body: "body", keys: fmt.Sprint("key", i), uniq: fmt.Sprint("U", i)})
	}
	waitIndexed(b, s)
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
	o := testOptions(root)
	mut(&o)
	b.ResetTimer()
	var took time.Duration
	for range b.N {
		start := time.Now()
		s, err := Open(o)
		if err != nil {
			b.Fatal(err)
		}
		took += time.Since(start)
		if err := s.Close(); err != nil {
			b.Fatal(err)
		}
	}
	b.ReportMetric(float64(took.Milliseconds())/float64(b.N), "ms/open")
}
