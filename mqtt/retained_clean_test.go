package mqtt

import (
	"context"
	"os/exec"
	"slices"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestMQTTMosquittoCleanRetained: the "clean retained" pattern with the
// mosquitto clients. mosquitto_sub -t '#' lists the retained messages
// (and none on reserved topics), mosquitto_sub -t '#' --remove-retained
// deletes each by publishing an empty retained message to its topic, and
// a new '#' subscriber then gets no retained message at all.
func TestMQTTMosquittoCleanRetained(t *testing.T) {
	subBin, pubBin := mosquittoBins(t)
	ts := startServer(t, nil)
	host, port := hostPort(ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	retained := map[string]string{"home/a": "1", "home/b/c": "2", "x": "3"}
	for _, ver := range []string{"mqttv311", "mqttv5"} {
		for topic, v := range retained {
			runMosquitto(t, ctx, false, pubBin, "-h", host, "-p", port, "-V", ver, "-q", "1", "-r", "-t", topic, "-m", v)
		}
	}
	// Internal retained state on a reserved topic is neither listed nor
	// removable by a '#' subscriber.
	if err := ts.Publish(ctx, &Message{Topic: "statestore/v1/r", Payload: []byte("internal"), Retain: true}); err != nil {
		t.Fatal(err)
	}
	list := func(ver string) []string {
		out := runMosquitto(t, ctx, false, subBin, "-h", host, "-p", port, "-V", ver, "-t", "#", "-v", "-C", "3", "-W", "10")
		lines := strings.Split(strings.TrimSpace(out), "\n")
		slices.Sort(lines)
		return lines
	}
	want := []string{"home/a 1", "home/b/c 2", "x 3"}
	for _, ver := range []string{"mqttv311", "mqttv5"} {
		if got := list(ver); !slices.Equal(got, want) {
			t.Fatalf("%s: mosquitto_sub -t '#' listed %q, want %q", ver, got, want)
		}
	}
	// --retained-only prints the retained messages only (the echoes of the
	// deletions are live messages). mosquitto_sub 2.0 then waits for its
	// -W timeout (exit 27) with this server as with mosquitto's own.
	out := runMosquitto(t, ctx, true, subBin, "-h", host, "-p", port, "-V", "mqttv5", "-t", "#", "-v",
		"--remove-retained", "--retained-only", "-W", "2")
	out = strings.ReplaceAll(out, "Timed out\n", "")
	lines := strings.Split(strings.TrimSpace(out), "\n")
	slices.Sort(lines)
	if !slices.Equal(lines, want) {
		t.Fatalf("--remove-retained printed %q, want %q", lines, want)
	}
	testutil.WaitFor(t, 10*time.Second, "retained messages deleted", func() bool {
		n, _ := ts.RetainedCount()
		return n == 1
	})
	if m, _ := ts.backend.Retained(ctx, "statestore/#"); len(m) != 1 {
		t.Fatalf("the reserved retained message was touched: %v", m)
	}
	// A new '#' subscriber gets nothing retained: the first line it
	// prints is the live message published after it subscribed.
	cmd := exec.CommandContext(ctx, subBin, "-h", host, "-p", port, "-i", "after-clean", "-t", "#", "-v", "-C", "1")
	var buf strings.Builder
	cmd.Stdout = &buf
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "subscribed", func() bool { return ts.subscribedTo("after-clean", "done") })
	runMosquitto(t, ctx, false, pubBin, "-h", host, "-p", port, "-t", "done", "-m", "live")
	if err := cmd.Wait(); err != nil {
		t.Fatal(err)
	}
	if got := strings.TrimSpace(buf.String()); got != "done live" {
		t.Fatalf("after the clean, '#' received %q first, want the live message", got)
	}
}
