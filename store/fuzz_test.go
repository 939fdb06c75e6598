package store

import (
	"os"
	"path/filepath"
	"testing"
)

// FuzzStoreCheckpoint: the checkpoint decoder never panics and accepts only
// what encode produced.
func FuzzStoreCheckpoint(f *testing.F) {
	f.Add(checkpoint{1, 2, 3}.encode())
	f.Add([]byte{})
	f.Add(make([]byte, 28))
	f.Fuzz(func(t *testing.T, b []byte) {
		cp, err := decodeCheckpoint(b)
		if err == nil && string(cp.encode()) != string(b) {
			t.Fatalf("accepted bytes that do not round-trip")
		}
	})
}

// FuzzStoreRecover writes arbitrary bytes as the tail of a commitlog
// segment, a consume-queue file and an index file, and opens the store:
// recovery must never panic, and whatever it keeps must be readable.
func FuzzStoreRecover(f *testing.F) {
	f.Add([]byte{0, 0, 0, 120, 0xDA, 0xA3, 0x20, 0xA7}, []byte{0, 0, 0, 0, 0, 0, 0, 1, 0, 0, 0, 99}, []byte{1, 2, 3})
	f.Add([]byte{0, 0, 0x10, 0, 0xCB, 0xD4, 0x31, 0x94}, []byte{0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff, 0xff}, make([]byte, 40))
	f.Fuzz(func(t *testing.T, clTail, cqTail, idxBytes []byte) {
		root := t.TempDir()
		o := testOptions(root)
		o.SegmentSize = 4096
		o.MaxMessageSize = 1024
		o.IndexSlots = 4
		o.IndexEntries = 8
		s, err := Open(o)
		if err != nil {
			t.Fatal(err)
		}
		for range 5 {
			mustPut(t, s, msgSpec{topic: "T", body: "seed", keys: "k"})
		}
		end := s.MaxPhysicalOffset()
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		write := func(path string, off int64, b []byte) {
			fh, err := os.OpenFile(path, os.O_RDWR, 0)
			if err != nil {
				t.Fatal(err)
			}
			defer fh.Close()
			if _, err := fh.WriteAt(b, off); err != nil {
				t.Fatal(err)
			}
		}
		if len(clTail) > 4096-int(end) {
			clTail = clTail[:4096-int(end)]
		}
		write(filepath.Join(root, "commitlog", fileNameFor(0)), end, clTail)
		if len(cqTail) > 64*20-100 {
			cqTail = cqTail[:64*20-100]
		}
		write(filepath.Join(root, "consumequeue", "T", "0", fileNameFor(0)), 100, cqTail)
		names, _ := filepath.Glob(filepath.Join(root, "index", "*"))
		if len(idxBytes) > 40+16+160 {
			idxBytes = idxBytes[:40+16+160]
		}
		write(names[0], 0, idxBytes)
		s2, err := Open(o)
		if err != nil {
			t.Fatalf("reopen: %v", err)
		}
		defer s2.Close()
		readAll(t, s2, "T", 0)
		checkConsistency(t, s2)
		r, err := s2.QueryByKey("T", "k", 32, 0, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		r.Release()
	})
}
