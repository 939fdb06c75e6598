package main

import (
	"slices"
	"testing"
)

// TestSliceOrderBalanced: every turn is an order of all n servers, and
// over a full cycle of turns each server follows each other server
// equally often (first-order carry-over balanced), which a rotation of
// one fixed cycle is not.
func TestSliceOrderBalanced(t *testing.T) {
	for n := 1; n <= 7; n++ {
		rows := n
		if n%2 == 1 {
			rows = 2 * n
		}
		after := map[[2]int]int{}
		for turn := range rows {
			o := sliceOrder(n, turn)
			sorted := slices.Sorted(slices.Values(o))
			for k, v := range sorted {
				if v != k {
					t.Fatalf("n=%d turn %d: %v is not an order of 0..%d", n, turn, o, n-1)
				}
			}
			for k := 1; k < n; k++ {
				after[[2]int{o[k-1], o[k]}]++
			}
			if !slices.Equal(o, sliceOrder(n, turn+rows)) {
				t.Fatalf("n=%d: turn %d and %d differ", n, turn, turn+rows)
			}
		}
		want := rows / n // rows*(n-1) adjacent pairs over n*(n-1) ordered pairs
		for a := range n {
			for b := range n {
				if a != b && after[[2]int{a, b}] != want {
					t.Fatalf("n=%d: %d right after %d %d times, want %d (%v)", n, b, a, after[[2]int{a, b}], want, after)
				}
			}
		}
	}
}
