package iothub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// c2dProps decodes the property bag of a devicebound topic.
func c2dProps(t testing.TB, topic string) map[string]string {
	t.Helper()
	bag, ok := strings.CutPrefix(topic, "devices/")
	if !ok {
		t.Fatalf("topic %q", topic)
	}
	_, bag, _ = strings.Cut(bag, "/messages/devicebound/")
	props, err := DecodeBag(bag)
	if err != nil {
		t.Fatal(err)
	}
	out := map[string]string{}
	for _, p := range props {
		out[p.Name] = p.Value
	}
	return out
}

// TestHubC2D: a cloud-to-device message sent through one node reaches
// the device on another with its properties; one sent while the device is
// offline comes when it reconnects; an expired one never comes; what a
// full session queue cannot hold comes after it, read back from the log;
// unknown devices and oversized bodies are refused.
func TestHubC2D(t *testing.T) {
	c := startTestCluster(t, 1)
	a := startNode(t, c, func(mo *mqtt.Options, _ *bridge.Options, _ *Options) { mo.MaxQueuedMessages = 3 })
	b := startNode(t, c)
	dev := createDevice(t, a, "lamp")
	id := Identity{DeviceID: "lamp"}
	key := dev.Authentication.SymmetricKey.PrimaryKey
	d := dialDevice(t, a.addr, id, deviceToken(t, id, key, time.Hour))
	d.subscribe("devices/lamp/messages/devicebound/#")
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	msg := &C2DMessage{DeviceID: "lamp", Body: []byte("on"), MessageID: "m-1", CorrelationID: "c-1", ContentType: "text/plain",
		Properties: []Property{{"color", "warm white"}}}
	if err := b.hub.SendC2D(ctx, msg); err != nil {
		t.Fatal(err)
	}
	p := d.expect()
	props := c2dProps(t, p.Topic)
	if string(p.Payload) != "on" || props["$.mid"] != "m-1" || props["$.cid"] != "c-1" || props["$.ct"] != "text/plain" ||
		props["color"] != "warm white" || props["$.to"] != "/devices/lamp/messages/deviceBound" || props["$.exp"] == "" || p.QoS != 1 {
		t.Fatalf("got %s %q %v", p.Topic, p.Payload, props)
	}

	// Offline (persistent session held by node a): queued, bounded; the
	// excess waits in the log.
	d.Send(&packets.Disconnect{})
	d.Closed()
	waitFor(t, 10*time.Second, "offline", func() bool { return !a.hub.connectedHere("lamp") })
	soon := time.Now().Add(time.Second)
	if err := b.hub.SendC2D(ctx, &C2DMessage{DeviceID: "lamp", Body: []byte("expires"), Expiry: soon}); err != nil {
		t.Fatal(err)
	}
	for i := range 4 {
		if err := b.hub.SendC2D(ctx, &C2DMessage{DeviceID: "lamp", Body: fmt.Appendf(nil, "queued-%d", i)}); err != nil {
			t.Fatal(err)
		}
	}
	waitFor(t, 10*time.Second, "the expiry", func() bool { return time.Now().After(soon) })
	d = dialDevice(t, a.addr, id, deviceToken(t, id, key, time.Hour))
	var got []string
	for range 4 {
		got = append(got, string(d.expect().Payload))
	}
	d.nothing(300 * time.Millisecond)
	// The queue held 3 (the expired one among them, dropped at delivery);
	// the last two came from the log once it drained.
	if fmt.Sprint(got) != "[queued-0 queued-1 queued-2 queued-3]" {
		t.Fatalf("after reconnect: %q", got)
	}

	if err := b.hub.SendC2D(ctx, &C2DMessage{DeviceID: "nobody", Body: []byte("x")}); !errors.Is(err, twincli.ErrNotFound) {
		t.Fatalf("unknown device: %v", err)
	}
	if err := b.hub.SendC2D(ctx, &C2DMessage{DeviceID: "lamp", Body: make([]byte, DefaultC2DMaxSize+1)}); !errors.Is(err, ErrTooLarge) {
		t.Fatalf("oversized: %v", err)
	}
	if err := b.hub.SendC2D(ctx, &C2DMessage{DeviceID: "lamp", Body: []byte("x"), Expiry: time.Now().Add(-time.Second)}); !errors.Is(err, ErrBadRequest) {
		t.Fatalf("expired at send: %v", err)
	}
}

// TestHubC2DResumeOnAnotherNode: a message for an offline device whose
// session is stored in the cluster reaches it when it reconnects to
// another node (the session's replay from the log).
func TestHubC2DResumeOnAnotherNode(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c)
	dev := createDevice(t, a, "valve")
	id := Identity{DeviceID: "valve"}
	key := dev.Authentication.SymmetricKey.PrimaryKey
	d := dialDevice(t, a.addr, id, deviceToken(t, id, key, time.Hour))
	d.subscribe("devices/valve/messages/devicebound/#")
	d.Send(&packets.Disconnect{})
	d.Closed()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := a.hub.SendC2D(ctx, &C2DMessage{DeviceID: "valve", Body: []byte("close")}); err != nil {
		t.Fatal(err)
	}
	d2 := dialDevice(t, b.addr, id, deviceToken(t, id, key, time.Hour))
	if p := d2.expect(); string(p.Payload) != "close" {
		t.Fatalf("got %s %q", p.Topic, p.Payload)
	}
}

// TestHubC2DBeforeFirstConnect: cloud-to-device messages for registered
// devices that have never connected (so no MQTT session holds them) wait
// for their first connect, on another node, without the device
// subscribing again: one sent through the hub to a device created in the
// registry, and one produced straight to the egress topic (as `smartgo
// admin device send` and back ends do) to a device created through the
// HTTPS API.
func TestHubC2DBeforeFirstConnect(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c, withHTTPS(t))
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	dev := createDevice(t, a, "pump")
	if err := b.hub.SendC2D(ctx, &C2DMessage{DeviceID: "pump", Body: []byte("prime"), MessageID: "p-1"}); err != nil {
		t.Fatal(err)
	}
	if err := b.hub.SendC2D(ctx, &C2DMessage{DeviceID: "pump", Body: []byte("start")}); err != nil {
		t.Fatal(err)
	}
	id := Identity{DeviceID: "pump"}
	d := dialDevice(t, a.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	first, second := d.expect(), d.expect()
	if string(first.Payload) != "prime" || c2dProps(t, first.Topic)["$.mid"] != "p-1" || string(second.Payload) != "start" {
		t.Fatalf("first connect got %s %q, %s %q", first.Topic, first.Payload, second.Topic, second.Payload)
	}
	d.nothing(300 * time.Millisecond)

	st, _, body := newAPI(t, b, "owner").do("PUT", "/devices/fan?api-version=2021-04-12", []byte(`{"deviceId":"fan"}`), nil)
	if st != 200 {
		t.Fatalf("PUT /devices/fan: %d %s", st, body)
	}
	var created twincli.Device
	if err := json.Unmarshal(body, &created); err != nil {
		t.Fatal(err)
	}
	msg := &C2DMessage{DeviceID: "fan", Body: []byte("spin"), MessageID: "f-1"}
	if err := PrepareC2D(msg, DefaultC2DMaxSize, time.Hour, time.Hour, time.Now()); err != nil {
		t.Fatal(err)
	}
	cm, err := bridge.EncodeMessage(msg.MQTT(msg.Expiry), bridge.DefaultEgressTopic)
	if err != nil {
		t.Fatal(err)
	}
	prod, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: c.RegistryAddrs()}})
	if err != nil {
		t.Fatal(err)
	}
	defer prod.Close()
	if _, err := prod.SendOrderly(ctx, cm, "fan", client.HashSelector); err != nil {
		t.Fatal(err)
	}
	fid := Identity{DeviceID: "fan"}
	f := dialDevice(t, a.addr, fid, deviceToken(t, fid, created.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	if p := f.expect(); string(p.Payload) != "spin" || c2dProps(t, p.Topic)["$.mid"] != "f-1" {
		t.Fatalf("first connect got %s %q", p.Topic, p.Payload)
	}
}

// TestHubTelemetry: device and module telemetry reach the events topic
// with the property bag as broker properties.
func TestHubTelemetry(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startNode(t, c)
	dev := createDevice(t, n, "meter")
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	mod, err := n.hub.Twins().CreateModule(ctx, &twincli.Module{DeviceID: "meter", ModuleID: "adc"})
	if err != nil {
		t.Fatal(err)
	}
	id, mid := Identity{DeviceID: "meter"}, Identity{DeviceID: "meter", ModuleID: "adc"}
	d := dialDevice(t, n.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	m := dialDevice(t, n.addr, mid, deviceToken(t, mid, mod.Authentication.SymmetricKey.PrimaryKey, time.Hour))
	d.publish1(1, "devices/meter/messages/events/%24.mid=42&%24.ct=application%2Fjson&unit=kWh", []byte(`{"v":1}`))
	m.publish1(1, "devices/meter/modules/adc/messages/events/%24.on=raw&ch=3/", []byte("raw"))
	pc := pullAll(t, c, DefaultEventsTopic)
	var msgs []map[string]string
	bodies := map[string]string{}
	for len(msgs) < 2 {
		got, err := pc.Poll(ctx)
		if err != nil {
			t.Fatal(err)
		}
		for _, x := range got {
			msgs = append(msgs, x.Properties)
			bodies[x.Properties[PropDeviceID]+"/"+x.Properties[PropModuleID]] = string(x.Body)
		}
	}
	for _, p := range msgs {
		switch p[PropModuleID] {
		case "":
			if p["message-id"] != "42" || p["content-type"] != "application/json" || p["unit"] != "kWh" || p[PropDeviceID] != "meter" {
				t.Errorf("device telemetry %v", p)
			}
		case "adc":
			if p["iothub-outputname"] != "raw" || p["ch"] != "3" || p[PropMessageSource] != "Telemetry" {
				t.Errorf("module telemetry %v", p)
			}
		}
	}
	if bodies["meter/"] != `{"v":1}` || bodies["meter/adc"] != "raw" {
		t.Fatalf("bodies %v", bodies)
	}
	// A bag that does not decode: the device's connection is closed
	// (3.1.1 has no negative PUBACK) and nothing is stored.
	d.Send(&packets.Publish{Topic: "devices/meter/messages/events/a=%zz", Payload: []byte("x"), QoS: 1, PacketID: 7})
	d.Closed()
}

// TestHubC2DNotForAReplacedIdentity: a device identity deleted and
// created again with the same id is a new device (IoT Hub drops the old
// identity's queue): the cloud-to-device messages queued for the old
// one's offline session are not delivered to the new one, whose first
// connect gets only what was sent to it, whichever node held the old
// session. They were before: the new device resumed the old session. The
// old identity's session is one its connection left, or (never) the one
// the hub prepared for it, never connected (tagged with its generation
// id, which the new identity's differs from); or one a client with the
// device's id left that had no user name (replacedWithoutUserName).
func TestHubC2DNotForAReplacedIdentity(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, tc := range []struct {
		name              string
		holder, creator   *node
		sender, reconnect *node
		never             bool // the old identity never connected
	}{
		{"one node", a, a, a, a, false},
		{"created on another node", a, b, b, b, false},
		{"reconnecting to the holder", a, b, b, a, false},
		{"never connected", a, a, a, a, true},
		{"never connected, created again elsewhere", a, b, b, a, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devID := strings.NewReplacer(" ", "-", ",", "").Replace(tc.name)
			id := Identity{DeviceID: devID}
			dev := createDevice(t, tc.holder, devID)
			oldGen := dev.GenerationID
			if !tc.never {
				d := dialDevice(t, tc.holder.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
				d.subscribe("devices/" + devID + "/messages/devicebound/#")
				d.Send(&packets.Disconnect{})
				d.Closed()
				waitFor(t, 10*time.Second, "the disconnect recorded", func() bool {
					got, err := tc.holder.hub.Twins().GetDevice(ctx, devID)
					return err == nil && got.ConnectionState == "Disconnected" && !strings.HasPrefix(got.ConnectionStateUpdatedTime, "0001")
				})
			}
			if err := tc.sender.hub.SendC2D(ctx, &C2DMessage{DeviceID: devID, Body: []byte("for the old device")}); err != nil {
				t.Fatal(err)
			}
			if err := tc.creator.hub.Twins().DeleteDevice(ctx, devID, "*"); err != nil {
				t.Fatal(err)
			}
			dev = createDevice(t, tc.creator, devID)
			if dev.GenerationID == "" || dev.GenerationID == oldGen {
				t.Fatalf("generation ids %q then %q", oldGen, dev.GenerationID)
			}
			if err := tc.sender.hub.SendC2D(ctx, &C2DMessage{DeviceID: devID, Body: []byte("for the new device")}); err != nil {
				t.Fatal(err)
			}
			// The node holding the old session drops it once its tail has
			// read the creator's records (it kept it before: the check
			// below says what the new device got then).
			for end := time.Now().Add(10 * time.Second); tc.holder.br.Server().SessionInstance(devID) != 0 && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
			d := dialDevice(t, tc.reconnect.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
			if p := d.expect(); string(p.Payload) != "for the new device" {
				t.Fatalf("the new device got %q", p.Payload)
			}
			d.nothing(300 * time.Millisecond)
		})
	}
	replacedWithoutUserName(t, ctx, c, a, b)
}

// replacedWithoutUserName is TestHubC2DNotForAReplacedIdentity for a
// client with a device's id that connected without a user name (left to
// the server's own rules, as on a bridge that lets anonymous clients in)
// and holds a session with the device's cloud-to-device subscription.
// Once the identity is deleted and created again, the new device must
// not resume it: its session records name the generation of the identity
// they were written for. It used to be kept whenever the connection had
// no user name (its record could not be told from an earlier version's
// prepared one), and, had it one, whenever it ended after the new
// identity's creation by the node's clock (the cases "left after").
func replacedWithoutUserName(t *testing.T, ctx context.Context, c *testCluster, a, b *node) {
	adm := adminClient(t, c)
	for _, tc := range []struct {
		name      string
		leftLater bool // the old connection ends after the identity was created again
		creator   *node
	}{
		{"left before the delete", false, a},
		{"left after the new identity was created", true, a},
		{"left after, created on another node", true, b},
	} {
		t.Run("no user name, "+tc.name, func(t *testing.T) {
			devID := "anon-" + strings.NewReplacer(" ", "-", ",", "").Replace(tc.name)
			id := Identity{DeviceID: devID}
			createDevice(t, a, devID)
			old := dialDeviceCP(t, a.addr, id, &packets.Connect{ClientID: devID, KeepAlive: 60})
			old.subscribe("devices/" + devID + "/messages/devicebound/#")
			leave := func() {
				old.Send(&packets.Disconnect{})
				old.Closed()
				// Its node has its offline record (a prepare there sees
				// the session it left, not the connection's).
				waitOffline(t, ctx, adm, a, devID)
			}
			if !tc.leftLater {
				leave()
			}
			if err := a.hub.SendC2D(ctx, &C2DMessage{DeviceID: devID, Body: []byte("for the old device")}); err != nil {
				t.Fatal(err)
			}
			if tc.leftLater {
				// Received, not acknowledged: it stays in the session.
				if p := old.Recv(); p == nil {
					t.Fatal("no message for the old device")
				}
			}
			if err := tc.creator.hub.Twins().DeleteDevice(ctx, devID, "*"); err != nil {
				t.Fatal(err)
			}
			dev := createDevice(t, tc.creator, devID)
			if tc.leftLater {
				leave()
			}
			// Sent through the node the client left, whose records it
			// reads at once (another node's tail may still see it online,
			// and then queues the message in its session).
			if err := a.hub.SendC2D(ctx, &C2DMessage{DeviceID: devID, Body: []byte("for the new device")}); err != nil {
				t.Fatal(err)
			}
			for end := time.Now().Add(10 * time.Second); a.br.Server().SessionInstance(devID) != 0 && time.Now().Before(end); {
				time.Sleep(10 * time.Millisecond)
			}
			d := dialDevice(t, tc.creator.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
			if p := d.expect(); string(p.Payload) != "for the new device" {
				t.Fatalf("the new device got %q", p.Payload)
			}
			d.nothing(300 * time.Millisecond)
		})
	}
}

// TestHubC2DQueuedInAReplacedIdentitysSession: a cloud-to-device message
// queued in the session of a connection of an earlier identity of the
// device id (sent while that connection was online, so no prepare could
// replace the session; here received and not acknowledged, as it also is
// when a node still sees the connection online) must not reach the new
// identity's device when it connects elsewhere: the session's records
// name the old identity's generation, and LoadSession does not resume a
// session of another owner than the connecting identity; nor does a
// node that holds the session offline in memory (mqtt.OwnerTagger) when
// the new device connects there. The new device starts a session of its
// own (session present 0), which gets what is sent to it.
func TestHubC2DQueuedInAReplacedIdentitysSession(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	adm := adminClient(t, c)
	for _, tc := range []struct {
		name     string
		userName bool // the old connection authenticated as the old identity
		sameNode bool // the new device connects where the old session is held in memory
	}{
		{"device", true, false},
		{"no user name", false, false},
		{"device same node", true, true},
		{"no user name same node", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devID := "queued-" + strings.ReplaceAll(tc.name, " ", "-")
			id := Identity{DeviceID: devID}
			dev := createDevice(t, a, devID)
			cp := &packets.Connect{ClientID: devID, KeepAlive: 60}
			if tc.userName {
				cp = connectCP(id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
			}
			old := dialDeviceCP(t, a.addr, id, cp)
			old.subscribe("devices/" + devID + "/messages/devicebound/#")
			if err := a.hub.SendC2D(ctx, &C2DMessage{DeviceID: devID, Body: []byte("for the old device")}); err != nil {
				t.Fatal(err)
			}
			// Received, not acknowledged: it stays in the session.
			if p := old.Recv(); p == nil {
				t.Fatal("no message for the old device")
			}
			if err := a.hub.Twins().DeleteDevice(ctx, devID, "*"); err != nil {
				t.Fatal(err)
			}
			dev = createDevice(t, a, devID)
			old.Send(&packets.Disconnect{})
			old.Closed()
			if tc.userName {
				// The hub closed the old device's connection (its identity
				// deleted) and, when the registry still said so once it
				// ended, ended the session it left.
				waitOfflineOrEnded(t, ctx, adm, a, devID)
			} else {
				waitOffline(t, ctx, adm, a, devID)
			}
			// No send since: nothing replaced the old session. The new
			// device connects on the other node, which loads it, or on
			// this one, which holds it offline in memory.
			at := b
			if tc.sameNode {
				at = a
			}
			nc := mqtttest.Dial(t, at.addr, packets.Version311)
			nc.RecvTimeout = 10 * time.Second
			if ack := nc.Connect(connectCP(id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))); ack.ReasonCode != 0 || ack.SessionPresent && !tc.userName {
				// The old device's connection was revoked when its identity
				// was deleted: the new one's creation may have prepared it
				// a session (present 1) in place of the old one's.
				t.Fatalf("the new device's CONNACK: %v, session present %v", ack.ReasonCode, ack.SessionPresent)
			}
			d := &device{Conn: nc, t: t, id: id}
			if p, err := d.Next(500 * time.Millisecond); err == nil {
				t.Fatalf("the new device got %T %+v", p, p)
			}
			d.subscribe("devices/" + devID + "/messages/devicebound/#")
			if err := at.hub.SendC2D(ctx, &C2DMessage{DeviceID: devID, Body: []byte("for the new device")}); err != nil {
				t.Fatal(err)
			}
			if p := d.expect(); string(p.Payload) != "for the new device" {
				t.Fatalf("the new device got %q", p.Payload)
			}
			d.nothing(300 * time.Millisecond)
		})
	}
}

// adminClient is an admin client of c's cluster for waitOffline.
func adminClient(t *testing.T, c *testCluster) *admin.Admin {
	t.Helper()
	adm, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { adm.Close() })
	return adm
}

// waitOfflineOrEnded is waitOffline where the session may have ended.
func waitOfflineOrEnded(t *testing.T, ctx context.Context, adm *admin.Admin, n *node, devID string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the offline session recorded or ended", func() bool {
		p, err := adm.MQTTSessions(ctx, n.br.Backend().NodeID(), admin.MQTTQuery{Prefix: devID})
		return err == nil && (len(p.Items) == 0 || len(p.Items) == 1 && p.Items[0].ClientID == devID && !p.Items[0].Online)
	})
}

// waitOffline waits until node n reports devID's session offline (its
// offline record written: a prepare there sees the session it left, not
// the connection's).
func waitOffline(t *testing.T, ctx context.Context, adm *admin.Admin, n *node, devID string) {
	t.Helper()
	waitFor(t, 10*time.Second, "the offline session recorded", func() bool {
		p, err := adm.MQTTSessions(ctx, n.br.Backend().NodeID(), admin.MQTTQuery{Prefix: devID})
		return err == nil && len(p.Items) == 1 && p.Items[0].ClientID == devID && !p.Items[0].Online
	})
}
