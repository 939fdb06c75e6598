package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"math/rand/v2"
	"net/netip"
	"os"
	"path/filepath"
	"slices"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/store/record"
	"github.com/smartgo/smartgo/store/vfs"
)

// Benchmarks measure the store next to a raw baseline in the same run:
//
//	BenchmarkBaselineWrite        plain sequential write(2) of the same record bytes
//	BenchmarkStorePut             async-flush puts, 1 and 8 concurrent putters
//	BenchmarkBaselineSyncEach     write(2) + fdatasync per message (appending)
//	BenchmarkBaselineSyncEachPrealloc  the same, overwriting a preallocated, zeroed, synced file
//	BenchmarkStorePutSync         sync-flush puts with 64 concurrent putters (group commit)
//	BenchmarkStoreScan            queue scan, warm and cold page cache
//	BenchmarkStoreReadCost        one random read as the queue grows (must stay flat)

func benchOptions(root string) Options {
	o := DefaultOptions(root)
	o.SegmentSize = 256 << 20
	o.CQEntriesPerFile = 300_000
	o.IndexSlots = 1 << 16
	o.IndexEntries = 1 << 18
	o.DiskUsage = func(string) (float64, error) { return 0.1, nil }
	return o
}

// benchRecord is the encoded record of benchMsg(size) as the store would
// write it (with a store host): the bytes the raw baselines write. It fails
// the benchmark rather than hand a baseline an empty slice.
func benchRecord(b *testing.B, size int) []byte {
	b.Helper()
	m := benchMsg(size)
	m.StoreHost = netip.MustParseAddrPort("127.0.0.1:10911")
	rec := make([]byte, record.SealedSize(m))
	if n, err := record.EncodeSealedTo(rec, m); err != nil || n != len(rec) {
		b.Fatalf("bench record of %d bytes: %d bytes, %v", size, n, err)
	}
	return rec
}

func benchMsg(size int) *record.Message {
	m := newMsg(msgSpec{topic: "BenchTopic", body: "", tags: "TagA"})
	m.Body = []byte(strings.Repeat("b", max(1, size-record.SealedSize(m))))
	return m
}

func reportRate(b *testing.B, start time.Time, n int, bytesPer int) {
	b.StopTimer() // closing (final flush) is not part of the measurement
	el := time.Since(start).Seconds()
	b.ReportMetric(float64(n)/el, "msgs/s")
	_ = bytesPer
}

func BenchmarkBaselineWrite(b *testing.B) {
	for _, size := range []int{128, 1024} {
		b.Run(fmt.Sprintf("size=%d", size), func(b *testing.B) {
			rec := benchRecord(b, size)
			f, err := os.Create(filepath.Join(b.TempDir(), "baseline"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			b.SetBytes(int64(len(rec)))
			b.ReportAllocs()
			b.ResetTimer()
			start := time.Now()
			for i := 0; i < b.N; i++ {
				if _, err := f.Write(rec); err != nil {
					b.Fatal(err)
				}
			}
			reportRate(b, start, b.N, len(rec))
		})
	}
}

// asyncModes are the FlushAsync write modes the put benchmarks compare.
var asyncModes = []AsyncWriteMode{AsyncWriteHybrid, AsyncWritePwrite}

// BenchmarkStorePut measures FlushAsync puts of one record: through the
// mapping (AsyncWriteHybrid, the default, and AsyncWriteMapped) or with a
// pwrite each (AsyncWritePwrite).
func BenchmarkStorePut(b *testing.B) {
	for _, size := range []int{128, 1024} {
		for _, putters := range []int{1, 8} {
			for _, mode := range asyncModes {
				b.Run(fmt.Sprintf("size=%d/putters=%d/writes=%v", size, putters, mode), func(b *testing.B) {
					o := benchOptions(b.TempDir())
					o.AsyncWrites = mode
					benchStorePut(b, o, size, putters)
				})
			}
		}
	}
}

// BenchmarkStorePutBatch measures FlushAsync puts of 32-record batches (a
// SEND_BATCH request), written with one pwrite (AsyncWriteHybrid, the
// default) or through the mapping (AsyncWriteMapped).
func BenchmarkStorePutBatch(b *testing.B) {
	const n = 32
	for _, size := range []int{128, 1024} {
		for _, mode := range []AsyncWriteMode{AsyncWriteHybrid, AsyncWriteMapped} {
			b.Run(fmt.Sprintf("size=%d/batch=%d/writes=%v", size, n, mode), func(b *testing.B) {
				o := benchOptions(b.TempDir())
				o.AsyncWrites = mode
				s, err := Open(o)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				tmpl := benchMsg(size)
				items := make([]record.BatchItem, n)
				for i := range items {
					items[i] = record.BatchItem{Body: tmpl.Body, Properties: []byte(tmpl.Properties)}
				}
				tmpl.Properties = ""
				ctx := context.Background()
				res, err := s.PutBatch(ctx, tmpl, items)
				if err != nil || res.MsgCount != n {
					b.Fatalf("PutBatch: %+v %v", res, err)
				}
				b.SetBytes(int64(res.WroteBytes))
				b.ReportAllocs()
				b.ResetTimer()
				start := time.Now()
				for i := 0; i < b.N; i++ {
					if _, err := s.PutBatch(ctx, tmpl, items); err != nil {
						b.Fatal(err)
					}
				}
				reportRate(b, start, b.N*n, res.WroteBytes/n)
			})
		}
	}
}

func benchStorePut(b *testing.B, o Options, size, putters int) {
	s, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := benchMsg(size)
	n := record.SealedSize(m)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	ctx := context.Background()
	b.ResetTimer()
	start := time.Now()
	if putters == 1 {
		for i := 0; i < b.N; i++ {
			if _, err := s.Put(ctx, m); err != nil {
				b.Fatal(err)
			}
		}
	} else {
		b.SetParallelism((putters + 1) / 2)
		b.RunParallel(func(pb *testing.PB) {
			mm := *m
			for pb.Next() {
				if _, err := s.Put(ctx, &mm); err != nil {
					b.Error(err)
					return
				}
			}
		})
	}
	reportRate(b, start, b.N, n)
}

func BenchmarkBaselineSyncEach(b *testing.B) {
	rec := benchRecord(b, 128)
	f, err := os.Create(filepath.Join(b.TempDir(), "baseline"))
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	b.SetBytes(int64(len(rec)))
	b.ResetTimer()
	start := time.Now()
	for i := 0; i < b.N; i++ {
		if _, err := f.Write(rec); err != nil {
			b.Fatal(err)
		}
		if err := fdatasync(int(f.Fd())); err != nil {
			b.Fatal(err)
		}
	}
	reportRate(b, start, b.N, len(rec))
}

// BenchmarkBaselineSyncEachPrealloc is write(2) + fdatasync per message
// overwriting a preallocated, zero-filled, synced file: the same kind of
// file the store's FlushSync segments are (BenchmarkBaselineSyncEach
// appends and so also pays for the size change in every sync).
func BenchmarkBaselineSyncEachPrealloc(b *testing.B) {
	rec := benchRecord(b, 128)
	b.SetBytes(int64(len(rec)))
	el := syncWrites(b, rec)
	b.ReportMetric(float64(b.N)/el.Seconds(), "msgs/s")
}

// syncWrites writes batch and fdatasyncs b.N times, overwriting a
// preallocated, zero-filled, synced 64 MiB file (the kind of file the
// store's FlushSync segments are), and returns the time the writes took
// (the benchmark timer is reset after the setup too).
func syncWrites(b *testing.B, batch []byte) time.Duration {
	const size = 64 << 20
	f, err := vfs.Default.OpenFile(filepath.Join(b.TempDir(), "baseline"), os.O_RDWR|os.O_CREATE|os.O_TRUNC, 0o644)
	if err != nil {
		b.Fatal(err)
	}
	defer f.Close()
	if err := f.Allocate(0, size); err != nil && !errors.Is(err, vfs.ErrNotSupported) {
		b.Fatal(err)
	}
	if err := writeZeros(f, 0, size, true); err != nil {
		b.Fatal(err)
	}
	b.ResetTimer()
	start := time.Now()
	off := int64(0)
	for i := 0; i < b.N; i++ {
		if off+int64(len(batch)) > size {
			off = 0
		}
		if _, err := f.WriteAt(batch, off); err != nil {
			b.Fatal(err)
		}
		off += int64(len(batch))
		if err := f.Datasync(); err != nil {
			b.Fatal(err)
		}
	}
	return time.Since(start)
}

func BenchmarkStorePutSync(b *testing.B) {
	o := benchOptions(b.TempDir())
	o.FlushMode = FlushSync
	s, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	m := benchMsg(128)
	b.SetBytes(int64(record.SealedSize(m)))
	b.ReportAllocs()
	flushes := s.Stats().Flushes
	b.SetParallelism(32) // 64 putters on 2 CPUs
	b.ResetTimer()
	start := time.Now()
	b.RunParallel(func(pb *testing.PB) {
		mm := *m
		for pb.Next() {
			res, err := s.Put(context.Background(), &mm)
			if err != nil || res.Status != PutOK {
				b.Error(res.Status, err)
				return
			}
		}
	})
	reportRate(b, start, b.N, record.SealedSize(m))
	st := s.Stats()
	b.ReportMetric(float64(b.N)/float64(max(1, st.Flushes-flushes)), "msgs/fsync")
	b.ReportMetric(float64(st.FlushTime.Microseconds())/float64(max(1, st.Flushes)), "µs/fsync")
}

var scanSink byte

func scanOptions(root string) Options {
	o := benchOptions(root)
	o.SegmentSize = 16 << 20
	return o
}

// fillQueue writes n messages of size bytes to one queue.
func fillQueue(b *testing.B, root string, n, size int) {
	fillQueueOpts(b, benchOptions(root), n, size)
}

func fillQueueOpts(b *testing.B, o Options, n, size int) {
	s, err := Open(o)
	if err != nil {
		b.Fatal(err)
	}
	m := benchMsg(size)
	for i := 0; i < n; i++ {
		if _, err := s.Put(context.Background(), m); err != nil {
			b.Fatal(err)
		}
	}
	if err := s.Close(); err != nil {
		b.Fatal(err)
	}
}

func BenchmarkStoreScan(b *testing.B) {
	root := b.TempDir()
	const n, size = 100_000, 1024
	fillQueueOpts(b, scanOptions(root), n, size)
	for _, cold := range []bool{false, true} {
		b.Run(map[bool]string{false: "warm", true: "cold"}[cold], func(b *testing.B) {
			var total int64
			var el time.Duration
			var residentSum float64
			for i := 0; i < b.N; i++ {
				s, err := Open(scanOptions(root))
				if err != nil {
					b.Fatal(err)
				}
				if cold {
					residentSum += dropCaches(b, s)
				}
				start := time.Now()
				for off := int64(0); off < n; {
					r, _ := s.GetMessages("BenchTopic", 0, off, 32, nil)
					for _, buf := range r.Buffers {
						total += int64(len(buf))
						for i := 0; i < len(buf); i += 64 { // read every cache line
							scanSink += buf[i]
						}
					}
					off = r.NextBeginOffset
					r.Release()
				}
				el += time.Since(start)
				_ = s.Close()
			}
			b.ReportMetric(float64(total)/el.Seconds()/1e6, "MB/s")
			b.ReportMetric(float64(int64(b.N)*n)/el.Seconds(), "msgs/s")
			if cold {
				b.ReportMetric(100*residentSum/float64(b.N), "%resident-at-start")
			}
		})
	}
}

// BenchmarkBaselineColdRead is the baseline of the cold scan: read(2) in
// 1 MiB chunks of the same commitlog files, evicted from the page cache
// first (no process maps them here, so fadvise DONTNEED evicts them all).
func BenchmarkBaselineColdRead(b *testing.B) {
	root := b.TempDir()
	const n, size = 100_000, 1024
	fillQueueOpts(b, scanOptions(root), n, size)
	paths, err := filepath.Glob(filepath.Join(root, "commitlog", "*"))
	if err != nil || len(paths) == 0 {
		b.Fatal("no segments", err)
	}
	buf := make([]byte, 1<<20)
	var total int64
	var el time.Duration
	for i := 0; i < b.N; i++ {
		for _, p := range paths {
			f, err := os.Open(p)
			if err != nil {
				b.Fatal(err)
			}
			evictFile(b, f)
			start := time.Now()
			for {
				k, err := f.Read(buf)
				total += int64(k)
				if err != nil {
					break
				}
			}
			el += time.Since(start)
			_ = f.Close()
		}
	}
	b.ReportMetric(float64(total)/el.Seconds()/1e6, "MB/s")
}

func BenchmarkStoreReadCost(b *testing.B) {
	sizes := []int{1e3, 1e4, 1e5, 1e6}
	if os.Getenv("SMARTGO_LONG") != "" {
		sizes = append(sizes, 1e7)
	}
	for _, n := range sizes {
		b.Run(fmt.Sprintf("entries=%d", n), func(b *testing.B) {
			root := b.TempDir()
			fillQueue(b, root, n, 100)
			s, err := Open(benchOptions(root))
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			for off := int64(0); off < int64(n); { // map every page once: measure steady state
				r, _ := s.GetMessages("BenchTopic", 0, off, 32, nil)
				for _, buf := range r.Buffers {
					scanSink += buf[0]
				}
				off = r.NextBeginOffset
				r.Release()
			}
			// floor: the memory touches a read cannot avoid (its consume
			// queue entry and its record header, straight from the same
			// mappings), so store/floor shows the store's own cost as the
			// queue grows apart from cache and TLB misses. Each offset
			// depends on the previous read's bytes, as in the store loop,
			// so the CPU cannot overlap the misses of successive reads.
			cq := s.lookupCQ("BenchTopic", 0)
			b.Run("floor", func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				var sink int64
				for i := 0; i < b.N; i++ {
					f, rel := cq.acquireFile((rng.Int64N(int64(n)) + sink&1) % int64(n))
					e := getCQEntry(f.data[rel : rel+cqEntrySize])
					f.release()
					m := s.cl.acquireAt(e.phy)
					sink = int64(be.Uint32(m.data[e.phy-m.base:])) // 100: even
					m.release()
				}
				scanSink += byte(sink)
			})
			b.Run("store", func(b *testing.B) {
				rng := rand.New(rand.NewPCG(1, 2))
				b.ReportAllocs()
				for i := 0; i < b.N; i++ {
					r, _ := s.GetMessages("BenchTopic", 0, rng.Int64N(int64(n)), 1, nil)
					if r.Status != GetFound {
						b.Fatal(r.Status)
					}
					r.Release()
				}
			})
		})
	}
}

func BenchmarkStoreGet(b *testing.B) {
	root := b.TempDir()
	fillQueue(b, root, 10_000, 128)
	s, err := Open(benchOptions(root))
	if err != nil {
		b.Fatal(err)
	}
	defer s.Close()
	b.ReportAllocs()
	b.ResetTimer()
	for i := 0; i < b.N; i++ {
		r, _ := s.GetMessages("BenchTopic", 0, int64(i%9000), 32, nil)
		r.Release()
	}
}

// BenchmarkBaselineSyncBatch is the hardware bound of group commit: k
// records written with one write(2) and made durable with one fdatasync,
// on the same kind of preallocated file as the store's sync segments.
// msgs/s divided by BenchmarkBaselineSyncEachPrealloc's rate is the best
// ratio a group commit of k putters can reach on this disk.
func BenchmarkBaselineSyncBatch(b *testing.B) {
	rec := benchRecord(b, 128)
	for _, k := range []int{1, 8, 32, 64} {
		b.Run(fmt.Sprintf("k=%d", k), func(b *testing.B) {
			batch := bytes.Repeat(rec, k)
			b.SetBytes(int64(len(batch)))
			el := syncWrites(b, batch)
			b.ReportMetric(float64(b.N*k)/el.Seconds(), "msgs/s")
			b.ReportMetric(float64(el.Microseconds())/float64(b.N), "µs/fsync")
		})
	}
}

// BenchmarkStoreGetVerify is the cost of verifying records on the pull
// path: the same GetMessages reads (32 records per pull, page cache warm)
// with record verification off (the baseline) and on, in one run, for
// small and larger records. ns/record is per record returned; the
// "verify" runs report their extra ns/record over the baseline measured
// just before them, and the ratio. The same figures from the process's CPU
// time (cpu-ns/record, verify-cpu-ns/record) hold on a loaded machine, where
// wall time also counts the time other processes held the cores.
func BenchmarkStoreGetVerify(b *testing.B) {
	for _, size := range []int{128, 1024, 4096} {
		root := b.TempDir()
		const n = 20_000
		fillQueue(b, root, n, size)
		s, err := Open(benchOptions(root))
		if err != nil {
			b.Fatal(err)
		}
		var base, baseCPU float64
		for _, verify := range []bool{false, true} {
			name := fmt.Sprintf("size=%d/verify=%v", size, verify)
			b.Run(name, func(b *testing.B) {
				s.noVerify = !verify
				defer func() { s.noVerify = false }()
				recs := 0
				b.ResetTimer()
				cpu0 := processCPU()
				for i := 0; i < b.N; i++ {
					r, _ := s.GetMessages("BenchTopic", 0, int64(i*32%(n-32)), 32, nil)
					recs += r.MessageCount()
					r.Release()
				}
				cpu := float64((processCPU() - cpu0).Nanoseconds()) / float64(max(1, recs))
				ns := float64(b.Elapsed().Nanoseconds()) / float64(max(1, recs))
				b.ReportMetric(ns, "ns/record")
				if cpu > 0 {
					b.ReportMetric(cpu, "cpu-ns/record")
				}
				if !verify {
					base, baseCPU = ns, cpu
				} else if base > 0 {
					b.ReportMetric(ns-base, "verify-ns/record")
					b.ReportMetric(ns/base, "x-baseline")
					if baseCPU > 0 {
						b.ReportMetric(cpu-baseCPU, "verify-cpu-ns/record")
					}
				}
			})
		}
		s.Close()
	}
}

// BenchmarkStorePreallocate compares how a segment's blocks are
// allocated, in one run: whole segments up front (Preallocate =
// SegmentSize, the old behaviour) against chunks allocated ahead of the
// writer (the default; a quarter of the segment here). Each sub-benchmark
// puts b.N 1 KiB messages into a new store with 64 MiB segments, FlushAsync
// from one putter and FlushSync from 64; it reports msgs/s, put latency
// percentiles and the disk the first segment took when the store opened
// (MiB-at-open, from the file's blocks). Run with -benchtime=300000x (about
// five segments, so both ways pay for warming the segments they write in
// the measured time).
func BenchmarkStorePreallocate(b *testing.B) {
	for _, mode := range []FlushMode{FlushAsync, FlushSync} {
		for _, whole := range []bool{true, false} {
			name := fmt.Sprintf("%s/prealloc=%s", mode, map[bool]string{true: "whole", false: "ahead"}[whole])
			b.Run(name, func(b *testing.B) {
				o := benchOptions(b.TempDir())
				o.FlushMode = mode
				o.SegmentSize = 64 << 20
				o.Preallocate = 16 << 20
				if whole {
					o.Preallocate = o.SegmentSize
				}
				s, err := Open(o)
				if err != nil {
					b.Fatal(err)
				}
				defer s.Close()
				var st syscall.Stat_t
				seg := filepath.Join(o.Root, "commitlog", fileNameFor(0))
				if err := syscall.Stat(seg, &st); err != nil {
					b.Fatal(err)
				}
				atOpen := float64(st.Blocks*512) / (1 << 20)
				m := benchMsg(1024)
				b.SetBytes(int64(record.SealedSize(m)))
				ctx := context.Background()
				var mu sync.Mutex
				var lat []time.Duration
				b.ResetTimer()
				start := time.Now()
				if mode == FlushAsync {
					lat = make([]time.Duration, 0, b.N)
					for i := 0; i < b.N; i++ {
						t0 := time.Now()
						if _, err := s.Put(ctx, m); err != nil {
							b.Fatal(err)
						}
						lat = append(lat, time.Since(t0))
					}
				} else {
					b.SetParallelism(32)
					b.RunParallel(func(pb *testing.PB) {
						mm := *m
						var mine []time.Duration
						for pb.Next() {
							t0 := time.Now()
							if _, err := s.Put(ctx, &mm); err != nil {
								b.Error(err)
								return
							}
							mine = append(mine, time.Since(t0))
						}
						mu.Lock()
						lat = append(lat, mine...)
						mu.Unlock()
					})
				}
				reportRate(b, start, b.N, record.SealedSize(m))
				b.ReportMetric(atOpen, "MiB-at-open")
				slices.Sort(lat)
				if n := len(lat); n > 0 {
					b.ReportMetric(float64(lat[n*99/100].Microseconds()), "p99-µs")
					b.ReportMetric(float64(lat[n-1-n/10000].Microseconds()), "p99.99-µs")
				}
			})
		}
	}
}
