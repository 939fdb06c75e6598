package statestore

import (
	"fmt"
	"testing"
)

// TestStateStoreHistoryRing: the history's ring holds what a plain list
// that drops its oldest events beyond the bounds would hold, in order,
// through many wraps and both bounds (count and bytes), and since reads
// the same changes from it.
func TestStateStoreHistoryRing(t *testing.T) {
	for _, tc := range []struct {
		maxLen   int
		maxBytes int64
	}{{1, 1 << 20}, {5, 1 << 20}, {40, 1 << 20}, {1000, 60}, {17, 200}} {
		h := history{maxLen: tc.maxLen, maxBytes: tc.maxBytes}
		var want []histEvent
		var wantBytes int64
		var floor HLC
		rng := newRand(uint64(tc.maxLen))
		for i := 1; i <= 3000; i++ {
			ev := histEvent{version: HLC{Wall: int64(i), Node: "n"}, op: OpSet, key: fmt.Sprintf("k%d", rng.intn(7)),
				value: make([]byte, rng.intn(30))}
			h.add(ev)
			want = append(want, ev)
			wantBytes += ev.size()
			for len(want) > 0 && (len(want) > tc.maxLen || wantBytes > tc.maxBytes) {
				floor = want[0].version
				wantBytes -= want[0].size()
				want = want[1:]
			}
			if h.len() != len(want) || h.bytes != wantBytes || h.floor != floor {
				t.Fatalf("bounds %+v, add %d: %d events %d bytes floor %v, want %d %d %v", tc, i, h.len(), h.bytes, h.floor, len(want), wantBytes, floor)
			}
			for j := range want {
				if got := h.at(j); got.version != want[j].version || got.key != want[j].key {
					t.Fatalf("bounds %+v, add %d: event %d is %v %s, want %v %s", tc, i, j, got.version, got.key, want[j].version, want[j].key)
				}
			}
			if i%97 == 0 && len(want) > 0 {
				from := want[len(want)/2].version
				notes, ok := h.since(from, "c", "k3", false)
				if !ok {
					t.Fatalf("since %v refused with floor %v", from, h.floor)
				}
				var n int
				for _, ev := range want[len(want)/2+1:] {
					if ev.key == "k3" {
						if notes[n].Version != ev.version {
							t.Fatalf("since: note %d version %v, want %v", n, notes[n].Version, ev.version)
						}
						n++
					}
				}
				if n != len(notes) {
					t.Fatalf("since: %d notes, want %d", len(notes), n)
				}
			}
		}
	}
}
