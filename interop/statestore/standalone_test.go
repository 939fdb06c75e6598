package statestore

import (
	"bufio"
	"context"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"syscall"
	"testing"
	"time"

	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/statestore"
)

// standalone is a running `smartgo standalone` process built from this
// checkout: the server setup a user gets (registry, broker with the state
// store, MQTT bridge with the state store front calling the broker in
// process).
type standalone struct {
	mqtt string // bridge MQTT address
	cmd  *exec.Cmd
	// exited is closed when the current run's process has exited;
	// exitErr (read only after exited) is what Wait returned.
	exited  chan struct{}
	exitErr error
	log     string // path of its combined output
	logf    *os.File

	bin, dir  string
	args, env []string
	runs      int
}

// smartgoBinary builds cmd/smartgo once per test run (SMARTGO_SS_BIN
// names a prebuilt binary instead, e.g. to benchmark another build).
func smartgoBinary(t testing.TB) string {
	t.Helper()
	if bin := os.Getenv("SMARTGO_SS_BIN"); bin != "" {
		return bin
	}
	return testnet.SmartgoBinary(t, filepath.Join("..", ".."))
}

// startStandalone runs `smartgo standalone` on free loopback ports with
// its data in a temp dir (extra: more -set flags), waits until it runs and
// stops it with SIGINT at cleanup.
func startStandalone(t testing.TB, extra ...string) *standalone {
	t.Helper()
	return startStandaloneBin(t, smartgoBinary(t), nil, extra...)
}

// startStandaloneBin is startStandalone with binary bin and env added to
// the process's environment.
func startStandaloneBin(t testing.TB, bin string, env []string, extra ...string) *standalone {
	t.Helper()
	return startStandaloneBinData(t, bin, env, "", extra...)
}

// startStandaloneBinData is startStandaloneBin with the data in data (its
// logs stay in a temp dir), or in the temp dir when data is "".
func startStandaloneBinData(t testing.TB, bin string, env []string, data string, extra ...string) *standalone {
	t.Helper()
	dir := t.TempDir()
	if data == "" {
		data = filepath.Join(dir, "data")
	}
	ports := testnet.FreePorts(t, 3)
	s := &standalone{mqtt: fmt.Sprintf("127.0.0.1:%d", ports[2]), bin: bin, dir: dir, env: env}
	s.args = []string{"standalone", "-data", data,
		"-set", fmt.Sprintf("registry.listen=127.0.0.1:%d", ports[0]),
		"-set", fmt.Sprintf("broker.listen=127.0.0.1:%d", ports[1]),
		"-set", "bridge.listen=" + s.mqtt, "-set", "console.listen=127.0.0.1:0",
		"-set", "store.segment_size=64MiB", "-set", "log.level=info"}
	for _, e := range extra {
		s.args = append(s.args, "-set", e)
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(os.Interrupt)
		select {
		case <-s.exited:
			if s.exitErr != nil {
				t.Errorf("smartgo standalone exited with %v", s.exitErr)
			}
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			t.Error("smartgo standalone did not stop within 15 s of SIGINT")
		}
		if t.Failed() {
			data, _ := os.ReadFile(s.log)
			t.Logf("smartgo log:\n%s", data)
		}
		_ = s.logf.Close()
	})
	s.start(t)
	return s
}

// start runs the process (again, on the same ports and data) and waits
// until it runs; each run logs to a file of its own.
func (s *standalone) start(t testing.TB) {
	t.Helper()
	s.runs++
	s.log = filepath.Join(s.dir, fmt.Sprintf("smartgo-%d.log", s.runs))
	s.cmd = exec.Command(s.bin, withoutAMQP(s.args)...)
	if s.env != nil {
		s.cmd.Env = append(os.Environ(), s.env...)
	}
	logf, err := os.Create(s.log)
	if err != nil {
		t.Fatal(err)
	}
	s.logf = logf
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	cmd, exited := s.cmd, make(chan struct{})
	s.exited = exited
	go func() { s.exitErr = cmd.Wait(); close(exited) }()
	// Wait for readiness or for the process to exit (a bad -set makes it
	// exit at once: fail then with its log, not after the whole deadline).
	deadline := time.After(30 * time.Second)
	for !s.logContains("standalone running") {
		select {
		case <-exited:
			if s.logContains("standalone running") {
				return // the cleanup reports the exit
			}
			data, _ := os.ReadFile(s.log)
			t.Fatalf("smartgo standalone exited (%v) before it ran:\n%s", s.exitErr, data)
		case <-deadline:
			data, _ := os.ReadFile(s.log)
			t.Fatalf("standalone did not come up within 30 s:\n%s", data)
		case <-time.After(20 * time.Millisecond): // the log has no wake-up: look again
		}
	}
}

// kill9Restart kills the process with SIGKILL and starts it again.
func (s *standalone) kill9Restart(t testing.TB) {
	t.Helper()
	_ = s.cmd.Process.Signal(syscall.SIGKILL)
	<-s.exited
	_ = s.logf.Close()
	s.start(t)
}

func (s *standalone) logContains(text string) bool {
	f, err := os.Open(s.log)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	sc.Buffer(make([]byte, 64<<10), 1<<20)
	for sc.Scan() {
		if strings.Contains(sc.Text(), text) {
			return true
		}
	}
	return false
}

// dialStandalone connects SmartGo's Go client and waits until the state
// store answers (the front learns the shard route from the registry).
func dialStandalone(t testing.TB, s *standalone, id string) *sscli.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sscli.Dial(ctx, sscli.Options{Addr: s.mqtt, ClientID: id})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	var lastErr error
	testutil.WaitFor(t, 5*time.Second, "a state store answer from "+id, func() bool {
		_, _, _, lastErr = c.Get(ctx, []byte("warmup"))
		return lastErr == nil
	})
	return c
}

// TestStateStoreStandaloneProcess drives a real `smartgo standalone`
// process, whose bridge calls the broker's state store in process: CRUD,
// a SET notification, and an expiry's DELETE notification (pushed by the
// broker's timer to the in-process front end).
func TestStateStoreStandaloneProcess(t *testing.T) {
	s := startStandalone(t)
	if !s.logContains("statestore_local_brokers=[127.0.0.1:") {
		data, _ := os.ReadFile(s.log)
		t.Fatalf("the bridge does not call the broker in process:\n%s", data)
	}
	ctx := ctx10(t)
	w := dialStandalone(t, s, "sa-watcher")
	c := dialStandalone(t, s, "sa-writer")
	if err := w.KeyNotify(ctx, []byte("k"), false); err != nil {
		t.Fatal(err)
	}
	if err := w.KeyNotify(ctx, []byte("e"), false); err != nil {
		t.Fatal(err)
	}
	applied, v1, err := c.Set(ctx, []byte("k"), []byte("v1"), sscli.SetOptions{})
	if err != nil || !applied || v1.IsZero() {
		t.Fatalf("set: %v %v %v", applied, v1, err)
	}
	val, ver, ok, err := c.Get(ctx, []byte("k"))
	if err != nil || !ok || string(val) != "v1" || ver.Compare(v1) != 0 {
		t.Fatalf("get: %q %v %v %v", val, ver, ok, err)
	}
	if n, err := c.Del(ctx, []byte("k"), statestore.HLC{}); err != nil || n != 1 {
		t.Fatalf("del: %d %v", n, err)
	}
	if _, _, err := c.Set(ctx, []byte("e"), []byte("x"), sscli.SetOptions{Expiry: 100 * time.Millisecond}); err != nil {
		t.Fatal(err)
	}
	want := []struct {
		key string
		op  statestore.Op
	}{{"k", statestore.OpSet}, {"k", statestore.OpDelete}, {"e", statestore.OpSet}, {"e", statestore.OpDelete}}
	for _, wn := range want {
		select {
		case n := <-w.Notifications():
			if string(n.Key) != wn.key || n.Op != wn.op {
				t.Fatalf("notification %s %q, want %s %q", n.Op, n.Key, wn.op, wn.key)
			}
		case <-time.After(5 * time.Second):
			t.Fatalf("no %s notification for %q", wn.op, wn.key)
		}
	}
}
