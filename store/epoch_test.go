package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
)

// TestStoreEpochFilePinned pins the epoch file format (frozen, see
// epoch.go).
func TestStoreEpochFilePinned(t *testing.T) {
	entries := []EpochEntry{{1, 0}, {2, 4096}, {5, 4096}, {7, 1 << 40}}
	b := AppendEpochFile(nil, entries)
	want := "smartgo-epochs 1\n1 0\n2 4096\n5 4096\n7 1099511627776\n"
	if string(b) != want {
		t.Fatalf("epoch file\n%q\nwant\n%q", b, want)
	}
	back, err := ParseEpochFile(b)
	if err != nil || !slices.Equal(back, entries) {
		t.Fatalf("parse %v %v", back, err)
	}
	if back, err := ParseEpochFile([]byte("smartgo-epochs 1\n")); err != nil || len(back) != 0 {
		t.Fatalf("empty history: %v %v", back, err)
	}
	for _, bad := range []string{"", "smartgo-epochs 2\n", "smartgo-epochs 1\n1 0", "smartgo-epochs 1\n1  0\n",
		"smartgo-epochs 1\n0 0\n", "smartgo-epochs 1\n1 -5\n", "smartgo-epochs 1\n2 10\n1 20\n", "smartgo-epochs 1\n1 10\n2 5\n",
		"smartgo-epochs 1\n1 0\n1 0\n", "smartgo-epochs 1\nx y\n", "smartgo-epochs 1\n99999999999 0\n"} {
		if _, err := ParseEpochFile([]byte(bad)); err == nil {
			t.Errorf("ParseEpochFile(%q) accepted", bad)
		}
	}
}

func FuzzStoreEpochFile(f *testing.F) {
	f.Add([]byte("smartgo-epochs 1\n1 0\n2 4096\n"))
	f.Add([]byte("smartgo-epochs 1\n"))
	f.Fuzz(func(t *testing.T, b []byte) {
		e, err := ParseEpochFile(b)
		if err != nil {
			return
		}
		again, err := ParseEpochFile(AppendEpochFile(nil, e))
		if err != nil || !slices.Equal(again, e) {
			t.Fatalf("round trip of %v: %v %v", e, again, err)
		}
	})
}

func TestStoreEpochStartAndRecord(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	e, err := s.StartEpoch(1)
	if err != nil || e != (EpochEntry{1, 0}) {
		t.Fatalf("StartEpoch(1) = %v %v", e, err)
	}
	mustPut(t, s, msgSpec{topic: "T", body: "a"})
	end := s.MaxPhysicalOffset()
	if e, _ := s.StartEpoch(1); e.StartOffset != 0 {
		t.Fatalf("same epoch again moved its start: %v", e)
	}
	if _, err := s.StartEpoch(3); err != nil {
		t.Fatal(err)
	}
	if _, err := s.StartEpoch(2); !errors.Is(err, ErrEpoch) {
		t.Fatalf("older epoch: %v", err)
	}
	if err := s.RecordEpoch(EpochEntry{2, 0}); err != nil { // below the last: ignored
		t.Fatal(err)
	}
	if err := s.RecordEpoch(EpochEntry{9, end + 1}); !errors.Is(err, ErrEpoch) {
		t.Fatalf("epoch beyond the log end: %v", err)
	}
	if err := s.RecordEpoch(EpochEntry{4, end}); err != nil {
		t.Fatal(err)
	}
	want := []EpochEntry{{1, 0}, {3, end}, {4, end}}
	if got := s.Epochs(); !slices.Equal(got, want) {
		t.Fatalf("epochs %v, want %v", got, want)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, nil)
	if got := s.Epochs(); !slices.Equal(got, want) {
		t.Fatalf("epochs after reopen %v, want %v", got, want)
	}
	if l, ok := s.LastEpoch(); !ok || l != (EpochEntry{4, end}) {
		t.Fatalf("last %v %v", l, ok)
	}
	_ = s.Close()
	if err := os.WriteFile(filepath.Join(dir, epochFileName), []byte("garbage\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(testOptions(dir)); !isCorrupt(err) {
		t.Fatalf("open with a damaged epoch file: %v", err)
	}
}

func TestStoreConsistentOffset(t *testing.T) {
	type h = []EpochEntry
	cases := []struct {
		name      string
		local     h
		localEnd  int64
		remote    h
		remoteEnd int64
		want      int64
	}{
		{"same epoch, remote ahead", h{{1, 0}}, 500, h{{1, 0}}, 900, 500},
		{"same epoch, local ahead", h{{1, 0}}, 900, h{{1, 0}}, 500, 500},
		{"old master's unacknowledged tail", h{{1, 0}}, 900, h{{1, 0}, {2, 600}}, 1000, 600},
		{"deposed master with its own epoch", h{{1, 0}, {2, 600}}, 800, h{{1, 0}, {3, 650}}, 700, 600},
		{"slave that saw epoch 2 then epoch 3 elsewhere", h{{1, 0}, {2, 600}}, 800, h{{1, 0}, {2, 600}, {3, 700}}, 900, 700},
		{"empty local", nil, 0, h{{1, 0}}, 900, 0},
		{"pre-controller data", nil, 300, h{{1, 200}}, 900, 200},
		{"nothing in common", h{{4, 100}}, 300, h{{5, 50}}, 900, 50},
		{"same epoch, different start", h{{1, 0}, {2, 100}}, 300, h{{1, 0}, {2, 150}}, 900, 100},
	}
	for _, c := range cases {
		if got := ConsistentOffset(c.local, c.localEnd, c.remote, c.remoteEnd); got != c.want {
			t.Errorf("%s: %d, want %d", c.name, got, c.want)
		}
		if got := ConsistentOffset(c.remote, c.remoteEnd, c.local, c.localEnd); got != c.want {
			t.Errorf("%s (swapped): %d, want %d", c.name, got, c.want)
		}
	}
}

// putN puts n messages over three queues of two topics and returns their
// results.
func putN(t *testing.T, s *Store, n int, tag string) []PutResult {
	t.Helper()
	var out []PutResult
	for i := range n {
		topic := []string{"TA", "TB"}[i%2]
		out = append(out, mustPut(t, s, msgSpec{topic: topic, qid: int32(i % 3), body: fmt.Sprintf("%s-%d-%s", tag, i, bytes.Repeat([]byte("x"), 700)),
			keys: fmt.Sprintf("k%d", i)}))
	}
	return out
}

func queueContents(t *testing.T, s *Store) map[string][]string {
	t.Helper()
	out := map[string][]string{}
	for _, topic := range []string{"TA", "TB"} {
		for q := int32(0); q < 3; q++ {
			for _, m := range readAll(t, s, topic, q) {
				k := fmt.Sprintf("%s/%d", topic, q)
				out[k] = append(out[k], string(m.Body))
			}
		}
	}
	return out
}

// TestStoreTruncateTail: cutting the log at a record boundary removes the
// records after it from the commitlog (across segments), the consume
// queues and the epochs; new puts continue at the cut with the right
// queue offsets; all of it survives a reopen.
func TestStoreTruncateTail(t *testing.T) {
	dir := t.TempDir()
	s := openTest(t, dir, nil)
	if _, err := s.StartEpoch(1); err != nil {
		t.Fatal(err)
	}
	first := putN(t, s, 100, "a")
	cut := first[60].PhysicalOffset
	if _, err := s.StartEpoch(2); err != nil {
		t.Fatal(err)
	}
	putN(t, s, 150, "b") // several more 64 KiB segments
	waitIndexed(t, s)
	if len(segmentFiles(t, dir)) < 4 {
		t.Fatalf("want the tail across segments, have %d", len(segmentFiles(t, dir)))
	}
	ref := openTest(t, t.TempDir(), nil) // the same 60 messages alone
	putN(t, ref, 60, "a")
	waitDispatched(t, ref)
	want := queueContents(t, ref)

	if err := s.TruncateTail(s.MaxPhysicalOffset() + 1); !errors.Is(err, ErrTruncate) {
		t.Fatalf("cut past the end: %v", err)
	}
	if err := s.TruncateTail(cut); err != nil {
		t.Fatal(err)
	}
	if s.MaxPhysicalOffset() != cut {
		t.Fatalf("end %d after the cut at %d", s.MaxPhysicalOffset(), cut)
	}
	if got := queueContents(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatalf("queues after the cut differ from the first 60 messages")
	}
	if got := s.Epochs(); !slices.Equal(got, []EpochEntry{{1, 0}}) {
		t.Fatalf("epochs after the cut %v", got)
	}
	// Puts continue where the cut left them, in the log and in each queue.
	if _, err := s.StartEpoch(3); err != nil {
		t.Fatal(err)
	}
	more := putN(t, s, 30, "c")
	if more[0].PhysicalOffset != cut {
		t.Fatalf("next put at %d, want %d", more[0].PhysicalOffset, cut)
	}
	refMore := putN(t, ref, 30, "c")
	for i := range more {
		if more[i].QueueOffset != refMore[i].QueueOffset {
			t.Fatalf("put %d got queue offset %d, want %d", i, more[i].QueueOffset, refMore[i].QueueOffset)
		}
	}
	waitIndexed(t, s)
	waitDispatched(t, ref)
	want = queueContents(t, ref)
	if got := queueContents(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatal("queues after new puts differ")
	}
	// A key of the cut tail is not found any more; one of the new puts is.
	if r, _ := s.QueryByKey("TA", "k62", 10, 0, 1<<62); r != nil && len(r.Buffers) > 0 {
		r.Release()
		t.Fatal("key of a cut message still found")
	} else if r != nil {
		r.Release()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, dir, nil)
	if got := queueContents(t, s); fmt.Sprint(got) != fmt.Sprint(want) {
		t.Fatal("queues after reopening differ")
	}
	if got := s.Epochs(); !slices.Equal(got, []EpochEntry{{1, 0}, {3, cut}}) {
		t.Fatalf("epochs after reopen %v", got)
	}
}

// replicate copies src's log from dst's end to src's end with
// ReadRaw/AppendRaw, recording src's epochs as a slave does.
func replicate(t *testing.T, dst, src *Store) {
	t.Helper()
	for _, e := range src.Epochs() {
		if e.StartOffset <= dst.MaxPhysicalOffset() {
			if err := dst.RecordEpoch(e); err != nil {
				t.Fatal(err)
			}
		}
	}
	for dst.MaxPhysicalOffset() < src.MaxPhysicalOffset() {
		r, err := src.ReadRaw(dst.MaxPhysicalOffset(), 8<<10)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range r.Buffers {
			if err := dst.AppendRaw(dst.MaxPhysicalOffset(), b); err != nil {
				t.Fatal(err)
			}
		}
		r.Release()
		for _, e := range src.Epochs() {
			if e.StartOffset <= dst.MaxPhysicalOffset() {
				if err := dst.RecordEpoch(e); err != nil {
					t.Fatal(err)
				}
			}
		}
	}
}

func logBytes(t *testing.T, s *Store, from, to int64) []byte {
	t.Helper()
	var out []byte
	for from < to {
		r, err := s.ReadRaw(from, int(to-from))
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range r.Buffers {
			out = append(out, b...)
			from += int64(len(b))
		}
		r.Release()
	}
	return out
}

// TestStoreTruncateReplicaConverges: a replica that holds the old
// master's unacknowledged tail finds the consistent offset from the epoch
// histories, cuts there and replicates the new master: the two logs and
// their queues end up identical.
func TestStoreTruncateReplicaConverges(t *testing.T) {
	old := openTest(t, t.TempDir(), nil)
	if _, err := old.StartEpoch(1); err != nil {
		t.Fatal(err)
	}
	putN(t, old, 100, "e1")
	lagging := openTest(t, t.TempDir(), nil) // has 60, becomes the new master
	ahead := openTest(t, t.TempDir(), nil)   // has all 100
	replicate(t, ahead, old)
	for lagging.MaxPhysicalOffset() < ahead.MaxPhysicalOffset()/2 {
		r, err := old.ReadRaw(lagging.MaxPhysicalOffset(), 1<<10)
		if err != nil {
			t.Fatal(err)
		}
		for _, b := range r.Buffers {
			if err := lagging.AppendRaw(lagging.MaxPhysicalOffset(), b); err != nil {
				t.Fatal(err)
			}
		}
		r.Release()
	}
	if err := lagging.RecordEpoch(EpochEntry{1, 0}); err != nil {
		t.Fatal(err)
	}
	// The lagging replica may end in the middle of a record: the new
	// master starts its epoch at its last complete record.
	if end, err := lagging.DropPartialTail(); err != nil || end != lagging.MaxPhysicalOffset() || end != lagging.DispatchedPhysicalOffset() {
		t.Fatalf("drop partial tail: end %d, max %d, dispatched %d, %v", end, lagging.MaxPhysicalOffset(), lagging.DispatchedPhysicalOffset(), err)
	}
	if _, err := lagging.StartEpoch(2); err != nil {
		t.Fatal(err)
	}
	putN(t, lagging, 40, "e2")
	waitDispatched(t, lagging)

	c := ConsistentOffset(ahead.Epochs(), ahead.MaxPhysicalOffset(), lagging.Epochs(), lagging.MaxPhysicalOffset())
	if start := lagging.Epochs()[1].StartOffset; c != start {
		t.Fatalf("consistent offset %d, want the new epoch's start %d", c, start)
	}
	if err := ahead.TruncateTail(c); err != nil {
		t.Fatal(err)
	}
	replicate(t, ahead, lagging)
	waitDispatched(t, ahead)
	if !slices.Equal(ahead.Epochs(), lagging.Epochs()) {
		t.Fatalf("epochs %v vs %v", ahead.Epochs(), lagging.Epochs())
	}
	end := lagging.MaxPhysicalOffset()
	if ahead.MaxPhysicalOffset() != end || !bytes.Equal(logBytes(t, ahead, 0, end), logBytes(t, lagging, 0, end)) {
		t.Fatal("logs differ after the replica converged")
	}
	if a, b := queueContents(t, ahead), queueContents(t, lagging); fmt.Sprint(a) != fmt.Sprint(b) {
		t.Fatal("queues differ after the replica converged")
	}
}

// TestStoreDispatchLimit: records past the limit stay out of the consume
// queues until the limit moves.
func TestStoreDispatchLimit(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	rs := putN(t, s, 10, "a")
	waitDispatched(t, s)
	s.SetDispatchLimit(s.MaxPhysicalOffset())
	putN(t, s, 10, "b")
	s.dispatchAvailable()
	if got := s.MaxOffset("TA", 0) + s.MaxOffset("TA", 1) + s.MaxOffset("TA", 2) + s.MaxOffset("TB", 0) + s.MaxOffset("TB", 1) + s.MaxOffset("TB", 2); got != 10 {
		t.Fatalf("%d entries visible past the limit", got)
	}
	_ = rs
	s.SetDispatchLimit(1 << 62)
	waitDispatched(t, s)
	if got := s.MaxOffset("TA", 0) + s.MaxOffset("TA", 1) + s.MaxOffset("TA", 2) + s.MaxOffset("TB", 0) + s.MaxOffset("TB", 1) + s.MaxOffset("TB", 2); got != 20 {
		t.Fatalf("%d entries visible after lifting the limit", got)
	}
}
