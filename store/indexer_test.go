package store

import (
	"fmt"
	"path/filepath"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// A key is found as soon as its record is consumable: QueryByKey waits for
// the indexer to reach the dispatcher.
func TestIndexerQueryAfterDispatch(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.IndexEntries = 5000; o.IndexSlots = 512 })
	for i := range 300 {
		mustPut(t, s, msgSpec{topic: "T", body: "b", keys: fmt.Sprintf("k%d", i)})
		waitDispatched(t, s)
		r, err := s.QueryByKey("T", fmt.Sprintf("k%d", i), 4, 0, 1<<62)
		if err != nil || r.MessageCount() != 1 {
			t.Fatalf("key k%d right after dispatch: %d results, %v", i, r.MessageCount(), err)
		}
		r.Release()
	}
	if st := s.Stats(); st.IndexLagBytes != 0 {
		t.Fatalf("index lag %d after queries", st.IndexLagBytes)
	}
}

// Records without keys still move the index's resume point: a restart
// walks from the last record walked, not from the last one that had keys.
func TestIndexerResumeCoversKeylessRecords(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, func(o *Options) { o.IndexEntries = 5000; o.IndexSlots = 512 })
	for i := range 20 {
		mustPut(t, s, msgSpec{topic: "T", body: "keyed", keys: fmt.Sprintf("k%d", i)})
	}
	var last int64
	for range 200 {
		last = mustPut(t, s, msgSpec{topic: "T", body: "no keys"}).PhysicalOffset
	}
	waitDispatched(t, s)
	r, _ := s.QueryByKey("T", "k3", 4, 0, 1<<62)
	if r.MessageCount() != 1 || r.IndexLastUpdatePhyOffset != last {
		t.Fatalf("k3: %d results, index at %d, last record at %d", r.MessageCount(), r.IndexLastUpdatePhyOffset, last)
	}
	r.Release()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s2 := openTest(t, root, func(o *Options) { o.IndexEntries = 5000; o.IndexSlots = 512 })
	if rep := s2.RecoveryReport(); rep.IndexFrom != last {
		t.Fatalf("index walk resumed at %d, want the last record %d", rep.IndexFrom, last)
	}
	for _, k := range []string{"k0", "k19"} {
		r, _ := s2.QueryByKey("T", k, 4, 0, 1<<62)
		if r.MessageCount() != 1 {
			t.Fatalf("%s after restart: %d results", k, r.MessageCount())
		}
		r.Release()
	}
}

// A crash while the indexer trails the dispatcher loses no key: recovery
// indexes from where the index had got to.
func TestIndexerCatchesUpAfterCrash(t *testing.T) {
	root := t.TempDir()
	opts := func(o *Options) { o.IndexEntries = 5000; o.IndexSlots = 512 }
	s := openTest(t, root, opts)
	for i := range 50 {
		mustPut(t, s, msgSpec{topic: "T", body: "early", keys: fmt.Sprintf("e%d", i)})
	}
	waitDispatched(t, s)
	s.waitIndexed(s.dispatched.Load(), indexCatchUpWait)
	indexedBefore := s.indexed.Load()

	// Hold the indexer back while more records are stored and dispatched,
	// and take the files as a crash would leave them.
	s.ix.run.Lock()
	for i := range 80 {
		mustPut(t, s, msgSpec{topic: "T", body: "late", keys: fmt.Sprintf("l%d", i)})
	}
	waitDispatched(t, s)
	if s.indexed.Load() != indexedBefore {
		s.ix.run.Unlock()
		t.Fatal("indexer moved while held")
	}
	// Copies read the page cache: what a killed process leaves behind.
	image := filepath.Join(t.TempDir(), "image")
	copyTree(t, root, image)
	s.ix.run.Unlock()

	s2 := openTest(t, image, opts)
	rep := s2.RecoveryReport()
	if !rep.Abnormal || rep.IndexFrom >= indexedBefore {
		t.Fatalf("abnormal=%v index walk from %d (indexed before %d)", rep.Abnormal, rep.IndexFrom, indexedBefore)
	}
	for _, k := range []string{"e0", "e49", "l0", "l40", "l79"} {
		r, _ := s2.QueryByKey("T", k, 4, 0, 1<<62)
		if r.MessageCount() != 1 {
			t.Fatalf("%s after crash recovery: %d results", k, r.MessageCount())
		}
		r.Release()
	}
}

// Index files are synced every IndexFlushInterval, not at every logic
// flush, and always at Close; the checkpoint's index timestamp only
// claims what was synced.
func TestIndexFlushInterval(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, func(o *Options) { o.IndexEntries = 5000; o.IndexSlots = 512; o.IndexFlushInterval = time.Hour })
	first := mustPut(t, s, msgSpec{topic: "T", body: "b", keys: "first"})
	// The first logic flush syncs the index (none before it).
	testutil.Eventually(t, 5*time.Second, func() error {
		if cp := s.lastCheckpoint(); cp.Index < first.StoreTimestamp {
			return fmt.Errorf("checkpoint %+v", cp)
		}
		return nil
	})
	time.Sleep(5 * time.Millisecond) // a later store timestamp
	var last PutResult
	for i := range 50 {
		last = mustPut(t, s, msgSpec{topic: "T", body: "b", keys: fmt.Sprintf("k%d", i)})
	}
	waitDispatched(t, s)
	s.waitIndexed(s.dispatched.Load(), indexCatchUpWait)
	// Consume queues go on being synced and checkpointed; the index not.
	testutil.Eventually(t, 5*time.Second, func() error {
		if cp := s.lastCheckpoint(); cp.Logics < last.StoreTimestamp {
			return fmt.Errorf("checkpoint %+v", cp)
		}
		return nil
	})
	f := s.idx.list()[len(s.idx.list())-1]
	f.mu.RLock()
	count := int64(f.count)
	f.mu.RUnlock()
	if cp := s.lastCheckpoint(); cp.Index >= last.StoreTimestamp || f.mf.flushedTo.Load() >= count {
		t.Fatalf("index synced before its interval: checkpoint %+v, synced to entry %d of %d", cp, f.mf.flushedTo.Load(), count)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if f.mf.flushedTo.Load() != count {
		t.Fatalf("Close synced the index to %d of %d", f.mf.flushedTo.Load(), count)
	}
	cp, ok, err := readCheckpoint(root)
	if !ok || err != nil || cp.Index < last.StoreTimestamp {
		t.Fatalf("checkpoint after Close %+v ok=%v err=%v", cp, ok, err)
	}
}

// Index slots and header live in memory between index syncs: a process
// killed in between leaves an index file whose header and slots are those
// of the last sync, consistent with each other, and recovery indexes the
// rest again from there.
func TestIndexKilledBetweenSyncs(t *testing.T) {
	root := t.TempDir()
	opts := func(o *Options) { o.IndexEntries = 5000; o.IndexSlots = 512; o.IndexFlushInterval = time.Hour }
	s := openTest(t, root, opts)
	first := mustPut(t, s, msgSpec{topic: "T", body: "b", keys: "synced"})
	testutil.Eventually(t, 5*time.Second, func() error { // the first logic flush syncs the index
		if cp := s.lastCheckpoint(); cp.Index < first.StoreTimestamp {
			return fmt.Errorf("checkpoint %+v", cp)
		}
		return nil
	})
	var late []PutResult
	for i := range 100 {
		late = append(late, mustPut(t, s, msgSpec{topic: "T", body: "b", keys: fmt.Sprintf("late%d", i)}))
	}
	waitDispatched(t, s)
	s.waitIndexed(s.dispatched.Load(), indexCatchUpWait)
	r, _ := s.QueryByKey("T", "late99", 4, 0, 1<<62)
	if r.MessageCount() != 1 {
		t.Fatalf("late99 before the kill: %d", r.MessageCount())
	}
	r.Release()
	image := filepath.Join(t.TempDir(), "image")
	copyTree(t, root, image)

	s2 := openTest(t, image, opts)
	rep := s2.RecoveryReport()
	if rep.IndexFrom > late[0].PhysicalOffset {
		t.Fatalf("index walk resumed at %d, after the unsynced records (first at %d)", rep.IndexFrom, late[0].PhysicalOffset)
	}
	for _, k := range []string{"synced", "late0", "late50", "late99"} {
		r, _ := s2.QueryByKey("T", k, 4, 0, 1<<62)
		if r.MessageCount() != 1 {
			t.Fatalf("%s after the kill: %d results", k, r.MessageCount())
		}
		r.Release()
	}
}

// Runs of records without keys are skipped by the indexer without being
// read; keys between such runs are all indexed, and the resume point still
// moves to the last record.
func TestIndexerKeylessRunsAndKeys(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.IndexEntries = 5000; o.IndexSlots = 512 })
	for round := range 20 {
		for range 30 {
			mustPut(t, s, msgSpec{topic: "T", body: "no keys"})
		}
		mustPut(t, s, msgSpec{topic: "T", body: "keyed", keys: fmt.Sprintf("r%d", round)})
		if round%2 == 0 {
			waitIndexed(t, s) // let some rounds end on a keyed record, some not
		}
	}
	var last int64
	for range 30 {
		last = mustPut(t, s, msgSpec{topic: "T", body: "no keys"}).PhysicalOffset
	}
	waitIndexed(t, s)
	for round := range 20 {
		r, _ := s.QueryByKey("T", fmt.Sprintf("r%d", round), 4, 0, 1<<62)
		if r.MessageCount() != 1 {
			t.Fatalf("r%d: %d results", round, r.MessageCount())
		}
		if round == 19 && r.IndexLastUpdatePhyOffset != last {
			t.Fatalf("index at %d, last record at %d", r.IndexLastUpdatePhyOffset, last)
		}
		r.Release()
	}
}

// A dispatch round indexes its own records when the writer noted them
// (no hand-off to the indexer goroutine, no thread woken), and a round
// too long for that is left to the indexer; keys are found either way.
func TestIndexerRoundsOnDispatcher(t *testing.T) {
	s := openTest(t, t.TempDir(), func(o *Options) { o.IndexEntries = 50000; o.IndexSlots = 4096 })
	// The first key makes the index file: the indexer goroutine's work.
	mustPut(t, s, msgSpec{topic: "T", body: "b", keys: "first"})
	waitIndexed(t, s)
	loops := s.ix.loops.Load()
	for i := range 100 {
		mustPut(t, s, msgSpec{topic: "T", body: "b", keys: fmt.Sprintf("k%d", i)})
		waitIndexed(t, s)
		mustPut(t, s, msgSpec{topic: "T", body: "no keys"})
		waitIndexed(t, s)
	}
	if n := s.ix.loops.Load() - loops; n != 0 {
		t.Fatalf("the indexer goroutine ran %d rounds for rounds the dispatcher could index", n)
	}

	// One round of more notes than a round indexes itself.
	s.dispMu.Lock()
	for i := range maxInlineIndex + 10 {
		mustPut(t, s, msgSpec{topic: "T", body: "b", keys: fmt.Sprintf("long%d", i)})
	}
	s.dispMu.Unlock()
	s.wakeDispatcher()
	waitIndexed(t, s)
	if s.ix.loops.Load() == loops {
		t.Fatal("a long round was indexed without the indexer goroutine")
	}
	for _, k := range []string{"k0", "k99", "long0", fmt.Sprintf("long%d", maxInlineIndex+9)} {
		r, err := s.QueryByKey("T", k, 4, 0, 1<<62)
		if err != nil || r.MessageCount() != 1 {
			t.Fatalf("%s: %d results, %v", k, r.MessageCount(), err)
		}
		r.Release()
	}
}
