package store

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/smartgo/smartgo/store/record"
)

// stopAfterCtx is a context that ends at its n-th look: recovery then
// stops at a point the test chooses, whatever the machine's speed.
type stopAfterCtx struct {
	context.Context
	looks atomic.Int64
	n     int64 // 0: never
}

func (c *stopAfterCtx) Err() error {
	if k := c.looks.Add(1); c.n > 0 && k >= c.n {
		return context.Canceled
	}
	return nil
}

// crashedStoreForStop writes msgs keyed messages to 3 queues, closes the
// store and leaves it as a crash that lost its consume queues and index
// would, with a torn tail after the last record (in the segment it
// names): its recovery checks,
// re-dispatches and re-indexes every record, and cuts the tail.
func crashedStoreForStop(t *testing.T, root string, msgs int) (lastName string) {
	t.Helper()
	s, err := Open(testOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	for i := range msgs {
		mustPut(t, s, msgSpec{topic: "R", qid: int32(i % 3), body: fmt.Sprintf("m%d", i), keys: fmt.Sprintf("k%d", i)})
	}
	end := s.MaxPhysicalOffset()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	for _, d := range []string{"consumequeue", "index"} {
		if err := os.RemoveAll(filepath.Join(root, d)); err != nil {
			t.Fatal(err)
		}
	}
	if err := os.WriteFile(filepath.Join(root, abortName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	var last string // the segment holding end
	var base int64
	for _, p := range segmentFiles(t, root) {
		var b int64
		if _, err := fmt.Sscanf(filepath.Base(p), "%d", &b); err != nil {
			t.Fatal(err)
		}
		if b <= end && b >= base {
			last, base = p, b
		}
	}
	f, err := os.OpenFile(last, os.O_RDWR, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteAt(bytes.Repeat([]byte{0xA5}, 300), end-base); err != nil { // a torn record
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	return filepath.Base(last)
}

// readCommitLog returns the commitlog segments' bytes by file name.
func readCommitLog(t *testing.T, root string) map[string][]byte {
	t.Helper()
	out := map[string][]byte{}
	for _, p := range segmentFiles(t, root) {
		b, err := os.ReadFile(p)
		if err != nil {
			t.Fatal(err)
		}
		// Zeros past the data aside: a store that runs allocates its
		// segments further (Preallocate).
		out[filepath.Base(p)] = bytes.TrimRight(b, "\x00")
	}
	return out
}

// TestOpenContextStopsRecovery stops a crash recovery at points spread
// over its commitlog check, re-dispatch and index walk (each on a copy of
// the crashed files): OpenContext returns the context's error at once,
// naming the step, and leaves the commitlog byte for byte as it was until
// the check reached its end (the torn tail is not cut by an interrupted
// check), as the whole recovery leaves it after; the open after it
// recovers every message, by queue and by key.
func TestOpenContextStopsRecovery(t *testing.T) {
	crashed := t.TempDir()
	const msgs = 6000
	lastName := crashedStoreForStop(t, crashed, msgs)
	before := readCommitLog(t, crashed)

	// How many looks a whole recovery takes, and the commitlog after it.
	root := t.TempDir()
	copyTree(t, crashed, root)
	count := &stopAfterCtx{Context: context.Background()}
	s, err := OpenContext(count, testOptions(root))
	if err != nil {
		t.Fatal(err)
	}
	cut := readCommitLog(t, root)
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	total := count.looks.Load()
	if total < 3*msgs/recoverStopEvery {
		t.Fatalf("a recovery of %d records looked at its context %d times", msgs, total)
	}
	if bytes.Equal(cut[lastName], before[lastName]) {
		t.Fatal("the whole recovery did not cut the torn tail")
	}

	steps := map[string]bool{}
	for _, n := range []int64{1, 2, total / 8, total / 4, total / 2, 2 * total / 3, total - 2, total} {
		root := t.TempDir()
		copyTree(t, crashed, root)
		ctx := &stopAfterCtx{Context: context.Background(), n: n}
		s, err := OpenContext(ctx, testOptions(root))
		if err == nil {
			_ = s.Close()
			t.Fatalf("stopped at look %d of %d: Open succeeded", n, total)
		}
		if !errors.Is(err, context.Canceled) {
			t.Fatalf("stopped at look %d of %d: %v, want context.Canceled wrapped", n, total, err)
		}
		if looks := ctx.looks.Load(); looks != n {
			t.Fatalf("stopped at look %d: recovery looked %d times, went on after the context ended", n, looks)
		}
		msg := err.Error()
		step := msg[strings.Index(msg, "during ")+len("during ") : strings.Index(msg, ";")]
		steps[step] = true
		want := cut
		if step == "the commitlog check" {
			want = before
		}
		now := readCommitLog(t, root)
		for name, b := range want {
			if !bytes.Equal(now[name], b) {
				t.Fatalf("stopped at look %d (%v): commitlog segment %s is not as it should be", n, err, name)
			}
		}
		if _, err := os.Stat(filepath.Join(root, abortName)); err != nil {
			t.Fatalf("stopped at look %d: abort marker gone: %v", n, err)
		}
		checkRecoveredAll(t, root, msgs)
	}
	for _, step := range []string{"the commitlog check", "the re-dispatch", "the index walk"} {
		if !steps[step] {
			t.Errorf("no stop during %s; stops seen: %v", step, steps)
		}
	}
}

// checkRecoveredAll opens the store a stopped recovery left and reads
// every message of crashedStoreForStop back, by queue and by key.
func checkRecoveredAll(t *testing.T, root string, msgs int) {
	t.Helper()
	s, err := Open(testOptions(root))
	if err != nil {
		t.Fatalf("open after a stopped recovery: %v", err)
	}
	defer func() {
		checkConsistency(t, s)
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
	}()
	if !s.RecoveryReport().Abnormal {
		t.Fatal("the open after a stopped recovery did not recover as after a crash")
	}
	for q := range int32(3) {
		got := readAll(t, s, "R", q)
		if len(got) != msgs/3 {
			t.Fatalf("queue %d: %d messages after a stopped recovery, want %d", q, len(got), msgs/3)
		}
		for i, m := range got {
			if want := fmt.Sprintf("m%d", i*3+int(q)); string(m.Body) != want {
				t.Fatalf("queue %d offset %d: body %q, want %q", q, i, m.Body, want)
			}
		}
	}
	waitIndexed(t, s)
	for _, i := range []int{0, msgs / 2, msgs - 1} {
		r, err := s.QueryByKey("R", fmt.Sprintf("k%d", i), 4, 0, 1<<62)
		if err != nil {
			t.Fatal(err)
		}
		n := len(r.Buffers)
		var body string
		if n == 1 {
			m, _, _ := record.Decode(r.Buffers[0], true)
			body = string(m.Body)
		}
		r.Release()
		if n != 1 || body != fmt.Sprintf("m%d", i) {
			t.Fatalf("key k%d: %d messages (body %q) after a stopped recovery", i, n, body)
		}
	}
}
