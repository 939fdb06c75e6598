package store

import (
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/store/record"
	"golang.org/x/sys/unix"
)

// usage is the process's CPU time and fault and switch counts.
type usage struct {
	cpu          time.Duration
	minflt, nvcs int64
}

func readUsage(b *testing.B) usage {
	b.Helper()
	var ru unix.Rusage
	if err := unix.Getrusage(unix.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return usage{
		cpu:    time.Duration(ru.Utime.Nano() + ru.Stime.Nano()),
		minflt: ru.Minflt,
		nvcs:   ru.Nvcsw + ru.Nivcsw,
	}
}

func (u usage) report(b *testing.B, prefix string, n int) {
	b.ReportMetric(float64(u.cpu)/float64(time.Microsecond)/float64(n), prefix+"cpu-µs/msg")
	b.ReportMetric(float64(u.minflt)/float64(n), prefix+"faults/msg")
	b.ReportMetric(float64(u.nvcs)/float64(n), prefix+"ctxsw/msg")
}

func (u usage) sub(v usage) usage {
	return usage{cpu: u.cpu - v.cpu, minflt: u.minflt - v.minflt, nvcs: u.nvcs - v.nvcs}
}

// cpuMsgs are single 1 KiB messages as a broker stores what
// rocketmq-client-go sends one per request: a client message id, tags,
// 8 queues.
func cpuMsgs(queues int) []*record.Message {
	body := make([]byte, 1024)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	ms := make([]*record.Message, queues)
	for q := range ms {
		var p record.Properties
		p.Set(record.PropertyUniqueClientMessageIDKeyIndex, fmt.Sprintf("7F0000010001%020X", q))
		p.Set(record.PropertyTags, "tag")
		ms[q] = &record.Message{Topic: "CPU", QueueID: int32(q), BornTimestamp: time.Now().UnixMilli(),
			BornHost: bornHost, Body: body, Properties: p.String()}
		ms[q].Known = knownOf(ms[q].Properties) // as the broker hands them on
	}
	return ms
}

// BenchmarkStorePutCPU is the process CPU time per message of
// asynchronous-flush single-message puts (PutAsync with a callback, as the
// broker's send path makes them; default options), all
// of the store's own goroutines included (the dispatcher building consume
// queues, the indexer, the flushers, the prefaulter): puts from 4
// goroutines, either as fast as they go (rate=max) or paced in bursts
// every millisecond (rate=20000, about what a broker's readers hand the
// store under make compare-cpu). The store's CPU is counted until the
// dispatcher and the indexer have caught up, and reported next to a
// baseline measured in the same run: write(2) of the same record bytes,
// one call per record, from 4 goroutines. It reports the page faults and
// context switches per message too.
func BenchmarkStorePutCPU(b *testing.B) {
	const putters, queues = 4, 8
	for _, rate := range []int{0, 20000} {
		name := "rate=max"
		if rate > 0 {
			name = fmt.Sprintf("rate=%d", rate)
		}
		b.Run(name, func(b *testing.B) {
			// Baseline: write(2) of the same bytes.
			rec := benchRecord(b, 1024+200)
			f, err := os.Create(filepath.Join(b.TempDir(), "baseline"))
			if err != nil {
				b.Fatal(err)
			}
			defer f.Close()
			var mu sync.Mutex
			u0 := readUsage(b)
			runPaced(b, putters, rate, b.N, func(int) {
				mu.Lock()
				_, err := f.Write(rec)
				mu.Unlock()
				if err != nil {
					b.Error(err)
				}
			})
			base := readUsage(b).sub(u0)

			o := benchOptions(b.TempDir())
			s, err := Open(o)
			if err != nil {
				b.Fatal(err)
			}
			defer s.Close()
			ms := cpuMsgs(queues)
			var pool sync.Pool
			pool.New = func() any { return new(record.Message) }
			var answered atomic.Int64
			done := func(_ PutResult, err error) {
				if err != nil {
					b.Error(err)
				}
				answered.Add(1)
			}
			put := func(i int) {
				m := pool.Get().(*record.Message)
				*m = *ms[i%queues]
				if _, pending, err := s.PutAsync(m, true, done); err != nil {
					b.Error(err)
				} else if !pending {
					answered.Add(1)
				}
				pool.Put(m)
			}
			for i := range 20000 { // warm: the prefaulter running, queues created
				put(i)
			}
			waitCaughtUp(b, s, &answered, 20000)
			rb0 := readBack(s)
			u0 = readUsage(b)
			b.ResetTimer()
			runPaced(b, putters, rate, b.N, put)
			waitCaughtUp(b, s, &answered, int64(20000+b.N))
			b.StopTimer()
			got := readUsage(b).sub(u0)
			got.report(b, "", b.N)
			base.report(b, "write-", b.N)
			b.ReportMetric(float64(got.cpu)/float64(max(1, base.cpu)), "store/write")
			b.ReportMetric(float64(readBack(s)-rb0)/float64(b.N), "read-back/msg")
		})
	}
}

// runPaced calls fn(i) for i in [0, n) from putters goroutines, at rate
// calls per second in all (bursts every millisecond), or as fast as they
// go when rate is 0.
func runPaced(b *testing.B, putters, rate, n int, fn func(i int)) {
	var wg sync.WaitGroup
	for p := range putters {
		wg.Add(1)
		go func() {
			defer wg.Done()
			per := n / putters
			if p < n%putters {
				per++
			}
			if rate == 0 {
				for i := range per {
					fn(i*putters + p)
				}
				return
			}
			burst := max(1, rate/putters/1000)
			t := time.NewTicker(time.Millisecond)
			defer t.Stop()
			for i := 0; i < per; {
				<-t.C
				for j := 0; j < burst && i < per; j, i = j+1, i+1 {
					fn(i*putters + p)
				}
			}
		}()
	}
	wg.Wait()
}

// waitCaughtUp waits until n puts were answered and the dispatcher and
// the indexer have processed everything written.
func waitCaughtUp(b *testing.B, s *Store, answered *atomic.Int64, n int64) {
	b.Helper()
	deadline := time.Now().Add(time.Minute)
	for answered.Load() < n || s.DispatchedPhysicalOffset() < s.MaxPhysicalOffset() || s.IndexedPhysicalOffset() < s.MaxPhysicalOffset() {
		if time.Now().After(deadline) {
			b.Fatalf("store did not catch up: %d of %d answered, dispatched %d indexed %d of %d", answered.Load(), n, s.DispatchedPhysicalOffset(), s.IndexedPhysicalOffset(), s.MaxPhysicalOffset())
		}
		time.Sleep(time.Millisecond)
	}
}

// readBack is how many records the dispatcher and the indexer have read
// back from the commitlog instead of taking the writer's notes.
func readBack(s *Store) int64 {
	s.dispMu.Lock()
	n := s.disp.count - s.disp.noted
	s.dispMu.Unlock()
	s.ix.run.Lock()
	n += s.ix.read
	s.ix.run.Unlock()
	return n
}
