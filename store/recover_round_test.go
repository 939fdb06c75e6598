package store

import (
	"fmt"
	"path/filepath"
	"testing"
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
