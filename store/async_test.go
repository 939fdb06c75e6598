package store

import (
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
)

// TestStoreAsyncPutSync: in FlushSync mode PutAsync returns at once and
// calls back once per put, only after the flushed offset covers it; many
// puts share fdatasyncs, and no goroutine waits meanwhile.
func TestStoreAsyncPutSync(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.FlushMode = FlushSync })
	const n = 400
	var wg sync.WaitGroup
	var calls, early atomic.Int64
	var mu sync.Mutex
	seen := map[int64]bool{}
	wg.Add(n)
	for i := range n {
		m := newMsg(msgSpec{topic: "T", qid: int32(i % 4), body: fmt.Sprint("m", i)})
		res, pending, err := s.PutAsync(m, true, func(r PutResult, err error) {
			defer wg.Done()
			calls.Add(1)
			if err != nil || r.Status != PutOK {
				t.Errorf("put: %v %v", r.Status, err)
				return
			}
			if s.FlushedPhysicalOffset() < r.PhysicalOffset+int64(r.WroteBytes) {
				early.Add(1)
			}
			mu.Lock()
			dup := seen[r.PhysicalOffset]
			seen[r.PhysicalOffset] = true
			mu.Unlock()
			if dup {
				t.Errorf("put at %d called back twice", r.PhysicalOffset)
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if !pending { // already durable: the result is final, done is not called
			if res.Status != PutOK {
				t.Fatalf("put %d: %v", i, res.Status)
			}
			mu.Lock()
			seen[res.PhysicalOffset] = true
			mu.Unlock()
			wg.Done()
		}
	}
	wg.Wait()
	if e := early.Load(); e > 0 {
		t.Fatalf("%d puts called back before they were durable", e)
	}
	if len(seen) != n {
		t.Fatalf("%d distinct results for %d puts", len(seen), n)
	}
	st := s.Stats()
	t.Logf("%d callbacks, %d fdatasyncs", calls.Load(), st.Flushes)
	if st.Flushes >= n {
		t.Fatalf("%d fdatasyncs for %d puts: no group commit", st.Flushes, n)
	}
	waitDispatched(t, s)
	total := 0
	for q := range int32(4) {
		total += len(readAll(t, s, "T", q))
	}
	if total != n {
		t.Fatalf("%d of %d messages readable", total, n)
	}

	// A batch waits the same way.
	var bwg sync.WaitGroup
	bwg.Add(1)
	items := []record.BatchItem{{Body: []byte("b1")}, {Body: []byte("b2")}}
	_, pending, err := s.PutBatchAsync(newMsg(msgSpec{topic: "B"}), items, true, func(r BatchResult, err error) {
		defer bwg.Done()
		if err != nil || r.Status != PutOK || len(r.PhysicalOffsets) != 2 {
			t.Errorf("batch: %+v %v", r, err)
		}
	})
	if err != nil {
		t.Fatal(err)
	}
	if !pending {
		bwg.Done()
	}
	bwg.Wait()
}

// TestStoreAsyncPutNoWait: a put that waits for no flush (FlushAsync, or
// WAIT false) is written behind: PutAsync returns pending, and the
// callback comes once, from the dispatcher, after the record reached the
// page cache (readers see it), with the put's final result. Concurrent
// puts share the writes. With AsyncWriteMapped the result is final at
// once and the callback never runs; refused puts fail at once.
func TestStoreAsyncPutNoWait(t *testing.T) {
	for _, tc := range []struct {
		name string
		opts func(*Options)
		wait bool
	}{
		{"async-hybrid", nil, true},
		{"async-pwrite", func(o *Options) { o.AsyncWrites = AsyncWritePwrite }, true},
		{"sync-nowait", func(o *Options) { o.FlushMode = FlushSync }, false},
	} {
		t.Run(tc.name, func(t *testing.T) {
			s := openTest(t, t.TempDir(), tc.opts)
			const putters, per = 4, 200
			var wg sync.WaitGroup
			var mu sync.Mutex
			seen := map[int64]int{}
			var pendings, early atomic.Int64
			answer := func(r PutResult, err error) {
				if err != nil || r.Status != PutOK {
					t.Errorf("put: %v %v", r.Status, err)
					return
				}
				if s.MaxPhysicalOffset() < r.PhysicalOffset+int64(r.WroteBytes) {
					early.Add(1) // answered before readers could see it
				}
				mu.Lock()
				seen[r.PhysicalOffset]++
				mu.Unlock()
			}
			for g := range putters {
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range per {
						var cb sync.WaitGroup
						cb.Add(1)
						m := newMsg(msgSpec{topic: "T", qid: int32(g), body: fmt.Sprint("m", g, "-", i)})
						res, pending, err := s.PutAsync(m, tc.wait, func(r PutResult, err error) {
							answer(r, err)
							cb.Done()
						})
						if err != nil {
							t.Error(err)
							return
						}
						if pending {
							pendings.Add(1)
						} else {
							answer(res, nil)
							cb.Done()
						}
						if i%8 == 7 {
							cb.Wait() // a client's window: some answers awaited
						}
					}
				}()
			}
			wg.Wait()
			testutil.Eventually(t, 10*time.Second, func() error {
				mu.Lock()
				defer mu.Unlock()
				if len(seen) != putters*per {
					return fmt.Errorf("%d of %d answered", len(seen), putters*per)
				}
				return nil
			})
			mu.Lock()
			for off, n := range seen {
				if n != 1 {
					t.Errorf("put at %d answered %d times", off, n)
				}
			}
			mu.Unlock()
			if pendings.Load() == 0 {
				t.Error("no put was written behind")
			}
			if e := early.Load(); e > 0 {
				t.Fatalf("%d puts answered before their record was readable", e)
			}
			waitDispatched(t, s)
			for q := range int32(putters) {
				if got := readAll(t, s, "T", q); len(got) != per {
					t.Fatalf("queue %d: %d of %d messages readable", q, len(got), per)
				}
			}
		})
	}

	never := func(PutResult, error) { t.Error("callback of a put that does not wait") }
	mapped := openTest(t, t.TempDir(), func(o *Options) { o.AsyncWrites = AsyncWriteMapped })
	if res, pending, err := mapped.PutAsync(newMsg(msgSpec{topic: "T", body: "a"}), true, never); err != nil || pending || res.Status != PutOK {
		t.Fatal(res, pending, err)
	}
	// Refused puts fail at once.
	sync := openTest(t, t.TempDir(), func(o *Options) { o.FlushMode = FlushSync })
	big := newMsg(msgSpec{topic: "T", body: string(make([]byte, 64<<10))})
	if _, pending, err := sync.PutAsync(big, true, never); err == nil || pending {
		t.Fatalf("oversized put: pending %v err %v", pending, err)
	}
}

// TestStoreWriteBehindClose: Close answers every put written behind, and
// what it answered as stored is there after a reopen.
func TestStoreWriteBehindClose(t *testing.T) {
	dir := t.TempDir()
	s, err := Open(testOptions(dir))
	if err != nil {
		t.Fatal(err)
	}
	const n = 2000
	var mu sync.Mutex
	stored := map[string]bool{}
	var answered atomic.Int64
	for i := range n {
		body := fmt.Sprint("c", i)
		_, pending, err := s.PutAsync(newMsg(msgSpec{topic: "T", body: body}), true, func(r PutResult, err error) {
			answered.Add(1)
			if err == nil {
				mu.Lock()
				stored[body] = true
				mu.Unlock()
			}
		})
		if err != nil {
			t.Fatal(err)
		}
		if !pending {
			answered.Add(1)
			mu.Lock()
			stored[body] = true
			mu.Unlock()
		}
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got := answered.Load(); got != n {
		t.Fatalf("%d of %d puts answered by Close", got, n)
	}
	s2 := openTest(t, dir, nil)
	waitDispatched(t, s2)
	got := readAll(t, s2, "T", 0)
	have := map[string]bool{}
	for _, m := range got {
		have[string(m.Body)] = true
	}
	for body := range stored {
		if !have[body] {
			t.Fatalf("%s answered as stored, missing after reopen", body)
		}
	}
	if len(stored) != n {
		t.Fatalf("%d of %d puts stored before a clean Close", len(stored), n)
	}
}

// TestStoreAsyncPutTimeout: a put whose group commit has not come by its
// deadline is called back with PutFlushDiskTimeout, and stays stored; one
// whose bytes never made it into the log, with PutServiceNotAvailable.
func TestStoreAsyncPutTimeout(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.FlushMode = FlushSync
		o.FlushInterval = time.Hour // only settle below completes the waiter
	})
	res, ap, err := s.put(newMsg(msgSpec{topic: "T", body: "late"}), true, nil, true, monoNow())
	if err != nil || !ap.wait {
		t.Fatal(res, ap, err)
	}
	beyond := ap
	beyond.end += 1 << 20
	got := make(chan PutStatus, 2)
	s.gc.mu.Lock()
	s.gc.waiters = append(s.gc.waiters,
		flushWaiter{ap: ap, deadline: time.Now(), done: func(st PutStatus) { got <- st }},
		flushWaiter{ap: beyond, deadline: time.Now(), done: func(st PutStatus) { got <- st }})
	s.gc.mu.Unlock()
	if next := s.settle(time.Now().Add(time.Second), false); !next.IsZero() {
		t.Fatalf("waiters left after their deadline: next %v", next)
	}
	if st := <-got; st != PutFlushDiskTimeout {
		t.Fatalf("timed-out put: %v", st)
	}
	if st := <-got; st != PutServiceNotAvailable {
		t.Fatalf("put beyond the log: %v", st)
	}
	waitDispatched(t, s)
	if got := readAll(t, s, "T", 0); len(got) != 1 || string(got[0].Body) != "late" {
		t.Fatalf("the timed-out message must stay stored: %d", len(got))
	}
}

// A put's answer comes after it is counted: the write-behind rounds
// count their puts at once (putTally), before answering any of them, so
// a sender reading the stats in its answer finds every answered put in
// PutMessages, PutBytes and PutLatency.
func TestStoreAsyncPutCountedBeforeAnswer(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	const putters, each = 4, 300
	var answered atomic.Int64
	check := func() {
		k := answered.Add(1)
		st := s.Stats()
		var lat int64
		for _, c := range st.PutLatency {
			lat += c
		}
		if st.PutMessages < k || lat < k || st.PutBytes < k {
			t.Errorf("%d puts answered, stats count %d (latency %d, %d bytes)", k, st.PutMessages, lat, st.PutBytes)
		}
	}
	var wg sync.WaitGroup
	for p := range putters {
		wg.Go(func() {
			for i := range each {
				wg.Add(1)
				m := newMsg(msgSpec{topic: "T", qid: int32(p), body: fmt.Sprint("m", i)})
				_, pending, err := s.PutAsync(m, true, func(r PutResult, err error) {
					defer wg.Done()
					if err != nil || r.Status != PutOK {
						t.Errorf("put: %v %v", r.Status, err)
					}
					check()
				})
				if err != nil {
					t.Error(err)
					wg.Done()
					return
				}
				if !pending {
					check()
					wg.Done()
				}
			}
		})
	}
	wg.Wait()
	if st := s.Stats(); st.PutMessages != putters*each {
		t.Fatalf("%d puts counted, want %d", st.PutMessages, putters*each)
	}
}
