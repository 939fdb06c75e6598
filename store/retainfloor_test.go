package store

import (
	"fmt"
	"log/slog"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// Retention keeps every segment from the first record Options.Retain
// protects on, however old, and deletes the expired ones before it; the
// protected queue's consume-queue files stay with them, and as the
// protected offset moves up the segments below it go.
func TestStoreRetainFloorKeepsProtected(t *testing.T) {
	clock := &fakeClock{now: time.Now()}
	var from atomic.Int64
	logs := &testutil.LogBuffer{}
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.Now = clock.Now
		o.FileReservedTime = time.Minute
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		o.Retain = func(topic string, q int32, _ int64) (int64, bool) {
			return from.Load(), topic == "P" && q == 0
		}
	})
	put := func(topic string, n int) {
		for i := range n {
			mustPut(t, s, msgSpec{topic: topic, body: fmt.Sprintf("%s-%d-%0300d", topic, i, i)})
		}
	}
	put("T", 600) // several segments before the protected queue
	put("P", 300)
	put("T", 600)
	waitIndexed(t, s)
	waitFlushed(t, s)
	pFirst := readAll(t, s, "P", 0)[0].PhysicalOffset
	pFiles := len(s.lookupCQ("P", 0).list())
	segs := len(s.cl.list())

	clock.Add(time.Hour) // everything expired
	cleanAll(s)
	if got := s.MinPhysicalOffset(); got > pFirst || s.cl.list()[0].base+s.cl.list()[0].size <= pFirst {
		t.Fatalf("commitlog min %d; the protected queue starts at %d (segment not kept, or earlier ones not deleted)", got, pFirst)
	}
	if len(s.cl.list()) >= segs {
		t.Fatalf("no expired segment before the protected queue deleted (%d segments)", segs)
	}
	if n := len(readAll(t, s, "P", 0)); n != 300 || s.MinOffset("P", 0) != 0 {
		t.Fatalf("protected queue: %d of 300 messages readable, min offset %d", n, s.MinOffset("P", 0))
	}
	if n := len(s.lookupCQ("P", 0).list()); n != pFiles {
		t.Fatalf("protected queue's consume-queue files %d -> %d", pFiles, n)
	}
	if s.MinOffset("T", 0) == 0 {
		t.Fatal("unprotected queue's minimum did not move")
	}
	if held := s.Stats().RetainHeldBytes; held < s.opts.SegmentSize {
		t.Fatalf("RetainHeldBytes = %d, want at least a segment", held)
	}
	if l := logs.String(); !strings.Contains(l, "protected queue still needs") || !strings.Contains(l, "topic=P") {
		t.Fatalf("floor not logged with its queue:\n%s", l)
	}

	// Half consumed: the segments wholly below offset 150 go, 150 stays.
	from.Store(150)
	cleanAll(s)
	if min := s.MinOffset("P", 0); min == 0 || min > 150 {
		t.Fatalf("protected queue min offset %d after consuming 150", min)
	}
	if got := readAll(t, s, "P", 0); len(got) < 150 || got[len(got)-1].QueueOffset != 299 {
		t.Fatalf("protected tail not readable: %d messages", len(got))
	}

	// All consumed: nothing is held, only the active segment is left.
	from.Store(300)
	cleanAll(s)
	if n := len(s.cl.list()); n != 1 {
		t.Fatalf("%d segments left, want the active one", n)
	}
	if held := s.Stats().RetainHeldBytes; held != 0 {
		t.Fatalf("RetainHeldBytes = %d with nothing protected", held)
	}
}

// Above the force-clean mark, even with DiskForceClean, retention does not
// delete a segment holding protected records: it logs at WARN and the
// disk-full mark refuses writes instead.
func TestStoreRetainFloorUnderDiskPressure(t *testing.T) {
	var usage atomic.Value
	usage.Store(0.1)
	logs := &testutil.LogBuffer{}
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.DeleteWhen = fmt.Sprintf("%02d", (time.Now().Hour()+12)%24)
		o.DiskUsage = func(string) (float64, error) { return usage.Load().(float64), nil }
		o.DiskForceClean = true
		o.Logger = slog.New(slog.NewTextHandler(logs, nil))
		o.Retain = func(topic string, q int32, _ int64) (int64, bool) { return 0, topic == "P" }
	})
	for i := range 800 {
		mustPut(t, s, msgSpec{topic: "P", body: fmt.Sprintf("%0300d", i)})
	}
	waitIndexed(t, s)
	waitFlushed(t, s)
	before := len(s.cl.list())
	usage.Store(0.87)
	if n := s.clean(false); n != 0 || len(s.cl.list()) != before {
		t.Fatalf("forced clean deleted %d protected segments", n)
	}
	if st := s.Stats(); st.ForceDeletedUnconsumed != 0 || st.RetainHeldBytes == 0 {
		t.Fatalf("ForceDeletedUnconsumed %d, RetainHeldBytes %d", st.ForceDeletedUnconsumed, st.RetainHeldBytes)
	}
	if l := logs.String(); !strings.Contains(l, "level=WARN") || !strings.Contains(l, "topic=P") {
		t.Fatalf("held segment not logged at WARN with its queue:\n%s", l)
	}
	if n := len(readAll(t, s, "P", 0)); n != 800 {
		t.Fatalf("%d of 800 protected messages readable", n)
	}
}

// cleanAll runs retention until a run deletes nothing.
func cleanAll(s *Store) {
	for s.CleanExpired() > 0 {
	}
}

func waitFlushed(t *testing.T, s *Store) {
	t.Helper()
	testutil.Eventually(t, 5*time.Second, func() error {
		if f, c := s.cl.flushed.Load(), s.cl.committed.Load(); f != c {
			return fmt.Errorf("flushed %d of %d", f, c)
		}
		return nil
	})
}
