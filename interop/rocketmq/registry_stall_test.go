package rocketmq

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropRegistryStallKeepsBrokers: a registry stopped (SIGSTOP) for
// 14 s, past its broker_expiry (11 s), and resumed (SIGCONT) heard nothing
// meanwhile, while the broker kept registering (every 10 s, the
// registrations waiting in its socket): it expires no broker, it gives
// them one more heartbeat interval. It expired every broker at its first
// scan. A broker that is stopped itself is still expired (the control).
func TestInteropRegistryStallKeepsBrokers(t *testing.T) {
	if testing.Short() {
		t.Skip("starts processes")
	}
	dir := t.TempDir()
	ports := freePorts(t, 3)
	regAddr := "127.0.0.1:" + strconv.Itoa(ports[0])
	bAddr := "127.0.0.1:" + strconv.Itoa(ports[1])
	reg := &ctlNode{name: "registry", ready: "registry running", log: filepath.Join(dir, "registry.log"),
		args: []string{"registry", "-set", "registry.listen=" + regAddr, "-set", "registry.kv_config_path=" + filepath.Join(dir, "kv.json"),
			"-set", "registry.broker_expiry=11s", "-set", "registry.scan_interval=250ms", "-set", "log.level=" + logLevel()}}
	br := &ctlNode{name: "broker", ready: "registered with registry", log: filepath.Join(dir, "broker.log"),
		args: []string{"broker", "-listen", bAddr, "-data", filepath.Join(dir, "b"), "-registries", regAddr,
			"-set", "broker.name=broker-stall", "-set", "broker.register_interval=10s",
			"-set", "broker.ha_listen=127.0.0.1:" + strconv.Itoa(ports[2]), "-set", "broker.advertise_ip=127.0.0.1",
			"-set", "store.segment_size=8MiB", "-set", "log.level=" + logLevel()}}
	t.Cleanup(func() {
		br.kill9()
		reg.kill9()
		if t.Failed() {
			for _, n := range []*ctlNode{reg, br} {
				data, _ := os.ReadFile(n.log)
				t.Logf("%s:\n%s", n.log, tail(string(data), 40))
			}
		}
	})
	reg.run(t)
	br.run(t)
	adm, err := admin.New(admin.Options{Registries: []string{regAddr}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = adm.Close() })
	listed := func() (bool, error) {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		ci, err := adm.ClusterInfo(ctx)
		if err != nil {
			return false, err
		}
		bd := ci.BrokerAddrTable["broker-stall"]
		return bd != nil && bd.BrokerAddrs[0] == bAddr, nil
	}
	testutil.Eventually(t, 30*time.Second, func() error {
		if ok, err := listed(); err != nil || !ok {
			return fmt.Errorf("broker not listed yet (%v)", err)
		}
		return nil
	})
	const expired = "registry: broker expired"
	reg.signal(syscall.SIGSTOP)
	time.Sleep(14 * time.Second) // the stall under test: past the expiry
	reg.signal(syscall.SIGCONT)
	// The grace is one heartbeat interval (10 s, the broker's registration
	// period, as the registry saw it, or the expiry before it saw two); the
	// broker's queued registrations come in at once, the next one within
	// the grace. Watch past the grace.
	testutil.WaitFor(t, 30*time.Second, "the registry's stall noticed", func() bool {
		return countIn(reg.log, "liveness scan ran late") > 0
	})
	until := time.Now().Add(13 * time.Second)
	for time.Now().Before(until) {
		if ok, err := listed(); err == nil && !ok {
			t.Fatal("the broker left the registry's cluster table after the registry's stall")
		}
		time.Sleep(50 * time.Millisecond)
	}
	if n := countIn(reg.log, expired); n != 0 {
		t.Fatalf("the registry expired a live broker after its own stall (%d log lines %q)", n, expired)
	}
	// The control: a broker that stops registering is still expired.
	br.signal(syscall.SIGSTOP)
	t.Cleanup(func() { br.signal(syscall.SIGCONT) })
	testutil.Eventually(t, 30*time.Second, func() error {
		if ok, err := listed(); err != nil || ok {
			return fmt.Errorf("the stopped broker is still listed (%v)", err)
		}
		return nil
	})
	if countIn(reg.log, expired) == 0 {
		t.Fatalf("the stopped broker left the table without a %q line", expired)
	}
}
