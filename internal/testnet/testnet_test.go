package testnet

import "testing"

func TestFreePortsDistinctWithHANeighbours(t *testing.T) {
	ports := FreePorts(t, 5)
	seen := map[int]bool{}
	for _, p := range ports {
		for _, q := range []int{p, p + 1} {
			if seen[q] {
				t.Fatalf("port %d handed out twice (ports %v)", q, ports)
			}
			seen[q] = true
		}
	}
}

func TestFreePortsBelowTheEphemeralRange(t *testing.T) {
	lo, hi, ok := fixedRange()
	if !ok {
		t.Skip("no room below the ephemeral range here")
	}
	for _, p := range FreePorts(t, 20) {
		if p < lo || p+1 > hi {
			t.Fatalf("port %d (and %d) outside [%d, %d]", p, p+1, lo, hi)
		}
	}
}
