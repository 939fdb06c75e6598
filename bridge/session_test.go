package bridge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

func sendCmd(t testing.TB, p *client.Producer, topic, body string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if _, err := p.Send(ctx, &client.Message{Topic: DefaultEgressTopic, Body: []byte(body),
		Properties: map[string]string{PropTopic: topic, PropQoS: "1"}}); err != nil {
		t.Fatal(err)
	}
}

// TestBridgeSessionResumeOtherNode: a persistent session goes offline on
// node A; QoS 1 messages sent meanwhile arrive, in order, when the client
// resumes on node B.
func TestBridgeSessionResumeOtherNode(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	dev, ack := persistent(t, addrOf(a), "roamer", true)
	if ack.SessionPresent {
		t.Fatal("session present on a clean start")
	}
	dev.subscribe(1, sub("cmd/roamer/#", 1))
	dev.disconnect()
	testutil.WaitFor(t, 5*time.Second, "session record on node B", func() bool {
		b.Backend().mu.Lock()
		defer b.Backend().mu.Unlock()
		r := b.Backend().sessions["roamer"]
		return r != nil && !r.Online && len(r.Subscriptions) == 1
	})
	prod := newProducer(t, c)
	const n = 20
	for i := range n {
		sendCmd(t, prod, "cmd/roamer/x", fmt.Sprint(i))
	}
	sendCmd(t, prod, "cmd/other/x", "not for roamer")
	dev2, ack := persistent(t, addrOf(b), "roamer", false)
	if !ack.SessionPresent {
		t.Fatal("session not present on node B")
	}
	for i := range n {
		pub := dev2.expectPublish()
		if pub.Topic != "cmd/roamer/x" || string(pub.Payload) != fmt.Sprint(i) || pub.QoS != 1 {
			t.Fatalf("message %d: %s %q qos %d", i, pub.Topic, pub.Payload, pub.QoS)
		}
	}
	// The subscription is live on B now.
	sendCmd(t, prod, "cmd/roamer/y", "live")
	if pub := dev2.expectPublish(); pub.Topic != "cmd/roamer/y" || string(pub.Payload) != "live" {
		t.Fatalf("live message %s %q", pub.Topic, pub.Payload)
	}
	dev2.nothing(200 * time.Millisecond)
}

// TestBridgeRestartRestoresSessions: a bridge restart keeps persistent
// sessions (subscriptions) and the messages sent while it was down.
func TestBridgeRestartRestoresSessions(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	dev, _ := persistent(t, addrOf(a), "sleeper", true)
	dev.subscribe(1, sub("cmd/sleeper/#", 1), sub("alerts/+", 1))
	if err := a.Close(); err != nil { // saves the connected session
		t.Fatal(err)
	}
	prod := newProducer(t, c)
	sendCmd(t, prod, "alerts/fire", "while down")
	a2 := startBridge(t, c, nil)
	dev2, ack := persistent(t, addrOf(a2), "sleeper", false)
	if !ack.SessionPresent {
		t.Fatal("session lost in the restart")
	}
	if pub := dev2.expectPublish(); pub.Topic != "alerts/fire" || string(pub.Payload) != "while down" {
		t.Fatalf("offline message %s %q", pub.Topic, pub.Payload)
	}
	sendCmd(t, prod, "cmd/sleeper/wake", "up")
	if pub := dev2.expectPublish(); pub.Topic != "cmd/sleeper/wake" || string(pub.Payload) != "up" {
		t.Fatalf("after restart %s %q", pub.Topic, pub.Payload)
	}
}

// TestBridgeRetainedSurvivesRestart: retained messages live in the
// cluster; an empty retained payload deletes.
func TestBridgeRetainedSurvivesRestart(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	dev := connected(t, addrOf(a), packets.Version5, "pub-r")
	for _, p := range []*packets.Publish{
		{Topic: "status/a", Payload: []byte("old"), Retain: true},
		{Topic: "status/a", Payload: []byte("online"), Retain: true},
		{Topic: "status/b", Payload: []byte("gone"), Retain: true},
		{Topic: "status/b", Retain: true},
	} {
		if ack := dev.publish1(1, p); ack.ReasonCode != 0 {
			t.Fatal(ack.ReasonCode)
		}
	}
	a.Close()
	a2 := startBridge(t, c, nil)
	other := startBridge(t, c, nil)
	for _, node := range []*Bridge{a2, other} {
		s := connected(t, addrOf(node), packets.Version5, "sub-r")
		s.subscribe(1, sub("status/#", 1))
		pub := s.expectPublish()
		if pub.Topic != "status/a" || string(pub.Payload) != "online" || !pub.Retain {
			t.Fatalf("retained %s %q retain=%v", pub.Topic, pub.Payload, pub.Retain)
		}
		s.nothing(200 * time.Millisecond)
	}
}

// TestBridgeSessionV311AndStaleDelete: a 3.1.1 clean-session=false client
// roams from A to B; A's later expiry of its stale offline copy does not
// delete the session B now holds; QoS 2 ingress is stored before PUBREC.
func TestBridgeSessionV311AndStaleDelete(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	dev := dialRaw(t, addrOf(a), packets.Version311)
	dev.connect(&packets.Connect{ClientID: "v3dev", KeepAlive: 60})
	dev.subscribe(1, sub("cmd/v3dev", 2))
	dev.disconnect()
	testutil.WaitFor(t, 20*time.Second, "session record on B", func() bool {
		b.Backend().mu.Lock()
		defer b.Backend().mu.Unlock()
		r := b.Backend().sessions["v3dev"]
		return r != nil && !r.Online && !r.Deleted
	})
	prod := newProducer(t, c)
	sendCmd(t, prod, "cmd/v3dev", "one")
	dev2 := dialRaw(t, addrOf(b), packets.Version311)
	if ack := dev2.connect(&packets.Connect{ClientID: "v3dev", KeepAlive: 60}); !ack.SessionPresent {
		t.Fatal("session not present on B")
	}
	if pub := dev2.expectPublish(); string(pub.Payload) != "one" || pub.QoS != 1 {
		t.Fatalf("offline message %q qos %d", pub.Payload, pub.QoS)
	}
	testutil.WaitFor(t, 20*time.Second, "claim seen by A", func() bool {
		a.Backend().mu.Lock()
		defer a.Backend().mu.Unlock()
		r := a.Backend().sessions["v3dev"]
		return r != nil && r.Online && r.Node == b.Backend().NodeID()
	})
	ctx := context.Background()
	// A's stale offline copy expires: make A's own record look expired.
	a.Backend().mu.Lock()
	orig := a.Backend().own["v3dev"]
	own := *orig
	own.ExpiryMs, own.DisconnectedAt = 1000, time.Now().Add(-time.Hour).UnixMilli()
	a.Backend().own["v3dev"] = &own
	a.Backend().mu.Unlock()
	if err := a.Backend().DeleteSession(ctx, "v3dev"); err != nil {
		t.Fatal(err)
	}
	a.Backend().mu.Lock()
	a.Backend().own["v3dev"] = orig
	a.Backend().mu.Unlock()
	b.Backend().mu.Lock()
	r := b.Backend().sessions["v3dev"]
	b.Backend().mu.Unlock()
	if r == nil || r.Deleted {
		t.Fatal("stale delete from A removed the session B holds")
	}
	// QoS 2 from the device: PUBREC only once stored.
	dev2.send(&packets.Publish{QoS: 2, PacketID: 9, Topic: "devices/v3/telemetry", Payload: []byte("q2")})
	if rec, ok := dev2.recv().(*packets.Pubrec); !ok || rec.PacketID != 9 {
		t.Fatalf("want PUBREC 9, got %+v", rec)
	}
	got := pollN(t, newPull(t, c, "TELEMETRY"), 1)[0]
	if string(got.Body) != "q2" || got.Properties[PropQoS] != "2" {
		t.Fatalf("stored %q %v", got.Body, got.Properties)
	}
	// A clean start deletes the session cluster-wide.
	dev2.nc.Close()
	testutil.WaitFor(t, 20*time.Second, "offline record from B seen by A", func() bool {
		a.Backend().mu.Lock()
		defer a.Backend().mu.Unlock()
		r := a.Backend().sessions["v3dev"]
		return r != nil && !r.Online && r.Node == b.Backend().NodeID()
	})
	dev3 := dialRaw(t, addrOf(a), packets.Version311)
	dev3.connect(&packets.Connect{ClientID: "v3dev", CleanStart: true, KeepAlive: 60})
	testutil.WaitFor(t, 20*time.Second, "session deleted on B", func() bool {
		b.Backend().mu.Lock()
		defer b.Backend().mu.Unlock()
		r := b.Backend().sessions["v3dev"]
		return r == nil || r.Deleted
	})
}
