package store

import (
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// Under async flush the logic flush is a round of the commitlog flusher:
// each one makes the commitlog durable too, so the checkpoint records the
// commitlog's newest record even when FlushInterval alone would not have
// synced it yet, and it advances without Close.
func TestFlushRoundTakesCommitlogWithLogic(t *testing.T) {
	root := t.TempDir()
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	s := openTest(t, root, func(o *Options) {
		o.FlushMode = FlushAsync
		o.FlushInterval = time.Hour
		o.LogicFlushInterval = 20 * time.Millisecond
		o.Now = func() time.Time { return ts }
	})
	var last PutResult
	for i := range 50 {
		last = mustPut(t, s, msgSpec{topic: "T", qid: 2, body: fmt.Sprintf("round %d", i)})
	}
	want := ts.UnixMilli()
	testutil.Eventually(t, 10*time.Second, func() error {
		cp, ok, err := readCheckpoint(root)
		if err != nil {
			return err
		}
		if !ok || cp.Physic != want || cp.Logics != want {
			return fmt.Errorf("checkpoint %+v (found %v), want commitlog and queues at %d", cp, ok, want)
		}
		return nil
	})
	if end := last.PhysicalOffset + int64(last.WroteBytes); s.cl.flushed.Load() < end {
		t.Fatalf("commitlog flushed to %d, records end at %d", s.cl.flushed.Load(), end)
	}
}
