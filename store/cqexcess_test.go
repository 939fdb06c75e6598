package store

import (
	"bytes"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// A consume-queue file with bytes appended past its configured size
// outside the store (garbage: not a whole entry, or entries that cannot
// follow the file's) used to make Open refuse the whole store with
// ErrSegmentSize. Now the excess is cut off and reported as a corruption,
// and the queue reads every message and takes new ones; the file is its
// configured size again. Entries past the size (a changed
// CQEntriesPerFile) still refuse to open (TestStoreSegmentSizeChange).
func TestStoreCQFileGarbageAppendedCut(t *testing.T) {
	for _, tc := range []struct {
		name    string
		file    int // which file of the queue gets the garbage
		garbage []byte
	}{
		{"oddLengthOnFullFile", 0, []byte("garbage appended to a consume queue")},
		{"entriesOfOnesOnLastFile", 1, bytes.Repeat([]byte{0xff}, 2*cqEntrySize)},
		{"entryGoingBackOnFullFile", 0, append(make([]byte, 8), bytes.Repeat([]byte{0, 0, 0, 1}, 3)...)},
		{"entryAfterZerosOnLastFile", 1, append(make([]byte, cqEntrySize), bytes.Repeat([]byte{0x11}, cqEntrySize)...)},
	} {
		t.Run(tc.name, func(t *testing.T) {
			root := t.TempDir()
			s := openTest(t, root, nil)
			for i := range 100 { // 64 entries per file: two files
				mustPut(t, s, msgSpec{topic: "T", body: fmt.Sprintf("m%d", i)})
			}
			if err := s.Close(); err != nil {
				t.Fatal(err)
			}
			size := int64(testOptions(root).CQEntriesPerFile) * cqEntrySize
			path := filepath.Join(root, "consumequeue", "T", "0", fileNameFor(int64(tc.file)*size))
			f, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
			if err != nil {
				t.Fatal(err)
			}
			if _, err := f.Write(tc.garbage); err != nil {
				t.Fatal(err)
			}
			if err := f.Close(); err != nil {
				t.Fatal(err)
			}

			s2, err := Open(testOptions(root))
			if err != nil {
				t.Fatalf("open with %d bytes appended to %s: %v", len(tc.garbage), path, err)
			}
			defer s2.Close()
			var found bool
			for _, c := range s2.RecoveryReport().Corruptions {
				found = found || (c.File == path && c.Offset == size && strings.Contains(c.Reason, "not entries"))
			}
			if !found {
				t.Fatalf("no corruption reported for %s: %+v", path, s2.RecoveryReport().Corruptions)
			}
			if st, err := os.Stat(path); err != nil || st.Size() != size {
				t.Fatalf("%s after open: %v %v, want %d bytes", path, st, err, size)
			}
			msgs := readAll(t, s2, "T", 0)
			if len(msgs) != 100 {
				t.Fatalf("%d messages read after the cut, want 100", len(msgs))
			}
			for i, m := range msgs {
				if string(m.Body) != fmt.Sprintf("m%d", i) {
					t.Fatalf("message %d: %q", i, m.Body)
				}
			}
			mustPut(t, s2, msgSpec{topic: "T", body: "after"})
			waitDispatched(t, s2)
			if msgs := readAll(t, s2, "T", 0); len(msgs) != 101 || string(msgs[100].Body) != "after" {
				t.Fatalf("%d messages after a new put", len(msgs))
			}
		})
	}
}

// Entries past the configured size, of a file written with more entries
// per file, are not garbage: the store still refuses to open (cutting
// them would lose messages).
func TestStoreCQFileLongerWithEntriesRefused(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, func(o *Options) { o.CQEntriesPerFile = 128 })
	for i := range 100 {
		mustPut(t, s, msgSpec{topic: "T", body: fmt.Sprintf("m%d", i)})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := Open(testOptions(root)); !errors.Is(err, ErrSegmentSize) {
		t.Fatalf("open of a 128-entry file with 64 entries per file: %v, want ErrSegmentSize", err)
	}
}

// FuzzStoreCQExcess appends arbitrary bytes to a full consume-queue file:
// Open never panics, and either refuses with ErrSegmentSize (the bytes
// read as entries of a file with more entries per file) or opens with the
// file at its configured size and every message readable.
func FuzzStoreCQExcess(f *testing.F) {
	f.Add([]byte("garbage"))
	f.Add(bytes.Repeat([]byte{0xff}, 40))
	f.Add(make([]byte, 40))
	f.Add(append(make([]byte, 20), bytes.Repeat([]byte{1}, 20)...))
	f.Fuzz(func(t *testing.T, excess []byte) {
		if len(excess) == 0 || len(excess) > 4096 {
			return
		}
		root := t.TempDir()
		o := testOptions(root)
		o.CQEntriesPerFile = 8
		s, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		for i := range 8 {
			mustPut(t, s, msgSpec{topic: "T", body: fmt.Sprintf("m%d", i)})
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		path := filepath.Join(root, "consumequeue", "T", "0", fileNameFor(0))
		fh, err := os.OpenFile(path, os.O_WRONLY|os.O_APPEND, 0)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := fh.Write(excess); err != nil {
			t.Fatal(err)
		}
		_ = fh.Close()
		s2, err := Open(o)
		if errors.Is(err, ErrSegmentSize) {
			return
		}
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer s2.Close()
		if st, err := os.Stat(path); err != nil || st.Size() != 8*cqEntrySize {
			t.Fatalf("%s after open: %v %v", path, st, err)
		}
		if n := len(readAll(t, s2, "T", 0)); n != 8 {
			t.Fatalf("%d messages, want 8", n)
		}
	})
}
