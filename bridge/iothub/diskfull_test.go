package iothub

import (
	"context"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/mqtt"
)

// TestHubTwinRequestsWhileTheStoreRefusesWrites: a device that connects
// while the broker's disk is full (the store refuses writes) gets 503
// (retryable: the SDKs retry it) for its twin requests, and once the disk
// has room again its next request works on the same connection. Before,
// its registration (development mode) failed at connect and was never
// retried: every twin request got 404 until the device reconnected. A
// registered device's reported PATCH that the store refuses gets 503. A
// device that sends no request is registered and recorded as connected
// by the retries of its connection's set-up.
func TestHubTwinRequestsWhileTheStoreRefusesWrites(t *testing.T) {
	var usage atomic.Value
	usage.Store(0.10)
	c := startTestClusterWith(t, 1, func(o *cluster.Options) {
		o.DiskUsage = func(string) (float64, error) { return usage.Load().(float64), nil }
	})
	n := startNode(t, c, func(_ *mqtt.Options, _ *bridge.Options, o *Options) { o.DeviceAuth = AuthNone })
	known := Identity{DeviceID: "known-dev"}
	kd := dialDevice(t, n.addr, known, "")
	kd.subscribe(twinResFilter)
	waitFor(t, 10*time.Second, "known device registered", func() bool {
		st, _, _ := kd.request("$iothub/twin/GET/?$rid=0", nil)
		return st == 200
	})

	usage.Store(0.95)
	waitFor(t, 10*time.Second, "the store refusing writes", func() bool {
		err := c.Broker(0).Ready()
		return err != nil && strings.Contains(err.Error(), "refuses writes")
	})
	// A clean session: a persistent one's CONNECT writes its session
	// record, which the full store refuses (CONNACK "server
	// unavailable", which the SDKs retry).
	id := Identity{DeviceID: "full-dev"}
	cp := connectCP(id, "")
	cp.CleanStart = true
	d := dialDeviceCP(t, n.addr, id, cp)
	d.subscribe(twinResFilter)
	// Another sends no twin request at all.
	quiet := Identity{DeviceID: "quiet-dev"}
	qcp := connectCP(quiet, "")
	qcp.CleanStart = true
	dialDeviceCP(t, n.addr, quiet, qcp)
	if st, _, body := d.request("$iothub/twin/GET/?$rid=1", nil); st != 503 {
		t.Fatalf("twin GET of a device whose registration the store refused: %d %s, want 503", st, body)
	}
	if st, _, body := kd.request("$iothub/twin/PATCH/properties/reported/?$rid=2", []byte(`{"t":1}`)); st != 503 {
		t.Fatalf("reported PATCH the store refused: %d %s, want 503", st, body)
	}

	usage.Store(0.10)
	waitFor(t, 10*time.Second, "the store accepting writes", func() bool { return c.Broker(0).Ready() == nil })
	if st, _, body := d.request("$iothub/twin/GET/?$rid=3", nil); st != 200 {
		t.Fatalf("twin GET after the disk freed, same connection: %d %s", st, body)
	}
	if st, _, body := d.request("$iothub/twin/PATCH/properties/reported/?$rid=4", []byte(`{"t":2}`)); st != 204 {
		t.Fatalf("reported PATCH after the disk freed: %d %s", st, body)
	}
	for _, dev := range []string{id.DeviceID, quiet.DeviceID} {
		waitFor(t, 10*time.Second, dev+" registered and recorded as connected", func() bool {
			ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
			defer cancel()
			d, err := n.hub.Twins().GetDevice(ctx, dev)
			return err == nil && d.ConnectionState == "Connected"
		})
	}
}
