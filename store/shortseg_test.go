package store

import (
	"errors"
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
