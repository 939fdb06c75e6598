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
