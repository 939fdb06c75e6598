package iothub

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/client/admin"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/mqtt"
)

// pahoDevice is a device connected with paho.golang (MQTT 5): a
// persistent session (clean start 0, session expiry an hour), as the
// device SDKs keep one, client id = device id.
type pahoDevice struct {
	pc      *paho.Client
	got     chan *paho.Publish
	present bool // the CONNACK's session present
}

// dialPaho connects a device to addr with password (a SAS token, or ""
// in AuthNone mode) and requires CONNACK 0.
func dialPaho(t *testing.T, ctx context.Context, addr string, id Identity, password string) *pahoDevice {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	d := &pahoDevice{got: make(chan *paho.Publish, 16)}
	d.pc = paho.NewClient(paho.ClientConfig{ClientID: id.ClientID(), Conn: nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) { d.got <- pr.Packet; return true, nil }}})
	expiry := uint32(3600)
	cp := &paho.Connect{ClientID: id.ClientID(), KeepAlive: 60, CleanStart: false,
		UsernameFlag: true, Username: testHost + "/" + id.ClientID() + "/?api-version=2021-04-12",
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}
	if password != "" {
		cp.PasswordFlag, cp.Password = true, []byte(password)
	}
	ack, err := d.pc.Connect(ctx, cp)
	if err != nil || ack.ReasonCode != 0 {
		t.Fatalf("%s: connect: %v %+v", id, err, ack)
	}
	d.present = ack.SessionPresent
	t.Cleanup(func() { _ = d.pc.Disconnect(&paho.Disconnect{}) })
	return d
}

// nothingFor requires that no message arrives within dur.
func (d *pahoDevice) nothingFor(t *testing.T, dur time.Duration) {
	t.Helper()
	select {
	case p := <-d.got:
		t.Fatalf("got %s %q", p.Topic, p.Payload)
	case <-time.After(dur):
	}
}

// next returns the next message (10s at most).
func (d *pahoDevice) next(t *testing.T) *paho.Publish {
	t.Helper()
	select {
	case p := <-d.got:
		return p
	case <-time.After(10 * time.Second):
		t.Fatal("no message")
		return nil
	}
}

// noSession waits until every node in ns reports no session of clientID
// and holds none.
func noSession(t *testing.T, ctx context.Context, adm *admin.Admin, clientID string, ns ...*node) {
	t.Helper()
	for _, n := range ns {
		waitFor(t, 15*time.Second, "no session of "+clientID+" on "+n.br.Backend().NodeID(), func() bool {
			if n.br.Server().SessionInstance(clientID) != 0 {
				return false
			}
			p, err := adm.MQTTSessions(ctx, n.br.Backend().NodeID(), admin.MQTTQuery{Prefix: clientID})
			if err != nil {
				return false
			}
			for _, s := range p.Items {
				if s.ClientID == clientID {
					return false
				}
			}
			return true
		})
	}
}

// TestHubDeletedIdentitySessionEnds: deleting a device identity through
// the REST API ends its persistent MQTT session at once on every node,
// with the cloud-to-device messages queued in it, as IoT Hub drops a
// deleted identity's queue: whether the device was offline (its session
// held by another node than the one serving the delete) or connected
// (the hub closes the connection and then ends the session it left).
// The same through a bulk delete, and for the modules of a deleted
// device. The device of an identity created again with fresh keys gets none of
// the old messages, only its own. In development mode (no device
// authentication, the identity registered at connect) a device of the
// same id reconnecting with clean session 0 finds no session (CONNACK
// session present 0) and none of the old messages. Before, the offline
// session stayed until it expired (or, for a SAS device, until an
// identity of the same id was created).
func TestHubDeletedIdentitySessionEnds(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c, withHTTPS(t))
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := adminClient(t, c)
	rest := newAPI(t, b, "owner")
	for _, tc := range []struct {
		name      string
		connected bool // connected when the identity is deleted
		bulk      bool // deleted by a bulk import (POST /devices)
	}{
		{"offline", false, false},
		{"connected", true, false},
		{"offline bulk", false, true},
	} {
		t.Run(tc.name, func(t *testing.T) {
			devID := "deleted-" + strings.ReplaceAll(tc.name, " ", "-")
			t.Cleanup(func() {
				if t.Failed() {
					for _, n := range []*node{a, b} {
						for _, l := range strings.Split(n.logs.String(), "\n") {
							if strings.Contains(l, devID) {
								t.Logf("%s: %s", n.br.Backend().NodeID(), l)
							}
						}
					}
				}
			})
			id := Identity{DeviceID: devID}
			dev := createDevice(t, a, devID)
			d := dialPaho(t, ctx, a.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
			if _, err := d.pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
				{Topic: "devices/" + devID + "/messages/devicebound/#", QoS: 1}}}); err != nil {
				t.Fatal(err)
			}
			if !tc.connected {
				if err := d.pc.Disconnect(&paho.Disconnect{}); err != nil {
					t.Fatal(err)
				}
				waitOffline(t, ctx, adm, a, devID)
				if err := a.hub.SendC2D(ctx, &C2DMessage{DeviceID: devID, Body: []byte("for the old device")}); err != nil {
					t.Fatal(err)
				}
			}
			if tc.bulk {
				body := []byte(`[{"id":"` + devID + `","importMode":"delete"}]`)
				if st, _, body := rest.do("POST", "/devices?api-version=2021-04-12", body, nil); st != 200 {
					t.Fatalf("bulk delete: %d %s", st, body)
				}
			} else if st, _, body := rest.do("DELETE", "/devices/"+devID+"?api-version=2021-04-12", nil, map[string]string{"If-Match": "*"}); st != 204 {
				t.Fatalf("DELETE: %d %s", st, body)
			}
			if tc.connected {
				select {
				case <-d.pc.Done():
				case <-ctx.Done():
					t.Fatal("the deleted identity's connection is still open")
				}
			}
			if tc.connected {
				// The node serving the delete ended it; the holder may keep
				// reading the record the closed connection left, stored
				// after that end, as an offline session (not fixed yet,
				// docs/durability.md), but holds none.
				noSession(t, ctx, adm, devID, b)
				waitFor(t, 15*time.Second, "the holder drops the session", func() bool { return a.br.Server().SessionInstance(devID) == 0 })
			} else {
				noSession(t, ctx, adm, devID, a, b)
			}

			st, _, body := rest.do("PUT", "/devices/"+devID+"?api-version=2021-04-12", []byte(`{"deviceId":"`+devID+`"}`), nil)
			if st != 200 {
				t.Fatalf("PUT: %d %s", st, body)
			}
			var created twincli.Device
			if err := json.Unmarshal(body, &created); err != nil {
				t.Fatal(err)
			}
			if created.Authentication.SymmetricKey.PrimaryKey == dev.Authentication.SymmetricKey.PrimaryKey {
				t.Fatal("the identity created again has the old key")
			}
			nd := dialPaho(t, ctx, a.addr, id, deviceToken(t, id, created.Authentication.SymmetricKey.PrimaryKey, time.Hour))
			nd.nothingFor(t, 500*time.Millisecond)
			// As the SDKs do on connect (its prepared session may hold it).
			if _, err := nd.pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
				{Topic: "devices/" + devID + "/messages/devicebound/#", QoS: 1}}}); err != nil {
				t.Fatal(err)
			}
			if err := b.hub.SendC2D(ctx, &C2DMessage{DeviceID: devID, Body: []byte("for the new device")}); err != nil {
				t.Fatal(err)
			}
			if p := nd.next(t); string(p.Payload) != "for the new device" {
				t.Fatalf("the new device got %s %q", p.Topic, p.Payload)
			}
			nd.nothingFor(t, 300*time.Millisecond)
		})
	}

	t.Run("module", func(t *testing.T) {
		// Deleting a device takes its modules with it: their sessions end
		// too.
		createDevice(t, a, "deleted-gateway")
		m, err := a.hub.Twins().CreateModule(ctx, &twincli.Module{DeviceID: "deleted-gateway", ModuleID: "filter"})
		if err != nil {
			t.Fatal(err)
		}
		id := Identity{DeviceID: "deleted-gateway", ModuleID: "filter"}
		d := dialPaho(t, ctx, a.addr, id, deviceToken(t, id, m.Authentication.SymmetricKey.PrimaryKey, time.Hour))
		if err := d.pc.Disconnect(&paho.Disconnect{}); err != nil {
			t.Fatal(err)
		}
		waitOffline(t, ctx, adm, a, id.ClientID())
		if st, _, body := rest.do("DELETE", "/devices/deleted-gateway?api-version=2021-04-12", nil, map[string]string{"If-Match": "*"}); st != 204 {
			t.Fatalf("DELETE: %d %s", st, body)
		}
		noSession(t, ctx, adm, id.ClientID(), a, b)
	})

	t.Run("development mode", func(t *testing.T) {
		devMode := func(_ *mqtt.Options, _ *bridge.Options, o *Options) { o.DeviceAuth = AuthNone }
		x, y := startNode(t, c, devMode), startNode(t, c, devMode, withHTTPS(t))
		rest := newAPI(t, y, "owner")
		id := Identity{DeviceID: "deleted-dev-mode"}
		d := dialPaho(t, ctx, x.addr, id, "")
		if _, err := d.pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
			{Topic: "devices/" + id.DeviceID + "/messages/devicebound/#", QoS: 1}}}); err != nil {
			t.Fatal(err)
		}
		waitFor(t, 10*time.Second, "the device registered", func() bool {
			_, err := x.hub.Twins().GetDevice(ctx, id.DeviceID)
			return err == nil
		})
		if err := d.pc.Disconnect(&paho.Disconnect{}); err != nil {
			t.Fatal(err)
		}
		waitOffline(t, ctx, adm, x, id.DeviceID)
		if err := x.hub.SendC2D(ctx, &C2DMessage{DeviceID: id.DeviceID, Body: []byte("for the old device")}); err != nil {
			t.Fatal(err)
		}
		if st, _, body := rest.do("DELETE", "/devices/"+id.DeviceID+"?api-version=2021-04-12", nil, map[string]string{"If-Match": "*"}); st != 204 {
			t.Fatalf("DELETE: %d %s", st, body)
		}
		noSession(t, ctx, adm, id.DeviceID, x, y)
		nd := dialPaho(t, ctx, x.addr, id, "")
		if nd.present {
			t.Fatal("the device found the deleted identity's session (session present 1)")
		}
		nd.nothingFor(t, 500*time.Millisecond)
	})
}
