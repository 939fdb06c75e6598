//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	twc "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/console"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
)

// TestClusterProcConsoleTwinsMasterHung: while a master hangs (SIGSTOP:
// its connections stay up, it answers nothing), the console's device
// list and twin pages answer 200 from its slave's replica, marked with
// console.PartialHeader, within the console's request timeout, as for a
// dead master. Before, the read waited for the master until the timeout
// and the page failed.
func TestClusterProcConsoleTwinsMasterHung(t *testing.T) {
	const devices = 12
	dir := t.TempDir()
	ports := freePorts(t, 4)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg, masterA, slaveA, consoleAddr := addr(0), addr(1), addr(2), addr(3)
	rp := start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	common := []string{"-registries", reg, "-set", "store.segment_size=8MiB", "-set", "broker.advertise_ip=127.0.0.1",
		"-set", "broker.slave_sync_interval=200ms"}
	ma := start(t, dir, "master-a", append([]string{"broker", "-listen", masterA, "-data", filepath.Join(dir, "ma")}, common...)...)
	sa := start(t, dir, "slave-a", append([]string{"broker", "-listen", slaveA, "-data", filepath.Join(dir, "sa"),
		"-set", "broker.role=slave", "-set", "broker.id=1"}, common...)...)
	const timeout = 6 * time.Second
	con := start(t, dir, "console", "console", "-listen", consoleAddr, "-registries", reg, "-set", "console.request_timeout="+timeout.String())
	logsOnFailure(t, rp, ma, sa, con)
	u, _ := openConsole(t, consoleAddr, reg)

	c := twinProcClient(t, reg)
	waitTwinRoute(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()
	for i := range devices {
		dev := fmt.Sprintf("dev%02d", i)
		if _, err := c.CreateDevice(ctx, &twc.Device{DeviceID: dev}); err != nil {
			t.Fatal(err)
		}
		if _, err := c.UpdateTwin(ctx, dev, "", []byte(`{"tags":{"n":`+strconv.Itoa(i)+`}}`), ""); err != nil {
			t.Fatal(err)
		}
	}
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	testutil.Eventually(t, 60*time.Second, func() error {
		if n, err := replicaDevices(rc, slaveA, twc.DefaultShards); err != nil || n != devices {
			return fmt.Errorf("slave replica has %d of %d devices: %v", n, devices, err)
		}
		return nil
	})

	// get reads a console page: status, PartialHeader, decoded body, and
	// how long it took.
	get := func(path string, out any) (int, string, time.Duration, error) {
		start := time.Now()
		resp, err := u.hc.Get(u.base + path)
		if err != nil {
			return 0, "", time.Since(start), err
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK && out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				return resp.StatusCode, "", time.Since(start), err
			}
		}
		return resp.StatusCode, resp.Header.Get(console.PartialHeader), time.Since(start), nil
	}
	var p struct {
		Devices []struct {
			DeviceID string `json:"deviceId"`
		} `json:"devices"`
	}
	if code, partial, _, err := get("/api/twins?pageSize=100", &p); err != nil || code != http.StatusOK || partial != "" || len(p.Devices) != devices {
		t.Fatalf("master up: /api/twins %d %q %v: %d devices", code, partial, err, len(p.Devices))
	}

	ma.pause(t)
	t.Cleanup(func() { _ = ma.cmd.Process.Signal(syscall.SIGCONT) })
	var d struct {
		Twin struct {
			Tags struct {
				N int `json:"n"`
			} `json:"tags"`
		} `json:"twin"`
	}
	code, partial, took, err := get("/api/twins/dev07", &d)
	if err != nil || code != http.StatusOK || d.Twin.Tags.N != 7 || !strings.Contains(partial, slaveA) {
		t.Fatalf("master hung: /api/twins/dev07: %d %q %v %+v after %v", code, partial, err, d, took)
	}
	if took > timeout {
		t.Fatalf("master hung: /api/twins/dev07 took %v, over the console's %v", took, timeout)
	}
	p.Devices = nil
	code, partial, took, err = get("/api/twins?pageSize=100", &p)
	if err != nil || code != http.StatusOK || len(p.Devices) != devices || !strings.Contains(partial, slaveA) || took > timeout {
		t.Fatalf("master hung: /api/twins: %d %q %v: %d devices after %v", code, partial, err, len(p.Devices), took)
	}
}
