package statestore

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testnet"
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

// TestStateStoreAzureAnsweredWhileQueuesNotRebuilt: a registry, a broker
// whose data is on a 64 MiB tmpfs and a bridge, each its own process. The
// Azure IoT Operations Go client SETs keys through the bridge; the broker
// is killed with SIGKILL, a topic's consume queues are removed while it is
// down (a crash on a disk another process filled leaves the same: records
// without their entries, which come before the state store's in the log)
// and the broker starts again on the tmpfs filled to its last page, where
// the queues cannot be rebuilt, so the state store cannot replay its
// shards. The broker serves, and the client's GET and SET are answered
// with an error at once instead of running out of time; once space frees
// the state store opens by itself and every key reads its value, without
// a restart.
func TestStateStoreAzureAnsweredWhileQueuesNotRebuilt(t *testing.T) {
	if testing.Short() {
		t.Skip("mounts a tmpfs and kills a process")
	}
	disk := testutil.MountTmpfs(t, "64m")
	c := &failoverCluster{dir: t.TempDir(), bin: smartgoBinary(t)}
	ports := testnet.FreePorts(t, 3)
	c.reg = "127.0.0.1:" + strconv.Itoa(ports[0])
	c.spawn(t, "registry", "registry", "-listen", c.reg, "-set", "registry.kv_config_path="+filepath.Join(c.dir, "kv.json"))
	data := filepath.Join(disk, "data")
	bArgs := []string{"broker", "-listen", "127.0.0.1:" + strconv.Itoa(ports[1]), "-data", data, "-registries", c.reg,
		"-set", "store.segment_size=8MiB", "-set", "store.preallocate=1MiB"}
	b := c.spawn(t, "broker-1", bArgs...)
	c.mqtt = "127.0.0.1:" + strconv.Itoa(ports[2])
	c.spawn(t, "bridge", "bridge", "-registries", c.reg, "-set", "bridge.listen="+c.mqtt)
	t.Cleanup(func() {
		if t.Failed() {
			for _, l := range c.logs {
				data, _ := os.ReadFile(l)
				lines := strings.Split(string(data), "\n")
				t.Logf("%s (last lines):\n%s", l, strings.Join(lines[max(0, len(lines)-30):], "\n"))
			}
		}
	})

	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: []string{c.reg}}})
	if err != nil {
		t.Fatal(err)
	}
	defer p.Close()
	testutil.WaitFor(t, 30*time.Second, "a send accepted", func() bool {
		_, err := p.Send(ctx, &client.Message{Topic: "RebuildT", Body: []byte("first")})
		return err == nil
	})
	for i := range 200 {
		if _, err := p.Send(ctx, &client.Message{Topic: "RebuildT", Body: []byte(fmt.Sprintf("m-%d|%02000d", i, i))}); err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
	}
	az := azureClientAt(t, c.mqtt, "rebuild-azure")
	testutil.WaitFor(t, 30*time.Second, "the bridge's state store route", func() bool {
		_, err := az.Set(ctx10(t), "rebuild-0", "v0")
		return err == nil
	})
	keys := map[string]string{"rebuild-0": "v0"}
	for i := 1; i < 20; i++ {
		k, v := fmt.Sprintf("rebuild-%d", i), fmt.Sprintf("v%d", i)
		if _, err := az.Set(ctx10(t), k, v); err != nil {
			t.Fatalf("SET %s: %v", k, err)
		}
		keys[k] = v
	}
	_ = b.Process.Signal(syscall.SIGKILL)
	testutil.WaitFor(t, 30*time.Second, "the killed broker gone", func() bool { return syscall.Kill(b.Process.Pid, 0) != nil })
	if err := os.RemoveAll(filepath.Join(data, "consumequeue", "RebuildT")); err != nil {
		t.Fatal(err)
	}
	filler := filepath.Join(disk, "filler")
	testutil.FillDisk(t, filler)
	c.spawn(t, "broker-2", bArgs...)
	log2 := filepath.Join(c.dir, "broker-2.log")
	logHas := func(text string) bool { b, _ := os.ReadFile(log2); return strings.Contains(string(b), text) }
	testutil.WaitFor(t, 60*time.Second, "the restarted broker registered with its state store not open", func() bool {
		return logHas("state store not open") && logHas(`msg="registered with registry"`)
	})

	for _, op := range []struct {
		name string
		do   func(ctx context.Context) error
	}{
		{"GET", func(ctx context.Context) error { _, err := az.Get(ctx, "rebuild-1"); return err }},
		{"SET", func(ctx context.Context) error { _, err := az.Set(ctx, "rebuild-new", "x"); return err }},
	} {
		octx, ocancel := context.WithTimeout(ctx, 20*time.Second)
		start := time.Now()
		err := op.do(octx)
		ocancel()
		took := time.Since(start)
		if err == nil || took > 10*time.Second {
			t.Fatalf("%s while the state store is not open: %v after %v, want an error answer at once", op.name, err, took)
		}
		t.Logf("%s while the state store is not open: %v (after %v)", op.name, err, took.Round(time.Millisecond))
	}

	if err := os.Remove(filler); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 60*time.Second, "the state store open", func() bool { return logHas(`msg="state store open"`) })
	for k, v := range keys {
		got, err := az.Get(ctx10(t), k)
		if err != nil || got.Value != v {
			t.Fatalf("GET %s once the state store opened: %+v, %v; want %q", k, got, err, v)
		}
	}
	testutil.WaitFor(t, 30*time.Second, "a SET accepted once space freed", func() bool {
		_, err := az.Set(ctx10(t), "rebuild-new", "x")
		return err == nil
	})
}
