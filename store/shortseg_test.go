package store

import (
	"errors"
	"fmt"
	"os"
	"syscall"
	"testing"

	"github.com/smartgo/smartgo/store/vfs"
)

// TestStoreShortSegmentWithoutRoom: a commitlog segment shorter than its
// size (a cut copy) is extended at open, and the extension's blocks are
// reserved first. On a disk with no room for them the open fails with a
// clear error naming the file: on a full tmpfs, reading the unreserved
// extension through the mapping raised SIGBUS during recovery and killed
// the process. With room again the store opens and serves every record.
func TestStoreShortSegmentWithoutRoom(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, nil)
	prs := putTopic(t, s, "T", 20)
	waitIndexed(t, s)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	seg := segPath(root, 0)
	o := testOptions(root)
	if err := os.Truncate(seg, o.SegmentSize/2); err != nil {
		t.Fatal(err)
	}

	fs := vfs.NewFaulty(nil)
	fs.Inject(vfs.Rule{Op: vfs.OpAllocate, Path: "commitlog", Err: syscall.ENOSPC})
	o.FS = fs
	s2, err := Open(o)
	if err == nil {
		_ = s2.Close()
		t.Fatal("Open with no room to extend a short segment succeeded")
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Open: %v, want an error wrapping ENOSPC", err)
	}
	if fs.Failed(vfs.OpAllocate) == 0 {
		t.Fatal("the extension was not reserved")
	}

	s3 := openTest(t, root, nil)
	readable(t, s3, "T", prs)
}

// TestStoreMissingSegmentWithoutRoom: a segment missing in the middle of
// the commitlog is recreated empty with its blocks reserved; with no room
// for them the open fails with an error wrapping ENOSPC. Recreated sparse,
// it was read through the mapping by recovery's scan, which on a full
// tmpfs raised SIGBUS. With room the store opens, reports the segment and
// serves every record outside it.
func TestStoreMissingSegmentWithoutRoom(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, nil)
	prs := putTopic(t, s, "T", 2000) // several 64 KiB segments
	o := testOptions(root)
	if prs[len(prs)-1].PhysicalOffset < 2*o.SegmentSize {
		t.Fatalf("only %d bytes written, want three segments", prs[len(prs)-1].PhysicalOffset)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.Remove(segPath(root, o.SegmentSize)); err != nil {
		t.Fatal(err)
	}

	fs := vfs.NewFaulty(nil)
	fs.Inject(vfs.Rule{Op: vfs.OpAllocate, Path: "commitlog", Err: syscall.ENOSPC})
	o.FS = fs
	s2, err := Open(o)
	if err == nil {
		_ = s2.Close()
		t.Fatal("Open with no room to recreate a missing segment succeeded")
	}
	if !errors.Is(err, syscall.ENOSPC) {
		t.Fatalf("Open: %v, want an error wrapping ENOSPC", err)
	}
	if _, err := os.Stat(segPath(root, o.SegmentSize)); !os.IsNotExist(err) {
		t.Fatalf("the segment that could not be reserved was left behind: %v", err)
	}

	s3 := openTest(t, root, nil)
	var kept []PutResult
	var keptIdx []int
	for i, pr := range prs {
		if pr.PhysicalOffset < o.SegmentSize || pr.PhysicalOffset >= 2*o.SegmentSize {
			kept = append(kept, pr)
			keptIdx = append(keptIdx, i)
		}
	}
	for j, pr := range kept {
		m, err := s3.ReadMessage(pr.PhysicalOffset)
		if err != nil || string(m.Body) != fmt.Sprint("T", keptIdx[j]) {
			t.Fatalf("record %d outside the missing segment lost: %v", keptIdx[j], err)
		}
	}
}
