package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

func runCmd(t *testing.T, args ...string) (int, string, string) {
	t.Helper()
	var out, errb bytes.Buffer
	code := run(context.Background(), args, &out, &errb)
	return code, out.String(), errb.String()
}

func TestCmdEverySubcommandHasHelp(t *testing.T) {
	for name := range commandTable {
		code, stdout, stderr := runCmd(t, name, "-h")
		if code != exitOK || stderr != "" {
			t.Errorf("%s -h: exit %d, stderr %q", name, code, stderr)
		}
		if !strings.Contains(stdout, "Usage: smartgo "+name) || !strings.Contains(stdout, "Examples:") || len(stdout) < 80 {
			t.Errorf("%s -h: help too thin:\n%s", name, stdout)
		}
	}
}

func TestCmdUsageAndUnknown(t *testing.T) {
	if code, _, stderr := runCmd(t); code != exitUsage || !strings.Contains(stderr, "standalone") {
		t.Fatalf("no args: exit %d\n%s", code, stderr)
	}
	if code, stdout, _ := runCmd(t, "--help"); code != exitOK || !strings.Contains(stdout, "standalone") {
		t.Fatalf("--help: exit %d\n%s", code, stdout)
	}
	if code, _, stderr := runCmd(t, "frobnicate"); code != exitUsage || !strings.Contains(stderr, `unknown command "frobnicate"`) {
		t.Fatalf("unknown: exit %d\n%s", code, stderr)
	}
	if code, _, _ := runCmd(t, "broker", "-no-such-flag"); code != exitUsage {
		t.Fatalf("bad flag: exit %d", code)
	}
}

func TestCmdVersion(t *testing.T) {
	code, stdout, _ := runCmd(t, "version")
	if code != exitOK || !strings.HasPrefix(stdout, "smartgo "+version) {
		t.Fatalf("version: exit %d, %q", code, stdout)
	}
}

func TestCmdBadConfigNamesFileAndKey(t *testing.T) {
	p := filepath.Join(t.TempDir(), "b.toml")
	if err := os.WriteFile(p, []byte("[store]\nsegment_sise = \"1GiB\"\n"), 0o644); err != nil {
		t.Fatal(err)
	}
	code, _, stderr := runCmd(t, "broker", "-c", p)
	if code != exitUsage || !strings.Contains(stderr, "b.toml") || !strings.Contains(stderr, "store.segment_sise") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCmd(t, "broker", "-set", "store.disk_full_ratio=120")
	if code != exitUsage || !strings.Contains(stderr, "store.disk_full_ratio = 120") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
	code, _, stderr = runCmd(t, "bridge", "-listen", "nowhere")
	if code != exitUsage || !strings.Contains(stderr, "bridge.listen") {
		t.Fatalf("exit %d, stderr %q", code, stderr)
	}
}

// A subsystem that is not built yet must say so and fail, never pretend
// (every subcommand is built now; the helper stays for the next one).
func TestCmdNotImplementedFailsLoudly(t *testing.T) {
	var errb bytes.Buffer
	if code := notImplemented(&errb, "x"); code != exitNotImplemented || !strings.Contains(errb.String(), "not implemented yet") {
		t.Fatalf("exit %d, %q", code, errb.String())
	}
}

// The broker runs until its context ends, then shuts down cleanly.
func TestCmdBrokerRunsAndStops(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testutil.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"broker", "-data", dir, "-listen", "127.0.0.1:0", "-registries", "",
			"-set", "store.segment_size=1MiB", "-set", "store.max_message_size=64KiB"}, &out, &errb)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(errb.String(), "broker started") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("broker did not start: %s", errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("broker did not stop")
	}
	if _, err := os.Stat(filepath.Join(dir, "config", "topic.json")); err != nil {
		t.Fatalf("no topic.json under the data dir: %v", err)
	}
}
