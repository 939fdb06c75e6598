package rocketmq

import (
	"bufio"
	"fmt"
	"github.com/smartgo/smartgo/internal/testnet"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
	"sync"
	"testing"
	"time"
)

// standalone is a running `smartgo standalone` process built from this
// checkout.
type standalone struct {
	registry string
	broker   string
	mqtt     string // the bridge's MQTT listener
	cmd      *exec.Cmd
	log      *os.File
}

// smartgoBinary builds cmd/smartgo once per test run.
func smartgoBinary(t *testing.T) string { return testnet.SmartgoBinary(t, filepath.Join("..", "..")) }

// freePorts: see testnet.FreePorts.
func freePorts(t *testing.T, n int) []int { return testnet.FreePorts(t, n) }

// startStandalone runs `smartgo standalone` on free loopback ports with
// its data in a temp dir, and stops it (SIGINT) at cleanup.
func startStandalone(t *testing.T, extra ...string) *standalone {
	t.Helper()
	s, _ := runStandaloneAt(t, t.TempDir(), extra...)
	return s
}

// runStandaloneAt runs `smartgo standalone` on free loopback ports with
// its data in dir (which may hold an earlier run's data) and a log file
// of its own there; stop ends it as cleanup would (SIGINT, wait).
func runStandaloneAt(t *testing.T, dir string, extra ...string) (s *standalone, stop func()) {
	t.Helper()
	ports := freePorts(t, 3)
	s = &standalone{
		registry: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		broker:   fmt.Sprintf("127.0.0.1:%d", ports[1]),
		mqtt:     fmt.Sprintf("127.0.0.1:%d", ports[2]),
	}
	args := append([]string{"standalone", "-data", filepath.Join(dir, "data"),
		"-set", "registry.listen=" + s.registry, "-set", "broker.listen=" + s.broker, "-set", "console.listen=127.0.0.1:0",
		"-set", "bridge.listen=" + s.mqtt,
		"-set", "store.segment_size=64MiB", "-set", "log.level=" + logLevel()}, extra...)
	logf, err := os.CreateTemp(dir, "smartgo-*.log")
	if err != nil {
		t.Fatal(err)
	}
	_ = logf.Close()
	s.cmd, s.log, stop = runSmartgo(t, logf.Name(), "registered with registry", args...)
	return s, stop
}

func (s *standalone) logContains(text string) bool { return fileContains(s.log.Name(), text) }

// runSmartgo starts the smartgo binary with args, its output in logPath,
// waits until its log shows ready, and returns stop, which ends it
// (SIGINT, then SIGKILL after 15 s) and logs the tail of its log if the
// test failed; cleanup calls stop too (it runs once).
func runSmartgo(t *testing.T, logPath, ready string, args ...string) (*exec.Cmd, *os.File, func()) {
	t.Helper()
	cmd := exec.Command(smartgoBinary(t), withoutAMQP(args)...)
	logf, err := os.Create(logPath)
	if err != nil {
		t.Fatal(err)
	}
	cmd.Stdout, cmd.Stderr = logf, logf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	var once sync.Once
	stop := func() {
		once.Do(func() {
			_ = cmd.Process.Signal(os.Interrupt)
			done := make(chan error, 1)
			go func() { done <- cmd.Wait() }()
			select {
			case err := <-done:
				if err != nil {
					t.Errorf("smartgo %s exited with %v", args[0], err)
				}
			case <-time.After(15 * time.Second):
				_ = cmd.Process.Kill()
				<-done
				t.Errorf("smartgo %s did not stop within 15 s of SIGINT", args[0])
			}
			if t.Failed() {
				data, _ := os.ReadFile(logPath)
				t.Logf("smartgo %s log (%s):\n%s", args[0], logPath, tail(string(data), 400))
			}
			logf.Close()
		})
	}
	t.Cleanup(stop)
	deadline := time.Now().Add(20 * time.Second)
	for !fileContains(logPath, ready) {
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(logPath)
			t.Fatalf("smartgo %s did not come up:\n%s", args[0], data)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return cmd, logf, stop
}

// fileContains reports whether a line of the file at path contains text.
func fileContains(path, text string) bool {
	f, err := os.Open(path)
	if err != nil {
		return false
	}
	defer f.Close()
	sc := bufio.NewScanner(f)
	for sc.Scan() {
		if strings.Contains(sc.Text(), text) {
			return true
		}
	}
	return false
}

func tail(s string, n int) string {
	lines := strings.Split(s, "\n")
	if len(lines) > n {
		lines = lines[len(lines)-n:]
	}
	return strings.Join(lines, "\n")
}

// logLevel is smartgo's log level in interop runs (SMARTGO_LOG, default info).
func logLevel() string {
	if l := os.Getenv("SMARTGO_LOG"); l != "" {
		return l
	}
	return "info"
}
