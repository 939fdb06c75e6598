package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
	"github.com/smartgo/smartgo/store/vfs"
)

func TestStoreBadRoot(t *testing.T) {
	dir := t.TempDir()
	file := filepath.Join(dir, "file")
	if err := os.WriteFile(file, []byte("x"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(testOptions(file)); !errors.Is(err, ErrBadRoot) {
		t.Fatalf("root is a file: %v", err)
	}
	if _, err := Open(testOptions(filepath.Join(file, "sub"))); !errors.Is(err, ErrBadRoot) {
		t.Fatalf("root under a file: %v", err)
	}
	if os.Geteuid() != 0 {
		ro := filepath.Join(dir, "ro")
		if err := os.Mkdir(ro, 0o500); err != nil {
			t.Fatal(err)
		}
		if _, err := Open(testOptions(filepath.Join(ro, "store"))); !errors.Is(err, ErrBadRoot) {
			t.Fatalf("unwritable root: %v", err)
		}
	}
	if _, err := Open(Options{}); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("empty options: %v", err)
	}
	o := testOptions(dir)
	o.MaxMessageSize = int(o.SegmentSize)
	if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("message larger than segment: %v", err)
	}
	o = testOptions(dir)
	o.DeleteWhen = "25"
	if err := o.Validate(); !errors.Is(err, ErrInvalidOptions) {
		t.Fatalf("DeleteWhen 25: %v", err)
	}
	if err := DefaultOptions(dir).Validate(); err != nil {
		t.Fatalf("defaults: %v", err)
	}
}

func TestStoreLock(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, nil)
	if _, err := Open(testOptions(root)); !errors.Is(err, ErrLocked) {
		t.Fatalf("second open: %v", err)
	}
	if _, err := os.Stat(filepath.Join(root, abortName)); err != nil {
		t.Fatalf("abort file missing while running: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, abortName)); !os.IsNotExist(err) {
		t.Fatalf("abort file after clean close: %v", err)
	}
	s2 := openTest(t, root, nil)
	_ = s2
}

func TestStoreSegmentSizeChange(t *testing.T) {
	root := t.TempDir()
	s, err := Open(testOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 400 {
		mustPut(t, s, msgSpec{topic: "T", body: fmt.Sprintf("%0300d", i)})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, size := range []int64{32 << 10, 128 << 10} {
		o := testOptions(root)
		o.SegmentSize = size
		if _, err := Open(o); !errors.Is(err, ErrSegmentSize) {
			t.Fatalf("segment size %d: %v", size, err)
		}
	}
	// A single full segment written with a smaller size is recognised too.
	root1 := t.TempDir()
	s1, err := Open(testOptions(root1))
	if err != nil {
		t.Fatal(err)
	}
	for i := range 250 {
		mustPut(t, s1, msgSpec{topic: "T", body: fmt.Sprintf("%0200d", i)})
	}
	if err := s1.Close(); err != nil {
		t.Fatal(err)
	}
	for _, p := range segmentFiles(t, root1)[1:] {
		_ = os.Remove(p)
	}
	o1 := testOptions(root1)
	o1.SegmentSize = 1 << 20
	if _, err := Open(o1); !errors.Is(err, ErrSegmentSize) {
		t.Fatalf("single smaller segment: %v", err)
	}
	o := testOptions(root)
	o.CQEntriesPerFile = 1000
	if _, err := Open(o); !errors.Is(err, ErrSegmentSize) {
		t.Fatalf("CQ entries change: %v", err)
	}
	// The original size still works.
	s2 := openTest(t, root, nil)
	if got := len(readAll(t, s2, "T", 0)); got != 400 {
		t.Fatalf("%d messages", got)
	}
}

func TestStoreMessageTooLarge(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	res, err := s.Put(context.Background(), newMsg(msgSpec{topic: "T", body: strings.Repeat("x", 17<<10)}))
	if !errors.Is(err, ErrMessageTooLarge) || res.Status != PutMessageIllegal {
		t.Fatalf("too large: %v %v", res.Status, err)
	}
	res, err = s.Put(context.Background(), newMsg(msgSpec{topic: strings.Repeat("t", 200), body: "x"}))
	if !errors.Is(err, ErrIllegalMessage) || res.Status != PutMessageIllegal {
		t.Fatalf("long topic: %v %v", res.Status, err)
	}
	// A body of MaxMessageSize is stored, though its record is larger (as
	// on RocketMQ, the limit is the body's).
	if _, err := s.Put(context.Background(), newMsg(msgSpec{topic: "T", body: strings.Repeat("x", 16<<10)})); err != nil {
		t.Fatalf("body of MaxMessageSize: %v", err)
	}
	// Largest allowed message still fits a fresh segment.
	m := newMsg(msgSpec{topic: "T"})
	m.Body = make([]byte, 16<<10-record.SealedSize(m))
	for range 6 {
		if _, err := s.Put(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	}
	if s.Stats().PutErrors != 2 {
		t.Fatalf("put errors %d", s.Stats().PutErrors)
	}
}

func TestStoreSyncFlushGroupCommit(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.FlushMode = FlushSync
		o.FlushInterval = time.Hour // only group-commit requests flush
	})
	const writers, each = 32, 40
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				res, err := s.Put(context.Background(), newMsg(msgSpec{topic: "T", qid: int32(w % 4), body: fmt.Sprint(w, "-", i)}))
				if err != nil || res.Status != PutOK {
					t.Errorf("put: %v %v", res.Status, err)
					return
				}
				if s.FlushedPhysicalOffset() < res.PhysicalOffset+int64(res.WroteBytes) {
					t.Errorf("acknowledged before flushed")
				}
			}
		}()
	}
	wg.Wait()
	st := s.Stats()
	if st.PutMessages != writers*each {
		t.Fatalf("%d puts", st.PutMessages)
	}
	if st.Flushes >= writers*each/2 {
		t.Fatalf("%d fdatasyncs for %d puts: no group commit", st.Flushes, st.PutMessages)
	}
	t.Logf("%d puts, %d fdatasyncs", st.PutMessages, st.Flushes)
	// WAIT=false does not wait.
	m := newMsg(msgSpec{topic: "T", body: "nowait"})
	m.Properties = "WAIT\x01false"
	if res, err := s.Put(context.Background(), m); err != nil || res.Status != PutOK {
		t.Fatal(res, err)
	}
}

func TestStoreSyncFlushTimeout(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.FlushMode = FlushSync
		o.SyncFlushTimeout = time.Nanosecond
	})
	timeouts := 0
	for i := range 50 {
		res, err := s.Put(context.Background(), newMsg(msgSpec{topic: "T", body: fmt.Sprint(i)}))
		if err != nil {
			t.Fatal(err)
		}
		if res.Status == PutFlushDiskTimeout {
			timeouts++
		}
	}
	if timeouts == 0 {
		t.Fatal("no FLUSH_DISK_TIMEOUT with a 1 ns timeout")
	}
	waitDispatched(t, s)
	if got := len(readAll(t, s, "T", 0)); got != 50 {
		t.Fatalf("timed-out messages must stay stored: %d", got)
	}
	// A cancelled context also stops the wait but keeps the message.
	ctx, cancel := context.WithCancel(context.Background())
	cancel()
	s2 := openTest(t, t.TempDir(), func(o *Options) { o.FlushMode = FlushSync; o.FlushInterval = time.Hour })
	res, err := s2.Put(ctx, newMsg(msgSpec{topic: "T", body: "c"}))
	if err != nil || (res.Status != PutFlushDiskTimeout && res.Status != PutOK) {
		t.Fatal(res, err)
	}
}

func TestStoreAppendRawReplication(t *testing.T) {
	master := openTest(t, t.TempDir(), nil)
	slave := openTest(t, t.TempDir(), nil)
	for i := range 1500 {
		mustPut(t, master, msgSpec{topic: fmt.Sprint("T", i%3), qid: int32(i % 2), body: fmt.Sprintf("%d-%0100d", i, i), keys: fmt.Sprint("k", i)})
	}
	// Ship in odd-sized chunks that split records.
	for off := slave.MaxPhysicalOffset(); off < master.MaxPhysicalOffset(); off = slave.MaxPhysicalOffset() {
		r, err := master.ReadRaw(off, 7000)
		if err != nil {
			t.Fatal(err)
		}
		if err := slave.AppendRaw(off, r.Buffers[0]); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	if err := slave.AppendRaw(1, []byte("x")); !errors.Is(err, ErrBadOffset) {
		t.Fatalf("wrong offset: %v", err)
	}
	waitDispatched(t, slave)
	waitDispatched(t, master)
	for tp := range 3 {
		for q := range int32(2) {
			topic := fmt.Sprint("T", tp)
			a, b := readAll(t, master, topic, q), readAll(t, slave, topic, q)
			if len(a) != len(b) || len(a) == 0 {
				t.Fatalf("%s/%d: master %d slave %d", topic, q, len(a), len(b))
			}
			for i := range a {
				if string(a[i].Body) != string(b[i].Body) || a[i].PhysicalOffset != b[i].PhysicalOffset {
					t.Fatalf("%s/%d[%d] differs", topic, q, i)
				}
			}
		}
	}
	r, _ := slave.QueryByKey("T1", "k1000", 4, 0, 1<<62)
	if r.MessageCount() != 1 {
		t.Fatalf("slave index: %d", r.MessageCount())
	}
	r.Release()
	// A new slave may start at the master's last segment: its queues start
	// mid-way and read back the same records.
	late := openTest(t, t.TempDir(), nil)
	segs := master.cl.list()
	from := segs[len(segs)-1].base
	for off := from; off < master.MaxPhysicalOffset(); off = late.MaxPhysicalOffset() {
		r, err := master.ReadRaw(off, 5000)
		if err != nil {
			t.Fatal(err)
		}
		if err := late.AppendRaw(off, r.Buffers[0]); err != nil {
			t.Fatal(err)
		}
		r.Release()
	}
	waitDispatched(t, late)
	for q := range int32(2) {
		lmin, lmax := late.MinOffset("T2", q), late.MaxOffset("T2", q)
		if lmax != master.MaxOffset("T2", q) || lmin == 0 || lmin >= lmax {
			t.Fatalf("late slave T2/%d: [%d,%d)", q, lmin, lmax)
		}
		g, _ := late.GetMessages("T2", q, lmin, 32, nil)
		m, _ := master.GetMessages("T2", q, lmin, 32, nil)
		if g.Status != GetFound || g.MessageCount() != m.MessageCount() || g.PhysicalOffsets[0] != m.PhysicalOffsets[0] {
			t.Fatalf("late slave read: %v %d vs %d", g.Status, g.MessageCount(), m.MessageCount())
		}
		g.Release()
		m.Release()
		// Below the start: the file is missing, the client is moved on.
		if lmin >= int64(testOptions("").CQEntriesPerFile) {
			r, _ := late.GetMessages("T2", q, 0, 32, nil)
			if r.Status != GetOffsetTooSmall {
				t.Fatalf("below late start: %v", r.Status)
			}
			r.Release()
		}
	}
	// A promoted slave continues queue offsets.
	res := mustPut(t, slave, msgSpec{topic: "T0", qid: 0, body: "promoted"})
	if res.QueueOffset != master.MaxOffset("T0", 0) {
		t.Fatalf("queue offset after promotion %d, want %d", res.QueueOffset, master.MaxOffset("T0", 0))
	}
}

func TestStoreStats(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	for i := range 10 {
		mustPut(t, s, msgSpec{topic: "T", body: fmt.Sprint(i)})
	}
	waitDispatched(t, s)
	r, _ := s.GetMessages("T", 0, 0, 32, nil)
	r.Release()
	st := s.Stats()
	var lat int64
	for _, c := range st.PutLatency {
		lat += c
	}
	if st.PutMessages != 10 || st.PutBytes == 0 || st.GetMessages != 10 || st.GetBytes != st.PutBytes || lat != 10 || st.DispatchLagBytes != 0 || st.Queues != 1 {
		t.Fatalf("stats %+v", st)
	}
}

func TestStoreDeleteTopic(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, nil)
	for i := range 100 {
		mustPut(t, s, msgSpec{topic: "Gone", qid: int32(i % 2), body: "x"})
		mustPut(t, s, msgSpec{topic: "Kept", body: "y"})
	}
	waitDispatched(t, s)
	r, _ := s.GetMessages("Gone", 0, 0, 4, nil) // held across the delete
	if err := s.DeleteTopic("Gone"); err != nil {
		t.Fatal(err)
	}
	if _, err := record.Parse(r.Buffers[0], true); err != nil {
		t.Fatal(err)
	}
	r.Release()
	if got := s.Topics(); len(got) != 1 || got[0] != "Kept" {
		t.Fatalf("topics %v", got)
	}
	if s.MaxOffset("Gone", 0) != 0 {
		t.Fatal("queue still there")
	}
	if _, err := os.Stat(filepath.Join(root, "consumequeue", "Gone")); !os.IsNotExist(err) {
		t.Fatalf("directory left: %v", err)
	}
	res := mustPut(t, s, msgSpec{topic: "Gone", body: "again"})
	if res.QueueOffset != 0 {
		t.Fatalf("offset after delete %d", res.QueueOffset)
	}
}

func TestStoreZeroAllocs(t *testing.T) {
	if testing.Short() || raceEnabled {
		t.Skip("sync.Pool drops items at random under -race")
	}
	s := openTest(t, t.TempDir(), func(o *Options) { o.SegmentSize = 64 << 20 })
	m := newMsg(msgSpec{topic: "T", body: strings.Repeat("a", 128), tags: "TagA"})
	mustPut(t, s, msgSpec{topic: "T", body: "warm"})
	putAllocs := testing.AllocsPerRun(2000, func() {
		if _, err := s.Put(context.Background(), m); err != nil {
			t.Fatal(err)
		}
	})
	waitDispatched(t, s)
	filter := TagSet{record.TagsHash("TagA")}.Match
	getAllocs := testing.AllocsPerRun(2000, func() {
		r, err := s.GetMessages("T", 0, 10, 32, filter)
		if err != nil || r.Status != GetFound {
			t.Fatal(err)
		}
		r.Release()
	})
	t.Logf("allocs per put %.2f, per get %.2f", putAllocs, getAllocs)
	if putAllocs > 0.05 || getAllocs > 0.05 {
		t.Fatalf("allocs per put %.2f, per get %.2f; want 0", putAllocs, getAllocs)
	}
}

// TestStoreFailStop: after an fdatasync failure the store refuses writes
// (and reports it) instead of acknowledging what it may not keep.
func TestStoreFailStop(t *testing.T) {
	var failed []Event
	var mu sync.Mutex
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.FlushMode = FlushSync
		o.Listener = func(e Event) {
			if e.Kind == EventWriteFailed {
				mu.Lock()
				failed = append(failed, e)
				mu.Unlock()
			}
		}
	})
	mustPut(t, s, msgSpec{topic: "T", body: "ok"})
	f, err := s.cl.active.pin()
	if err != nil {
		t.Fatal(err)
	}
	_ = f.Close() // the next pwrite (sync mode writes with pwrite) or fdatasync fails with EBADF
	s.cl.active.unpin()
	res, err := s.Put(context.Background(), newMsg(msgSpec{topic: "T", body: "unsynced"}))
	switch {
	case err == nil && res.Status == PutFlushDiskTimeout: // stored, the sync failed
	case errors.Is(err, ErrWriteFailed) && res.Status == PutServiceNotAvailable: // the write itself failed
	default:
		t.Fatalf("put whose write or sync failed: %v %v", res.Status, err)
	}
	_, err = s.Put(context.Background(), newMsg(msgSpec{topic: "T", body: "refused"}))
	if !errors.Is(err, ErrWriteFailed) || !errors.Is(s.Err(), ErrWriteFailed) || !s.Stats().WriteFailed {
		t.Fatalf("put after failure: %v", err)
	}
	mu.Lock()
	n := len(failed)
	mu.Unlock()
	if n != 1 {
		t.Fatalf("%d write-failed events", n)
	}
}

// TestStoreSyncFlushWriteBehind: in FlushSync mode records of waiting
// putters are buffered and written with one pwrite per group commit. Every
// acknowledged put must be durable, every WAIT=false put readable at once,
// across segment rolls, and all of them must come back after a restart in
// each writer's order.
func TestStoreSyncFlushWriteBehind(t *testing.T) {
	root := t.TempDir()
	mut := func(o *Options) {
		o.FlushMode = FlushSync
		o.FlushInterval = time.Hour // only group-commit requests flush
		o.WarmSegments = true
	}
	s := openTest(t, root, mut)
	const writers, each = 16, 120
	var wg sync.WaitGroup
	for w := range writers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range each {
				m := newMsg(msgSpec{topic: "W", qid: int32(w % 3), body: fmt.Sprintf("%d-%d-%s", w, i, strings.Repeat("x", (w*31+i*7)%300))})
				nowait := i%5 == 4
				if nowait {
					m.Properties = "WAIT\x01false"
				}
				res, err := s.Put(context.Background(), m)
				if err != nil || res.Status != PutOK {
					t.Errorf("put: %v %v", res.Status, err)
					return
				}
				end := res.PhysicalOffset + int64(res.WroteBytes)
				if nowait && s.MaxPhysicalOffset() < end {
					t.Errorf("WAIT=false put not written: max %d < %d", s.MaxPhysicalOffset(), end)
				}
				if !nowait && s.FlushedPhysicalOffset() < end {
					t.Errorf("acknowledged before flushed")
				}
			}
		}()
	}
	wg.Wait()
	if len(s.cl.list()) < 3 {
		t.Fatalf("%d segments: the test must cross segment rolls", len(s.cl.list()))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, root, mut)
	if rep := s.RecoveryReport(); len(rep.Truncations) > 0 || rep.Abnormal {
		t.Fatalf("clean restart report %+v", rep)
	}
	next := make([]int, writers)
	total := 0
	for q := range int32(3) {
		for _, m := range readAll(t, s, "W", q) {
			var w, i int
			if _, err := fmt.Sscanf(string(m.Body), "%d-%d-", &w, &i); err != nil {
				t.Fatalf("body %q: %v", m.Body, err)
			}
			if w%3 != int(q) || i != next[w] {
				t.Fatalf("queue %d: writer %d message %d, want %d", q, w, i, next[w])
			}
			if want := fmt.Sprintf("%d-%d-%s", w, i, strings.Repeat("x", (w*31+i*7)%300)); string(m.Body) != want {
				t.Fatalf("body %q, want %q", m.Body, want)
			}
			next[w]++
			total++
		}
	}
	if total != writers*each {
		t.Fatalf("%d messages after restart, want %d", total, writers*each)
	}
}

// TestStoreSegmentPreparedAtHalf: the allocator pre-writes the next
// segment only once the active one is half full, not right after a roll
// (a whole-segment pre-write competes with group-commit fdatasyncs).
func TestStoreSegmentPreparedAtHalf(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.FlushMode = FlushSync
		o.WarmSegments = true
	})
	prepared := func() *mappedFile {
		s.cl.allocMu.Lock()
		defer s.cl.allocMu.Unlock()
		return s.cl.prepared
	}
	mustPut(t, s, msgSpec{topic: "T", body: "first"})
	s.putMu.Lock()
	nextAt := s.cl.nextAt
	s.putMu.Unlock()
	if m := prepared(); m != nil || nextAt != s.opts.SegmentSize/2 || len(s.cl.allocReq) != 0 {
		t.Fatalf("next segment requested right after the roll (prepared %v, nextAt %d)", m != nil, nextAt)
	}
	for s.MaxPhysicalOffset() < s.opts.SegmentSize/2 {
		mustPut(t, s, msgSpec{topic: "T", body: strings.Repeat("y", 500)})
	}
	testutil.Eventually(t, 5*time.Second, func() error {
		if m := prepared(); m == nil || m.base != s.opts.SegmentSize {
			return errors.New("next segment not prepared")
		}
		return nil
	})
}

// TestStorePrefaultWindow: with mapped writes the prefaulter populates the
// pages ahead of the writer; its ranges are page aligned (madvise refuses
// others, which silently turned pre-faulting off) and the populate keeps
// the bytes already written.
func TestStorePrefaultWindow(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.WarmSegments = true })
	if !s.cl.prefault {
		t.Fatal("FlushAsync store without pre-faulting")
	}
	for i := range 5 {
		mustPut(t, s, msgSpec{topic: "T", body: fmt.Sprint("m", i)})
	}
	s.putMu.Lock()
	s.cl.faulted = s.cl.writePos
	r, ok := s.cl.nextFaultLocked(s.cl.active)
	s.putMu.Unlock()
	if !ok || r.from%4096 != 0 || r.to <= r.from || r.to > r.seg.size {
		t.Fatalf("fault range [%d, %d) ok=%v", r.from, r.to, ok)
	}
	if err := r.populate(); err != nil {
		t.Fatalf("populate: %v", err)
	}
	if s.cl.noPrefault.Load() {
		t.Fatal("pre-faulting turned itself off")
	}
	waitDispatched(t, s)
	if got := readAll(t, s, "T", 0); len(got) != 5 || string(got[4].Body) != "m4" {
		t.Fatalf("read back %d messages after populate", len(got))
	}
}

// TestStoreSyncRange: the mapped flush syncs [flushedTo, pos) from the page
// holding flushedTo (msync wants a page-aligned start), only ever advances
// flushedTo, and clamps pos to the file.
func TestStoreSyncRange(t *testing.T) {
	m, err := createMappedFile(newFileSys(vfs.Default, DefaultMaxOpenFiles), filepath.Join(t.TempDir(), fileNameFor(0)), 0, 64<<10, 64<<10, warmNone)
	if err != nil {
		t.Fatal(err)
	}
	defer m.close()
	copy(m.data[5000:], "records")
	m.flushedTo.Store(5000) // not page aligned
	if err := m.syncRange(9000); err != nil {
		t.Fatal(err)
	}
	if got := m.flushedTo.Load(); got != 9000 {
		t.Fatalf("flushedTo %d, want 9000", got)
	}
	if err := m.syncRange(3000); err != nil || m.flushedTo.Load() != 9000 {
		t.Fatalf("a lower pos moved flushedTo to %d (err %v)", m.flushedTo.Load(), err)
	}
	if err := m.syncRange(1 << 30); err != nil || m.flushedTo.Load() != 64<<10 {
		t.Fatalf("pos past the end: flushedTo %d, err %v", m.flushedTo.Load(), err)
	}
	b, err := os.ReadFile(m.path)
	if err != nil || string(b[5000:5007]) != "records" {
		t.Fatalf("file bytes %q, %v", b[5000:5007], err)
	}
}

// Store times of single puts on the wall clock (Options.Now unset or
// time.Now) are the wall clock's time at the put, in ms, never going back
// from one put to the next, though the clock is read only now and then.
func TestStorePutTimesFollowWallClock(t *testing.T) {
	for _, now := range []func() time.Time{nil, time.Now} {
		s := openTest(t, t.TempDir(), func(o *Options) { o.Now = now })
		if !s.clock.wall {
			t.Fatal("store does not take time.Now for the wall clock")
		}
		last := int64(0)
		// Long enough to cross several of the clock's readings.
		for i, start := 0, time.Now(); time.Since(start) < 3*putClockResync; i++ {
			before := time.Now().UnixMilli()
			r := mustPut(t, s, msgSpec{topic: "T", body: "b"})
			after := time.Now().UnixMilli()
			// A millisecond of slack: the wall clock may be slewed.
			if r.StoreTimestamp < before-1 || r.StoreTimestamp > after+1 {
				t.Fatalf("put %d: store time %d outside [%d, %d]", i, r.StoreTimestamp, before, after)
			}
			if r.StoreTimestamp < last {
				t.Fatalf("put %d: store time %d before the previous %d", i, r.StoreTimestamp, last)
			}
			last = r.StoreTimestamp
		}
	}
}

// latencyPut is a PutDone that keeps its result.
type latencyPut struct {
	res  PutResult
	err  error
	done atomic.Bool
}

func (p *latencyPut) PutDone(res PutResult, err error) { p.res, p.err = res, err; p.done.Store(true) }

func (p *latencyPut) answered() error {
	if !p.done.Load() {
		return errors.New("not answered yet")
	}
	return nil
}

// Every kind of put reports how long it took (PutResult.Latency, what a
// broker times its puts by instead of reading the clock around the call)
// and counts once in Stats.PutLatency: a put answered at once, one
// written behind (until the write that covered it), one that waited for
// the group commit (until it was durable), a pair and a batch.
func TestStorePutResultLatency(t *testing.T) {
	check := func(t *testing.T, what string, res PutResult, err error) {
		t.Helper()
		if err != nil || res.Status != PutOK {
			t.Fatalf("%s: %v %v", what, res.Status, err)
		}
		if res.Latency <= 0 || res.Latency > time.Minute {
			t.Fatalf("%s: latency %v", what, res.Latency)
		}
	}
	counted := func(s *Store) int64 {
		var n int64
		for _, c := range s.Stats().PutLatency {
			n += c
		}
		return n
	}
	t.Run("async", func(t *testing.T) {
		s := openTest(t, t.TempDir(), nil)
		res, err := s.Put(context.Background(), newMsg(msgSpec{topic: "L", body: "put"}))
		check(t, "Put", res, err)
		var p latencyPut
		if _, pending, err := s.PutAsyncDeferred(newMsg(msgSpec{topic: "L", body: "behind"}), true, &p); err != nil || !pending {
			t.Fatalf("PutAsyncDeferred: pending %v, %v", pending, err)
		}
		s.Drain()
		testutil.Eventually(t, 10*time.Second, p.answered)
		check(t, "written behind", p.res, p.err)
		pair, err := s.PutPair(newMsg(msgSpec{topic: "L", body: "first"}), newMsg(msgSpec{topic: "L", body: "second"}))
		check(t, "PutPair[0]", pair[0], err)
		check(t, "PutPair[1]", pair[1], err)
		batch, err := s.PutBatch(context.Background(), newMsg(msgSpec{topic: "L"}), []record.BatchItem{{Body: []byte("a")}, {Body: []byte("b")}})
		check(t, "PutBatch", batch.PutResult, err)
		if n := counted(s); n != 4 {
			t.Fatalf("%d puts counted in PutLatency, want 4 (a pair and a batch count once)", n)
		}
	})
	t.Run("sync", func(t *testing.T) {
		s := openTest(t, t.TempDir(), func(o *Options) { o.FlushMode = FlushSync })
		var p latencyPut
		res, pending, err := s.PutAsync(newMsg(msgSpec{topic: "L", body: "durable"}), true, p.PutDone)
		if err != nil {
			t.Fatal(err)
		}
		if pending {
			testutil.Eventually(t, 10*time.Second, p.answered)
			res, err = p.res, p.err
		}
		check(t, "PutAsync waiting for the group commit", res, err)
		res, err = s.PutWait(context.Background(), newMsg(msgSpec{topic: "L", body: "waited"}), true)
		check(t, "PutWait", res, err)
	})
}
