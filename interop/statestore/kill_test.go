package statestore

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/internal/testutil"
)

// TestStateStoreAckedSetsSurviveKill9 kills a `smartgo standalone`
// (async flush, the default) with SIGKILL while writers SET their keys
// over and over, then reads every key after the restart: each holds the
// last value its writer saw acknowledged, or a later one the writer sent
// without hearing back (an acknowledged SET is in the commitlog's page
// cache, which a killed process does not lose; docs/durability.md). Three
// kills, each after a different amount of load.
func TestStateStoreAckedSetsSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a process")
	}
	s := startStandalone(t)
	const writers = 4
	acked := make([]int, writers) // per writer: its key's last acknowledged value
	for round := range 3 {
		clients := make([]*sscli.Client, writers)
		for w := range writers {
			clients[w] = dialStandalone(t, s, fmt.Sprintf("kill-w%d-r%d", w, round))
		}
		ctx, stop := context.WithCancel(context.Background())
		var wg sync.WaitGroup
		var mu sync.Mutex
		total := 0
		for w := range writers {
			wg.Add(1)
			go func() {
				defer wg.Done()
				key := []byte("kill-" + strconv.Itoa(w))
				for n := acked[w] + 1; ctx.Err() == nil; n++ {
					cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
					applied, _, err := clients[w].Set(cctx, key, []byte(strconv.Itoa(n)), sscli.SetOptions{})
					cancel()
					if err != nil || !applied {
						return // the process is gone (or going)
					}
					mu.Lock()
					acked[w] = n
					total++
					mu.Unlock()
				}
			}()
		}
		want := 200 * (round + 1)
		testutil.WaitFor(t, 30*time.Second, fmt.Sprintf("%d acknowledged SETs", want), func() bool {
			mu.Lock()
			defer mu.Unlock()
			return total >= want
		})
		s.kill9Restart(t)
		stop()
		wg.Wait()
		for _, c := range clients {
			_ = c.Close()
		}
		r := dialStandalone(t, s, fmt.Sprintf("kill-reader-%d", round))
		for w := range writers {
			ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
			val, _, ok, err := r.Get(ctx, []byte("kill-"+strconv.Itoa(w)))
			cancel()
			got, _ := strconv.Atoi(string(val))
			if err != nil || !ok || got < acked[w] {
				t.Fatalf("kill %d: writer %d's key reads %q (ok %v, err %v) after the restart; %d was acknowledged", round, w, val, ok, err, acked[w])
			}
			acked[w] = got
		}
		t.Logf("kill %d: %d SETs acknowledged, every key at or past its last acknowledged value", round, total)
	}
}
