package main

import (
	"context"
	"encoding/json"
	"net"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/mqtt"
)

// `admin cluster` lists the bridge node; `admin mqtt ...` lists a paho
// client, its session and a retained message, and disconnects it.
func TestCmdAdminMQTT(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	mo := mqtt.DefaultOptions()
	mo.Listen = []string{"127.0.0.1:0"}
	bo := bridge.DefaultOptions(c.RegistryAddrs()...)
	bo.HeartbeatInterval = 200 * time.Millisecond
	br, err := bridge.New(mo, bo)
	if err != nil {
		t.Fatal(err)
	}
	if err := br.Start(ctx); err != nil {
		t.Fatal(err)
	}
	defer br.Close()

	nc, err := net.Dial("tcp", br.Addrs()[0].String())
	if err != nil {
		t.Fatal(err)
	}
	gone := make(chan *paho.Disconnect, 1)
	pc := paho.NewClient(paho.ClientConfig{ClientID: "cli-dev", Conn: nc, OnServerDisconnect: func(d *paho.Disconnect) { gone <- d }})
	expiry := uint32(600)
	if _, err := pc.Connect(ctx, &paho.Connect{ClientID: "cli-dev", CleanStart: true, KeepAlive: 45,
		Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}}); err != nil {
		t.Fatal(err)
	}
	defer pc.Disconnect(&paho.Disconnect{})
	if _, err := pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "cli/#", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	if _, err := pc.Publish(ctx, &paho.Publish{Topic: "cli/retained", QoS: 1, Retain: true, Payload: []byte("kept")}); err != nil {
		t.Fatal(err)
	}

	reg := strings.Join(c.RegistryAddrs(), ",")
	adm := func(args ...string) (int, string, string) {
		t.Helper()
		return runCmd(t, append([]string{"admin", "-registry", reg}, args...)...)
	}
	node := br.Backend().NodeID()
	// The node shows in both forms once a heartbeat carried the client.
	deadline := time.Now().Add(15 * time.Second)
	for {
		code, out, _ := adm("cluster")
		_, js, _ := adm("-o", "json", "cluster")
		var cl struct {
			Brokers []map[string]any `json:"brokers"`
			Bridges []map[string]any `json:"bridges"`
		}
		err := json.Unmarshal([]byte(js), &cl)
		if code == exitOK && strings.Contains(out, "BRIDGE_NODE") && strings.Contains(out, node) && err == nil &&
			len(cl.Brokers) == 1 && len(cl.Bridges) == 1 && cl.Bridges[0]["connections"] == float64(1) {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("admin cluster never showed node %s with its client: %q %s", node, out, js)
		}
		time.Sleep(50 * time.Millisecond)
	}
	if code, out, errs := adm("mqtt", "clients"); code != exitOK || !strings.Contains(out, "cli-dev") || !strings.Contains(out, "cli/#@1") ||
		!strings.Contains(out, "45s") {
		t.Fatalf("mqtt clients: %d %q %q", code, out, errs)
	}
	if code, out, errs := adm("mqtt", "sessions", "-prefix", "cli-"); code != exitOK || !strings.Contains(out, "cli-dev") {
		t.Fatalf("mqtt sessions: %d %q %q", code, out, errs)
	}
	if code, out, errs := adm("mqtt", "retained"); code != exitOK || !strings.Contains(out, "cli/retained") || !strings.Contains(out, `"kept"`) {
		t.Fatalf("mqtt retained: %d %q %q", code, out, errs)
	}
	// An empty result is an empty JSON array, not null (scripts iterate).
	if code, out, errs := adm("-o", "json", "mqtt", "clients", "-prefix", "nobody-"); code != exitOK || strings.TrimSpace(out) != "[]" {
		t.Fatalf("mqtt clients matching none: %d %q %q", code, out, errs)
	}
	if code, _, errs := adm("mqtt", "clients", "-limit", "100000"); code != exitUsage || !strings.Contains(errs, "-limit") {
		t.Fatalf("huge limit: %d %q", code, errs)
	}
	if code, _, errs := adm("mqtt", "disconnect"); code != exitUsage || !strings.Contains(errs, "-client") {
		t.Fatalf("disconnect without -client: %d %q", code, errs)
	}
	if code, _, errs := adm("mqtt", "disconnect", "-client", "nobody"); code != exitFailure || !strings.Contains(errs, "not connected") {
		t.Fatalf("disconnect of nobody: %d %q", code, errs)
	}
	if code, out, errs := adm("mqtt", "disconnect", "-client", "cli-dev"); code != exitOK || !strings.Contains(out, "disconnected") {
		t.Fatalf("disconnect: %d %q %q", code, out, errs)
	}
	select {
	case d := <-gone:
		if d.ReasonCode != 0x98 {
			t.Fatalf("reason %#x", d.ReasonCode)
		}
	case <-ctx.Done():
		t.Fatal("no DISCONNECT")
	}
}
