package store

import (
	"os"
	"path/filepath"
	"testing"

	"github.com/smartgo/smartgo/store/record"
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

// FuzzStoreResync puts arbitrary bytes in the middle segment of a
// three-segment log and recovers it after a crash: recovery never panics,
// every record of the other two segments stays readable, and replication
// reads (ReadRaw) over the whole log ship only what is on disk or zeros,
// so a slave fed from them serves the same records.
func FuzzStoreResync(f *testing.F) {
	rec := func(phy int64) []byte {
		m := newMsg(msgSpec{topic: "Z", body: "fuzz"})
		m.StoreHost, m.PhysicalOffset = bornHost, phy
		b := make([]byte, record.SealedSize(m))
		if _, err := record.EncodeSealedTo(b, m); err != nil {
			f.Fatal(err)
		}
		return b
	}
	f.Add([]byte{})
	f.Add(rec(4096))
	f.Add(append(make([]byte, 100), rec(4096+100)...))
	f.Add(append(rec(4096), 0xDA, 0xA3, 0x20, 0xA7, 0, 0))
	f.Fuzz(fuzzResyncBody)
}

func fuzzResyncBody(t *testing.T, mid []byte) {
	root := t.TempDir()
	mutate := func(o *Options) { o.SegmentSize = 4096; o.MaxMessageSize = 1024 }
	s := openTest(t, root, mutate)
	var kept []PutResult
	for s.MaxPhysicalOffset() < 3*4096 {
		kept = append(kept, mustPut(t, s, msgSpec{topic: "T", body: "fuzz-record"}))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := make([]byte, 4096)
	copy(seg, mid)
	if err := os.WriteFile(filepath.Join(root, "commitlog", fileNameFor(4096)), seg, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.WriteFile(filepath.Join(root, abortName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, root, mutate)
	check := func(s *Store) {
		for _, pr := range kept {
			if pr.PhysicalOffset >= 4096 && pr.PhysicalOffset < 2*4096 {
				continue
			}
			if m, err := s.ReadMessage(pr.PhysicalOffset); err != nil || string(m.Body) != "fuzz-record" {
				t.Fatalf("record at %d outside the damaged segment lost: %v", pr.PhysicalOffset, err)
			}
		}
	}
	check(s)
	slave := openTest(t, t.TempDir(), mutate)
	for off := int64(0); off < s.MaxPhysicalOffset(); off = slave.MaxPhysicalOffset() {
		r, err := s.ReadRaw(off, 700)
		if err != nil {
			t.Fatal(err)
		}
		var data []byte
		for _, b := range r.Buffers {
			data = append(data, b...)
		}
		r.Release()
		if len(data) == 0 {
			t.Fatalf("no progress at %d of %d", off, s.MaxPhysicalOffset())
		}
		disk := mustRawAt(t, s, off, int64(len(data)))
		for i := range data {
			if data[i] != 0 && data[i] != disk[i] {
				t.Fatalf("shipped byte %d at %d is neither the disk's nor zero", i, off)
			}
		}
		if err := slave.AppendRaw(off, data); err != nil {
			t.Fatal(err)
		}
	}
	waitDispatched(t, slave)
	check(slave)
}
