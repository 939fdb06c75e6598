package main

import (
	"context"
	"encoding/json"
	"os"
	"os/exec"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"
)

// A fleet of simulated devices against a real standalone: every device
// connects from three local addresses, subscribes and publishes, keeps
// its connection alive with PINGREQs; a message published to one
// device's topic reaches it; the server lists the devices; a device the
// server disconnects counts as dropped with the server's reason; SIGINT
// ends the fleet with its report.
func TestCmdBinaryBenchDevices(t *testing.T) {
	if _, err := exec.LookPath("mosquitto_pub"); err != nil {
		t.Skip("mosquitto_pub not installed")
	}
	dir := t.TempDir()
	sa := startBin(t, "standalone", "-data", filepath.Join(dir, "data"), "-set", "registry.listen=127.0.0.1:0",
		"-set", "broker.listen=127.0.0.1:0", "-set", "bridge.listen=127.0.0.1:0", "-set", "console.listen=127.0.0.1:0",
		"-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB")
	m := sa.waitLog(t, regexp.MustCompile(`standalone running" registry=(127\.0\.0\.1:\d+).*bridge=127\.0\.0\.1:(\d+)`), 60*time.Second)
	reg, port := m[1], m[2]

	const n = 300
	fleet := startBin(t, "bench", "devices", "-mqtt", "127.0.0.1:"+port, "-n", "300", "-sources", "127.0.0.2-127.0.0.4",
		"-keepalive", "1s", "-subscribe", "-publish-every", "300ms", "-rate", "1000", "-o", "json")
	fleet.waitLog(t, regexp.MustCompile(`connected 300 connecting 0 failed 0`), 60*time.Second)

	code, out, stderr := runBin(t, 60*time.Second, "admin", "-registry", reg, "mqtt", "clients", "-prefix", "dev-1", "-limit", "1000", "-o", "json")
	var clients []map[string]any
	if err := json.Unmarshal([]byte(out), &clients); code != exitOK || err != nil {
		t.Fatalf("admin mqtt clients: exit %d %v\n%s\n%s", code, err, out, stderr)
	}
	// dev-1, dev-10..19, dev-100..199: 111 of the fleet's ids start with dev-1.
	addrs := map[string]bool{}
	for _, c := range clients {
		if a, _, ok := strings.Cut(c["remoteAddr"].(string), ":"); ok {
			addrs[a] = true
		}
	}
	if len(clients) != 111 || len(addrs) != 3 {
		t.Fatalf("the server lists %d devices from %v, want 111 from 3 addresses:\n%s", len(clients), addrs, out)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if b, err := exec.CommandContext(ctx, "mosquitto_pub", "-h", "127.0.0.1", "-p", port, "-V", "5", "-q", "1",
		"-t", "devices/dev-7/in", "-m", "hello").CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, b)
	}
	fleet.waitLog(t, regexp.MustCompile(`received [1-9]`), 30*time.Second)

	if code, out, stderr := runBin(t, 60*time.Second, "admin", "-registry", reg, "mqtt", "disconnect", "-client", "dev-42"); code != exitOK {
		t.Fatalf("admin mqtt disconnect: exit %d\n%s\n%s", code, out, stderr)
	}
	fleet.waitLog(t, regexp.MustCompile(`dropped 1 `), 30*time.Second)
	// Two rounds of pings and several publishes each after the drop.
	fleet.waitLog(t, regexp.MustCompile(`acked ([3-9]\d{3}|\d{5,})`), 60*time.Second)

	code, _ = fleet.stop(t, os.Interrupt, 30*time.Second)
	var r struct {
		Devices, Connected, Failed, Dropped, Subscribed, Pings, Pongs, Published, Acked, Received int64
		Errors                                                                                    map[string]int64
		ConnectP99Ms                                                                              float64
	}
	if err := json.Unmarshal([]byte(fleet.stdout.String()), &r); err != nil {
		t.Fatalf("report: %v\n%s", err, fleet.stdout.String())
	}
	if code != exitFailure || r.Devices != n || r.Connected != n || r.Failed != 0 || r.Dropped != 1 || r.Subscribed != n ||
		r.Pings < n || r.Pongs < n || r.Acked < 3000 || r.Published < r.Acked || r.Received < 1 || r.ConnectP99Ms <= 0 {
		t.Fatalf("exit %d (want 1: one dropped), report %+v\n%s", code, r, fleet.stdout.String())
	}
	if r.Errors["dropped: DISCONNECT administrative action"] != 1 {
		t.Fatalf("drop reasons %v", r.Errors)
	}
	if c, _ := sa.stop(t, syscall.SIGTERM, 60*time.Second); c != exitOK {
		t.Fatalf("standalone exit %d", c)
	}
}

// Devices that cannot connect fail with the reason, and the exit code
// says so; bad flags are usage errors.
func TestCmdBinaryBenchDevicesFail(t *testing.T) {
	code, out, stderr := runBin(t, 60*time.Second, "bench", "devices", "-mqtt", deadAddr(t), "-n", "20", "-hold", "1ms")
	if code != exitFailure || !strings.Contains(out, "connected 0, failed 20") || !strings.Contains(out, "connect: connection refused 20") {
		t.Fatalf("exit %d\n%s\n%s", code, out, stderr)
	}
	for _, bad := range [][]string{{"-n", "0"}, {"-protocol", "3"}, {"-sources", "127.0.0.9-127.0.0.2"}, {"-sources", "::1"}, {"-size", "4"}, {"-keepalive", "10ms"}} {
		if code, _, stderr := runBin(t, 30*time.Second, append([]string{"bench", "devices"}, bad...)...); code != exitUsage {
			t.Fatalf("%v: exit %d\n%s", bad, code, stderr)
		}
	}
}
