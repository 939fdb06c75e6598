package main

import (
	"context"
	"regexp"
	"strings"
	"testing"
	"time"

	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/internal/testutil"
)

// smartgo standalone serves the state store over MQTT 5: registry, broker
// (hosting the shards) and bridge (the MQTT front) in one process.
func TestCmdStandaloneStateStore(t *testing.T) {
	dir := t.TempDir()
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testutil.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"standalone", "-set", "amqp.listen=", "-data", dir, "-set", "registry.listen=127.0.0.1:0", "-set", "broker.listen=127.0.0.1:0",
			"-set", "bridge.listen=127.0.0.1:0", "-set", "console.listen=127.0.0.1:0", "-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB"}, &out, &errb)
	}()
	defer func() {
		cancel()
		select {
		case code := <-done:
			if code != exitOK {
				t.Errorf("standalone exit %d:\n%s", code, errb.String())
			}
		case <-time.After(20 * time.Second):
			t.Error("standalone did not stop")
		}
	}()
	re := regexp.MustCompile(`standalone running.*bridge=(127\.0\.0\.1:\d+)`)
	var addr string
	deadline := time.Now().Add(30 * time.Second)
	for addr == "" {
		if m := re.FindStringSubmatch(errb.String()); m != nil {
			addr = m[1]
		}
		if time.Now().After(deadline) {
			t.Fatalf("standalone did not come up:\n%s", errb.String())
		}
		time.Sleep(20 * time.Millisecond)
	}
	cctx, ccancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer ccancel()
	c, err := sscli.Dial(cctx, sscli.Options{Addr: addr, ClientID: "cmd-test"})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	// The shards' topic route may take a moment to reach the registry.
	var applied bool
	for {
		applied, _, err = c.Set(cctx, []byte("device-7/temp"), []byte("21.5"), sscli.SetOptions{})
		if err == nil || cctx.Err() != nil {
			break
		}
		time.Sleep(100 * time.Millisecond)
	}
	if err != nil || !applied {
		t.Fatalf("SET: applied %v err %v\n%s", applied, err, errb.String())
	}
	v, _, ok, err := c.Get(cctx, []byte("device-7/temp"))
	if err != nil || !ok || string(v) != "21.5" {
		t.Fatalf("GET = %q %v %v", v, ok, err)
	}
	// The key is browsable with its version from the admin CLI.
	reg := regexp.MustCompile(`standalone running.*registry=(127\.0\.0\.1:\d+)`).FindStringSubmatch(errb.String())
	if reg == nil {
		t.Fatalf("no registry address in the log:\n%s", errb.String())
	}
	code, stdout, stderr := runCmd(t, "admin", "-registry", reg[1], "statestore", "keys", "-prefix", "device-7/")
	if code != exitOK || !strings.Contains(stdout, `"device-7/temp"`) || !strings.Contains(stdout, `"21.5"`) {
		t.Fatalf("statestore keys: %d %q %q", code, stdout, stderr)
	}
	if code, _, stderr := runCmd(t, "admin", "-registry", reg[1], "statestore", "keys", "-limit", "5000"); code != exitUsage {
		t.Fatalf("huge limit: %d %q", code, stderr)
	}
}

// TestCmdStandaloneWarnsOfRegistryController: registry.controller =
// true, which the standalone's registry does not act on (it runs no
// controller replica), is said at start with a WARN naming the key, and
// the standalone starts: a configuration an older SmartGo started with
// (or one file shared with `smartgo registry`) keeps working.
func TestCmdStandaloneWarnsOfRegistryController(t *testing.T) {
	logs, _ := standalone(t, "-set", "registry.controller=true")
	if s := logs.String(); !strings.Contains(s, "level=WARN") || !strings.Contains(s, "registry.controller = true is ignored by standalone") {
		t.Fatalf("no WARN about registry.controller:\n%s", s)
	}
}

// TestCmdStandaloneRefusesSlaveRole: broker.role = "slave" makes no sense
// for a standalone (its broker is the only one of its group, so there is
// no master to follow); it is refused at once with a message naming the
// key and what to run instead. It waited its whole start timeout before
// failing. The context only bounds a standalone that does not refuse it.
func TestCmdStandaloneRefusesSlaveRole(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	var out, errb testutil.LogBuffer
	code := run(ctx, []string{"standalone", "-set", "amqp.listen=", "-data", t.TempDir(), "-set", "registry.listen=127.0.0.1:0", "-set", "broker.listen=127.0.0.1:0",
		"-set", "bridge.listen=127.0.0.1:0", "-set", "console.listen=", "-set", "metrics.listen=",
		"-set", "broker.role=slave", "-set", "broker.id=1"}, &out, &errb)
	if ctx.Err() != nil || code != exitUsage || !strings.Contains(errb.String(), `broker.role = "slave"`) ||
		!strings.Contains(errb.String(), "smartgo broker") {
		t.Fatalf("standalone with broker.role=slave: exit %d (context %v):\n%s", code, ctx.Err(), errb.String())
	}
}
