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
// (Sent through SmartGo's HTTPS endpoint here, to fill the queue quickly;
// TestAzureNodeServiceSendsC2D sends with the service SDK over AMQP.)
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

// TestAzureNodeServiceSendsC2D: the service SDK's Client.send, which
// speaks AMQP 1.0 to port 5671 (TLS, a put-token on $cbs, a link to
// /messages/devicebound). 150 messages on one connection (more than a
// link's credit of 100) reach the device SDK client with their ids,
// correlation ids, content type and application properties; a send to a
// device that is not registered fails with DeviceNotFoundError and the
// connection goes on; a connection string with a wrong key fails to
// connect (the put-token answered 401: UnauthorizedError) and stores
// nothing.
func TestAzureNodeServiceSendsC2D(t *testing.T) {
	nodeReady(t)
	// IoT Hub's queue depth of 50 would refuse a burst of 150 that the
	// device has not completed yet.
	h := startHub(t, hubAddress(t), "iothub.c2d_max_queue_depth=500")
	dev := mustOK(t, h.service(t, "create", "sdk-amqp"), "create")["device"].(map[string]any)
	key := dev["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	d := h.startDevice(t, "HostName="+hubHost+";DeviceId=sdk-amqp;SharedAccessKey="+key)

	res := mustOK(t, h.service(t, "send", "sdk-amqp", "150", "amqp", `{"color":"red"}`), "send")
	if res["sent"] != float64(150) {
		t.Fatalf("sent %v", res["sent"])
	}
	unknown, _ := res["unknownDevice"].(map[string]any)
	if unknown == nil || unknown["error"] != "DeviceNotFoundError" {
		t.Fatalf("send to an unregistered device: %v", res["unknownDevice"])
	}
	seen := map[string]bool{}
	for len(seen) < 150 {
		ev := d.await(t, "the messages sent over AMQP", event("c2d"))
		id, _ := ev["messageId"].(string)
		if !strings.HasPrefix(id, "amqp-") || ev["data"] != id {
			t.Fatalf("message %v", ev)
		}
		props := fmt.Sprint(ev["properties"])
		if !strings.Contains(props, "color") || !strings.Contains(props, "red") {
			t.Fatalf("message %s properties %s", id, props)
		}
		seen[id] = true
	}
	for i := range 150 {
		if !seen[fmt.Sprintf("amqp-%d", i)] {
			t.Fatalf("amqp-%d not received", i)
		}
	}

	bad := "SERVICE_CONNECTION_STRING=HostName=" + hubHost + ";SharedAccessKeyName=iothubowner;SharedAccessKey=" +
		"d3JvbmcgYnV0IHdlbGwgZm9ybWVkIGtleSwgMzIgYnl0ZXMh"
	res = h.serviceWith(t, []string{bad}, "send", "sdk-amqp", "1", "bad")
	// The SDK wraps the put-token's UnauthorizedError in its connect error.
	if res["ok"] != false || res["cause"] != "UnauthorizedError" {
		t.Fatalf("send with a wrong key: %v", res)
	}
	// Messages reach the device in order: the next one is the marker.
	h.sendC2D(t, "sdk-amqp", "marker", map[string]string{"iothub-messageid": "marker"})
	if ev := d.await(t, "the marker", event("c2d")); ev["messageId"] != "marker" {
		t.Fatalf("a message sent with a wrong key was delivered: %v", ev)
	}
}

// TestAzureNodeServiceFeedback: a message sent with ack "full" and
// completed by the device SDK client gives a feedback record (Success,
// with the device's id and generation) on the service SDK's feedback
// receiver, in a batch of IoT Hub's content type.
func TestAzureNodeServiceFeedback(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))
	dev := mustOK(t, h.service(t, "create", "sdk-fb"), "create")["device"].(map[string]any)
	key := dev["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	d := h.startDevice(t, "HostName="+hubHost+";DeviceId=sdk-fb;SharedAccessKey="+key)
	res := mustOK(t, h.service(t, "feedback", "sdk-fb", "fb-1"), "feedback")
	if ev := d.await(t, "the message", event("c2d")); ev["messageId"] != "fb-1" {
		t.Fatalf("device got %v", ev)
	}
	rec, _ := res["record"].(map[string]any)
	if rec["deviceId"] != "sdk-fb" || rec["statusCode"] != "Success" || rec["description"] != "Success" ||
		rec["deviceGenerationId"] != dev["generationId"] || rec["enqueuedTimeUtc"] == "" {
		t.Fatalf("feedback %v (device %v)", res, dev["generationId"])
	}
	if res["contentType"] != "application/vnd.microsoft.iothub.feedback.json" {
		t.Fatalf("content type %v", res["contentType"])
	}
}

// TestAzureNodeServiceSendsC2DQueueFull: over AMQP too, the 51st message
// for a device that holds 50 fails with the service SDK's
// DeviceMaximumQueueDepthExceededError.
func TestAzureNodeServiceSendsC2DQueueFull(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))
	mustOK(t, h.service(t, "create", "sdk-amqp-full"), "create")
	res := h.service(t, "send", "sdk-amqp-full", "51", "q")
	if res["ok"] != false || res["error"] != "DeviceMaximumQueueDepthExceededError" {
		t.Fatalf("51 messages: %v", res)
	}
	if n := h.c2dCount(t, "sdk-amqp-full"); n != 50 {
		t.Fatalf("cloudToDeviceMessageCount %v, want 50", n)
	}
}
