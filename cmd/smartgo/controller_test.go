package main

import (
	"context"
	"encoding/json"
	"fmt"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// startServer runs a server subcommand until the test ends and waits for
// want in its log.
func startServer(t *testing.T, want string, args ...string) *testutil.LogBuffer {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testutil.LogBuffer
	done := make(chan int, 1)
	go func() { done <- run(ctx, args, &out, &errb) }()
	exited := false
	t.Cleanup(func() {
		cancel()
		if exited {
			return
		}
		select {
		case code := <-done:
			if code != exitOK {
				t.Errorf("%s exit %d: %s", args[0], code, errb.String())
			}
		case <-time.After(15 * time.Second):
			t.Errorf("%s did not stop", args[0])
		}
	})
	deadline := time.Now().Add(15 * time.Second)
	for !strings.Contains(errb.String(), want) {
		select {
		case code := <-done:
			exited = true
			t.Fatalf("%s exited %d: %s", args[0], code, errb.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("%s: no %q in: %s", args[0], want, errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	return &errb
}

func controllerMetadata(t *testing.T, addr string) protocol.ControllerMetadata {
	t.Helper()
	cl, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer cl.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
	defer cancel()
	resp, err := cl.Invoke(ctx, addr, protocol.NewRequest(protocol.ControllerGetMetadata, nil, nil))
	if err != nil {
		t.Fatal(err)
	}
	var md protocol.ControllerMetadata
	if err := protocol.DecodeControllerBody(resp.Body, &md); err != nil {
		t.Fatal(err)
	}
	return md
}

// A registry with registry.controller = true answers the controller's
// requests on its own port; `smartgo controller` runs one on its own.
func TestCmdControllerInRegistryAndAlone(t *testing.T) {
	dir := t.TempDir()
	ports := testnet.FreePorts(t, 2)
	reg := "127.0.0.1:" + strconv.Itoa(ports[0])
	startServer(t, "leads", "registry", "-listen", reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"),
		"-set", "registry.controller=true", "-set", "controller.data_dir="+filepath.Join(dir, "c1"),
		"-set", "controller.raft_listen=127.0.0.1:"+strconv.Itoa(ports[0]+1), "-set", "log.level=debug")
	md := controllerMetadata(t, reg)
	if md.Self != reg || md.State != "Leader" || md.Leader != reg || len(md.Peers) != 1 {
		t.Fatalf("embedded controller metadata %+v", md)
	}

	// A broker in controller mode becomes master; admin controller shows it.
	startServer(t, "became master", "broker", "-listen", "127.0.0.1:0", "-data", filepath.Join(dir, "b"), "-registries", reg,
		"-set", "broker.controllers="+reg, "-set", "broker.ha_listen=127.0.0.1:0", "-set", "store.segment_size=8MiB")
	var view struct {
		Replicas []protocol.ControllerMetadata `json:"replicas"`
		Groups   []protocol.ControllerGroup    `json:"groups"`
	}
	code, stdout, stderr := runCmd(t, "admin", "controller", "-registry", reg, "-o", "json")
	if code != exitOK || json.Unmarshal([]byte(stdout), &view) != nil {
		t.Fatalf("admin controller: exit %d %q %q", code, stdout, stderr)
	}
	if len(view.Replicas) != 1 || len(view.Groups) != 1 || view.Groups[0].MasterID == 0 || view.Groups[0].MasterEpoch != 1 ||
		!view.Groups[0].Brokers[0].Alive {
		t.Fatalf("admin controller view %+v", view)
	}
	if code, stdout, _ := runCmd(t, "admin", "controller", "-registry", reg); code != exitOK || !strings.Contains(stdout, "Leader") ||
		!strings.Contains(stdout, "broker-a") {
		t.Fatalf("admin controller table: %d %s", code, stdout)
	}
	if code, _, stderr := runCmd(t, "admin", "controller", "elect", "-group", "broker-a", "-registry", reg); code != exitFailure ||
		!strings.Contains(stderr, "alive") {
		t.Fatalf("elect with a live master: exit %d %q", code, stderr)
	}
	if code, _, _ := runCmd(t, "admin", "controller", "elect", "-registry", reg); code != exitUsage {
		t.Fatalf("elect without -group: exit %d", code)
	}

	ctl := "127.0.0.1:" + strconv.Itoa(ports[1])
	startServer(t, "leads", "controller", "-listen", ctl, "-data", filepath.Join(dir, "c2"),
		"-peers", fmt.Sprintf("%s=127.0.0.1:%d", ctl, ports[1]+1), "-set", "controller.raft_listen=127.0.0.1:"+strconv.Itoa(ports[1]+1))
	if md := controllerMetadata(t, ctl); md.Self != ctl || md.State != "Leader" {
		t.Fatalf("controller metadata %+v", md)
	}
	if code, _, stderr := runCmd(t, "controller", "-peers", "nonsense", "-data", dir); code != exitUsage || !strings.Contains(stderr, "controller.peers") {
		t.Fatalf("bad peers: exit %d %q", code, stderr)
	}
}

// TestCmdAdminAtControllerPort: a controller replica's address given for
// a registry's or a broker's is named as such; it said only "request
// type 106 not supported" (as a broker's, with no hint at all).
func TestCmdAdminAtControllerPort(t *testing.T) {
	ports := testnet.FreePorts(t, 1)
	ctl := "127.0.0.1:" + strconv.Itoa(ports[0])
	startServer(t, "leads", "controller", "-listen", ctl, "-data", t.TempDir(),
		"-peers", fmt.Sprintf("%s=127.0.0.1:%d", ctl, ports[0]+1), "-set", "controller.raft_listen=127.0.0.1:"+strconv.Itoa(ports[0]+1))
	for _, c := range []struct {
		args []string
		want string
	}{
		{[]string{"admin", "-registry", ctl, "cluster"}, ctl + " is a controller replica, not a registry"},
		{[]string{"admin", "-registry", ctl, "broker", "config", "-b", ctl}, ctl + " is a controller replica, not a broker"},
	} {
		if code, _, stderr := runCmd(t, c.args...); code != exitFailure || !strings.Contains(stderr, c.want) {
			t.Errorf("%v: exit %d: %s", c.args, code, stderr)
		}
	}
}
