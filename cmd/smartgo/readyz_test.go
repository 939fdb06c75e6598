package main

import (
	"fmt"
	"os"
	"path/filepath"
	"regexp"
	"strconv"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
)

// A standalone is not ready while its broker is still starting: its
// registry is up first, and /readyz used to answer 200 "ok registry"
// during the broker's recovery, so a client started on readiness found no
// route. The broker is held in its start here by a FIFO in place of its
// topic config (the read blocks until the test writes it).
func TestCmdBinaryStandaloneNotReadyUntilEveryPartIsUp(t *testing.T) {
	data := t.TempDir()
	cfg := filepath.Join(data, "store", "config")
	if err := os.MkdirAll(cfg, 0o755); err != nil {
		t.Fatal(err)
	}
	fifo := filepath.Join(cfg, "topic.json")
	if err := syscall.Mkfifo(fifo, 0o644); err != nil {
		t.Skipf("mkfifo: %v", err)
	}
	p := startBin(t, "standalone", "-data", data, "-set", "metrics.listen=127.0.0.1:0", "-set", "registry.listen=127.0.0.1:0",
		"-set", "broker.listen=127.0.0.1:0", "-set", "bridge.listen=127.0.0.1:0", "-set", "console.listen=127.0.0.1:0",
		"-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB")
	addr := p.waitLog(t, regexp.MustCompile(`metrics listening.* addr=(\S+)`), 30*time.Second)[1]
	p.waitLog(t, regexp.MustCompile(`registry: started`), 30*time.Second)
	var code int
	var body string
	testutil.WaitFor(t, 30*time.Second, "the registry's check in /readyz", func() bool {
		code, body = readyz(t, addr)
		return strings.Contains(body, "ok registry")
	})
	if code != 503 || !strings.Contains(body, "fail broker: starting") || !strings.Contains(body, "fail bridge: starting") ||
		!strings.Contains(body, "fail console: starting") {
		t.Fatalf("/readyz while the broker starts: %d %q", code, body)
	}
	if strings.Contains(p.stderr.String(), "standalone running") {
		t.Fatalf("the broker did not wait for its topic config:\n%s", p.stderr.String())
	}
	f, err := os.OpenFile(fifo, os.O_WRONLY, 0)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := f.WriteString("{}"); err != nil {
		t.Fatal(err)
	}
	if err := f.Close(); err != nil {
		t.Fatal(err)
	}
	p.waitLog(t, regexp.MustCompile(`standalone running`), 60*time.Second)
	testutil.WaitFor(t, 30*time.Second, "/readyz 200", func() bool {
		code, body = readyz(t, addr)
		return code == 200
	})
	for _, part := range []string{"registry", "broker", "statestore", "twin", "bridge", "console"} {
		if !strings.Contains(body, "ok "+part+"\n") {
			t.Errorf("/readyz lacks %q: %q", "ok "+part, body)
		}
	}
	if code, _ := p.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, p.stderr.String())
	}
}

// A registry with an embedded controller replica is ready only while the
// replica knows its Raft leader, as `smartgo controller` is: one whose
// peers do not answer has no quorum and says so (it used to say only
// "ok registry"); /readyz/registry asks for its name service alone.
func TestCmdRegistryWithControllerReadiness(t *testing.T) {
	dir := t.TempDir()
	ports := testnet.FreePorts(t, 3)
	reg := "127.0.0.1:" + strconv.Itoa(ports[0])
	dead1, dead2 := deadAddr(t), deadAddr(t)
	peers := fmt.Sprintf("%s=127.0.0.1:%d,%s=%s,%s=%s", reg, ports[1], dead1, dead1, dead2, dead2)
	errb := startServer(t, "registry running", "registry", "-listen", reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"),
		"-set", "registry.controller=true", "-set", "controller.data_dir="+filepath.Join(dir, "c1"),
		"-set", "controller.raft_listen=127.0.0.1:"+strconv.Itoa(ports[1]), "-set", "controller.peers="+peers,
		"-set", "metrics.listen=127.0.0.1:"+strconv.Itoa(ports[2]))
	mon := "127.0.0.1:" + strconv.Itoa(ports[2])
	code, body := readyz(t, mon)
	if code != 503 || !strings.Contains(body, "ok registry\n") || !strings.Contains(body, "fail controller: controller: no Raft leader known") {
		t.Fatalf("/readyz of a registry whose controller has no quorum: %d %q\n%s", code, body, errb.String())
	}
	if m := metricsText(t, mon); !strings.Contains(m, "\nsmartgo_controller_leader_known 0\n") {
		t.Fatalf("/metrics of a registry whose controller has no quorum:\n%s", m)
	}
	// A probe of the name service alone keeps it in service meanwhile.
	if code, body := getPath(t, mon, "/readyz/registry"); code != 200 || body != "ok registry\n" {
		t.Fatalf("/readyz/registry of a registry whose controller has no quorum: %d %q", code, body)
	}
	if code, body := getPath(t, mon, "/readyz/controller"); code != 503 || !strings.Contains(body, "fail controller: controller: no Raft leader known") {
		t.Fatalf("/readyz/controller without quorum: %d %q", code, body)
	}

	// A single replica elects itself and the registry is ready.
	ports = testnet.FreePorts(t, 3)
	reg = "127.0.0.1:" + strconv.Itoa(ports[0])
	startServer(t, "registry running", "registry", "-listen", reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv2.json"),
		"-set", "registry.controller=true", "-set", "controller.data_dir="+filepath.Join(dir, "c2"),
		"-set", "controller.raft_listen=127.0.0.1:"+strconv.Itoa(ports[1]), "-set", "metrics.listen=127.0.0.1:"+strconv.Itoa(ports[2]))
	mon = "127.0.0.1:" + strconv.Itoa(ports[2])
	testutil.WaitFor(t, 30*time.Second, "/readyz 200 with a leader", func() bool {
		code, body = readyz(t, mon)
		return code == 200
	})
	if body != "ok registry\nok controller\n" {
		t.Fatalf("/readyz of a registry whose controller leads: %q", body)
	}
	if m := metricsText(t, mon); !strings.Contains(m, "\nsmartgo_controller_leader_known 1\n") ||
		!strings.Contains(m, "\nsmartgo_controller_raft_state{state=\"Leader\"} 1\n") || !strings.Contains(m, "\nsmartgo_registry_brokers ") {
		t.Fatalf("/metrics of a registry whose controller leads:\n%s", m)
	}
}

// metricsText returns the body of a process's /metrics.
func metricsText(t *testing.T, addr string) string {
	t.Helper()
	code, body := getPath(t, addr, "/metrics")
	if code != 200 {
		t.Fatalf("/metrics: %d", code)
	}
	return body
}

// A bridge or broker process still starting names the part it waits for:
// a bridge whose registries do not answer answers /readyz "fail bridge:
// starting" and /readyz/bridge 503 (it used to say only that no
// component was up, and a probe of /readyz/bridge found no such check).
func TestCmdBinaryStartingPartsAreNamed(t *testing.T) {
	p := startBin(t, "bridge", "-listen", "127.0.0.1:0", "-set", `bridge.registries=["`+deadAddr(t)+`"]`, "-set", "metrics.listen=127.0.0.1:0")
	addr := p.waitLog(t, regexp.MustCompile(`metrics listening.* addr=(\S+)`), 30*time.Second)[1]
	p.waitLog(t, regexp.MustCompile(`waiting for the registries`), 20*time.Second)
	if code, body := readyz(t, addr); code != 503 || body != "fail bridge: starting: not up yet\n" {
		t.Fatalf("/readyz of a bridge waiting for its registries: %d %q", code, body)
	}
	if code, body := getPath(t, addr, "/readyz/bridge"); code != 503 || body != "fail bridge: starting: not up yet\n" {
		t.Fatalf("/readyz/bridge of a bridge waiting for its registries: %d %q", code, body)
	}
	if code, _ := p.stop(t, syscall.SIGTERM, 10*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, p.stderr.String())
	}
}

// metrics.pprof (TOML, here through -set) serves the runtime's profiles
// on the metrics port of a real process, and only when set.
func TestCmdBinaryMetricsPprof(t *testing.T) {
	for _, on := range []bool{false, true} {
		args := []string{"registry", "-set", "registry.listen=127.0.0.1:0", "-set", "metrics.listen=127.0.0.1:0"}
		if on {
			args = append(args, "-set", "metrics.pprof=true")
		}
		p := startBin(t, args...)
		addr := p.waitLog(t, regexp.MustCompile(`metrics listening.* addr=(\S+)`), 30*time.Second)[1]
		code, body := getPath(t, addr, "/debug/pprof/cmdline")
		switch {
		case on && (code != 200 || !strings.Contains(body, "registry")):
			t.Fatalf("pprof on: /debug/pprof/cmdline %d %q", code, body)
		case !on && code != 404:
			t.Fatalf("pprof off: /debug/pprof/cmdline %d %q, want 404", code, body)
		}
		if code, _ := p.stop(t, syscall.SIGTERM, 10*time.Second); code != exitOK {
			t.Fatalf("exit %d:\n%s", code, p.stderr.String())
		}
	}
}
