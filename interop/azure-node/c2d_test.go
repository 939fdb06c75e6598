package azurenode

import (
	"fmt"
	"strings"
	"testing"
	"time"
)

// c2dCount is the device's cloudToDeviceMessageCount as the service
// SDK's Registry.get reads it.
func (h *hub) c2dCount(t *testing.T, id string) float64 {
	t.Helper()
	n, _ := mustOK(t, h.service(t, "get", id), "get")["device"].(map[string]any)["cloudToDeviceMessageCount"].(float64)
	return n
}

// TestAzureNodeC2DQueueDepth: IoT Hub's queue depth. A device that is
// offline holds at most 50 cloud-to-device messages: the 51st is refused
// with 403 DeviceMaximumQueueDepthExceeded, and the service SDK's
// Registry.get shows cloudToDeviceMessageCount 50, also after the hub
// restarted. The device SDK client connects and receives the 50 (its
// PUBACKs complete them): the count goes to 0 and sending works again.
// (The service SDK sends cloud-to-device messages over AMQP only, which
// SmartGo does not offer: they go through SmartGo's HTTPS endpoint.)
func TestAzureNodeC2DQueueDepth(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))
	dev := mustOK(t, h.service(t, "create", "sdk-c2d"), "create")["device"].(map[string]any)
	key := dev["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	if dev["cloudToDeviceMessageCount"] != float64(0) {
		t.Fatalf("a new device's count: %v", dev["cloudToDeviceMessageCount"])
	}
	for i := range 50 {
		h.sendC2D(t, "sdk-c2d", fmt.Sprintf("m%d", i), map[string]string{"iothub-messageid": fmt.Sprintf("q-%d", i)})
	}
	refused := func(what string) {
		t.Helper()
		st, code, body := h.postC2D(t, "sdk-c2d", "one too many", nil)
		if st != 403 || code != "DeviceMaximumQueueDepthExceeded" || !strings.Contains(body, "ErrorCode:DeviceMaximumQueueDepthExceeded") {
			t.Fatalf("51st message %s: %d %s %s", what, st, code, body)
		}
	}
	refused("")
	if n := h.c2dCount(t, "sdk-c2d"); n != 50 {
		t.Fatalf("cloudToDeviceMessageCount %v, want 50", n)
	}
	// The ledger is the twin shard's: a restart keeps it.
	h.stop(t)
	h.run(t)
	if n := h.c2dCount(t, "sdk-c2d"); n != 50 {
		t.Fatalf("cloudToDeviceMessageCount after a restart %v, want 50", n)
	}
	refused("after a restart")

	d := h.startDevice(t, "HostName="+hubHost+";DeviceId=sdk-c2d;SharedAccessKey="+key)
	seen := map[string]bool{}
	for len(seen) < 50 {
		ev := d.await(t, "the queued messages", event("c2d"))
		seen[ev["messageId"].(string)] = true
	}
	for i := range 50 {
		if !seen[fmt.Sprintf("q-%d", i)] {
			t.Fatalf("q-%d not received (got %d)", i, len(seen))
		}
	}
	waitFor(t, 30*time.Second, "cloudToDeviceMessageCount back to 0", func() bool { return h.c2dCount(t, "sdk-c2d") == 0 })
	h.sendC2D(t, "sdk-c2d", "again", map[string]string{"iothub-messageid": "again"})
	if ev := d.await(t, "the message after the queue drained", event("c2d")); ev["messageId"] != "again" {
		t.Fatalf("got %v", ev)
	}
}
