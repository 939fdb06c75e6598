package store

import (
	"os"
	"path/filepath"
	"testing"
)

// A prepared queue has its directory and first file before any record
// (so the first put's dispatch creates nothing), holds no entries, and
// takes its records from offset 0 as an unprepared one does, across a
// restart too. A queue with records, and a store that replicates, are
// left as they are.
func TestPrepareQueue(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, nil)
	first := filepath.Join(root, "consumequeue", "T", "0", fileNameFor(0))
	if _, err := os.Stat(first); !os.IsNotExist(err) {
		t.Fatalf("queue file before PrepareQueue: %v", err)
	}
	if err := s.PrepareQueue("T", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(first); err != nil {
		t.Fatalf("queue file after PrepareQueue: %v", err)
	}
	if got := s.MaxOffset("T", 0); got != 0 {
		t.Fatalf("prepared queue max offset %d, want 0", got)
	}
	if err := s.PrepareQueue("T", 0); err != nil { // twice: nothing more
		t.Fatal(err)
	}
	for i, body := range []string{"a", "b", "c"} {
		if r := mustPut(t, s, msgSpec{topic: "T", qid: 0, body: body}); r.QueueOffset != int64(i) {
			t.Fatalf("put %d at queue offset %d", i, r.QueueOffset)
		}
	}
	waitDispatched(t, s)
	// A queue with records is not touched (its tail is not replaced).
	if err := s.PrepareQueue("T", 0); err != nil {
		t.Fatal(err)
	}
	if got := readAll(t, s, "T", 0); len(got) != 3 || string(got[0].Body) != "a" || string(got[2].Body) != "c" {
		t.Fatalf("read %d records", len(got))
	}
	// Prepared and never written: empty after a restart, then written.
	if err := s.PrepareQueue("T", 1); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, root, nil)
	if got := s.MaxOffset("T", 1); got != 0 {
		t.Fatalf("prepared queue after restart: max offset %d, want 0", got)
	}
	if r := mustPut(t, s, msgSpec{topic: "T", qid: 1, body: "d"}); r.QueueOffset != 0 {
		t.Fatalf("first put of a prepared queue at offset %d", r.QueueOffset)
	}
	waitDispatched(t, s)
	if got := readAll(t, s, "T", 1); len(got) != 1 || string(got[0].Body) != "d" {
		t.Fatalf("prepared queue after restart: read %d records", len(got))
	}
	if got := readAll(t, s, "T", 0); len(got) != 3 {
		t.Fatalf("queue T/0 after restart: read %d records", len(got))
	}
}

// A store that replicates (raw mode) prepares nothing: its queues start
// where the master's records say.
func TestPrepareQueueRawModeNoop(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, nil)
	if err := s.AppendRaw(0, nil); err != nil { // a slave's first (empty) append
		t.Fatal(err)
	}
	if err := s.PrepareQueue("T", 0); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(root, "consumequeue", "T")); !os.IsNotExist(err) {
		t.Fatalf("raw mode: queue directory made (%v)", err)
	}
}
