package iothub

import (
	"context"
	"encoding/json"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestHubDeviceTwinFlow: a SAS device connects over MQTT 3.1.1 with clean
// session 0, reads its twin, patches reported properties, and is told of
// a desired change the back end makes; its connection state follows the
// connection.
func TestHubDeviceTwinFlow(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c)
	dev := createDevice(t, n, "thermo-1")
	id := Identity{DeviceID: "thermo-1"}
	d := dialDevice(t, n.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	if codes := d.subscribe(twinResFilter, twinDesiredFilter); codes[0] != 1 || codes[1] != 1 {
		t.Fatalf("SUBACK %v", codes)
	}
	st, _, body := d.request("$iothub/twin/GET/?$rid=1", []byte(" "))
	var props struct {
		Desired, Reported map[string]any
	}
	if st != 200 || json.Unmarshal(body, &props) != nil || props.Desired["$version"] != float64(1) {
		t.Fatalf("GET: %d %s", st, body)
	}
	st, topic, body := d.request("$iothub/twin/PATCH/properties/reported/?$rid=2", []byte(`{"fw":"1.0","battery":{"level":80}}`))
	if st != 204 || topic != "$iothub/twin/res/204/?$rid=2&$version=2" || len(body) != 0 {
		t.Fatalf("PATCH: %d %s %q", st, topic, body)
	}
	doc := twinDoc(t, n, id)
	if doc["connectionState"] != "Connected" {
		t.Fatalf("connection state %v", doc["connectionState"])
	}
	rep := doc["properties"].(map[string]any)["reported"].(map[string]any)
	if rep["fw"] != "1.0" || rep["$version"] != float64(2) {
		t.Fatalf("reported %v", rep)
	}

	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.hub.Twins().UpdateDesired(ctx, id.DeviceID, "", []byte(`{"rate":5}`), 0); err != nil {
		t.Fatal(err)
	}
	p := d.expect()
	if p.Topic != "$iothub/twin/PATCH/properties/desired/?$version=2" {
		t.Fatalf("desired topic %q", p.Topic)
	}
	var patch map[string]any
	if err := json.Unmarshal(p.Payload, &patch); err != nil || patch["rate"] != float64(5) || patch["$version"] != float64(2) {
		t.Fatalf("desired patch %s", p.Payload)
	}
	d.Send(&packets.Disconnect{})
	d.Closed()
	waitFor(t, 10*time.Second, "Disconnected", func() bool { return twinDoc(t, n, id)["connectionState"] == "Disconnected" })
}

// TestHubDeviceReconnectKeepsSubscriptions: a device that reconnects
// (clean session 0, no new SUBSCRIBE, as the SDKs do) to another node
// still gets desired changes and twin responses: the subscriptions live
// in its persistent session; the twin stays Connected across the move.
func TestHubDeviceReconnectKeepsSubscriptions(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c)
	dev := createDevice(t, a, "roamer")
	id := Identity{DeviceID: "roamer"}
	key := dev.Authentication.SymmetricKey.PrimaryKey
	d := dialDevice(t, a.addr, id, deviceToken(t, id, key, time.Hour))
	d.subscribe(twinResFilter, twinDesiredFilter)
	d.Send(&packets.Disconnect{})
	d.Closed()
	d2 := dialDevice(t, b.addr, id, deviceToken(t, id, key, time.Hour))
	if st, _, body := d2.request("$iothub/twin/GET/?$rid=9", nil); st != 200 {
		t.Fatalf("GET after reconnect: %d %s", st, body)
	}
	waitFor(t, 10*time.Second, "watched on node b", func() bool { return b.hub.Twins().Watched() == 1 })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := a.hub.Twins().UpdateDesired(ctx, id.DeviceID, "", []byte(`{"mode":"eco"}`), 0); err != nil {
		t.Fatal(err)
	}
	if p := d2.expect(); !strings.HasPrefix(p.Topic, desiredTopicPrefix) || !strings.Contains(string(p.Payload), "eco") {
		t.Fatalf("desired after reconnect: %s %s", p.Topic, p.Payload)
	}
	if got := twinDoc(t, a, id)["connectionState"]; got != "Connected" {
		t.Fatalf("state %v", got)
	}
}

// TestHubDeviceAuthRefused: bad credentials are refused with a clear
// CONNACK and counted; a client that is not a device is left to the
// server's own rules.
func TestHubDeviceAuthRefused(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c)
	dev := createDevice(t, n, "d1")
	key := dev.Authentication.SymmetricKey.PrimaryKey
	id := Identity{DeviceID: "d1"}
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := n.hub.Twins().CreateDevice(ctx, &twincli.Device{DeviceID: "off", Status: "disabled"}); err != nil {
		t.Fatal(err)
	}
	otherKey := createDevice(t, n, "d2").Authentication.SymmetricKey.PrimaryKey
	wrongHost, _ := SignToken("other.test/devices/d1", "", key, time.Now().Add(time.Hour))
	expired, _ := SignToken(testHost+"/devices/d1", "", key, time.Now().Add(-time.Minute))
	forD2 := deviceToken(t, Identity{DeviceID: "d2"}, otherKey, time.Hour)
	mismatch := connectCP(id, deviceToken(t, id, key, time.Hour))
	mismatch.ClientID = "d2"
	for _, tc := range []struct {
		name string
		cp   *packets.Connect
		want packets.ReasonCode
	}{
		{"signed with another device's key", connectCP(id, deviceToken(t, id, otherKey, time.Hour)), packets.ConnectRefusedBadUsernameOrPassword},
		{"expired", connectCP(id, expired), packets.ConnectRefusedBadUsernameOrPassword},
		{"token of another device", connectCP(id, forD2), packets.ConnectRefusedNotAuthorized},
		{"token for another host", connectCP(id, wrongHost), packets.ConnectRefusedNotAuthorized},
		{"no password", connectCP(id, ""), packets.ConnectRefusedBadUsernameOrPassword},
		{"not a token", connectCP(id, "hunter2"), packets.ConnectRefusedBadUsernameOrPassword},
		{"malformed token", connectCP(id, "SharedAccessSignature sr=x"), packets.ConnectRefusedBadUsernameOrPassword},
		{"client id differs", mismatch, packets.ConnectRefusedNotAuthorized},
		{"unknown device", connectCP(Identity{DeviceID: "ghost"}, deviceToken(t, Identity{DeviceID: "ghost"}, key, time.Hour)), packets.ConnectRefusedNotAuthorized},
		{"disabled device", connectCP(Identity{DeviceID: "off"}, deviceToken(t, Identity{DeviceID: "off"}, key, time.Hour)), packets.ConnectRefusedNotAuthorized},
	} {
		if got := refused(t, n.addr, tc.cp); got != tc.want {
			t.Errorf("%s: CONNACK %v, want %v", tc.name, got, tc.want)
		}
	}
	if got := n.hub.Stats().AuthFailures.Load(); got != 10 {
		t.Errorf("auth failures %d, want 10", got)
	}
	// A plain MQTT client is not a device.
	if got := refused(t, n.addr, &packets.Connect{ClientID: "plain", CleanStart: true}); got != 0 {
		t.Errorf("plain client: CONNACK %v", got)
	}
	if !strings.Contains(n.logs.String(), "iothub: device refused") {
		t.Error("refusals not logged")
	}
	// Nothing of it changed the registry.
	if got := twinDoc(t, n, id)["connectionState"]; got != "Disconnected" {
		t.Errorf("state %v", got)
	}
}

// TestHubDeviceTopicsConfined: a device uses only its own topics; the
// $iothub tree and other devices' topics are closed to it and to plain
// clients.
func TestHubDeviceTopicsConfined(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c)
	dev := createDevice(t, n, "d1")
	createDevice(t, n, "d2")
	id := Identity{DeviceID: "d1"}
	d := dialDevice(t, n.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	codes := d.subscribe("devices/d1/messages/devicebound/#", "devices/d2/messages/devicebound/#", "devices/+/messages/devicebound/#",
		"#", "$iothub/#", "$iothub/methods/POST/#")
	want := []packets.ReasonCode{1, 0x80, 0x80, 0x80, 0x80, 1}
	for i := range want {
		if codes[i] != want[i] {
			t.Fatalf("SUBACK %v, want %v", codes, want)
		}
	}
	plain := mqttPlain(t, n.addr, "watcher")
	plain.Send(&packets.Subscribe{PacketID: 1, Subscriptions: []packets.Subscription{{Filter: "devices/#", QoS: 1},
		{Filter: "$iothub/twin/res/#", QoS: 1}, {Filter: "#", QoS: 1}}})
	if sa := plain.Recv().(*packets.Suback); sa.ReasonCodes[0] != 0x80 || sa.ReasonCodes[1] != 0x80 || sa.ReasonCodes[2] != 1 {
		t.Fatalf("plain SUBACK %v", sa.ReasonCodes)
	}
	events := pullAll(t, c, DefaultEventsTopic)
	// Another device's telemetry topic, a C2D topic and a plain topic:
	// acknowledged (3.1.1 has no refusal) and dropped.
	d.publish1(2, "devices/d2/messages/events/", []byte("spoof"))
	d.publish1(3, "devices/d1/messages/devicebound/x", []byte("self c2d"))
	d.publish1(4, "plain/topic", []byte("x"))
	d.publish1(5, "devices/d1/messages/events/a=1", []byte("mine"))
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msgs, err := events.Poll(ctx)
	if err != nil || len(msgs) != 1 || string(msgs[0].Body) != "mine" || msgs[0].Properties[PropDeviceID] != "d1" {
		t.Fatalf("stored telemetry %v %v", msgs, err)
	}
	plain.nothing(200 * time.Millisecond)
	d.nothing(100 * time.Millisecond)
}

// A desired change made right after a device's first twin GET is
// answered reaches the device: the GET waits until the connection's
// desired changes are watched (the reconnect flow of twins.md: subscribe,
// GET, then rely on notifications).
func TestHubDesiredRightAfterFirstGet(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c)
	for i := range 20 {
		name := fmt.Sprintf("eager-%d", i)
		dev := createDevice(t, n, name)
		id := Identity{DeviceID: name}
		d := dialDevice(t, n.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
		d.subscribe(twinResFilter, twinDesiredFilter)
		if st, _, body := d.request("$iothub/twin/GET/?$rid=1", nil); st != 200 {
			t.Fatalf("%s: GET %d %s", name, st, body)
		}
		ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
		_, err := n.hub.Twins().UpdateDesired(ctx, name, "", []byte(`{"round":`+strconv.Itoa(i)+`}`), 0)
		cancel()
		if err != nil {
			t.Fatal(err)
		}
		if p := d.expect(); !strings.HasPrefix(p.Topic, desiredTopicPrefix) || !strings.Contains(string(p.Payload), `"round":`+strconv.Itoa(i)) {
			t.Fatalf("%s: desired after the first GET: %s %s", name, p.Topic, p.Payload)
		}
		d.Send(&packets.Disconnect{})
		d.Closed()
	}
}

// TestHubRevokedIdentitiesDisconnected: a device whose identity is
// disabled (through the HTTPS API of another node), a device deleted
// (through the registry client, as `smartgo admin device delete`) and a
// module deleted lose their connections, and are refused when they
// connect again.
func TestHubRevokedIdentitiesDisconnected(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c, withHTTPS(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	connected := func(id Identity, key string) *device {
		t.Helper()
		d := dialDevice(t, a.addr, id, deviceToken(t, id, key, time.Hour))
		d.subscribe(twinResFilter)
		// The twin GET is answered once the connection is watched.
		if st, _, body := d.request("$iothub/twin/GET/?$rid=1", []byte(" ")); st != 200 {
			t.Fatalf("%s GET: %d %s", id, st, body)
		}
		return d
	}
	other := createDevice(t, a, "bystander")
	bystander := connected(Identity{DeviceID: "bystander"}, other.Authentication.SymmetricKey.PrimaryKey)

	dis := createDevice(t, a, "to-disable")
	disID := Identity{DeviceID: "to-disable"}
	d := connected(disID, dis.Authentication.SymmetricKey.PrimaryKey)
	st, _, body := newAPI(t, b, "owner").do("PUT", "/devices/to-disable", []byte(`{"deviceId":"to-disable","status":"disabled"}`),
		map[string]string{"If-Match": "*"})
	if st != 200 {
		t.Fatalf("disable: %d %s", st, body)
	}
	d.Closed()
	if code := refused(t, a.addr, connectCP(disID, deviceToken(t, disID, dis.Authentication.SymmetricKey.PrimaryKey, time.Hour))); code != 5 {
		t.Fatalf("disabled device's CONNACK %v", code)
	}

	del := createDevice(t, a, "to-delete")
	delID := Identity{DeviceID: "to-delete"}
	d = connected(delID, del.Authentication.SymmetricKey.PrimaryKey)
	mod, err := a.hub.Twins().CreateModule(ctx, &twincli.Module{DeviceID: "bystander", ModuleID: "mod"})
	if err != nil {
		t.Fatal(err)
	}
	modID := Identity{DeviceID: "bystander", ModuleID: "mod"}
	m := connected(modID, mod.Authentication.SymmetricKey.PrimaryKey)
	if err := b.hub.Twins().DeleteDevice(ctx, "to-delete", ""); err != nil {
		t.Fatal(err)
	}
	if err := b.hub.Twins().DeleteModule(ctx, "bystander", "mod", ""); err != nil {
		t.Fatal(err)
	}
	d.Closed()
	m.Closed()
	if code := refused(t, a.addr, connectCP(delID, deviceToken(t, delID, del.Authentication.SymmetricKey.PrimaryKey, time.Hour))); code != 5 {
		t.Fatalf("deleted device's CONNACK %v", code)
	}
	// The device of the deleted module keeps its connection.
	if st, _, body := bystander.request("$iothub/twin/GET/?$rid=2", []byte(" ")); st != 200 {
		t.Fatalf("bystander GET: %d %s", st, body)
	}
}

// TestHubDisabledDeviceModulesRefused: disabling a device closes its
// modules' open connections (on another node than the API call) and
// refuses their new ones; enabling it again lets them connect. A module
// of another device keeps its connection.
func TestHubDisabledDeviceModulesRefused(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c, withHTTPS(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	createDevice(t, a, "gw")
	createDevice(t, a, "gw2")
	connected := func(id Identity, key string) *device {
		t.Helper()
		d := dialDevice(t, a.addr, id, deviceToken(t, id, key, time.Hour))
		d.subscribe(twinResFilter)
		if st, _, body := d.request("$iothub/twin/GET/?$rid=1", []byte(" ")); st != 200 {
			t.Fatalf("%s GET: %d %s", id, st, body)
		}
		return d
	}
	keys := map[Identity]string{}
	for _, id := range []Identity{{DeviceID: "gw", ModuleID: "m1"}, {DeviceID: "gw", ModuleID: "m2"}, {DeviceID: "gw2", ModuleID: "m1"}} {
		m, err := a.hub.Twins().CreateModule(ctx, &twincli.Module{DeviceID: id.DeviceID, ModuleID: id.ModuleID})
		if err != nil {
			t.Fatal(err)
		}
		keys[id] = m.Authentication.SymmetricKey.PrimaryKey
	}
	m1, m2 := Identity{DeviceID: "gw", ModuleID: "m1"}, Identity{DeviceID: "gw", ModuleID: "m2"}
	other := Identity{DeviceID: "gw2", ModuleID: "m1"}
	c1, c2, co := connected(m1, keys[m1]), connected(m2, keys[m2]), connected(other, keys[other])

	api := newAPI(t, b, "owner")
	setStatus := func(status string) {
		t.Helper()
		st, _, body := api.do("PUT", "/devices/gw", []byte(`{"deviceId":"gw","status":"`+status+`"}`), map[string]string{"If-Match": "*"})
		if st != 200 {
			t.Fatalf("%s: %d %s", status, st, body)
		}
	}
	setStatus("disabled")
	c1.Closed()
	c2.Closed()
	for _, id := range []Identity{m1, m2} {
		if code := refused(t, a.addr, connectCP(id, deviceToken(t, id, keys[id], time.Hour))); code != 5 {
			t.Fatalf("%s of the disabled device: CONNACK %v", id, code)
		}
	}
	if !strings.Contains(a.logs.String(), "device gw is disabled") {
		t.Fatalf("no refusal reason in the log:\n%s", a.logs.String())
	}
	if st, _, body := co.request("$iothub/twin/GET/?$rid=2", []byte(" ")); st != 200 {
		t.Fatalf("module of another device: GET %d %s", st, body)
	}

	setStatus("enabled")
	d := connected(m1, keys[m1])
	if st, _, body := d.request("$iothub/twin/GET/?$rid=2", []byte(" ")); st != 200 {
		t.Fatalf("module after enable: GET %d %s", st, body)
	}
}

// TestHubModelIDAnnounced: a device announcing an IoT Plug and Play model
// id in its user name (model-id=) has it as its twin's modelId, on the
// other node's API too; reconnecting without one keeps it, with another
// replaces it; a model id that is not a DTMI is refused at CONNECT.
func TestHubModelIDAnnounced(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c, withHTTPS(t))
	dev := createDevice(t, a, "pnp")
	id := Identity{DeviceID: "pnp"}
	key := dev.Authentication.SymmetricKey.PrimaryKey
	api := newAPI(t, b, "owner")
	connectAs := func(query string) *device {
		t.Helper()
		cp := connectCP(id, deviceToken(t, id, key, time.Hour))
		cp.Username = testHost + "/pnp/?api-version=2021-04-12" + query
		d := dialDeviceCP(t, a.addr, id, cp)
		d.subscribe(twinResFilter)
		if st, _, body := d.request("$iothub/twin/GET/?$rid=1", []byte(" ")); st != 200 {
			t.Fatalf("GET: %d %s", st, body)
		}
		return d
	}
	modelID := func() any {
		t.Helper()
		st, _, body := api.do("GET", "/twins/pnp", nil, nil)
		var tw map[string]any
		if st != 200 || json.Unmarshal(body, &tw) != nil {
			t.Fatalf("twin: %d %s", st, body)
		}
		return tw["modelId"]
	}
	if m := modelID(); m != "" {
		t.Fatalf("modelId before any connect: %v", m)
	}
	d := connectAs("&model-id=dtmi:com:example:Thermostat;1&DeviceClientType=test")
	if m := modelID(); m != "dtmi:com:example:Thermostat;1" {
		t.Fatalf("modelId after the announcing connect: %v", m)
	}
	d.Send(&packets.Disconnect{})
	d.Closed()
	waitFor(t, 10*time.Second, "disconnected", func() bool { return twinDoc(t, a, id)["connectionState"] == "Disconnected" })
	d = connectAs("&DeviceClientType=test")
	if m := modelID(); m != "dtmi:com:example:Thermostat;1" {
		t.Fatalf("modelId after a connect announcing none: %v", m)
	}
	d.Send(&packets.Disconnect{})
	d.Closed()
	d = connectAs("&model-id=dtmi%3Acom%3Aexample%3AThermostat%3B2")
	if m := modelID(); m != "dtmi:com:example:Thermostat;2" {
		t.Fatalf("modelId after announcing another: %v", m)
	}
	// Its telemetry carries the connection's model id (dt-dataschema); a
	// device that announced none sends none.
	d.publish1(1, "devices/pnp/messages/events/%24.mid=pnp-1", []byte(`{"t":20}`))
	plain := createDevice(t, a, "plain")
	pid := Identity{DeviceID: "plain"}
	dialDevice(t, a.addr, pid, deviceToken(t, pid, plain.Authentication.SymmetricKey.PrimaryKey, time.Hour)).
		publish1(1, "devices/plain/messages/events/%24.mid=plain-1", []byte(`{"t":21}`))
	pc := pullAll(t, c, DefaultEventsTopic)
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	seen := map[string]map[string]string{}
	for len(seen) < 2 {
		got, err := pc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range got {
			seen[x.Properties["message-id"]] = x.Properties
		}
	}
	if s := seen["pnp-1"][PropDataSchema]; s != "dtmi:com:example:Thermostat;2" {
		t.Errorf("PnP telemetry dt-dataschema %q: %v", s, seen["pnp-1"])
	}
	if s, ok := seen["plain-1"][PropDataSchema]; ok {
		t.Errorf("telemetry of a device without a model id has dt-dataschema %q", s)
	}
	for _, bad := range []string{"&model-id=urn:thermostat", "&model-id=%zz"} {
		cp := connectCP(id, deviceToken(t, id, key, time.Hour))
		cp.Username = testHost + "/pnp/?api-version=2021-04-12" + bad
		if code := refused(t, a.addr, cp); code != 4 {
			t.Fatalf("%s: CONNACK %v", bad, code)
		}
	}
}
