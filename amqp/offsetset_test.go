package amqp

import (
	"math/rand/v2"
	"testing"
)

// TestOffsetSetMatchesAMap: random adds and removes, dense and sparse,
// below and above the current span, give the answers of a map.
func TestOffsetSetMatchesAMap(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	for round := range 50 {
		var s offsetSet
		m := map[uint64]bool{}
		start := uint64(r.IntN(1 << 20))
		span := uint64(1 + r.IntN(5000))
		for range 5000 {
			o := start + uint64(r.Int64N(int64(span)))
			if r.IntN(3) == 0 && o >= 200 {
				o -= uint64(r.IntN(200)) // sometimes below the span
			}
			if r.IntN(2) == 0 {
				s.add(o)
				m[o] = true
			} else {
				s.remove(o)
				delete(m, o)
			}
			if s.has(o) != m[o] {
				t.Fatalf("round %d: has(%d) = %v, the map says %v", round, o, s.has(o), m[o])
			}
		}
		for o := start - min(start, 300); o < start+span+300; o++ {
			if s.has(o) != m[o] {
				t.Fatalf("round %d: has(%d) = %v at the end, the map says %v", round, o, s.has(o), m[o])
			}
		}
		for o := range m {
			s.remove(o)
		}
		if len(s.words) != 0 {
			t.Fatalf("round %d: %d words left after removing every member", round, len(s.words))
		}
	}
}
