package mqtt

import (
	"context"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestMQTTSubscriptionIdentifierOverlapMosquitto: mosquitto_sub with two
// overlapping filters in one SUBSCRIBE carrying an identifier gets a
// message matching both once, with the identifier once. libmosquitto 2.0
// treats a PUBLISH with the identifier twice as malformed: it reconnects
// and a QoS 0 message is gone.
func TestMQTTSubscriptionIdentifierOverlapMosquitto(t *testing.T) {
	subBin, _ := mosquittoBins(t)
	ts := startServer(t, nil)
	host, port := hostPort(ts.addr)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, subBin, "-h", host, "-p", port, "-V", "5", "-i", "subid-sub",
		"-t", "ov/#", "-t", "ov/+", "-D", "subscribe", "subscription-identifier", "7",
		"-F", "%t %p", "-C", "2", "-W", "15")
	var out strings.Builder
	cmd.Stdout, cmd.Stderr = &out, &out
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "mosquitto_sub subscribed", func() bool {
		return ts.subscribedTo("subid-sub", "ov/x") && ts.subscribedTo("subid-sub", "ov/x/y")
	})
	pub := pahoDial(t, ts.addr, &paho.Connect{ClientID: "subid-pub", CleanStart: true, KeepAlive: 30}, nil)
	for _, p := range []*paho.Publish{
		{Topic: "ov/x", QoS: 0, Payload: []byte("both")},  // matches ov/# and ov/+
		{Topic: "ov/x/y", QoS: 0, Payload: []byte("one")}, // matches ov/# only
	} {
		if _, err := pub.Publish(ctx, p); err != nil {
			t.Fatalf("publish %s: %v", p.Topic, err)
		}
	}
	if err := cmd.Wait(); err != nil {
		t.Fatalf("mosquitto_sub: %v\n%s", err, out.String())
	}
	if got, want := out.String(), "ov/x both\nov/x/y one\n"; got != want {
		t.Fatalf("mosquitto_sub printed %q, want %q", got, want)
	}
}
