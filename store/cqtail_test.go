package store

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/store/record"
)

// Readers following a queue while the dispatcher makes its entries read
// each entry once it is final, whether it is still in the queue's tail or
// already in the file, across tails and files (1,000 entries per file: a
// file does not end on a tail's end).
func TestConsumeQueueTailReadersFollowWriter(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.CQEntriesPerFile = 1000
		o.SegmentSize = 1 << 20
	})
	const n = 3000
	var wg sync.WaitGroup
	errs := make(chan error, 4)
	for range 3 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			deadline := time.Now().Add(30 * time.Second)
			for off := int64(0); off < n; {
				if time.Now().After(deadline) {
					errs <- fmt.Errorf("reader stuck at %d", off)
					return
				}
				r, err := s.GetMessages("T", 0, off, 32, nil)
				if err != nil {
					errs <- err
					return
				}
				for i, b := range r.Buffers {
					m, _, err := record.Decode(b, true)
					if err != nil || m.QueueOffset != r.QueueOffsets[i] || string(m.Body) != fmt.Sprintf("m%d", r.QueueOffsets[i]) {
						errs <- fmt.Errorf("offset %d: record offset %d body %q err %v", r.QueueOffsets[i], m.QueueOffset, m.Body, err)
						r.Release()
						return
					}
					if r.QueueOffsets[i] != off {
						errs <- fmt.Errorf("read offset %d, expected %d", r.QueueOffsets[i], off)
						r.Release()
						return
					}
					off++
				}
				r.Release()
			}
		}()
	}
	for i := range n {
		mustPut(t, s, msgSpec{topic: "T", body: fmt.Sprintf("m%d", i)})
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
}

// A logic flush writes the entries still in a queue's tail to its file
// before it syncs it: the file then holds every entry.
func TestConsumeQueueTailWrittenByFlush(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, func(o *Options) {
		o.CQEntriesPerFile = 1000
		o.LogicFlushInterval = time.Hour
	})
	var phys []int64
	for i := range 50 {
		phys = append(phys, mustPut(t, s, msgSpec{topic: "T", body: fmt.Sprintf("m%d", i)}).PhysicalOffset)
	}
	waitDispatched(t, s)
	if err := s.flushLogic(false); err != nil {
		t.Fatal(err)
	}
	b, err := os.ReadFile(filepath.Join(root, "consumequeue", "T", "0", fileNameFor(0)))
	if err != nil {
		t.Fatal(err)
	}
	for i, phy := range phys {
		if e := getCQEntry(b[i*cqEntrySize:]); e.phy != phy {
			t.Fatalf("entry %d in the file: phy %d, want %d", i, e.phy, phy)
		}
	}
	if e := getCQEntry(b[len(phys)*cqEntrySize:]); e != (cqEntry{}) {
		t.Fatalf("entry after the last: %+v", e)
	}
}

// A process killed with entries in its tails loses only those entries:
// recovery makes them again from the commitlog.
func TestConsumeQueueTailLostToKill(t *testing.T) {
	root := t.TempDir()
	opts := func(o *Options) {
		o.CQEntriesPerFile = 1000
		o.LogicFlushInterval = time.Hour
	}
	s := openTest(t, root, opts)
	const n = 300
	for i := range n {
		for q := range int32(2) {
			m := newMsg(msgSpec{topic: "T", qid: q, body: fmt.Sprintf("m%d", i)})
			if _, err := s.Put(context.Background(), m); err != nil {
				t.Fatal(err)
			}
		}
	}
	waitDispatched(t, s)
	// Copies read the page cache: what a killed process leaves behind.
	image := filepath.Join(t.TempDir(), "image")
	copyTree(t, root, image)

	s2 := openTest(t, image, opts)
	if !s2.RecoveryReport().Abnormal {
		t.Fatal("recovery did not see the kill")
	}
	for q := range int32(2) {
		got := readAll(t, s2, "T", q)
		if len(got) != n {
			t.Fatalf("queue %d after the kill: %d messages, want %d", q, len(got), n)
		}
		for i, m := range got {
			if string(m.Body) != fmt.Sprintf("m%d", i) {
				t.Fatalf("queue %d offset %d: body %q", q, i, m.Body)
			}
		}
	}
}

// dispatcherQueue is topic T's queue 0 of a store of large queue files
// with no flush rounds, with the dispatcher's lock held until the test
// ends: the caller appends as the dispatcher would.
func dispatcherQueue(t testing.TB) *consumeQueue {
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.CQEntriesPerFile = 100_000
		// No flush rounds allocating while the allocations are counted.
		o.FlushInterval, o.LogicFlushInterval = time.Hour, time.Hour
	})
	mustPut(t, s, msgSpec{topic: "T", body: "x"})
	waitDispatched(t, s)
	s.dispMu.Lock()
	t.Cleanup(func() {
		s.dispMu.Unlock()
		_ = s.Close() // the entries made here point at no record
	})
	cq := s.cqForDispatch([]byte("T"), 0)
	if cq == nil {
		t.Fatal("no queue")
	}
	return cq
}

// A queue's tails reuse the buffer of the tail they replace when no
// reader holds it, and leave a held one to its reader: entries read back
// right either way, from the tail or the file.
func TestConsumeQueueTailReusesItsBuffer(t *testing.T) {
	cq := dispatcherQueue(t)
	add := func(n int) { // a dispatch round's appends
		for range n {
			off := cq.next()
			if _, ok, err := cq.appendEntry(off, cqEntry{phy: off * 100, size: int32(off), tags: off}, 0); !ok || err != nil {
				t.Fatalf("append %d: %v %v", off, ok, err)
			}
		}
		cq.publish()
	}
	check := func() {
		t.Helper()
		for off := cq.minOff.Load() + 1; off < cq.maxOff.Load(); off++ {
			if e, ok := cq.entry(off); !ok || e != (cqEntry{phy: off * 100, size: int32(off), tags: off}) {
				t.Fatalf("entry %d: %+v %v", off, e, ok)
			}
		}
	}
	// Tails grow to cqTailMaxEntries (no flush writes any of them here),
	// then a replaced tail's buffer is the spare.
	add(3 * cqTailMaxEntries)
	// One tail's worth of entries: one replacement, its cqTail the only
	// allocation (a fresh buffer would be a second; the margin is for
	// the process's other goroutines).
	if n := testing.AllocsPerRun(50, func() { add(cqTailMaxEntries) }); n >= 1.5 {
		t.Fatalf("%.2f allocations per tail, want 1", n)
	}
	check()

	held := cq.tail.Load()
	held.readers.Add(1) // a reader in its buffer
	add(cqTailMaxEntries)
	same := func(a, b []byte) bool { return cap(a) > 0 && cap(b) > 0 && &a[:1][0] == &b[:1][0] }
	if nt := cq.tail.Load(); nt == held || same(cq.spare, held.buf) || same(nt.buf, held.buf) {
		t.Fatal("a tail's buffer held by a reader was kept for reuse")
	}
	held.readers.Add(-1)
	add(3 * cqTailMaxEntries)
	if e := getCQEntry(held.buf); e.phy != held.start*100 {
		t.Fatalf("the held tail's buffer was written: %+v", e)
	}
	check()
}

// A queue's tail doubles each time it fills before a logic flush wrote
// any of it, up to cqTailMaxEntries, and halves when a flush wrote part
// of it; the entries read back right through every size, from the tails
// and from the file.
func TestConsumeQueueTailGrowsWhenBusy(t *testing.T) {
	cq := dispatcherQueue(t)
	add := func(n int) {
		t.Helper()
		for range n {
			off := cq.next()
			if _, ok, err := cq.appendEntry(off, cqEntry{phy: off * 100, size: int32(off), tags: off}, 0); !ok || err != nil {
				t.Fatalf("append %d: %v %v", off, ok, err)
			}
		}
		cq.publish()
	}
	room := func() int { return len(cq.tail.Load().buf) / cqEntrySize }
	fill := func() { // the current tail full, then one entry in the next
		t.Helper()
		t0 := cq.tail.Load()
		add(int(t0.ends()-cq.next()) + 1)
		if cq.tail.Load() == t0 {
			t.Fatal("the tail was not replaced")
		}
	}
	if got := room(); got != cqTailEntries {
		t.Fatalf("first tail: %d entries, want %d", got, cqTailEntries)
	}
	for want := 2 * cqTailEntries; want <= cqTailMaxEntries; want *= 2 {
		fill()
		if got := room(); got != want {
			t.Fatalf("tail after a full one: %d entries, want %d", got, want)
		}
	}
	fill()
	if got := room(); got != cqTailMaxEntries {
		t.Fatalf("tail at the most: %d entries, want %d", got, cqTailMaxEntries)
	}
	for want := cqTailMaxEntries / 2; want >= cqTailEntries; want /= 2 {
		add(3)
		if err := cq.flush(); err != nil { // writes part of the tail
			t.Fatal(err)
		}
		fill()
		if got := room(); got != want {
			t.Fatalf("tail after a flushed one: %d entries, want %d", got, want)
		}
	}
	add(3)
	if err := cq.flush(); err != nil {
		t.Fatal(err)
	}
	fill()
	if got := room(); got != cqTailEntries {
		t.Fatalf("tail at the least: %d entries, want %d", got, cqTailEntries)
	}
	if err := cq.flush(); err != nil {
		t.Fatal(err)
	}
	for off := int64(1); off < cq.maxOff.Load(); off++ {
		if e, ok := cq.entry(off); !ok || e != (cqEntry{phy: off * 100, size: int32(off), tags: off}) {
			t.Fatalf("entry %d: %+v %v", off, e, ok)
		}
	}
}
