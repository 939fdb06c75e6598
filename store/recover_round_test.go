package store

import (
	"fmt"
	"os"
	"path/filepath"
	"sync/atomic"
	"testing"
	"time"
)

// Recovery re-dispatching many records of one queue in one round sees them
// as consecutive, not as a gap that forces a full replay, and the queue
// gets them all.
func TestRecoveryRedispatchOneRoundIsNotAGap(t *testing.T) {
	root := t.TempDir()
	s := openTest(t, root, nil)
	for i := range 20 {
		mustPut(t, s, msgSpec{topic: "T", qid: 1, body: fmt.Sprintf("early %d", i)})
	}
	waitDispatched(t, s)
	// Hold the dispatcher back while more records are stored, and take the
	// files as a crash would leave them: the queue lacks the last 60.
	s.dispMu.Lock()
	for i := range 60 {
		mustPut(t, s, msgSpec{topic: "T", qid: 1, body: fmt.Sprintf("late %d", i)})
	}
	image := filepath.Join(t.TempDir(), "image")
	copyTree(t, root, image)
	s.dispMu.Unlock()

	s2 := openTest(t, image, nil)
	rep := s2.RecoveryReport()
	if !rep.Abnormal || rep.FullReplay || rep.Err() != nil {
		t.Fatalf("recovery: abnormal=%v fullReplay=%v err=%v", rep.Abnormal, rep.FullReplay, rep.Err())
	}
	got := readAll(t, s2, "T", 1)
	if len(got) != 80 || string(got[20].Body) != "late 0" || string(got[79].Body) != "late 59" {
		t.Fatalf("queue after recovery: %d messages", len(got))
	}
}

// A restart without writes keeps the checkpoint's commitlog time: a crash
// after it recovers from the checkpoint, not from the start of the log.
func TestRecoveryIdleRestartKeepsCheckpoint(t *testing.T) {
	root := t.TempDir()
	var now atomic.Int64
	now.Store(time.Now().UnixMilli())
	clock := func(o *Options) { o.Now = func() time.Time { return time.UnixMilli(now.Load()) } }
	s := openTest(t, root, clock)
	for i := range 2000 {
		now.Add(10) // 20 s of records: the checkpoint's 3 s margin covers only the last ones
		mustPut(t, s, msgSpec{topic: "T", body: fmt.Sprintf("%0200d", i)})
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	cp, _, err := readCheckpoint(root)
	if err != nil || cp.Physic == 0 {
		t.Fatalf("checkpoint after writes %+v %v", cp, err)
	}
	s = openTest(t, root, clock) // no writes
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if got, _, _ := readCheckpoint(root); got.Physic != cp.Physic {
		t.Fatalf("idle restart changed the checkpoint's commitlog time %d -> %d", cp.Physic, got.Physic)
	}
	if err := os.WriteFile(filepath.Join(root, abortName), nil, 0o644); err != nil {
		t.Fatal(err)
	}
	s = openTest(t, root, func(o *Options) { clock(o); o.VerifyAllOnCrash = false })
	if rep := s.RecoveryReport(); rep.DispatchFrom == 0 || rep.Redispatched > 1000 {
		t.Fatalf("crash after an idle restart re-dispatched from %d (%d records)", rep.DispatchFrom, rep.Redispatched)
	}
}
