package bridge

import (
	"context"
	"errors"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
)

// pahoClient connects a paho.golang client with a session expiry; it
// returns the client and a channel closed when the server disconnects it,
// carrying the DISCONNECT reason code.
func pahoClient(t *testing.T, ctx context.Context, addr, id string, keepAlive uint16) (*paho.Client, chan byte) {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan byte, 1)
	pc := paho.NewClient(paho.ClientConfig{ClientID: id, Conn: nc,
		OnServerDisconnect: func(d *paho.Disconnect) { gone <- d.ReasonCode }})
	expiry := uint32(3600)
	if ack, err := pc.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: keepAlive,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("connect %s: %v %+v", id, err, ack)
	}
	return pc, gone
}

// TestBridgeAdminCalls: through a registry, an admin client lists the
// node (with its connection count), its connected clients (version, keep
// alive, subscriptions), the cluster's sessions including an offline one,
// the retained messages, pages them, and disconnects a client, which gets
// DISCONNECT 0x98 and leaves the list.
func TestBridgeAdminCalls(t *testing.T) {
	c := startCluster(t)
	b := startBridge(t, c, func(_ *mqtt.Options, o *Options) { o.HeartbeatInterval = 200 * time.Millisecond; o.Version = "test-v" })
	a, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()

	var clients []*paho.Client
	var gone []chan byte
	for i := range 3 {
		pc, g := pahoClient(t, ctx, addrOf(b), fmt.Sprintf("dev-%d", i), uint16(30+i))
		defer pc.Disconnect(&paho.Disconnect{})
		if _, err := pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: fmt.Sprintf("cmd/%d/#", i), QoS: 1}}}); err != nil {
			t.Fatal(err)
		}
		clients, gone = append(clients, pc), append(gone, g)
	}
	if _, err := clients[0].Publish(ctx, &paho.Publish{Topic: "state/lamp", QoS: 1, Retain: true, Payload: []byte("on")}); err != nil {
		t.Fatal(err)
	}
	offline, _ := pahoClient(t, ctx, addrOf(b), "sleeper", 60)
	if _, err := offline.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "wake/#", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	_ = offline.Disconnect(&paho.Disconnect{})

	node := b.Backend().NodeID()
	testutil.WaitFor(t, 10*time.Second, "node listed with 3 connections", func() bool {
		bs, err := a.Bridges(ctx)
		return err == nil && len(bs) == 1 && bs[0].Node == node && bs[0].Connections == 3 && bs[0].Version == "test-v" &&
			len(bs[0].Addrs) == 1 && bs[0].ClusterSessions == 4 && bs[0].Retained == 1
	})
	if err := b.Ready(); err != nil {
		t.Fatalf("registered node not ready: %v", err)
	}

	cp, err := a.MQTTClients(ctx, node, admin.MQTTQuery{})
	if err != nil {
		t.Fatal(err)
	}
	if cp.Total != 3 || len(cp.Items) != 3 {
		t.Fatalf("clients: %+v", cp)
	}
	c1 := cp.Items[1]
	if c1.ClientID != "dev-1" || c1.Node != node || c1.Version != 5 || c1.KeepAliveSecs != 31 || c1.RemoteAddr == "" ||
		len(c1.Subscriptions) != 1 || c1.Subscriptions[0].Filter != "cmd/1/#" || c1.Subscriptions[0].QoS != 1 {
		t.Fatalf("client dev-1: %+v", c1)
	}
	// Paging: two per page, then the rest.
	p1, err := a.MQTTClients(ctx, node, admin.MQTTQuery{Prefix: "dev-", Limit: 2})
	if err != nil || len(p1.Items) != 2 || p1.Next != "dev-1" || p1.Total != 3 {
		t.Fatalf("page 1: %+v %v", p1, err)
	}
	p2, err := a.MQTTClients(ctx, node, admin.MQTTQuery{Prefix: "dev-", After: p1.Next, Limit: 2})
	if err != nil || len(p2.Items) != 1 || p2.Items[0].ClientID != "dev-2" || p2.Next != "" {
		t.Fatalf("page 2: %+v %v", p2, err)
	}

	// The sleeper's connection count drops when its socket closes; its
	// session is saved offline just after.
	var sp *admin.MQTTSessionPage
	var sleeper *admin.MQTTSession
	testutil.WaitFor(t, 10*time.Second, "the sleeper's session offline", func() bool {
		var err error
		if sp, err = a.MQTTSessions(ctx, node, admin.MQTTQuery{}); err != nil {
			t.Fatal(err)
		}
		sleeper = nil
		for i := range sp.Items {
			if sp.Items[i].ClientID == "sleeper" {
				sleeper = &sp.Items[i]
			}
		}
		return sleeper != nil && !sleeper.Online
	})
	if sp.Total != 4 || sleeper == nil || sleeper.Online || sleeper.DisconnectedAt == 0 || sleeper.ExpirySecs != 3600 ||
		len(sleeper.Subscriptions) != 1 || sleeper.Subscriptions[0].Filter != "wake/#" {
		t.Fatalf("sessions: %+v", sp)
	}

	rp, err := a.MQTTRetained(ctx, node, admin.MQTTQuery{Prefix: "state/"})
	if err != nil || rp.Total != 1 || rp.Items[0].Topic != "state/lamp" || string(rp.Items[0].Payload) != "on" || rp.Items[0].QoS != 1 {
		t.Fatalf("retained: %+v %v", rp, err)
	}

	// Bad requests.
	if _, err := a.MQTTClients(ctx, node, admin.MQTTQuery{Limit: admin.MaxMQTTLimit + 1}); !errors.Is(err, client.ErrBadOptions) {
		t.Fatalf("huge limit: %v", err)
	}
	if _, err := a.MQTTClients(ctx, "no-such-node", admin.MQTTQuery{}); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("unknown node: %v", err)
	}
	if _, err := a.DisconnectMQTTClient(ctx, "", "nobody"); !errors.Is(err, client.ErrNotFound) {
		t.Fatalf("disconnect of an unknown client: %v", err)
	}

	// Disconnect dev-1 from whichever node has it.
	if n, err := a.DisconnectMQTTClient(ctx, "", "dev-1"); err != nil || n != node {
		t.Fatalf("disconnect: %q %v", n, err)
	}
	select {
	case code := <-gone[1]:
		if code != 0x98 {
			t.Fatalf("DISCONNECT reason %#x, want 0x98", code)
		}
	case <-ctx.Done():
		t.Fatal("client got no DISCONNECT")
	}
	testutil.WaitFor(t, 5*time.Second, "dev-1 gone", func() bool {
		p, err := a.MQTTClients(ctx, node, admin.MQTTQuery{})
		if err != nil || p.Total != 2 {
			return false
		}
		for _, c := range p.Items {
			if c.ClientID == "dev-1" {
				return false
			}
		}
		return true
	})
}

// TestBridgeLeavesRegistriesOnClose: a closed node is gone from the
// registries' list at once.
func TestBridgeLeavesRegistriesOnClose(t *testing.T) {
	c := startCluster(t)
	b := startBridge(t, c, nil)
	a, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	testutil.WaitFor(t, 10*time.Second, "node listed", func() bool { bs, err := a.Bridges(ctx); return err == nil && len(bs) == 1 })
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	if bs, err := a.Bridges(ctx); err != nil || len(bs) != 0 {
		t.Fatalf("after close: %+v %v", bs, err)
	}
}
