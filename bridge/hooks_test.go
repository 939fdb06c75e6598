package bridge

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeIngressOnlyRouteAndProps: a route marked IngressOnly stores
// into its broker topic with the properties of Options.IngressProps, and
// no MQTT subscriber receives its messages; a message the hook refuses
// is not stored (a v5 publisher is told), and the hook may not replace a
// bridge property.
func TestBridgeIngressOnlyRouteAndProps(t *testing.T) {
	c := startCluster(t)
	br := startBridge(t, c, func(_ *mqtt.Options, o *Options) {
		o.Routes = []Route{{Filter: "events/#", Topic: "EVENTS", IngressOnly: true}}
		o.IngressProps = func(m *mqtt.Message) (map[string]string, error) {
			_, tail, _ := strings.Cut(m.Topic, "/")
			switch tail {
			case "bad":
				return nil, errors.New("malformed property bag")
			case "clash":
				return map[string]string{PropTopic: "x"}, nil
			case "":
				return nil, nil
			}
			k, v, _ := strings.Cut(tail, "=")
			return map[string]string{k: v, "origin": m.ClientID}, nil
		}
	})
	if got := br.Backend().Topics(); strings.Contains(strings.Join(got, ","), "EVENTS") {
		t.Fatalf("ingress-only topic consumed for delivery: %v", got)
	}
	watcher := connected(t, addrOf(br), packets.Version5, "watcher")
	watcher.subscribe(1, sub("events/#", 1))
	pub := connected(t, addrOf(br), packets.Version5, "sensor-1")
	if a := pub.publish1(1, &packets.Publish{Topic: "events/temp=21", Payload: []byte("t")}); a.ReasonCode != 0 {
		t.Fatalf("PUBACK %v", a.ReasonCode)
	}
	for i, topic := range []string{"events/bad", "events/clash"} {
		if a := pub.publish1(uint16(2+i), &packets.Publish{Topic: topic, Payload: []byte("x")}); a.ReasonCode < 0x80 {
			t.Fatalf("%s stored: PUBACK %v", topic, a.ReasonCode)
		}
	}
	if a := pub.publish1(5, &packets.Publish{Topic: "events/last=1", Payload: []byte("l")}); a.ReasonCode != 0 {
		t.Fatalf("PUBACK %v", a.ReasonCode)
	}
	msgs := pollN(t, newPull(t, c, "EVENTS"), 2)
	if len(msgs) != 2 {
		t.Fatalf("%d messages stored, want 2", len(msgs))
	}
	m := msgs[0]
	if m.Properties["temp"] != "21" || m.Properties["origin"] != "sensor-1" || m.Properties[PropTopic] != "events/temp=21" ||
		m.Properties[PropClientID] != "sensor-1" {
		t.Fatalf("properties %v", m.Properties)
	}
	if msgs[1].Properties["last"] != "1" {
		t.Fatalf("second message %v", msgs[1].Properties)
	}
	watcher.nothing(300 * time.Millisecond)
}

// TestBridgePublishTo: a component's message to the egress topic reaches
// the connected subscriber on another node, and an offline persistent
// session gets it when it resumes.
func TestBridgePublishTo(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	live := connected(t, addrOf(b), packets.Version5, "live")
	live.subscribe(1, sub("devices/d1/messages/devicebound/#", 1))
	off, _ := persistent(t, addrOf(b), "off", true)
	off.subscribe(1, sub("devices/d1/messages/devicebound/#", 1))
	off.disconnect()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	msg := &mqtt.Message{Topic: "devices/d1/messages/devicebound/%24.mid=7", Payload: []byte("hi"), QoS: 1}
	if err := a.Backend().PublishTo(ctx, a.Backend().EgressTopic(), "d1", msg); err != nil {
		t.Fatal(err)
	}
	if p := live.expectPublish(); string(p.Payload) != "hi" || p.Topic != msg.Topic {
		t.Fatalf("live got %s %q", p.Topic, p.Payload)
	}
	back, ack := persistent(t, addrOf(a), "off", false)
	if !ack.SessionPresent {
		t.Fatal("session not present")
	}
	if p := back.expectPublish(); string(p.Payload) != "hi" {
		t.Fatalf("resumed session got %s %q", p.Topic, p.Payload)
	}
}
