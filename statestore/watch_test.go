package statestore

import (
	"bytes"
	"fmt"
	"testing"
	"unsafe"
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
			ev := newHistEvent(HLC{Wall: int64(i), Node: "n"}, OpSet, fmt.Sprintf("k%d", rng.intn(7)), make([]byte, rng.intn(30)))
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

// A history event is one cache line, and hands back the value it was
// given: the same bytes (shared, not copied), nil as nil, an empty value
// as an empty one (a SET of "" is not a DELETE's nil).
func TestStateStoreHistoryEventValue(t *testing.T) {
	if n := unsafe.Sizeof(histEvent{}); n != 64 {
		t.Fatalf("histEvent is %d bytes, want 64 (one cache line)", n)
	}
	v := []byte("value")
	for _, tc := range []struct {
		name  string
		value []byte
	}{{"nil", nil}, {"empty", v[:0]}, {"bytes", v}} {
		h := history{maxLen: 2, maxBytes: 1 << 20}
		for i := 1; i <= 3; i++ { // evicts the first, wraps nothing
			h.add(newHistEvent(HLC{Wall: int64(i), Node: "n"}, OpSet, "k", tc.value))
		}
		notes, ok := h.since(HLC{Wall: 1, Node: "n"}, "c", "k", false)
		if !ok || len(notes) != 2 {
			t.Fatalf("%s: since: %d notes, ok %v", tc.name, len(notes), ok)
		}
		for _, n := range notes {
			got := n.Value
			if (got == nil) != (tc.value == nil) || !bytes.Equal(got, tc.value) {
				t.Fatalf("%s: note value %q (nil %v), want %q (nil %v)", tc.name, got, got == nil, tc.value, tc.value == nil)
			}
			if len(got) > 0 && &got[0] != &tc.value[0] {
				t.Fatalf("%s: note value copied, want the shared bytes", tc.name)
			}
		}
		if want := int64(2 * (1 + len(tc.value))); h.bytes != want {
			t.Fatalf("%s: history holds %d bytes, want %d", tc.name, h.bytes, want)
		}
	}
}
