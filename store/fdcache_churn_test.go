package store

import (
	"testing"
	"time"
)

// TestFDCacheFlushChurn: a consume-queue flush over more files with
// unflushed entries than descriptors (48 queues written between flushes,
// 16 descriptors) reopens about the files beyond the bound at each
// round: those that kept a descriptor keep it, and the others take turns
// in the room left. Before, every reopen let the clock close a file the
// same flush needed next (the queues come in map order), so nearly every
// file of every round was reopened. The bound holds throughout. (The
// cache's room is maxOpen less the sync rings' descriptors.)
func TestFDCacheFlushChurn(t *testing.T) {
	const queues, maxOpen, rounds = 48, 16, 4
	root := t.TempDir()
	s := openTest(t, root, func(o *Options) {
		o.MaxOpenFiles = maxOpen
		// No periodic logic round: the test runs each one itself.
		o.LogicFlushInterval = time.Hour
		o.IndexFlushInterval = time.Hour
	})
	flush := func() int64 {
		t.Helper()
		r0 := s.Stats().FileReopens
		if err := s.flushLogic(false); err != nil {
			t.Fatal(err)
		}
		return s.Stats().FileReopens - r0
	}
	putEveryQueue(t, s, queues, 0)
	waitIndexed(t, s)
	flush() // the first round: files created since the start
	var total int64
	// room is the least the cache held: maxOpen less the descriptors of
	// the process's sync rings (fdCache.limit), which syncs may set up at
	// any time.
	room := s.fs.fds.limit()
	for r := 1; r <= rounds; r++ {
		putEveryQueue(t, s, queues, r)
		waitIndexed(t, s)
		room = min(room, s.fs.fds.limit())
		n := flush()
		room = min(room, s.fs.fds.limit())
		total += n
		if fds, kinds := storeFDs(t, root); fds > maxOpen+1 {
			t.Fatalf("round %d: %d descriptors open under the store (%v), want <= %d", r, fds, kinds, maxOpen+1)
		}
		t.Logf("round %d: %d reopens for %d queues with unflushed entries, %d descriptors", r, n, queues, room)
	}
	// At best queues-maxOpen+1 per round (one descriptor is the active
	// commitlog segment's, one the room that the others take turns in);
	// a quarter of the bound more for the reopens of the dispatcher and
	// the indexer between the rounds.
	if want := int64(rounds * (queues - room + 2 + maxOpen/4)); total > want {
		t.Fatalf("%d reopens in %d flushes of %d queues with %d descriptors, want <= %d", total, rounds, queues, room, want)
	}
	checkEveryQueue(t, s, queues, rounds+1)
}
