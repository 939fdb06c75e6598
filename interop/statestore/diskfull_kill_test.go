package statestore

import (
	"context"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestStateStoreAzureSetsSurviveFullDiskKill9: the Azure IoT Operations
// Go client SETs keys over and over on a `smartgo standalone` whose data
// is on a 64 MiB tmpfs; another process fills the tmpfs to its last page
// (SETs are refused), the process is killed with SIGKILL and started
// again on the full disk, the filler goes once it has recovered, and
// every key reads its last acknowledged value or a later one.
func TestStateStoreAzureSetsSurviveFullDiskKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs and kills a process")
	}
	disk := testutil.MountTmpfs(t, "64m")
	s := startStandaloneBinData(t, smartgoBinary(t), nil, filepath.Join(disk, "data"), "store.segment_size=8MiB", "store.preallocate=1MiB")
	const writers = 4
	var mu sync.Mutex
	acked := make([]int, writers) // per writer: its key's last acknowledged value; protected by mu
	refused, total := 0, 0        // protected by mu
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range writers {
		c := azureClientAt(t, s.mqtt, fmt.Sprintf("full-w%d", w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			key := "full-" + strconv.Itoa(w)
			for n := 1; ctx.Err() == nil; n++ {
				cctx, cancel := context.WithTimeout(ctx, 2*time.Second)
				_, err := c.Set(cctx, key, strconv.Itoa(n)+"|"+string(make([]byte, 512)))
				cancel()
				mu.Lock()
				if err == nil {
					acked[w] = n
					total++
				} else {
					refused++
				}
				mu.Unlock()
				if err != nil {
					time.Sleep(20 * time.Millisecond)
				}
			}
		}()
	}
	t.Cleanup(func() { stop(); wg.Wait() })
	testutil.WaitFor(t, 30*time.Second, "400 acknowledged SETs", func() bool { mu.Lock(); defer mu.Unlock(); return total >= 400 })
	filler := filepath.Join(disk, "filler")
	testutil.FillDisk(t, filler)
	mu.Lock()
	r0 := refused
	mu.Unlock()
	testutil.WaitFor(t, 30*time.Second, "SETs refused on the full disk", func() bool { mu.Lock(); defer mu.Unlock(); return refused >= r0+20 })
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	_ = s.logf.Close()
	stop()
	wg.Wait()
	freed := testutil.RemoveOnceLogged(filepath.Join(s.dir, fmt.Sprintf("smartgo-%d.log", s.runs+1)), "store: recovered", filler, 30*time.Second)
	s.start(t)
	if err := <-freed; err != nil {
		t.Fatal(err)
	}
	r := azureClientAt(t, s.mqtt, "full-reader")
	for w := range writers {
		got, err := r.Get(ctx10(t), "full-"+strconv.Itoa(w))
		if err != nil {
			t.Fatalf("GET writer %d's key: %v", w, err)
		}
		v, _, _ := strings.Cut(got.Value, "|")
		n, _ := strconv.Atoi(v)
		if n < acked[w] {
			t.Fatalf("writer %d's key reads %d after the full disk and kill -9; %d was acknowledged", w, n, acked[w])
		}
	}
	t.Logf("%d SETs acknowledged, %d refused; every key at or past its last acknowledged value", total, refused)
}
