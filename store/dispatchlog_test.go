package store

import (
	"errors"
	"log/slog"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/vfs"
)

// A consume-queue file that cannot be opened for a reason other than
// space (the descriptor limit) holds the dispatcher back as a full disk
// does, but its log line names that, not disk space, and the store is not
// marked full; the entry appears once the open works.
func TestStoreFaultConsumeQueueOpenNotDisk(t *testing.T) {
	var logs testutil.LogBuffer
	s, fs := faultStore(t, t.TempDir(), func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
	})
	remove := fs.Inject(vfs.Rule{Op: vfs.OpOpen, Path: filepath.Join("consumequeue", "Q"), Err: syscall.EMFILE})
	pr := mustPut(t, s, msgSpec{topic: "Q", body: "Q0"})
	testutil.Eventually(t, 5*time.Second, func() error {
		if !strings.Contains(logs.String(), "consume-queue entry not written") {
			return errors.New("dispatcher has not logged the failure yet")
		}
		return nil
	})
	out := logs.String()
	if strings.Contains(out, "disk space") || !strings.Contains(out, "retries it next round") {
		t.Fatalf("log blames the disk or does not say the entry is retried:\n%s", out)
	}
	if s.Stats().DiskFull {
		t.Fatal("a failed open marked the disk full")
	}
	readable(t, s, "Q", []PutResult{pr})
	remove()
	testutil.Eventually(t, 5*time.Second, func() error {
		if s.MaxOffset("Q", 0) != 1 {
			return errors.New("entry not dispatched yet")
		}
		return nil
	})
}
