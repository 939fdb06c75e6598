package iothub

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/bridge"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/mqtt"
)

// TestHubTwinClientDeletedIdentitySessionEnds: an identity deleted
// through the state store's twin client directly (as `smartgo admin
// device delete` does: no hub node serves the delete, none ends the
// session) leaves no session to resume either. Its device, offline with
// cloud-to-device messages queued in its persistent session, connects
// again with clean session 0 once the identity is created again with new
// keys, through a create that prepared nothing (NoPrepareC2D: as when
// the relay to a hub node fails), to the node holding the session or to
// another: CONNACK session present 0, none of the old messages, and the
// new identity's own messages arrive. In development mode (no identity
// created again: the connect registers it) the same. Before, the device
// resumed the deleted identity's session and received its messages. A
// module deleted and created again (registry mode), or deleted
// (development mode), resumes nothing of the old module's either.
func TestHubTwinClientDeletedIdentitySessionEnds(t *testing.T) {
	c := startTestCluster(t, 1)
	a, b := startNode(t, c), startNode(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	adm := adminClient(t, c)
	tc, err := twincli.New(twincli.Options{Registries: c.RegistryAddrs(), NoPrepareC2D: true})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = tc.Close() })
	sub := func(t *testing.T, d *pahoDevice, devID string) {
		t.Helper()
		if _, err := d.pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
			{Topic: "devices/" + devID + "/messages/devicebound/#", QoS: 1}}}); err != nil {
			t.Fatal(err)
		}
	}
	// offline leaves devID's session offline on n with a message queued.
	offline := func(t *testing.T, n *node, d *pahoDevice, devID string) {
		t.Helper()
		sub(t, d, devID)
		if err := d.pc.Disconnect(&paho.Disconnect{}); err != nil {
			t.Fatal(err)
		}
		waitOffline(t, ctx, adm, n, devID)
		if err := n.hub.SendC2D(ctx, &C2DMessage{DeviceID: devID, Body: []byte("for the old device")}); err != nil {
			t.Fatal(err)
		}
	}
	// fresh requires that d resumed nothing and gets its own messages.
	fresh := func(t *testing.T, d *pahoDevice, n *node, devID string) {
		t.Helper()
		if d.present {
			t.Fatal("the device found the deleted identity's session (session present 1)")
		}
		d.nothingFor(t, 500*time.Millisecond)
		sub(t, d, devID)
		if err := n.hub.SendC2D(ctx, &C2DMessage{DeviceID: devID, Body: []byte("for the new device")}); err != nil {
			t.Fatal(err)
		}
		if p := d.next(t); string(p.Payload) != "for the new device" {
			t.Fatalf("the new device got %s %q", p.Topic, p.Payload)
		}
		d.nothingFor(t, 300*time.Millisecond)
	}

	for _, to := range []string{"same node", "other node"} {
		t.Run(to, func(t *testing.T) {
			devID := "twin-deleted-" + map[string]string{"same node": "same", "other node": "other"}[to]
			id := Identity{DeviceID: devID}
			dev, err := tc.CreateDevice(ctx, &twincli.Device{DeviceID: devID})
			if err != nil {
				t.Fatal(err)
			}
			d := dialPaho(t, ctx, a.addr, id, deviceToken(t, id, dev.Authentication.SymmetricKey.PrimaryKey, time.Hour))
			offline(t, a, d, devID)
			if err := tc.DeleteDevice(ctx, devID, "*"); err != nil {
				t.Fatal(err)
			}
			created, err := tc.CreateDevice(ctx, &twincli.Device{DeviceID: devID})
			if err != nil {
				t.Fatal(err)
			}
			if created.GenerationID == dev.GenerationID {
				t.Fatal("the identity created again has the old generation id")
			}
			n := a
			if to == "other node" {
				n = b
			}
			nd := dialPaho(t, ctx, n.addr, id, deviceToken(t, id, created.Authentication.SymmetricKey.PrimaryKey, time.Hour))
			fresh(t, nd, b, devID)
		})
	}

	t.Run("module", func(t *testing.T) {
		// A module deleted and created again is a new module: its
		// connect resumes nothing of the old one's.
		if _, err := tc.CreateDevice(ctx, &twincli.Device{DeviceID: "twin-deleted-gateway"}); err != nil {
			t.Fatal(err)
		}
		id := Identity{DeviceID: "twin-deleted-gateway", ModuleID: "filter"}
		m, err := tc.CreateModule(ctx, &twincli.Module{DeviceID: id.DeviceID, ModuleID: id.ModuleID})
		if err != nil {
			t.Fatal(err)
		}
		d := dialPaho(t, ctx, a.addr, id, deviceToken(t, id, m.Authentication.SymmetricKey.PrimaryKey, time.Hour))
		if _, err := d.pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
			{Topic: "devices/" + id.DeviceID + "/modules/" + id.ModuleID + "/inputs/#", QoS: 1}}}); err != nil {
			t.Fatal(err)
		}
		if err := d.pc.Disconnect(&paho.Disconnect{}); err != nil {
			t.Fatal(err)
		}
		waitOffline(t, ctx, adm, a, id.ClientID())
		if err := tc.DeleteModule(ctx, id.DeviceID, id.ModuleID, "*"); err != nil {
			t.Fatal(err)
		}
		m2, err := tc.CreateModule(ctx, &twincli.Module{DeviceID: id.DeviceID, ModuleID: id.ModuleID})
		if err != nil {
			t.Fatal(err)
		}
		for _, n := range []*node{a, b} {
			nd := dialPaho(t, ctx, n.addr, id, deviceToken(t, id, m2.Authentication.SymmetricKey.PrimaryKey, time.Hour))
			if nd.present {
				t.Fatalf("the module found the deleted module's session on %s (session present 1)", n.br.Backend().NodeID())
			}
			// Its own session now: the next connect resumes it.
			if err := nd.pc.Disconnect(&paho.Disconnect{}); err != nil {
				t.Fatal(err)
			}
			waitOffline(t, ctx, adm, n, id.ClientID())
			if n == a {
				// Deleted again, so that b's connect has a deleted
				// module's session to find (the records a's left).
				if err := tc.DeleteModule(ctx, id.DeviceID, id.ModuleID, "*"); err != nil {
					t.Fatal(err)
				}
				if m2, err = tc.CreateModule(ctx, &twincli.Module{DeviceID: id.DeviceID, ModuleID: id.ModuleID}); err != nil {
					t.Fatal(err)
				}
			}
		}
		nd := dialPaho(t, ctx, b.addr, id, deviceToken(t, id, m2.Authentication.SymmetricKey.PrimaryKey, time.Hour))
		if !nd.present {
			t.Fatal("the module did not resume its own session")
		}
	})

	t.Run("development mode", func(t *testing.T) {
		devMode := func(_ *mqtt.Options, _ *bridge.Options, o *Options) { o.DeviceAuth = AuthNone }
		x, y := startNode(t, c, devMode), startNode(t, c, devMode)
		for i, to := range []*node{x, y} {
			devID := fmt.Sprintf("twin-deleted-dev-%d", i)
			id := Identity{DeviceID: devID}
			d := dialPaho(t, ctx, x.addr, id, "")
			// Registered and recorded connected: the generation register
			// notes is the one its records name (a device that leaves
			// before then leaves a session naming none, kept).
			waitFor(t, 10*time.Second, "the device registered", func() bool {
				d, err := tc.GetDevice(ctx, devID)
				return err == nil && d.ConnectionState == "Connected"
			})
			offline(t, x, d, devID)
			if err := tc.DeleteDevice(ctx, devID, "*"); err != nil {
				t.Fatal(err)
			}
			nd := dialPaho(t, ctx, to.addr, id, "")
			fresh(t, nd, y, devID)

			// A module deleted (its device kept) the same.
			mid := Identity{DeviceID: devID, ModuleID: "filter"}
			md := dialPaho(t, ctx, x.addr, mid, "")
			waitFor(t, 10*time.Second, "the module registered", func() bool {
				m, err := tc.GetModule(ctx, mid.DeviceID, mid.ModuleID)
				return err == nil && m.ConnectionState == "Connected"
			})
			if _, err := md.pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{
				{Topic: "devices/" + mid.DeviceID + "/modules/" + mid.ModuleID + "/inputs/#", QoS: 1}}}); err != nil {
				t.Fatal(err)
			}
			if err := md.pc.Disconnect(&paho.Disconnect{}); err != nil {
				t.Fatal(err)
			}
			waitOffline(t, ctx, adm, x, mid.ClientID())
			if err := tc.DeleteModule(ctx, mid.DeviceID, mid.ModuleID, "*"); err != nil {
				t.Fatal(err)
			}
			if nmd := dialPaho(t, ctx, to.addr, mid, ""); nmd.present {
				t.Fatal("the module found the deleted module's session (session present 1)")
			}
		}
	})
}
