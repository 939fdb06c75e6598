// Package azurenode drives SmartGo's IoT Hub surface with the unmodified
// Azure IoT SDKs for Node from npm: azure-iot-device 1.18.4 with
// azure-iot-device-mqtt 1.16.4 (device.js, module.js) and azure-iothub 1.16.6
// (service.js), against a `smartgo standalone` process with [iothub]
// enabled.
//
// The SDKs have no port option: devices connect to 8883 and back ends to
// 443 of the host name in their connection string. The test serves both
// on a loopback address of its own (127.0.0.x) and runs Node with
// dnsmap.js preloaded, which resolves the hub's name to it; the hub's
// certificate is signed by a CA the test makes, passed to Node with
// NODE_EXTRA_CA_CERTS. It skips only when node is not installed; missing
// npm packages (npm ci in this folder) or ports it cannot bind fail it.
package azurenode

import (
	"bufio"
	"context"
	"encoding/json"
	"fmt"
	"os"
	"os/exec"
	"strings"
	"testing"
	"time"
)

// TestAzureNodeSDKs is the end-to-end run: identities and twins from the
// service SDK, a device SDK device with twin, reported properties, desired
// changes (also after its connection was taken away and restored), a
// direct method, cloud-to-device messages and telemetry, an X.509 device,
// and a module (ModuleClient) with its own twin.
func TestAzureNodeSDKs(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))

	// Service SDK: create devices (PUT answers 200; keys generated).
	created := mustOK(t, h.service(t, "create", "sdk-dev-1"), "create")
	key := created["device"].(map[string]any)["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	if key == "" {
		t.Fatalf("no key: %v", created)
	}
	keys := map[int]string{}
	for i := 2; i <= 4; i++ {
		dev := mustOK(t, h.service(t, "create", fmt.Sprintf("sdk-dev-%d", i)), "create")["device"].(map[string]any)
		keys[i] = dev["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	}
	if res := h.service(t, "create", "sdk-dev-1"); res["ok"] != false || res["status"] != float64(409) {
		t.Fatalf("second create: %v", res)
	}

	// Device SDK: connect, read the twin, report, send telemetry.
	devCS := "HostName=" + hubHost + ";DeviceId=sdk-dev-1;SharedAccessKey=" + key
	d := h.startDevice(t, devCS)
	twin := d.await(t, "the twin", event("twin"))
	if twin["desired"].(map[string]any)["$version"] != float64(1) {
		t.Fatalf("twin %v", twin)
	}
	d.await(t, "ready", event("ready"))
	tw := mustOK(t, h.service(t, "get-twin", "sdk-dev-1"), "get twin")["twin"].(map[string]any)
	rep := tw["properties"].(map[string]any)["reported"].(map[string]any)
	if rep["firmware"] != "1.2.3" || tw["connectionState"] != "Connected" {
		t.Fatalf("twin after report: %v", tw)
	}

	// Desired update with the current etag reaches the device.
	mustOK(t, h.service(t, "update-desired", "sdk-dev-1", `{"rate":5}`), "update desired")
	d.await(t, "desired rate 5", func(ev map[string]any) bool {
		delta, _ := ev["delta"].(map[string]any)
		return ev["event"] == "desired" && delta["rate"] == float64(5)
	})
	// A stale etag: 412, the SDK's InvalidEtagError; nothing changed.
	stale := mustOK(t, h.service(t, "stale-update", "sdk-dev-1", `{"a":1}`, `{"b":2}`), "stale update")
	second := stale["second"].(map[string]any)
	if stale["secondUpdated"] != false || second["status"] != float64(412) || second["error"] != "InvalidEtagError" {
		t.Fatalf("stale etag: %v", stale)
	}
	desired := mustOK(t, h.service(t, "get-twin", "sdk-dev-1"), "get twin")["twin"].(map[string]any)["properties"].(map[string]any)["desired"].(map[string]any)
	if desired["a"] != float64(1) || desired["b"] != nil {
		t.Fatalf("desired after the stale update: %v", desired)
	}

	// Bulk registry operations (addDevices, removeDevices): the devices
	// come and go with their keys generated.
	if res := mustOK(t, h.service(t, "add-devices", "bulk-1", "bulk-2"), "add devices"); res["result"].(map[string]any)["isSuccessful"] != true {
		t.Fatalf("add devices: %v", res)
	}
	bulk := mustOK(t, h.service(t, "get", "bulk-2"), "get bulk-2")["device"].(map[string]any)
	if bulk["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"] == "" {
		t.Fatalf("bulk-2 without a key: %v", bulk)
	}
	if res := h.service(t, "add-devices", "bulk-2", "bulk-3"); res["ok"] != false || res["status"] != float64(400) {
		t.Fatalf("add an existing device: %v", res)
	}
	mustOK(t, h.service(t, "remove-devices", "bulk-1", "bulk-2", "bulk-3"), "remove devices")
	if res := h.service(t, "get", "bulk-3"); res["status"] != float64(404) || res["error"] != "DeviceNotFoundError" {
		t.Fatalf("bulk-3 after remove: %v", res)
	}

	// Query with pages of 2 (x-ms-continuation), read as twins.
	q := mustOK(t, h.service(t, "query", "SELECT * FROM devices WHERE STARTSWITH(deviceId, 'sdk-dev-')", "2"), "query")
	if q["pages"].(float64) < 2 || len(q["ids"].([]any)) != 4 {
		t.Fatalf("query: %v", q)
	}

	// Direct method through the service SDK.
	inv := mustOK(t, h.service(t, "invoke", "sdk-dev-1", "reboot", `{"delay":2}`, "15"), "invoke")
	result := inv["result"].(map[string]any)
	payload := result["payload"].(map[string]any)
	if result["status"] != float64(200) || payload["rebooted"] != true {
		t.Fatalf("invoke: %v", inv)
	}
	d.await(t, "the method call", event("method"))
	if res := h.service(t, "invoke", "sdk-dev-2", "reboot", `{}`, "5"); res["ok"] != false || res["status"] != float64(404) {
		t.Fatalf("invoke an offline device: %v", res)
	}

	// Cloud-to-device through SmartGo's HTTPS API.
	h.sendC2D(t, "sdk-dev-1", "turn on", map[string]string{"iothub-messageid": "c2d-1", "iothub-app-color": "red"})
	c2d := d.await(t, "the C2D message", event("c2d"))
	if c2d["data"] != "turn on" || c2d["messageId"] != "c2d-1" || !strings.Contains(fmt.Sprint(c2d["properties"]), "color") {
		t.Fatalf("c2d: %v", c2d)
	}

	// A cloud-to-device message for a device that has never connected
	// waits for its first connect.
	h.sendC2D(t, "sdk-dev-3", "first boot", map[string]string{"iothub-messageid": "c2d-boot"})
	d3 := h.startDevice(t, "HostName="+hubHost+";DeviceId=sdk-dev-3;SharedAccessKey="+keys[3])
	if c2d := d3.await(t, "the C2D message sent before the first connect", event("c2d")); c2d["data"] != "first boot" || c2d["messageId"] != "c2d-boot" {
		t.Fatalf("c2d before the first connect: %v", c2d)
	}

	// Telemetry reached the events topic with its properties.
	h.expectTelemetry(t, "sdk-dev-1", "telemetry-1", "celsius")

	// Reconnect: another connection takes the device's session and leaves;
	// the SDK reconnects (clean session 0, without subscribing again) and
	// still gets desired changes.
	h.takeOver(t, "sdk-dev-1", key)
	for i := 0; ; i++ {
		if i == 30 {
			t.Fatal("no desired change reached the device after its reconnect")
		}
		rate := 100 + i
		mustOK(t, h.service(t, "update-desired", "sdk-dev-1", fmt.Sprintf(`{"rate":%d}`, rate)), "update desired")
		if d.within(2*time.Second, func(ev map[string]any) bool {
			delta, _ := ev["delta"].(map[string]any)
			return ev["event"] == "desired" && delta["rate"] == float64(rate)
		}) {
			t.Logf("desired change %d reached the device after its reconnect", i+1)
			break
		}
	}
	if tw := mustOK(t, h.service(t, "get-twin", "sdk-dev-1"), "get twin")["twin"].(map[string]any); tw["connectionState"] != "Connected" {
		t.Fatalf("state after reconnect: %v", tw["connectionState"])
	}

	// An X.509 device (self-signed, thumbprint registered).
	certFile, keyFile, thumb := selfSignedDevice(t, t.TempDir(), "sdk-x509")
	mustOK(t, h.service(t, "create-x509", "sdk-x509", thumb), "create x509")
	x := h.startDevice(t, "HostName="+hubHost+";DeviceId=sdk-x509;x509=true", "DEVICE_CERT="+certFile, "DEVICE_KEY="+keyFile)
	x.await(t, "the X.509 device ready", event("ready"))
	// Disabled, it loses its connection and the SDK's attempts to connect
	// again are refused (CONNACK 5; the SDK keeps retrying, as against
	// IoT Hub): the twin says Disconnected.
	mustOK(t, h.service(t, "disable", "sdk-x509"), "disable")
	waitFor(t, 60*time.Second, "the disabled device to be disconnected", func() bool {
		return mustOK(t, h.service(t, "get-twin", "sdk-x509"), "get twin")["twin"].(map[string]any)["connectionState"] == "Disconnected"
	})
	waitFor(t, 30*time.Second, "the disabled device's refused reconnect", func() bool {
		data, _ := os.ReadFile(h.log)
		return strings.Contains(string(data), `device=sdk-x509`) && strings.Contains(string(data), "sdk-x509 is disabled")
	})

	// A module of sdk-dev-1 (ModuleClient): its own twin, reported and
	// desired, beside the device's.
	mod := mustOK(t, h.service(t, "create-module", "sdk-dev-1", "sensor"), "create module")["module"].(map[string]any)
	mkey := mod["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	m := h.startScript(t, "module.js", "MODULE_CONNECTION_STRING=HostName="+hubHost+";DeviceId=sdk-dev-1;ModuleId=sensor;SharedAccessKey="+mkey)
	if mt := m.await(t, "the module twin", event("twin")); mt["desired"].(map[string]any)["$version"] != float64(1) {
		t.Fatalf("module twin %v", mt)
	}
	m.await(t, "the module ready", event("ready"))
	mtw := mustOK(t, h.service(t, "get-module-twin", "sdk-dev-1", "sensor"), "get module twin")["twin"].(map[string]any)
	if mtw["moduleId"] != "sensor" || mtw["properties"].(map[string]any)["reported"].(map[string]any)["role"] != "sensor" {
		t.Fatalf("module twin after its report: %v", mtw)
	}
	mustOK(t, h.service(t, "module-update-desired", "sdk-dev-1", "sensor", `{"interval":60}`), "module desired")
	m.await(t, "the module's desired interval 60", func(ev map[string]any) bool {
		delta, _ := ev["delta"].(map[string]any)
		return ev["event"] == "desired" && delta["interval"] == float64(60)
	})
	devTwin := mustOK(t, h.service(t, "get-twin", "sdk-dev-1"), "get twin")["twin"].(map[string]any)
	if devTwin["properties"].(map[string]any)["reported"].(map[string]any)["role"] != nil {
		t.Fatalf("the module's report reached the device twin: %v", devTwin["properties"])
	}
}

// TestAzureNodeConnectionStateAfterCrash: a device SDK client is connected
// when `smartgo standalone` is SIGKILLed and is gone when it comes back;
// the node that held the connection recorded nothing, yet the twin's
// connectionState becomes Disconnected, and a direct method to the
// device answers 404 at once.
func TestAzureNodeConnectionStateAfterCrash(t *testing.T) {
	nodeReady(t)
	// A long ack wait (for a device recorded connected elsewhere) keeps
	// "at once" apart from it however loaded the machine.
	h := startHub(t, hubAddress(t), "bridge.heartbeat_interval=1s", "iothub.method_ack_timeout=15s")
	created := mustOK(t, h.service(t, "create", "crash-dev"), "create")
	key := created["device"].(map[string]any)["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	d := h.startDevice(t, "HostName="+hubHost+";DeviceId=crash-dev;SharedAccessKey="+key)
	d.await(t, "ready", event("ready"))
	state := func() any {
		return mustOK(t, h.service(t, "get-twin", "crash-dev"), "get twin")["twin"].(map[string]any)["connectionState"]
	}
	if s := state(); s != "Connected" {
		t.Fatalf("connectionState %v while connected", s)
	}
	h.crash(t)
	d.kill(t)
	h.run(t)
	waitFor(t, 90*time.Second, "the twin of the crashed node's device to say Disconnected", func() bool { return state() == "Disconnected" })
	// A direct method to it does not wait for a node to answer.
	res := h.service(t, "invoke", "crash-dev", "reboot", `{}`, "30")
	methodFailure(t, res, 404, 404103)
	if ms := res["ms"].(float64); ms > 7500 {
		t.Errorf("invoke the crashed node's device: 404 after %v ms", ms)
	}
}

// TestAzureNodeDisabledDeviceModules: a ModuleClient (unmodified device
// SDK) of a device that the service SDK disables loses its connection and
// its reconnects are refused, as IoT Hub refuses the modules of a
// disabled device; enabled again, the SDK's own retries get it back and it
// gets desired changes again. The registry's statistics count the device
// as enabled, then disabled.
func TestAzureNodeDisabledDeviceModules(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))
	mustOK(t, h.service(t, "create", "dm-dev"), "create")
	mod := mustOK(t, h.service(t, "create-module", "dm-dev", "sensor"), "create module")["module"].(map[string]any)
	mkey := mod["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	m := h.startScript(t, "module.js", "MODULE_CONNECTION_STRING=HostName="+hubHost+";DeviceId=dm-dev;ModuleId=sensor;SharedAccessKey="+mkey)
	m.await(t, "the module ready", event("ready"))
	state := func() any {
		return mustOK(t, h.service(t, "get-module-twin", "dm-dev", "sensor"), "get module twin")["twin"].(map[string]any)["connectionState"]
	}
	if s := state(); s != "Connected" {
		t.Fatalf("module connectionState %v while connected", s)
	}

	// Registry.getRegistryStatistics counts devices (not modules) by status.
	stats := func() map[string]any { return mustOK(t, h.service(t, "stats"), "statistics")["stats"].(map[string]any) }
	if st := stats(); st["totalDeviceCount"] != float64(1) || st["enabledDeviceCount"] != float64(1) || st["disabledDeviceCount"] != float64(0) {
		t.Fatalf("statistics with dm-dev enabled: %v", st)
	}

	mustOK(t, h.service(t, "disable", "dm-dev"), "disable")
	if st := stats(); st["totalDeviceCount"] != float64(1) || st["enabledDeviceCount"] != float64(0) || st["disabledDeviceCount"] != float64(1) {
		t.Fatalf("statistics with dm-dev disabled: %v", st)
	}
	waitFor(t, 60*time.Second, "the disabled device's module to be disconnected", func() bool { return state() == "Disconnected" })
	waitFor(t, 60*time.Second, "the module's refused reconnect", func() bool {
		data, _ := os.ReadFile(h.log)
		return strings.Contains(string(data), "module dm-dev/sensor: device dm-dev is disabled")
	})

	mustOK(t, h.service(t, "enable", "dm-dev"), "enable")
	waitFor(t, 90*time.Second, "the module to connect again", func() bool { return state() == "Connected" })
	mustOK(t, h.service(t, "module-update-desired", "dm-dev", "sensor", `{"interval":7}`), "module desired")
	m.await(t, "the module's desired interval 7 after the enable", func(ev map[string]any) bool {
		delta, _ := ev["delta"].(map[string]any)
		return ev["event"] == "desired" && delta["interval"] == float64(7)
	})
}

// TestAzureNodeMethodOfflineDevice: the service SDK's invokeDeviceMethod
// on a device that is not connected gets 404 (errorCode 404103) at once,
// or after connectTimeoutInSeconds when it gives one; a device SDK client
// that connects while a call with a connect timeout waits answers it.
func TestAzureNodeMethodOfflineDevice(t *testing.T) {
	nodeReady(t)
	// A long ack wait (for a device recorded connected elsewhere) keeps
	// "at once" apart from it however loaded the machine.
	h := startHub(t, hubAddress(t), "iothub.method_ack_timeout=15s")
	created := mustOK(t, h.service(t, "create", "nap-dev"), "create")
	key := created["device"].(map[string]any)["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)

	// No connect timeout (absent, then 0): 404 at once, not after the
	// 15 s ack wait.
	for _, args := range [][]string{{"invoke", "nap-dev", "reboot", `{}`, "30"}, {"invoke", "nap-dev", "reboot", `{}`, "30", "0"}} {
		res := h.service(t, args...)
		inner := methodFailure(t, res, 404, 404103)
		if ms := res["ms"].(float64); ms > 7500 {
			t.Errorf("%v: 404 after %v ms", args, ms)
		}
		if info, _ := inner["info"].(map[string]any); info["timeout"] != "00:00:00" {
			t.Errorf("%v: info %v", args, inner)
		}
	}
	// A connect timeout of 2 s: 404 after it.
	res := h.service(t, "invoke", "nap-dev", "reboot", `{}`, "30", "2")
	methodFailure(t, res, 404, 404103)
	if ms := res["ms"].(float64); ms < 2000 {
		t.Errorf("connect timeout 2 s: 404 after %v ms", ms)
	}

	// The device connects while a call with a 60 s connect timeout waits.
	// service.js writes "calling" to stderr as it sends the request; the
	// device SDK takes far longer to start and connect than the request
	// takes to arrive.
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	cmd := exec.CommandContext(ctx, "node", "service.js", "invoke", "nap-dev", "reboot", `{"when":"now"}`, "30", "60")
	cmd.Env = h.nodeEnv()
	var stdout strings.Builder
	cmd.Stdout = &stdout
	stderr, _ := cmd.StderrPipe()
	if err := cmd.Start(); err != nil {
		t.Fatal(err)
	}
	calling := make(chan bool, 1)
	go func() {
		sc := bufio.NewScanner(stderr)
		for sc.Scan() {
			if sc.Text() == "calling" {
				calling <- true
			}
		}
		close(calling)
	}()
	if !<-calling {
		t.Fatal("service.js ended without calling")
	}
	d := h.startDevice(t, "HostName="+hubHost+";DeviceId=nap-dev;SharedAccessKey="+key)
	d.await(t, "the waiting method call", event("method"))
	if err := cmd.Wait(); err != nil {
		t.Fatalf("service.js: %v %s", err, stdout.String())
	}
	if err := json.Unmarshal([]byte(stdout.String()), &res); err != nil {
		t.Fatalf("service.js: %v %s", err, stdout.String())
	}
	t.Logf("the call waited %v ms for the device", res["ms"])
	result, _ := res["result"].(map[string]any)
	if res["ok"] != true || result["status"] != float64(200) || result["payload"].(map[string]any)["rebooted"] != true {
		t.Fatalf("the call that waited for the device: %v", res)
	}

	// A method the device does not answer: 504 (errorCode 504101,
	// GatewayTimeoutError) after the response timeout, not the SDK's own
	// timer.
	res = h.service(t, "invoke", "nap-dev", "no-such-method", `{}`, "2")
	if inner := methodFailure(t, res, 504, 504101); res["error"] != "GatewayTimeoutError" || res["ms"].(float64) < 2000 ||
		inner["info"].(map[string]any)["timeout"] != "00:00:02" {
		t.Fatalf("unanswered method: %v %v", res, inner)
	}
}

// TestAzureNodePnPModelID: a device SDK client (and a ModuleClient) that
// sets an IoT Plug and Play model id (setOptions({modelId})) before it
// connects has it as its twin's modelId for the service SDK
// (Registry.getTwin, getModuleTwin); a connection that announces none
// keeps the last one, one announcing another replaces it. Its telemetry
// carries the model id (dt-dataschema).
func TestAzureNodePnPModelID(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))
	created := mustOK(t, h.service(t, "create", "pnp-dev"), "create")
	key := created["device"].(map[string]any)["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	cs := "DEVICE_CONNECTION_STRING=HostName=" + hubHost + ";DeviceId=pnp-dev;SharedAccessKey=" + key
	twin := func() map[string]any {
		return mustOK(t, h.service(t, "get-twin", "pnp-dev"), "get twin")["twin"].(map[string]any)
	}
	if m := twin()["modelId"]; m != "" {
		t.Fatalf("modelId before any connect: %v", m)
	}
	for _, step := range []struct{ announce, want string }{
		{"dtmi:com:example:Thermostat;1", "dtmi:com:example:Thermostat;1"},
		{"", "dtmi:com:example:Thermostat;1"},
		{"dtmi:com:example:Thermostat;2", "dtmi:com:example:Thermostat;2"},
	} {
		d := h.startScript(t, "device.js", cs, "MODEL_ID="+step.announce)
		d.await(t, "ready", event("ready"))
		if tw := twin(); tw["modelId"] != step.want || tw["connectionState"] != "Connected" {
			t.Fatalf("announcing %q: modelId %v (%v), want %q", step.announce, tw["modelId"], tw["connectionState"], step.want)
		}
		if step.announce == "dtmi:com:example:Thermostat;1" {
			// Its telemetry carries the model id, as IoT Hub stamps it.
			if p := h.expectTelemetry(t, "pnp-dev", "telemetry-1", "celsius"); p["dt-dataschema"] != step.announce {
				t.Fatalf("telemetry of the PnP device: %v", p)
			}
		}
		d.stop(t)
		waitFor(t, 30*time.Second, "the device disconnected", func() bool { return twin()["connectionState"] == "Disconnected" })
	}

	mod := mustOK(t, h.service(t, "create-module", "pnp-dev", "fan"), "create module")["module"].(map[string]any)
	mkey := mod["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	m := h.startScript(t, "module.js", "MODULE_CONNECTION_STRING=HostName="+hubHost+";DeviceId=pnp-dev;ModuleId=fan;SharedAccessKey="+mkey,
		"MODEL_ID=dtmi:com:example:Fan;1")
	m.await(t, "the module ready", event("ready"))
	mt := mustOK(t, h.service(t, "get-module-twin", "pnp-dev", "fan"), "get module twin")["twin"].(map[string]any)
	if mt["modelId"] != "dtmi:com:example:Fan;1" {
		t.Fatalf("module twin modelId %v", mt["modelId"])
	}
	if tw := twin(); tw["modelId"] != "dtmi:com:example:Thermostat;2" {
		t.Fatalf("the module's model id reached the device twin: %v", tw["modelId"])
	}

	// A direct method to the module (invokeDeviceMethod with a module id,
	// ModuleClient.onMethod), then to a module of the device that is not
	// connected: 404103 at once.
	res := mustOK(t, h.service(t, "invoke-module", "pnp-dev", "fan", "ping", `{"n":1}`, "15"), "invoke module")
	result := res["result"].(map[string]any)
	if result["status"] != float64(201) || fmt.Sprint(result["payload"]) != "map[pong:map[n:1]]" {
		t.Fatalf("module method: %v", res)
	}
	m.await(t, "the module's method call", event("method"))
	mustOK(t, h.service(t, "create-module", "pnp-dev", "idle"), "create module")
	methodFailure(t, h.service(t, "invoke-module", "pnp-dev", "idle", "ping", `{}`, "15"), 404, 404103)
}

// TestAzureNodeDeviceIDWithQuestionMark: IoT Hub's device ids may hold
// '?', which the device SDK puts into its MQTT user name as it is
// ("{host}/a?b/?api-version=..."); such a device connects, reads its
// twin, reports and gets desired changes and methods. It used to be
// refused: the user name was cut at its first '?'.
func TestAzureNodeDeviceIDWithQuestionMark(t *testing.T) {
	nodeReady(t)
	h := startHub(t, hubAddress(t))
	const id = "sensor?1"
	created := mustOK(t, h.service(t, "create", id), "create")
	key := created["device"].(map[string]any)["authentication"].(map[string]any)["symmetricKey"].(map[string]any)["primaryKey"].(string)
	d := h.startDevice(t, "HostName="+hubHost+";DeviceId="+id+";SharedAccessKey="+key)
	d.await(t, "ready", event("ready"))
	tw := mustOK(t, h.service(t, "get-twin", id), "get twin")["twin"].(map[string]any)
	if tw["properties"].(map[string]any)["reported"].(map[string]any)["firmware"] != "1.2.3" || tw["connectionState"] != "Connected" {
		t.Fatalf("twin after report: %v", tw)
	}
	mustOK(t, h.service(t, "update-desired", id, `{"rate":9}`), "update desired")
	d.await(t, "desired rate 9", func(ev map[string]any) bool {
		delta, _ := ev["delta"].(map[string]any)
		return ev["event"] == "desired" && delta["rate"] == float64(9)
	})
	inv := mustOK(t, h.service(t, "invoke", id, "reboot", `{"n":1}`, "15"), "invoke")
	if result := inv["result"].(map[string]any); result["status"] != float64(200) {
		t.Fatalf("invoke: %v", inv)
	}
}
