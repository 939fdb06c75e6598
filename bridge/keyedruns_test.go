package bridge

import (
	"slices"
	"sync"
	"testing"
)

// TestKeyedRunsOneRunnerPerKeyInOrder: each key gets one runner at a
// time, which sees every item of its key once, in the order added, in
// batches of what queued while it handled the previous one; a drained key
// starts a new runner on its next add.
func TestKeyedRunsOneRunnerPerKeyInOrder(t *testing.T) {
	var k keyedRuns[int]
	var wg sync.WaitGroup
	var mu sync.Mutex
	got := map[string][]int{}
	running := map[string]int{}
	batches := 0
	gate := make(chan struct{})
	run := func(key string) {
		defer wg.Done()
		k.drain(key, func(items []int) {
			mu.Lock()
			running[key]++
			if running[key] != 1 {
				t.Errorf("key %s: %d runners at once", key, running[key])
			}
			batches++
			first := batches == 1
			mu.Unlock()
			if first {
				<-gate // the others queue up meanwhile
			}
			mu.Lock()
			got[key] = append(got[key], items...)
			running[key]--
			mu.Unlock()
		})
	}
	const n = 1000
	keys := []string{"a", "b", "c"}
	var adders sync.WaitGroup
	for _, key := range keys {
		adders.Add(1)
		go func() {
			defer adders.Done()
			for i := range n {
				if k.add(key, i) {
					wg.Add(1)
					go run(key)
				}
			}
		}()
	}
	adders.Wait()
	close(gate)
	wg.Wait()
	want := make([]int, n)
	for i := range want {
		want[i] = i
	}
	for _, key := range keys {
		if !slices.Equal(got[key], want) {
			t.Fatalf("key %s: got %d items %v..., want 0..%d in order", key, len(got[key]), got[key][:min(10, len(got[key]))], n-1)
		}
	}
	if batches >= 3*n {
		t.Fatalf("%d batches for %d items: nothing was taken in one go", batches, 3*n)
	}
	// Drained: the next add starts a runner again.
	if !k.add("a", 7) {
		t.Fatal("add on a drained key did not ask for a runner")
	}
	if k.add("a", 8) {
		t.Fatal("second add on a busy key asked for another runner")
	}
	var last []int
	k.drain("a", func(items []int) { last = append(last, items...) })
	if !slices.Equal(last, []int{7, 8}) {
		t.Fatalf("drain got %v, want [7 8]", last)
	}
}
