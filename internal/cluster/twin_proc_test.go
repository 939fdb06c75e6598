//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"testing"
	"time"

	twc "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
)

// twinAcks records what the brokers acknowledged: per device, the highest
// reported $version a PatchReported returned and the value it wrote.
type twinAcks struct {
	mu   sync.Mutex
	last map[string][2]int64 // device -> reported $version, value
}

// twinLoad creates devices and patches their reported properties from
// several goroutines until stop, recording every acknowledged patch.
func twinLoad(t *testing.T, c *twc.Client, devices int, stop <-chan struct{}) (*twinAcks, *sync.WaitGroup) {
	t.Helper()
	ctx := context.Background()
	for i := 0; i < devices; i++ {
		if _, err := c.CreateDevice(ctx, &twc.Device{DeviceID: fmt.Sprintf("d%03d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	acks := &twinAcks{last: map[string][2]int64{}}
	var wg sync.WaitGroup
	for g := 0; g < 4; g++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; ; i++ {
				select {
				case <-stop:
					return
				default:
				}
				dev := fmt.Sprintf("d%03d", (g*7919+i)%devices)
				val := int64(g*1_000_000 + i)
				ver, err := c.PatchReported(ctx, dev, "", []byte(`{"v":`+strconv.FormatInt(val, 10)+`}`), 0)
				if err != nil {
					continue // the broker is going down: not acknowledged
				}
				acks.mu.Lock()
				if ver > acks.last[dev][0] {
					acks.last[dev] = [2]int64{ver, val}
				}
				acks.mu.Unlock()
			}
		}()
	}
	return acks, &wg
}

// checkAcked reads every device's twin through c: the reported $version is
// at least the acknowledged one, with the acknowledged value at that
// version.
func (a *twinAcks) check(t *testing.T, c *twc.Client) int {
	t.Helper()
	a.mu.Lock()
	defer a.mu.Unlock()
	for dev, av := range a.last {
		props, err := c.GetProperties(context.Background(), dev, "")
		if err != nil {
			t.Fatalf("%s after the crash: %v", dev, err)
		}
		var p struct {
			Reported struct {
				V       int64 `json:"v"`
				Version int64 `json:"$version"`
			} `json:"reported"`
		}
		if err := json.Unmarshal(props.JSON, &p); err != nil {
			t.Fatal(err)
		}
		if p.Reported.Version < av[0] || (p.Reported.Version == av[0] && p.Reported.V != av[1]) {
			t.Fatalf("%s: reported $version %d value %d, acknowledged $version %d value %d", dev, p.Reported.Version, p.Reported.V, av[0], av[1])
		}
	}
	return len(a.last)
}

// checkEvents reads the events topic from addr: every acknowledged
// reported version has its updateTwin event (delivered at least once).
func (a *twinAcks) checkEvents(t *testing.T, addr string) int {
	t.Helper()
	seen := map[string]bool{}
	msgs := pullRecords(t, addr, "twin-events", 8)
	for _, m := range msgs {
		dev, _ := record.LookupPropertyString(m.Properties, "deviceId")
		var body struct {
			Properties struct {
				Reported struct {
					Version int64 `json:"$version"`
				} `json:"reported"`
			} `json:"properties"`
		}
		_ = json.Unmarshal(m.Body, &body)
		seen[dev+"/"+strconv.FormatInt(body.Properties.Reported.Version, 10)] = true
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	for dev, av := range a.last {
		for v := int64(2); v <= av[0]; v++ {
			if !seen[dev+"/"+strconv.FormatInt(v, 10)] {
				t.Fatalf("no event for %s reported $version %d (acknowledged up to %d; %d events)", dev, v, av[0], len(msgs))
			}
		}
	}
	return len(msgs)
}

func twinProcClient(t *testing.T, reg string) *twc.Client {
	t.Helper()
	c, err := twc.New(twc.Options{Registries: []string{reg}, RouteRefresh: 500 * time.Millisecond, RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func waitTwinRoute(t *testing.T, c *twc.Client) {
	t.Helper()
	testutil.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if _, err := c.GetDevice(ctx, "probe"); err != nil && !errors.Is(err, twc.ErrNotFound) {
			return err
		}
		return nil
	})
}

// TestClusterProcTwinKill9: a broker with sync flush serving twin writes
// from several clients is killed with SIGKILL; restarted on its data, it
// has every acknowledged reported patch (snapshot plus replay) and an
// event for each.
func TestClusterProcTwinKill9(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 2)
	reg := "127.0.0.1:" + strconv.Itoa(ports[0])
	start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	args := []string{"broker", "-listen", "127.0.0.1:" + strconv.Itoa(ports[1]), "-data", filepath.Join(dir, "b"), "-registries", reg,
		"-set", "store.flush=sync", "-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1",
		"-set", "twin.snapshot_interval=1s"}
	b := start(t, dir, "broker", args...)
	c := twinProcClient(t, reg)
	waitTwinRoute(t, c)
	stop := make(chan struct{})
	acks, wg := twinLoad(t, c, 50, stop)
	// Long enough for a snapshot (1 s) and a replay after it.
	testutil.Eventually(t, 60*time.Second, func() error {
		acks.mu.Lock()
		defer acks.mu.Unlock()
		total := int64(0)
		for _, v := range acks.last {
			total += v[0]
		}
		if total < 2000 {
			return fmt.Errorf("%d reported versions acknowledged", total)
		}
		if snaps, _ := filepath.Glob(filepath.Join(dir, "b", "twin", "*.snap")); len(snaps) == 0 {
			return errors.New("no twin snapshot yet")
		}
		return nil
	})
	b.kill()
	close(stop)
	wg.Wait()

	b.run(t)
	c2 := twinProcClient(t, reg)
	waitTwinRoute(t, c2)
	n := acks.check(t, c2)
	events := acks.checkEvents(t, "127.0.0.1:"+strconv.Itoa(ports[1]))
	t.Logf("%d devices' acknowledged patches intact after SIGKILL; %d events", n, events)
	if data, _ := os.ReadFile(b.log); len(data) == 0 {
		t.Log("(no broker log)")
	}
}

// TestClusterProcTwinMasterToSlave: twin writes acknowledged by a sync
// master are on its slave; with the master killed, the slave restarted as
// the group's master serves every acknowledged write, takes new ones, and
// its events topic holds an event for each.
func TestClusterProcTwinMasterToSlave(t *testing.T) {
	c := startProcCluster(t, "sync_master", "-set", "twin.snapshot_interval=1s")
	c.waitSlaveConnected(t)
	cl := twinProcClient(t, c.reg)
	waitTwinRoute(t, cl)
	stop := make(chan struct{})
	acks, wg := twinLoad(t, cl, 40, stop)
	testutil.Eventually(t, 60*time.Second, func() error {
		acks.mu.Lock()
		defer acks.mu.Unlock()
		if len(acks.last) < 40 {
			return fmt.Errorf("%d devices patched", len(acks.last))
		}
		return nil
	})
	time.Sleep(1500 * time.Millisecond) // let the slave snapshot part of it (the rest replays)
	c.master.kill()
	close(stop)
	wg.Wait()

	// The slave becomes the group's master: restarted with the master's id
	// and role on its own data.
	c.restartSlaveAsMaster(t)
	cl2 := twinProcClient(t, c.reg)
	testutil.Eventually(t, 30*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		_, err := cl2.GetDevice(ctx, "d000")
		return err
	})
	n := acks.check(t, cl2)
	if _, err := cl2.UpdateTwin(context.Background(), "d001", "", []byte(`{"tags":{"after":"switch"}}`), "*"); err != nil {
		t.Fatalf("write on the new master: %v", err)
	}
	events := acks.checkEvents(t, c.slaveAddr())
	t.Logf("%d devices intact on the slave turned master; %d events", n, events)
}
