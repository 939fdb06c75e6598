package bridge

import (
	"context"
	"fmt"
	"net"
	"os/exec"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
)

func mosquittoClients(t *testing.T) (sub, pub string) { t.Helper(); return mqtttest.Mosquitto(t) }

// TestBridgeMosquittoEndToEnd: mosquitto_pub (3.1.1 and 5) -> bridge ->
// broker -> SmartGo consumer and -> bridge -> mosquitto_sub (5).
func TestBridgeMosquittoEndToEnd(t *testing.T) {
	subBin, pubBin := mosquittoClients(t)
	c := startCluster(t)
	b := startBridge(t, c, nil)
	host, port, _ := net.SplitHostPort(addrOf(b))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	sub := exec.CommandContext(ctx, subBin, "-h", host, "-p", port, "-V", "5", "-q", "1", "-t", "devices/+/telemetry",
		"-C", "2", "-F", "%t %p %P", "-i", "mosq-sub")
	var subOut strings.Builder
	sub.Stdout = &subOut
	sub.Stderr = &subOut
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	// Wait for the subscription before publishing.
	testutil.WaitFor(t, 10*time.Second, "mosquitto_sub subscribed", func() bool { return b.Server().Stats().Connections.Load() >= 1 })
	time.Sleep(200 * time.Millisecond)
	for _, args := range [][]string{
		{"-V", "311", "-t", "devices/m1/telemetry", "-m", "v311", "-i", "mosq-pub-3"},
		{"-V", "5", "-t", "devices/m2/telemetry", "-m", "v5", "-i", "mosq-pub-5", "-D", "publish", "user-property", "site", "lab"},
	} {
		cmd := exec.CommandContext(ctx, pubBin, append([]string{"-h", host, "-p", port, "-q", "1"}, args...)...)
		if out, err := cmd.CombinedOutput(); err != nil {
			t.Fatalf("mosquitto_pub %v: %v %s", args, err, out)
		}
	}
	if err := sub.Wait(); err != nil {
		t.Fatalf("mosquitto_sub: %v %s", err, subOut.String())
	}
	got := subOut.String()
	if !strings.Contains(got, "devices/m1/telemetry v311") || !strings.Contains(got, "devices/m2/telemetry v5 site:lab") {
		t.Fatalf("mosquitto_sub printed %q", got)
	}
	msgs := pollN(t, newPull(t, c, "TELEMETRY"), 2)
	byBody := map[string]map[string]string{}
	for _, m := range msgs {
		byBody[string(m.Body)] = m.Properties
	}
	if p := byBody["v311"]; p[PropTopic] != "devices/m1/telemetry" || p[PropClientID] != "mosq-pub-3" || p[PropQoS] != "1" {
		t.Fatalf("v3.1.1 message properties %v", p)
	}
	if p := byBody["v5"]; p[PropUserProperties] != `[["site","lab"]]` || p[PropClientID] != "mosq-pub-5" {
		t.Fatalf("v5 message properties %v", p)
	}
}

// TestBridgeMosquittoSlowSubscriber: the reported loss. mosquitto_sub
// (MQTT 5, Receive Maximum 20 by default, persistent session) reads
// t/# at QoS 1 while mosquitto_pub stores 3,000 QoS 1 messages with 100
// in flight; with the session queue limited to 100 the subscriber falls
// behind. Every message arrives, in order; before, about 40% were
// dropped ("session queue full, messages dropped").
func TestBridgeMosquittoSlowSubscriber(t *testing.T) {
	const n = 3000
	subBin, pubBin := mosquittoClients(t)
	c := startCluster(t)
	b := startBridge(t, c, func(mo *mqtt.Options, _ *Options) { mo.MaxQueuedMessages = 100 })
	host, port, _ := net.SplitHostPort(addrOf(b))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	sub := exec.CommandContext(ctx, subBin, "-h", host, "-p", port, "-V", "5", "-q", "1", "-c", "-x", "3600",
		"-i", "mosq-slow", "-t", "t/#", "-C", strconv.Itoa(n))
	var subOut, subErr strings.Builder
	sub.Stdout, sub.Stderr = &subOut, &subErr
	if err := sub.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "mosquitto_sub subscribed", func() bool { return b.Server().Stats().Subscriptions.Load() >= 1 })
	var lines strings.Builder
	for i := range n {
		fmt.Fprintln(&lines, i)
	}
	pub := exec.CommandContext(ctx, pubBin, "-h", host, "-p", port, "-V", "5", "-q", "1", "-l", "-M", "100", "-t", "t/x",
		"-i", "mosq-fast")
	pub.Stdin = strings.NewReader(lines.String())
	if out, err := pub.CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}
	if err := sub.Wait(); err != nil {
		got := strings.Count(subOut.String(), "\n")
		t.Fatalf("mosquitto_sub: %v after %d of %d messages (%s); dropped %d", err, got, n, subErr.String(),
			b.Server().Stats().Dropped.Load())
	}
	seen := map[int]bool{}
	last := -1
	for _, l := range strings.Fields(subOut.String()) {
		v, err := strconv.Atoi(l)
		if err != nil {
			t.Fatalf("mosquitto_sub printed %q", l)
		}
		if seen[v] {
			continue // a redelivery
		}
		seen[v] = true
		if v < last {
			t.Fatalf("%d after %d", v, last)
		}
		last = v
	}
	if len(seen) != n {
		t.Fatalf("%d distinct of %d messages", len(seen), n)
	}
	t.Logf("overflows: %d", b.Server().Stats().Overflows.Load())
}
