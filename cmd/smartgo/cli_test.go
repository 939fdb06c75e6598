package main

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"slices"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// binary builds the smartgo binary once per test run.
func binary(t *testing.T) string {
	t.Helper()
	return testnet.SmartgoBinary(t, filepath.Join("..", ".."))
}

// runBin runs the built binary with args and returns its exit code and
// output; it fails the test when the process outlives timeout (a command
// that should have stopped at once and did not).
func runBin(t *testing.T, timeout time.Duration, args ...string) (int, string, string) {
	t.Helper()
	bin := binary(t) // built before the clock starts
	ctx, cancel := context.WithTimeout(context.Background(), timeout)
	defer cancel()
	cmd := exec.CommandContext(ctx, bin, args...)
	var out, errb bytes.Buffer
	cmd.Stdout, cmd.Stderr = &out, &errb
	err := cmd.Run()
	if ctx.Err() != nil {
		t.Fatalf("smartgo %s: still running after %v (killed)\nstderr:\n%s", strings.Join(args, " "), timeout, errb.String())
	}
	var ee *exec.ExitError
	switch {
	case err == nil:
		return 0, out.String(), errb.String()
	case errors.As(err, &ee):
		return ee.ExitCode(), out.String(), errb.String()
	}
	t.Fatalf("smartgo %s: %v", strings.Join(args, " "), err)
	return 0, "", ""
}

// commandLines lists every command, admin sub-command and bench mode as
// the words that name it on the command line.
func commandLines() [][]string {
	var lines [][]string
	for name := range commandTable {
		switch name {
		case "admin":
			for sub := range adminTable {
				lines = append(lines, append([]string{"admin"}, strings.Fields(sub)...))
			}
		case "bench":
			for _, m := range benchModes {
				lines = append(lines, []string{"bench", string(m.mode)})
			}
		default:
			lines = append(lines, []string{name})
		}
	}
	slices.SortFunc(lines, func(a, b []string) int { return strings.Compare(strings.Join(a, " "), strings.Join(b, " ")) })
	return lines
}

// A word left over after the flags is refused with exit 2 by every
// command, before it starts anything: `standalone extra -set ...` used to
// drop every flag after "extra" and start on the default ports.
func TestCmdBinaryRejectsStrayWords(t *testing.T) {
	for _, words := range commandLines() {
		args := append(slices.Clone(words), "extra", "-set", "registry.listen=127.0.0.1:1")
		code, stdout, stderr := runBin(t, 20*time.Second, args...)
		if code != exitUsage || !strings.Contains(stderr, `unexpected argument "extra"`) || stdout != "" {
			t.Errorf("smartgo %s: exit %d, stdout %q, stderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
		}
		// The same word after valid flags is refused too.
		args = append(slices.Clone(words), "-h-no-such-flag")
		if code, _, stderr := runBin(t, 20*time.Second, args...); code != exitUsage || !strings.Contains(stderr, "Usage: smartgo "+strings.Join(words, " ")) {
			t.Errorf("smartgo %s: exit %d, stderr:\n%s", strings.Join(args, " "), code, stderr)
		}
	}
	for _, args := range [][]string{{"frob"}, {"admin", "frob"}, {"admin", "topic", "frob"}, {"bench", "sideways"}, {"bench"}, {"admin"}, {"admin", "topic"}} {
		if code, stdout, stderr := runBin(t, 20*time.Second, args...); code != exitUsage || stdout != "" || !strings.Contains(stderr, "Usage: smartgo") {
			t.Errorf("smartgo %s: exit %d, stdout %q, stderr:\n%s", strings.Join(args, " "), code, stdout, stderr)
		}
	}
}

var twoDefaults = regexp.MustCompile(`\(default[^)]*\)[^\n]*\(default[^\n]*`)

// Help asked for goes to stdout with exit 0, and every command, admin
// sub-command and bench mode has its own page with an example.
func TestCmdBinaryHelpPages(t *testing.T) {
	seen := map[string]string{}
	for _, words := range commandLines() {
		name := strings.Join(words, " ")
		for _, ask := range [][]string{append(slices.Clone(words), "-h"), append(slices.Clone(words), "--help"), append([]string{"help"}, words...)} {
			code, stdout, stderr := runBin(t, 20*time.Second, ask...)
			if code != exitOK || stderr != "" {
				t.Errorf("smartgo %s: exit %d, stderr %q", strings.Join(ask, " "), code, stderr)
			}
			if !strings.HasPrefix(stdout, "Usage: smartgo "+name+" ") || !strings.Contains(stdout, "\nExamples:\n  smartgo "+name) {
				t.Errorf("smartgo %s: no own usage line or example:\n%s", strings.Join(ask, " "), stdout)
			}
			// A flag whose usage says its default in words does not
			// get the raw one as well ("(default: every queue) (default -1)").
			if l := twoDefaults.FindString(stdout); l != "" {
				t.Errorf("smartgo %s: a flag's default stated twice: %q", strings.Join(ask, " "), l)
			}
			if other, dup := seen[stdout]; dup && other != name {
				t.Errorf("%s and %s print the same help page", name, other)
			}
			seen[stdout] = name
		}
	}
	for _, ask := range [][]string{{"-h"}, {"--help"}, {"help"}, {"admin", "-h"}, {"admin", "help"}, {"admin", "help", "topic", "create"},
		{"bench", "-h"}, {"bench", "help"}, {"admin", "topic", "-h"}, {"help", "admin", "topic"}} {
		if code, stdout, stderr := runBin(t, 20*time.Second, ask...); code != exitOK || stderr != "" || !strings.Contains(stdout, "Usage: smartgo") {
			t.Errorf("smartgo %s: exit %d, stdout %q, stderr %q", strings.Join(ask, " "), code, stdout, stderr)
		}
	}
}

// --version and version print the version and the commit; -o json gives
// the same as fields.
func TestCmdBinaryVersion(t *testing.T) {
	for _, args := range [][]string{{"--version"}, {"version"}, {"-version"}} {
		code, stdout, stderr := runBin(t, 20*time.Second, args...)
		if code != exitOK || !strings.HasPrefix(stdout, "smartgo "+version+" (commit ") || stderr != "" {
			t.Errorf("smartgo %s: exit %d, %q %q", args[0], code, stdout, stderr)
		}
	}
	code, stdout, _ := runBin(t, 20*time.Second, "version", "-o", "json")
	if code != exitOK || !strings.Contains(stdout, `"commit": "`) || !strings.Contains(stdout, `"version": "`+version+`"`) {
		t.Errorf("version -o json: exit %d, %s", code, stdout)
	}
	// The Makefile's -ldflags reach the binary and its start-up log line.
	bin := filepath.Join(t.TempDir(), "smartgo")
	build := exec.Command("go", "build", "-ldflags", "-X main.version=9.8.7 -X main.commit=0123456789ab", "-o", bin, ".")
	if out, err := build.CombinedOutput(); err != nil {
		t.Fatalf("go build: %v\n%s", err, out)
	}
	out, err := exec.Command(bin, "--version").Output()
	if err != nil || !strings.HasPrefix(string(out), "smartgo 9.8.7 (commit 0123456789ab") {
		t.Fatalf("--version of a Makefile-style build: %q %v", out, err)
	}
	taken, err := net.Listen("tcp", "127.0.0.1:0") // the registry starts, logs, and fails to listen
	if err != nil {
		t.Fatal(err)
	}
	defer taken.Close()
	out, _ = exec.Command(bin, "registry", "-listen", taken.Addr().String(), "-set", "registry.kv_config_path="+filepath.Join(t.TempDir(), "kv.json")).CombinedOutput()
	if first, _, _ := strings.Cut(string(out), "\n"); !strings.Contains(first, "version=9.8.7 commit=0123456789ab") {
		t.Fatalf("first log line of a server: %q", first)
	}
	// MQTT's $SYS/broker/version says the same (it said "(devel)", the
	// module version Go records for a binary built in its work tree).
	ports := testnet.FreePorts(t, 3)
	addr := func(i int) string { return fmt.Sprintf("127.0.0.1:%d", ports[i]) }
	std := exec.Command(bin, "standalone", "-set", "amqp.listen=", "-data", filepath.Join(t.TempDir(), "data"), "-set", "registry.listen="+addr(0),
		"-set", "broker.listen="+addr(1), "-set", "bridge.listen="+addr(2), "-set", "console.listen=127.0.0.1:0",
		"-set", "store.segment_size=16MiB")
	if err := std.Start(); err != nil {
		t.Fatal(err)
	}
	defer func() { _ = std.Process.Kill(); _ = std.Wait() }()
	var c *mqtttest.Conn
	testutil.WaitFor(t, 30*time.Second, "the MQTT listener", func() bool {
		nc, err := net.Dial("tcp", addr(2))
		if err == nil {
			c = mqtttest.New(t, nc, packets.Version311)
		}
		return err == nil
	})
	c.RecvTimeout = 20 * time.Second
	if ack := c.Connect(&packets.Connect{ClientID: "sys-reader", CleanStart: true, KeepAlive: 60}); ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	c.Send(&packets.Subscribe{PacketID: 1, Subscriptions: []packets.Subscription{{Filter: "$SYS/broker/version"}}})
	for {
		switch p := c.Recv().(type) {
		case *packets.Suback:
			continue
		case *packets.Publish:
			if want := "smartgo version 9.8.7 (0123456789ab)"; string(p.Payload) != want {
				t.Fatalf("$SYS/broker/version is %q, want %q", p.Payload, want)
			}
			return
		default:
			t.Fatalf("unexpected %T", p)
		}
	}
}

// proc is a smartgo process started by a test.
type proc struct {
	cmd    *exec.Cmd
	stderr testutil.LogBuffer
	stdout testutil.LogBuffer
	done   chan struct{}
	code   int
}

// startBin starts the binary with args; the process is killed at the end
// of the test if it is still running.
func startBin(t *testing.T, args ...string) *proc {
	t.Helper()
	p := &proc{cmd: exec.Command(binary(t), withoutAMQP(args)...), done: make(chan struct{})}
	p.cmd.Stdout, p.cmd.Stderr = &p.stdout, &p.stderr
	if err := p.cmd.Start(); err != nil {
		t.Fatal(err)
	}
	go func() {
		err := p.cmd.Wait()
		var ee *exec.ExitError
		if errors.As(err, &ee) {
			p.code = ee.ExitCode()
		}
		close(p.done)
	}()
	t.Cleanup(func() {
		select {
		case <-p.done:
		default:
			_ = p.cmd.Process.Kill()
			<-p.done
		}
	})
	return p
}

// waitLog waits until the process's stderr matches re and returns the
// first match's groups.
func (p *proc) waitLog(t *testing.T, re *regexp.Regexp, timeout time.Duration) []string {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for {
		if m := re.FindStringSubmatch(p.stderr.String()); m != nil {
			return m
		}
		select {
		case <-p.done:
			t.Fatalf("exited (code %d) before logging %v:\n%s", p.code, re, p.stderr.String())
		default:
		}
		if time.Now().After(deadline) {
			t.Fatalf("no %v in the log after %v:\n%s", re, timeout, p.stderr.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
}

// stop sends sig and returns the exit code and how long the process took
// to exit; it fails the test after timeout.
func (p *proc) stop(t *testing.T, sig os.Signal, timeout time.Duration) (int, time.Duration) {
	t.Helper()
	start := time.Now()
	if err := p.cmd.Process.Signal(sig); err != nil {
		t.Fatal(err)
	}
	select {
	case <-p.done:
		return p.code, time.Since(start)
	case <-time.After(timeout):
		t.Fatalf("still running %v after %v:\n%s", timeout, sig, p.stderr.String())
		return 0, 0
	}
}

// deadAddr returns a loopback address nothing listens on.
func deadAddr(t *testing.T) string {
	t.Helper()
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	addr := ln.Addr().String()
	ln.Close()
	return addr
}

// A bridge whose registries do not answer says it waits, naming them, and
// stops at once on SIGTERM (it used to log nothing and ignore the signal
// for its 30 s start timeout), with exit 0: nothing failed, it was asked
// to stop. -set takes the list in TOML syntax.
func TestCmdBinaryBridgeWaitIsCancelledBySignal(t *testing.T) {
	r1, r2 := deadAddr(t), deadAddr(t)
	for _, sig := range []os.Signal{syscall.SIGTERM, os.Interrupt} {
		p := startBin(t, "bridge", "-listen", "127.0.0.1:0", "-set", `bridge.registries=["`+r1+`", "`+r2+`"]`)
		p.waitLog(t, regexp.MustCompile(`waiting for the registries.*registries="?\[`+regexp.QuoteMeta(r1)+` `+regexp.QuoteMeta(r2)+`\]`), 20*time.Second)
		// Well under the 30 s start timeout it used to wait out.
		code, took := p.stop(t, sig, 25*time.Second)
		if code != exitOK || took > 15*time.Second {
			t.Fatalf("%v: exit %d after %v:\n%s", sig, code, took, p.stderr.String())
		}
		if n := strings.Count(p.stderr.String(), "waiting for the registries"); n > 2 {
			t.Fatalf("the wait is logged %d times in a few seconds:\n%s", n, p.stderr.String())
		}
	}
}

// withoutAMQP turns AMQP off in a bridge or standalone command line (right
// after the command word, so a test's own amqp.listen comes later and
// wins): the processes of the tests must not all take port 5672.
func withoutAMQP(args []string) []string {
	if len(args) > 0 && (args[0] == "bridge" || args[0] == "standalone") {
		return append([]string{args[0], "-set", "amqp.listen="}, args[1:]...)
	}
	return args
}
