package store

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// After a run's first checkpoint (which replaces whatever file was there
// with a whole one), the checkpoint is overwritten in place: the same
// file (inode) takes each round's timestamps, 28 bytes with a valid CRC,
// and the next Open trusts it.
func TestCheckpointWrittenInPlace(t *testing.T) {
	root := t.TempDir()
	path := filepath.Join(root, checkpointName)
	// A damaged file from an earlier run: reported at Open, then replaced.
	if err := os.WriteFile(path, []byte("torn"), 0o644); err != nil {
		t.Fatal(err)
	}
	clock := time.Now().Add(-time.Hour).Truncate(time.Millisecond)
	var now syncTime
	now.set(clock)
	s := openTest(t, root, func(o *Options) {
		o.FlushMode = FlushAsync
		o.Now = now.get
	})
	if s.RecoveryReport().CheckpointValid {
		t.Fatal("a 4-byte checkpoint was taken as valid")
	}
	var ino uint64
	for i := range 3 {
		ts := clock.Add(time.Duration(i) * time.Second)
		now.set(ts)
		mustPut(t, s, msgSpec{topic: "T", qid: 0, body: fmt.Sprintf("round %d", i)})
		want := ts.UnixMilli()
		testutil.Eventually(t, 30*time.Second, func() error {
			cp, ok, err := readCheckpoint(root)
			if err != nil || !ok || cp.Physic != want || cp.Logics != want {
				return fmt.Errorf("checkpoint %+v (found %v, %v), want commitlog and queues at %d", cp, ok, err, want)
			}
			return nil
		})
		st, err := os.Stat(path)
		if err != nil {
			t.Fatal(err)
		}
		if st.Size() != checkpointSize {
			t.Fatalf("checkpoint is %d bytes", st.Size())
		}
		got := st.Sys().(*syscall.Stat_t).Ino
		if i > 0 && got != ino {
			t.Fatalf("round %d: checkpoint replaced (inode %d, was %d), not written in place", i, got, ino)
		}
		ino = got
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, root, nil)
	if rep := s.RecoveryReport(); !rep.CheckpointValid || rep.Checkpoint.Physic != clock.Add(2*time.Second).UnixMilli() {
		t.Fatalf("after Close: checkpoint %+v valid %v", rep.Checkpoint, rep.CheckpointValid)
	}
}

// syncTime is a settable clock for Options.Now, read by the store's
// goroutines.
type syncTime struct{ ms atomic.Int64 }

func (c *syncTime) set(t time.Time) { c.ms.Store(t.UnixMilli()) }
func (c *syncTime) get() time.Time  { return time.UnixMilli(c.ms.Load()) }
