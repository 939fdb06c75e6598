package iothub

import (
	"context"
	"testing"
	"time"

	twincli "github.com/smartgo/smartgo/client/twin"
)

// TestHubWildcardIDsOwnNoTopics: the registry allows '+' and '#' in ids,
// but as a topic level they are wildcards. Device "+" (and module "+" of a
// device) may not subscribe to "its own" cloud-to-device or module input
// filter, which would match every device's (or every module's); its twin
// still works, and another device's message reaches only that device.
func TestHubWildcardIDsOwnNoTopics(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c)
	spyID := Identity{DeviceID: "+"}
	spyDev := createDevice(t, n, "+")
	spy := dialDevice(t, n.addr, spyID, deviceToken(t, spyID, spyDev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	if rc := spy.subscribe("devices/+/messages/devicebound/#"); rc[0] < 0x80 {
		t.Fatalf("device %q subscribed to every device's cloud-to-device messages: SUBACK %v", spyID, rc)
	}
	if rc := spy.subscribe(twinResFilter); rc[0] >= 0x80 {
		t.Fatalf("twin responses: SUBACK %v", rc)
	}
	if st, _, body := spy.request("$iothub/twin/GET/?$rid=1", nil); st != 200 {
		t.Fatalf("twin GET of %q: %d %s", spyID, st, body)
	}

	lampDev := createDevice(t, n, "lamp")
	lampID := Identity{DeviceID: "lamp"}
	lamp := dialDevice(t, n.addr, lampID, deviceToken(t, lampID, lampDev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	if rc := lamp.subscribe("devices/lamp/messages/devicebound/#"); rc[0] >= 0x80 {
		t.Fatalf("lamp: SUBACK %v", rc)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := n.hub.SendC2D(ctx, &C2DMessage{DeviceID: "lamp", Body: []byte("for lamp only")}); err != nil {
		t.Fatal(err)
	}
	if p := lamp.expect(); string(p.Payload) != "for lamp only" {
		t.Fatalf("lamp got %q", p.Payload)
	}
	spy.nothing(200 * time.Millisecond)

	// A module "+" of a device: not the inputs of the device's other
	// modules; a module with a plain id keeps its own.
	for _, mid := range []string{"+", "cam"} {
		id := Identity{DeviceID: "lamp", ModuleID: mid}
		mod, err := n.hub.Twins().CreateModule(ctx, &twincli.Module{DeviceID: "lamp", ModuleID: mid})
		if err != nil {
			t.Fatal(err)
		}
		m := dialDevice(t, n.addr, id, deviceToken(t, id, mod.Authentication.SymmetricKey.PrimaryKey, time.Hour))
		rc := m.subscribe("devices/lamp/modules/" + mid + "/inputs/#")
		if refusedSub := rc[0] >= 0x80; refusedSub != (mid == "+") {
			t.Fatalf("module %s: SUBACK %v", id, rc)
		}
	}
}
