package store

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
)

type fakeClock struct {
	mu  sync.Mutex
	now time.Time
}

func (c *fakeClock) Now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.now }
func (c *fakeClock) Add(d time.Duration) {
	c.mu.Lock()
	c.now = c.now.Add(d)
	c.mu.Unlock()
}

func TestStoreRetentionDeletesExpired(t *testing.T) {
	start := time.Now()
	clock := &fakeClock{now: start}
	delHour := (start.Add(2*time.Hour).Hour() + 5) % 24
	var usage atomic.Value
	usage.Store(0.1)
	var events []Event
	var evMu sync.Mutex
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.Now = clock.Now
		o.FileReservedTime = time.Hour
		o.DeleteWhen = fmt.Sprintf("%02d;%02d", delHour, (delHour+1)%24)
		o.DiskUsage = func(string) (float64, error) { return usage.Load().(float64), nil }
		o.Listener = func(e Event) { evMu.Lock(); events = append(events, e); evMu.Unlock() }
	})
	for i := range 2000 {
		mustPut(t, s, msgSpec{topic: "T", qid: int32(i % 2), body: fmt.Sprintf("%d-%0300d", i, i), keys: fmt.Sprint("k", i)})
	}
	waitIndexed(t, s)
	testutil.Eventually(t, 5*time.Second, func() error {
		if s.cl.flushed.Load() != s.cl.committed.Load() {
			return errors.New("not flushed")
		}
		return nil
	})
	segs := len(s.cl.list())
	cqFiles := len(s.lookupCQ("T", 0).list())
	idxFiles := len(s.idx.list())
	// Not expired: nothing goes, even at the delete hour.
	if n := s.clean(false); n != 0 {
		t.Fatalf("deleted %d unexpired segments", n)
	}
	// Expired but not the delete hour, disk fine: kept.
	clock.Add(2 * time.Hour)
	if n := s.clean(false); n != 0 {
		t.Fatalf("deleted %d segments outside DeleteWhen", n)
	}
	// At the delete hour expired segments go (10 per run), never the active one.
	clock.Add(5 * time.Hour)
	total := 0
	for {
		n := s.clean(false)
		if n == 0 {
			break
		}
		total += n
	}
	if total != segs-1 || len(s.cl.list()) != 1 {
		t.Fatalf("deleted %d of %d segments, %d left", total, segs, len(s.cl.list()))
	}
	clMin := s.MinPhysicalOffset()
	if clMin != s.cl.list()[0].base {
		t.Fatalf("min physical %d", clMin)
	}
	if n := len(s.lookupCQ("T", 0).list()); n >= cqFiles {
		t.Fatalf("consume-queue files %d -> %d", cqFiles, n)
	}
	if n := len(s.idx.list()); n >= idxFiles {
		t.Fatalf("index files %d -> %d", idxFiles, n)
	}
	// Queue minimum moved; reads below it say OFFSET_TOO_SMALL.
	minOff := s.MinOffset("T", 0)
	if minOff == 0 {
		t.Fatal("queue min offset did not move")
	}
	r, _ := s.GetMessages("T", 0, 0, 32, nil)
	if r.Status != GetOffsetTooSmall || r.NextBeginOffset != minOff {
		t.Fatalf("read below min: %v next %d", r.Status, r.NextBeginOffset)
	}
	r.Release()
	got := readAll(t, s, "T", 0)
	if len(got) == 0 || got[0].PhysicalOffset < clMin {
		t.Fatalf("remaining reads wrong: %d", len(got))
	}
	evMu.Lock()
	nDel := 0
	for _, e := range events {
		if e.Kind == EventSegmentDeleted {
			nDel++
		}
	}
	evMu.Unlock()
	if nDel != total {
		t.Fatalf("%d delete events for %d deletions", nDel, total)
	}
}

// Above DiskForceCleanRatio, an unexpired segment is deleted only when
// every consumer group has consumed it, or when the operator opted in
// (DiskForceClean): then the unconsumed messages it held are logged at
// WARN and counted. Above DiskFullRatio puts are refused with ErrDiskFull
// until usage falls again.
func TestStoreRetentionDiskPressure(t *testing.T) {
	type state struct {
		usage    atomic.Value
		consumed atomic.Int64 // next offset consumed of T/0, -1: no group
	}
	open := func(t *testing.T, force bool) (*Store, *state, *testutil.LogBuffer) {
		st := &state{}
		st.usage.Store(0.1)
		st.consumed.Store(-1)
		logs := &testutil.LogBuffer{}
		clock := &fakeClock{now: time.Now()}
		s := openTest(t, t.TempDir(), func(o *Options) {
			o.Now = clock.Now
			o.DeleteWhen = fmt.Sprintf("%02d", (time.Now().Hour()+12)%24)
			o.DiskUsage = func(string) (float64, error) { return st.usage.Load().(float64), nil }
			o.DiskForceClean = force
			o.Logger = slog.New(slog.NewTextHandler(logs, nil))
			o.Consumed = func(topic string, q int32) (int64, bool) {
				c := st.consumed.Load()
				return c, c >= 0 && topic == "T" && q == 0
			}
		})
		for i := range 800 {
			mustPut(t, s, msgSpec{topic: "T", body: fmt.Sprintf("%0300d", i)})
		}
		waitIndexed(t, s)
		testutil.Eventually(t, 5*time.Second, func() error {
			if s.cl.flushed.Load() != s.cl.committed.Load() {
				return errors.New("not flushed")
			}
			return nil
		})
		return s, st, logs
	}
	// Messages of the oldest segment: queue offsets [0, n).
	firstSegCount := func(s *Store) int64 {
		m := s.cl.list()[0]
		return int64(s.lookupCQ("T", 0).entriesIn(m.base, m.base+m.size))
	}

	t.Run("unconsumed segment kept", func(t *testing.T) {
		s, st, logs := open(t, false)
		before := len(s.cl.list())
		st.usage.Store(0.87)
		if n := s.clean(false); n != 0 || len(s.cl.list()) != before {
			t.Fatalf("unexpired, unconsumed segment deleted (%d) without disk_force_clean", n)
		}
		if !strings.Contains(logs.String(), "holds unconsumed messages; not deleted") {
			t.Fatalf("refusal not logged:\n%s", logs.String())
		}
		// Consumed part way: still kept.
		st.consumed.Store(firstSegCount(s) - 1)
		if n := s.clean(false); n != 0 {
			t.Fatalf("partly consumed segment deleted")
		}
		// Consumed by every group: it may go.
		st.consumed.Store(firstSegCount(s))
		if n := s.clean(false); n != 1 || len(s.cl.list()) != before-1 {
			t.Fatalf("consumed segment not deleted under pressure: %d", n)
		}
		if s.Stats().ForceDeletedUnconsumed != 0 {
			t.Fatal("consumed messages counted as lost")
		}
	})

	t.Run("force clean opted in", func(t *testing.T) {
		s, st, logs := open(t, true)
		before := len(s.cl.list())
		want := firstSegCount(s)
		st.usage.Store(0.87)
		if n := s.clean(false); n != 1 || len(s.cl.list()) != before-1 {
			t.Fatalf("forced clean deleted %d", n)
		}
		if got := s.Stats().ForceDeletedUnconsumed; got != want {
			t.Fatalf("ForceDeletedUnconsumed = %d, want %d", got, want)
		}
		if !strings.Contains(logs.String(), "level=WARN") || !strings.Contains(logs.String(), fmt.Sprintf("unconsumed=%d", want)) {
			t.Fatalf("forced deletion not logged at WARN with the count:\n%s", logs.String())
		}
	})

	t.Run("full disk refuses then resumes", func(t *testing.T) {
		s, st, _ := open(t, false)
		st.usage.Store(0.95)
		s.clean(false)
		_, err := s.Put(context.Background(), newMsg(msgSpec{topic: "T", body: "x"}))
		if !errors.Is(err, ErrDiskFull) {
			t.Fatalf("put on full disk: %v", err)
		}
		res, _ := s.Put(context.Background(), newMsg(msgSpec{topic: "T", body: "x"}))
		if res.Status != PutServiceNotAvailable || !s.Stats().DiskFull {
			t.Fatalf("status %v", res.Status)
		}
		if refused, why := s.WritesRefused(); !refused || !strings.Contains(why, "disk full") {
			t.Fatalf("WritesRefused = %v %q", refused, why)
		}
		if s.Err() != nil {
			t.Fatal("a full disk made the store fail")
		}
		// The watcher sees the room by itself: no clean, no call.
		st.usage.Store(0.5)
		testutil.Eventually(t, 5*time.Second, func() error {
			if refused, why := s.WritesRefused(); refused {
				return errors.New(why)
			}
			return nil
		})
		mustPut(t, s, msgSpec{topic: "T", body: "ok again"})
	})
}

// TestStoreConcurrentReadersAndDeletion: one writer, many readers holding
// results, and retention deleting segments under them. A deleted segment is
// unmapped only after its last reader released it.
func TestStoreConcurrentReadersAndDeletion(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.Now = clock.Now
		o.FileReservedTime = time.Minute
		o.FlushInterval = 5 * time.Millisecond
	})
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var writes atomic.Int64
	wg.Add(1)
	go func() {
		defer wg.Done()
		for i := 0; ; i++ {
			select {
			case <-stop:
				return
			default:
			}
			if _, err := s.Put(context.Background(), newMsg(msgSpec{topic: "T", qid: int32(i % 4), body: fmt.Sprintf("%d-%0200d", i, i)})); err != nil {
				t.Error(err)
				return
			}
			writes.Add(1)
		}
	}()
	var sawDeletedWhileHeld atomic.Int64
	for rd := range 6 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			rng := rand.New(rand.NewPCG(uint64(rd), 1))
			offs := map[int32]int64{}
			for {
				select {
				case <-stop:
					return
				default:
				}
				q := int32(rng.IntN(4))
				r, err := s.GetMessages("T", q, offs[q], 16, nil)
				if err != nil {
					t.Error(err)
					return
				}
				if r.Status == GetOffsetTooSmall || r.Status == GetFound || r.Status == GetMessageWasRemoving {
					offs[q] = r.NextBeginOffset
				}
				time.Sleep(time.Duration(rng.IntN(3)) * time.Millisecond)
				for i, b := range r.Buffers {
					v, err := record.Parse(b, true)
					if err != nil || v.QueueOffset != r.QueueOffsets[i] {
						t.Errorf("held buffer invalid: %v", err)
					}
				}
				for _, m := range r.held {
					if m.removed.Load() {
						sawDeletedWhileHeld.Add(1)
						if m.unmapped.Load() {
							t.Error("segment unmapped while a reader holds it")
						}
					}
				}
				r.Release()
			}
		}()
	}
	wg.Add(1)
	go func() {
		defer wg.Done()
		for {
			select {
			case <-stop:
				return
			case <-time.After(10 * time.Millisecond):
			}
			clock.Add(2 * time.Minute)
			s.CleanExpired()
		}
	}()
	// Until retention has deleted segments under the readers for a while
	// (a loaded machine writes slower: the condition, not a fixed time).
	deadline := time.Now().Add(2 * time.Minute)
	for (writes.Load() < 1000 || s.MinPhysicalOffset() == 0 || sawDeletedWhileHeld.Load() < 10) && time.Now().Before(deadline) && !t.Failed() {
		time.Sleep(20 * time.Millisecond)
	}
	close(stop)
	wg.Wait()
	if writes.Load() < 1000 {
		t.Fatalf("only %d writes", writes.Load())
	}
	t.Logf("%d writes, segments now %d (min %d), %d reads held a deleted segment",
		writes.Load(), len(s.cl.list()), s.MinPhysicalOffset(), sawDeletedWhileHeld.Load())
	if s.MinPhysicalOffset() == 0 {
		t.Fatal("nothing was deleted")
	}
}

func TestStoreUnmapAfterRelease(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	s := openTest(t, t.TempDir(), func(o *Options) { o.Now = clock.Now; o.FileReservedTime = time.Minute })
	for i := range 600 {
		mustPut(t, s, msgSpec{topic: "T", body: fmt.Sprintf("%0300d", i)})
	}
	waitIndexed(t, s)
	testutil.Eventually(t, 5*time.Second, func() error {
		if s.cl.flushed.Load() != s.cl.committed.Load() {
			return errors.New("not flushed")
		}
		return nil
	})
	r, _ := s.GetMessages("T", 0, 0, 4, nil)
	if r.Status != GetFound {
		t.Fatal(r.Status)
	}
	seg := r.held[0]
	clock.Add(time.Hour)
	if s.CleanExpired() == 0 {
		t.Fatal("nothing deleted")
	}
	if !seg.removed.Load() || seg.unmapped.Load() {
		t.Fatalf("removed=%v unmapped=%v while held", seg.removed.Load(), seg.unmapped.Load())
	}
	if _, err := record.Parse(r.Buffers[0], true); err != nil {
		t.Fatalf("held buffer after delete: %v", err)
	}
	r.Release()
	if !seg.unmapped.Load() {
		t.Fatal("segment still mapped after the last release")
	}
	if _, err := s.MessageAt(0); !errors.Is(err, ErrNotFound) {
		t.Fatalf("MessageAt deleted: %v", err)
	}
}
