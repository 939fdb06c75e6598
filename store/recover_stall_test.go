package store

import (
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/vfs"
)

// A restart that cannot write consume-queue entries (another process
// filled the disk: ENOSPC allocating a queue's file) keeps the records it
// could not dispatch: they reach their queue once the allocation works,
// and new records take queue offsets after theirs. Recovery used to skip
// them for good (reported as corruption), losing acknowledged messages,
// and gave their queue offsets to the next records. Here B's queue was
// lost while the store was stopped, so recovery re-dispatches it from
// the commitlog.
func TestStoreRecoveryWaitsForConsumeQueueRoom(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, nil)
	a := putTopic(t, s, "A", 10)
	b := putTopic(t, s, "B", 5)
	for i := 10; i < 13; i++ {
		a = append(a, mustPut(t, s, msgSpec{topic: "A", body: fmt.Sprint("A", i)}))
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := os.RemoveAll(filepath.Join(root, "consumequeue", "B")); err != nil {
		t.Fatal(err)
	}

	fs := vfs.NewFaulty(nil)
	remove := fs.Inject(vfs.Rule{Op: vfs.OpAllocate, Path: filepath.Join("consumequeue", "B"), Err: syscall.ENOSPC})
	s = openTest(t, root, func(o *Options) { o.FS = fs })
	for _, c := range s.RecoveryReport().Corruptions { // B's lost queue is reported, nothing else
		if !strings.Contains(c.Error(), "consume queue missing") {
			t.Fatalf("records not dispatched for lack of room reported as corruption: %v", c)
		}
	}
	readable(t, s, "A", a)
	readable(t, s, "B", b)
	if fs.Failed(vfs.OpAllocate) == 0 {
		t.Fatal("recovery did not try to write B's queue")
	}
	remove()
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := s.MaxOffset("B", 0); n != 5 {
			return fmt.Errorf("B's queue ends at %d, want 5", n)
		}
		return nil
	})
	var next PutResult
	testutil.Eventually(t, 10*time.Second, func() error { // the disk watcher clears the failed allocation's refusal
		var err error
		next, err = s.Put(context.Background(), newMsg(msgSpec{topic: "B", body: "B5"}))
		if errors.Is(err, ErrDiskFull) {
			return err
		}
		if err != nil {
			t.Fatal(err)
		}
		return nil
	})
	if next.QueueOffset != 5 {
		t.Fatalf("a new record of B took queue offset %d, want 5 (after those recovery could not dispatch)", next.QueueOffset)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := s.MaxOffset("B", 0); n != 6 {
			return fmt.Errorf("B's queue ends at %d, want 6", n)
		}
		return nil
	})
	for i, pr := range append(b, next) {
		r, err := s.GetMessages("B", 0, int64(i), 1, nil)
		if err != nil || r.Status != GetFound || r.PhysicalOffsets[0] != pr.PhysicalOffset {
			t.Fatalf("B's queue offset %d does not hold its record: %v", i, err)
		}
		r.Release()
	}
}
