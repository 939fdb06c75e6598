package store

import (
	"fmt"
	"testing"
)

// OffsetByPhysical finds a queue's first message at or after a commitlog
// offset, whichever queues the messages between interleave with; the end
// of the queue past its last one, 0 for an unknown queue.
func TestStoreOffsetByPhysical(t *testing.T) {
	s := openTest(t, t.TempDir(), nil)
	var phy []int64 // queue 0's messages
	for i := range 300 {
		r := mustPut(t, s, msgSpec{topic: "T", qid: int32(i % 3 / 2), body: fmt.Sprint(i)}) // queues 0, 0, 1, ...
		if i%3 != 2 {
			phy = append(phy, r.PhysicalOffset)
		}
	}
	waitDispatched(t, s)
	for k, at := range phy {
		if got := s.OffsetByPhysical("T", 0, at); got != int64(k) {
			t.Fatalf("OffsetByPhysical(%d) = %d, want %d", at, got, k)
		}
		if got := s.OffsetByPhysical("T", 0, at+1); got != int64(k+1) {
			t.Fatalf("OffsetByPhysical(%d) = %d, want %d", at+1, got, k+1)
		}
	}
	if got := s.OffsetByPhysical("T", 0, 0); got != 0 {
		t.Fatalf("OffsetByPhysical(0) = %d", got)
	}
	if got, end := s.OffsetByPhysical("T", 0, s.MaxPhysicalOffset()), s.MaxOffset("T", 0); got != end || end != int64(len(phy)) {
		t.Fatalf("OffsetByPhysical(log end) = %d, want the queue's end %d (%d messages)", got, end, len(phy))
	}
	if got := s.OffsetByPhysical("nope", 0, 0); got != 0 {
		t.Fatalf("unknown queue: %d", got)
	}
}
