package controller

import (
	"bytes"
	"errors"
	"fmt"
	"log/slog"
	"os"
	"path/filepath"
	"testing"
	"time"

	"github.com/hashicorp/raft"
)

func openLS(t *testing.T, dir string) *logStore {
	t.Helper()
	ls, err := openLogStore(dir, slog.New(slog.DiscardHandler))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = ls.Close() })
	return ls
}

func entries(lo, hi uint64, term uint64) []*raft.Log {
	var out []*raft.Log
	for i := lo; i <= hi; i++ {
		out = append(out, &raft.Log{Index: i, Term: term, Type: raft.LogCommand, Data: fmt.Appendf(nil, "e%d", i),
			AppendedAt: time.Unix(1700000000, int64(i))})
	}
	return out
}

func checkRange(t *testing.T, ls *logStore, first, last uint64) {
	t.Helper()
	f, _ := ls.FirstIndex()
	l, _ := ls.LastIndex()
	if f != first || l != last {
		t.Fatalf("range %d..%d, want %d..%d", f, l, first, last)
	}
	for i := first; i <= last && last != 0; i++ {
		var e raft.Log
		if err := ls.GetLog(i, &e); err != nil {
			t.Fatalf("GetLog(%d): %v", i, err)
		}
		if e.Index != i || string(e.Data) != fmt.Sprintf("e%d", i) {
			t.Fatalf("entry %d = %+v", i, e)
		}
	}
	var e raft.Log
	if err := ls.GetLog(last+1, &e); !errors.Is(err, raft.ErrLogNotFound) {
		t.Fatalf("GetLog past the end: %v", err)
	}
}

func TestControllerLogStoreReplay(t *testing.T) {
	dir := t.TempDir()
	ls := openLS(t, dir)
	checkRange(t, ls, 0, 0)
	if err := ls.StoreLogs(entries(1, 10, 1)); err != nil {
		t.Fatal(err)
	}
	if err := ls.StoreLogs(entries(12, 12, 1)); err == nil {
		t.Fatal("a gap was accepted")
	}
	if err := ls.DeleteRange(1, 4); err != nil { // compaction
		t.Fatal(err)
	}
	if err := ls.DeleteRange(8, 10); err != nil { // conflicting tail
		t.Fatal(err)
	}
	if err := ls.DeleteRange(6, 6); err == nil {
		t.Fatal("a hole in the middle was accepted")
	}
	if err := ls.StoreLogs(entries(8, 9, 2)); err != nil {
		t.Fatal(err)
	}
	checkRange(t, ls, 5, 9)
	if err := ls.SetUint64([]byte("CurrentTerm"), 7); err != nil {
		t.Fatal(err)
	}
	if err := ls.Set([]byte("LastVoteCand"), []byte("x:1")); err != nil {
		t.Fatal(err)
	}
	_ = ls.Close()

	ls = openLS(t, dir)
	checkRange(t, ls, 5, 9)
	var e raft.Log
	_ = ls.GetLog(8, &e)
	if e.Term != 2 || e.AppendedAt.UnixNano() != time.Unix(1700000000, 8).UnixNano() {
		t.Fatalf("entry 8 after replay %+v", e)
	}
	if v, err := ls.GetUint64([]byte("CurrentTerm")); err != nil || v != 7 {
		t.Fatalf("term %d %v", v, err)
	}
	if v, err := ls.Get([]byte("LastVoteCand")); err != nil || string(v) != "x:1" {
		t.Fatalf("vote %q %v", v, err)
	}
	if _, err := ls.Get([]byte("missing")); err == nil || err.Error() != "not found" {
		t.Fatalf("missing key: %v", err)
	}
	// Everything deleted (a snapshot install), then a new start anywhere.
	if err := ls.DeleteRange(5, 9); err != nil {
		t.Fatal(err)
	}
	if err := ls.StoreLogs(entries(100, 101, 3)); err != nil {
		t.Fatal(err)
	}
	_ = ls.Close()
	ls = openLS(t, dir)
	checkRange(t, ls, 100, 101)
}

func TestControllerLogStoreTornTail(t *testing.T) {
	dir := t.TempDir()
	ls := openLS(t, dir)
	if err := ls.StoreLogs(entries(1, 3, 1)); err != nil {
		t.Fatal(err)
	}
	_ = ls.Close()
	path := filepath.Join(dir, logFileName)
	data, _ := os.ReadFile(path)
	one := appendEntryRecord(nil, entries(4, 4, 1)[0])
	for _, tail := range [][]byte{
		one[:5],                       // header cut
		one[:len(one)-3],              // payload cut
		corruptLast(one),              // last record damaged
		make([]byte, 4096),            // zero-filled tail
		append(one[:0:0], one[:8]...), // header only
	} {
		if err := os.WriteFile(path, append(append([]byte(nil), data...), tail...), 0o644); err != nil {
			t.Fatal(err)
		}
		ls = openLS(t, dir)
		checkRange(t, ls, 1, 3)
		// Appends continue after the cut.
		if err := ls.StoreLogs(entries(4, 4, 1)); err != nil {
			t.Fatal(err)
		}
		_ = ls.Close()
		ls = openLS(t, dir)
		checkRange(t, ls, 1, 4)
		_ = ls.Close()
	}
}

func corruptLast(rec []byte) []byte {
	b := append([]byte(nil), rec...)
	b[len(b)-1] ^= 0xFF
	return b
}

func TestControllerLogStoreCorruptMiddle(t *testing.T) {
	dir := t.TempDir()
	ls := openLS(t, dir)
	if err := ls.StoreLogs(entries(1, 5, 1)); err != nil {
		t.Fatal(err)
	}
	_ = ls.Close()
	path := filepath.Join(dir, logFileName)
	data, _ := os.ReadFile(path)
	data[recHeaderSize+3] ^= 0x40 // inside the first record
	if err := os.WriteFile(path, data, 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openLogStore(dir, slog.New(slog.DiscardHandler)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with a damaged first record: %v, want ErrCorrupt", err)
	}
	if err := os.WriteFile(filepath.Join(dir, stableFileName), []byte("{"), 0o644); err != nil {
		t.Fatal(err)
	}
	if _, err := openLogStore(dir, slog.New(slog.DiscardHandler)); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("open with a damaged stable file: %v, want ErrCorrupt", err)
	}
}

func TestControllerLogStoreCompaction(t *testing.T) {
	dir := t.TempDir()
	ls := openLS(t, dir)
	big := bytes.Repeat([]byte("x"), 12<<10)
	var next uint64 = 1
	for range 200 {
		if err := ls.StoreLogs([]*raft.Log{{Index: next, Term: 1, Data: big}}); err != nil {
			t.Fatal(err)
		}
		if next > 5 {
			if err := ls.DeleteRange(next-5, next-5); err != nil {
				t.Fatal(err)
			}
		}
		next++
	}
	st, _ := os.Stat(filepath.Join(dir, logFileName))
	if st.Size() > 2*compactMinSize {
		t.Fatalf("log file %d bytes for 5 live entries: not compacted", st.Size())
	}
	_ = ls.Close()
	ls = openLS(t, dir)
	if f, _ := ls.FirstIndex(); f != next-5 {
		t.Fatalf("first %d after compaction, want %d", f, next-5)
	}
	if l, _ := ls.LastIndex(); l != next-1 {
		t.Fatalf("last %d after compaction, want %d", l, next-1)
	}
}

// FuzzControllerLogReplay: replaying arbitrary bytes never panics; what it
// accepts is a log whose entries are contiguous.
func FuzzControllerLogReplay(f *testing.F) {
	var seed []byte
	for _, e := range entries(1, 3, 1) {
		seed = appendEntryRecord(seed, e)
	}
	seed = appendDeleteRecord(seed, 3, 3)
	f.Add(seed)
	f.Add([]byte{0, 0, 0, 1, 0, 0, 0, 0, 1})
	f.Fuzz(func(t *testing.T, b []byte) {
		ls := &logStore{log: slog.New(slog.DiscardHandler), stable: map[string][]byte{}}
		n, err := ls.replay(b)
		if err != nil {
			return
		}
		if n > int64(len(b)) {
			t.Fatalf("valid prefix %d beyond %d bytes", n, len(b))
		}
		for i, e := range ls.entries {
			if e.Index != ls.first+uint64(i) {
				t.Fatalf("entry %d has index %d", i, e.Index)
			}
		}
	})
}
