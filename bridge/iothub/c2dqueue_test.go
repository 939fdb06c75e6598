package iothub

import (
	"context"
	"errors"
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// c2dCount reads a device's cloudToDeviceMessageCount from the registry.
func c2dCount(t testing.TB, n *node, id string) int64 {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	d, err := n.hub.Twins().GetDevice(ctx, id)
	if err != nil {
		t.Fatal(err)
	}
	return d.CloudToDeviceMessageCount
}

// TestHubC2DQueueDepth: a device holds at most C2DMaxQueueDepth
// cloud-to-device messages it has not acknowledged: one more is refused
// with 403 DeviceMaximumQueueDepthExceeded, whichever node it is sent
// through, and the identity's cloudToDeviceMessageCount says how many
// it holds. Once the device connects and acknowledges them the count is
// 0 and sending works again; a message that expires leaves the count
// without being delivered.
func TestHubC2DQueueDepth(t *testing.T) {
	c := startTestCluster(t, 1)
	depth3 := func(_ *mqtt.Options, _ *bridge.Options, o *Options) { o.C2DMaxQueueDepth = 3 }
	a, b := startNode(t, c, depth3), startNode(t, c, depth3)
	dev := createDevice(t, a, "pump")
	id := Identity{DeviceID: "pump"}
	key := dev.Authentication.SymmetricKey.PrimaryKey
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	if n := c2dCount(t, a, "pump"); n != 0 {
		t.Fatalf("count of a new device %d", n)
	}
	// Offline (never connected): three are held, the fourth is refused.
	for i := range 3 {
		if err := []*node{a, b}[i%2].hub.SendC2D(ctx, &C2DMessage{DeviceID: "pump", Body: fmt.Appendf(nil, "m%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	err := b.hub.SendC2D(ctx, &C2DMessage{DeviceID: "pump", Body: []byte("one too many")})
	var te *twincli.Error
	if !errors.As(err, &te) || te.Status != 403 || te.Code != "DeviceMaximumQueueDepthExceeded" || !errors.Is(err, twincli.ErrQuota) {
		t.Fatalf("fourth message: %v", err)
	}
	if st, code, _ := statusOf(err); st != 403 || code != "DeviceMaximumQueueDepthExceeded" || st*1000+codeNumber(code) != 403004 {
		t.Fatalf("API answer %d %s", st, code)
	}
	if n := c2dCount(t, b, "pump"); n != 3 {
		t.Fatalf("count %d, want 3", n)
	}

	// The device takes them: the count goes to 0, and sending works again.
	d := dialDevice(t, a.addr, id, deviceToken(t, id, key, time.Hour))
	var got []string
	for range 3 {
		got = append(got, string(d.expect().Payload))
	}
	if fmt.Sprint(got) != "[m0 m1 m2]" {
		t.Fatalf("device got %q", got)
	}
	waitFor(t, 10*time.Second, "the count back to 0", func() bool { return c2dCount(t, b, "pump") == 0 })
	if err := b.hub.SendC2D(ctx, &C2DMessage{DeviceID: "pump", Body: []byte("again")}); err != nil {
		t.Fatal(err)
	}
	if p := d.expect(); string(p.Payload) != "again" {
		t.Fatalf("got %q", p.Payload)
	}
	waitFor(t, 10*time.Second, "the count back to 0", func() bool { return c2dCount(t, b, "pump") == 0 })

	// Offline again: a message that expires before the device returns
	// leaves the count, and makes room.
	d.Send(&packets.Disconnect{})
	d.Closed()
	waitFor(t, 10*time.Second, "offline", func() bool { return !a.hub.connectedHere("pump") })
	soon := time.Now().Add(1500 * time.Millisecond)
	if err := a.hub.SendC2D(ctx, &C2DMessage{DeviceID: "pump", Body: []byte("expires"), Expiry: soon}); err != nil {
		t.Fatal(err)
	}
	for i := range 2 {
		if err := a.hub.SendC2D(ctx, &C2DMessage{DeviceID: "pump", Body: fmt.Appendf(nil, "k%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	if n := c2dCount(t, a, "pump"); n != 3 && time.Now().Before(soon) {
		t.Fatalf("count %d, want 3", n)
	}
	waitFor(t, 10*time.Second, "the expiry", func() bool { return time.Now().After(soon) })
	if n := c2dCount(t, a, "pump"); n != 2 {
		t.Fatalf("count after an expiry %d, want 2", n)
	}
	if err := a.hub.SendC2D(ctx, &C2DMessage{DeviceID: "pump", Body: []byte("k2")}); err != nil {
		t.Fatalf("after an expiry: %v", err)
	}
	d = dialDevice(t, b.addr, id, deviceToken(t, id, key, time.Hour))
	got = got[:0]
	for range 3 {
		got = append(got, string(d.expect().Payload))
	}
	if fmt.Sprint(got) != "[k0 k1 k2]" {
		t.Fatalf("device got %q", got)
	}
	waitFor(t, 10*time.Second, "the count back to 0", func() bool { return c2dCount(t, a, "pump") == 0 })
}
