package bridge

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/internal/testutil"
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
