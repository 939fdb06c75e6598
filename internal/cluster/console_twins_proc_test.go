//go:build cluster

package cluster

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"net/http"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	twc "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/console"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	tw "github.com/smartgo/smartgo/twin"
)

// replicaDevices counts the device identities the broker at addr holds
// in its replica of the twin shards (TwinInvoke reads marked as replica
// reads, which a slave serves).
func replicaDevices(rc *remoting.Client, addr string, shards int) (int, error) {
	n := 0
	for q := range shards {
		req := protocol.NewTwinRequest(int32(q), (&tw.Request{Op: tw.OpListDevices, Limit: 1000}).AppendBinary(nil))
		protocol.MarkTwinReplicaRead(req)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		resp, err := rc.Invoke(ctx, addr, req)
		cancel()
		if err != nil {
			return 0, err
		}
		if resp.Code != protocol.Success {
			return 0, fmt.Errorf("shard %d: code %d %s", q, resp.Code, resp.Remark)
		}
		rep, err := tw.DecodeReply(resp.Body)
		if err != nil {
			return 0, err
		}
		var items []json.RawMessage
		if err := json.Unmarshal(rep.Body, &items); err != nil {
			return 0, err
		}
		n += len(items)
	}
	return n, nil
}

// TestClusterProcConsoleTwinsMasterDown: after a master dies, the
// console's device list and twin pages answer 200 with the twins its
// slave replicated (read-only), marked with console.PartialHeader, where
// they answered 502; writes stay refused; once the master is back the
// twinsReplicaSet is a registry, broker master-a with its slave and a
// console, devices twins written through the master and copied to the
// slave's replica.
type twinsReplicaSet struct {
	ma     *proc            // master-a
	slaveA string           // the slave's address
	u      *consoleUser     // the console
	c      *twc.Client      // the twin client that wrote the devices
	rc     *remoting.Client // for the slave's replica
}

// startTwinsReplicaSet starts a twinsReplicaSet whose console gives each
// request consoleTimeout, writes devices dev00, dev01... (tag n: their
// number) and returns once the slave's replica holds them all.
func startTwinsReplicaSet(t *testing.T, devices int, consoleTimeout time.Duration) *twinsReplicaSet {
	t.Helper()
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
	con := start(t, dir, "console", "console", "-listen", consoleAddr, "-registries", reg, "-set", "console.request_timeout="+consoleTimeout.String())
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
	t.Cleanup(func() { rc.Close() })
	testutil.Eventually(t, 60*time.Second, func() error {
		if n, err := replicaDevices(rc, slaveA, twc.DefaultShards); err != nil || n != devices {
			return fmt.Errorf("slave replica has %d of %d devices: %v", n, devices, err)
		}
		return nil
	})
	return &twinsReplicaSet{ma: ma, slaveA: slaveA, u: u, c: c, rc: rc}
}

// answers are whole again.
func TestClusterProcConsoleTwinsMasterDown(t *testing.T) {
	const devices = 20
	s := startTwinsReplicaSet(t, devices, 5*time.Second)
	ma, slaveA, u, c, rc := s.ma, s.slaveA, s.u, s.c, s.rc
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Minute)
	defer cancel()

	// get reads a console page: status, PartialHeader, decoded body.
	get := func(path string, out any) (int, string, error) {
		resp, err := u.hc.Get(u.base + path)
		if err != nil {
			return 0, "", err
		}
		defer resp.Body.Close()
		if resp.StatusCode == http.StatusOK && out != nil {
			if err := json.NewDecoder(resp.Body).Decode(out); err != nil {
				return resp.StatusCode, "", err
			}
		}
		return resp.StatusCode, resp.Header.Get(console.PartialHeader), nil
	}
	type page struct {
		Devices []struct {
			DeviceID string `json:"deviceId"`
		} `json:"devices"`
	}
	type twinDoc struct {
		Twin struct {
			Tags struct {
				N int `json:"n"`
			} `json:"tags"`
		} `json:"twin"`
	}
	var p page
	if code, partial, err := get("/api/twins?pageSize=100", &p); err != nil || code != http.StatusOK || partial != "" || len(p.Devices) != devices {
		t.Fatalf("master up: /api/twins %d %q %v: %d devices", code, partial, err, len(p.Devices))
	}

	ma.kill()
	testutil.Eventually(t, 60*time.Second, func() error {
		var p page
		code, partial, err := get("/api/twins?pageSize=100", &p)
		if err != nil || code != http.StatusOK {
			return fmt.Errorf("master dead: /api/twins: %d %v", code, err)
		}
		if len(p.Devices) != devices || !strings.Contains(partial, slaveA) {
			return fmt.Errorf("master dead: /api/twins: %d devices, %s %q", len(p.Devices), console.PartialHeader, partial)
		}
		return nil
	})
	var d twinDoc
	if code, partial, err := get("/api/twins/dev07", &d); err != nil || code != http.StatusOK || d.Twin.Tags.N != 7 || partial == "" {
		t.Fatalf("master dead: /api/twins/dev07: %d %q %v %+v", code, partial, err, d)
	}
	if code, _, err := get("/api/twins/nosuch", nil); err != nil || code != http.StatusNotFound {
		t.Fatalf("master dead: /api/twins/nosuch: %d %v, want 404", code, err)
	}
	// Writes are not sent to the slave; reads of a client that did not
	// ask for replica reads fail as before.
	wctx, wcancel := context.WithTimeout(ctx, 10*time.Second)
	if _, err := c.UpdateTwin(wctx, "dev07", "", []byte(`{"tags":{"n":70}}`), ""); !errors.Is(err, twc.ErrUnavailable) {
		t.Fatalf("master dead: a twin write: %v, want ErrUnavailable", err)
	}
	if _, err := c.GetTwin(wctx, "dev07", ""); !errors.Is(err, twc.ErrUnavailable) {
		t.Fatalf("master dead: a read without ReplicaReads: %v, want ErrUnavailable", err)
	}
	wcancel()
	if n, err := replicaDevices(rc, slaveA, twc.DefaultShards); err != nil || n != devices {
		t.Fatalf("slave replica after the refused write: %d devices, %v", n, err)
	}

	ma.run(t)
	testutil.Eventually(t, 90*time.Second, func() error {
		var p page
		code, partial, err := get("/api/twins?pageSize=100", &p)
		if err != nil || code != http.StatusOK || partial != "" || len(p.Devices) != devices {
			return fmt.Errorf("master back: /api/twins %d %q %v: %d devices", code, partial, err, len(p.Devices))
		}
		return nil
	})
	if code, partial, err := get("/api/twins/dev07", &d); err != nil || code != http.StatusOK || d.Twin.Tags.N != 7 || partial != "" {
		t.Fatalf("master back: /api/twins/dev07: %d %q %v %+v", code, partial, err, d)
	}
}
