package rocketmq

import (
	"bufio"
	"fmt"
	"github.com/smartgo/smartgo/internal/testnet"
	"os"
	"os/exec"
	"path/filepath"
	"strings"
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
// its data in a temp dir, and stops it (SIGTERM) at cleanup.
func startStandalone(t *testing.T, extra ...string) *standalone {
	t.Helper()
	bin := smartgoBinary(t)
	dir := t.TempDir()
	ports := freePorts(t, 3)
	s := &standalone{
		registry: fmt.Sprintf("127.0.0.1:%d", ports[0]),
		broker:   fmt.Sprintf("127.0.0.1:%d", ports[1]),
		mqtt:     fmt.Sprintf("127.0.0.1:%d", ports[2]),
	}
	args := append([]string{"standalone", "-data", filepath.Join(dir, "data"),
		"-set", "registry.listen=" + s.registry, "-set", "broker.listen=" + s.broker, "-set", "console.listen=127.0.0.1:0",
		"-set", "bridge.listen=" + s.mqtt,
		"-set", "store.segment_size=64MiB", "-set", "log.level=" + logLevel()}, extra...)
	s.cmd = exec.Command(bin, args...)
	logf, err := os.Create(filepath.Join(dir, "smartgo.log"))
	if err != nil {
		t.Fatal(err)
	}
	s.log = logf
	s.cmd.Stdout, s.cmd.Stderr = logf, logf
	if err := s.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = s.cmd.Process.Signal(os.Interrupt)
		done := make(chan error, 1)
		go func() { done <- s.cmd.Wait() }()
		select {
		case err := <-done:
			if err != nil {
				t.Errorf("smartgo standalone exited with %v", err)
			}
		case <-time.After(15 * time.Second):
			_ = s.cmd.Process.Kill()
			t.Error("smartgo standalone did not stop within 15 s of SIGINT")
		}
		if t.Failed() {
			data, _ := os.ReadFile(logf.Name())
			t.Logf("smartgo log:\n%s", tail(string(data), 400))
		}
		logf.Close()
	})
	deadline := time.Now().Add(20 * time.Second)
	for !s.logContains("registered with registry") {
		if time.Now().After(deadline) {
			data, _ := os.ReadFile(logf.Name())
			t.Fatalf("standalone did not come up:\n%s", data)
		}
		time.Sleep(20 * time.Millisecond)
	}
	return s
}

func (s *standalone) logContains(text string) bool {
	f, err := os.Open(s.log.Name())
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
