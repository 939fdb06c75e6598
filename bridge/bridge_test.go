package bridge

import (
	"bytes"
	"context"
	"fmt"
	"os"
	"path/filepath"
	"slices"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgePropertyNames pins the property names of doc.go: SmartGo and
// RocketMQ consumers depend on them.
func TestBridgePropertyNames(t *testing.T) {
	got := []string{PropTopic, PropQoS, PropRetain, PropClientID, PropUsername, PropUserProperties, PropResponseTopic,
		PropCorrelationData, PropContentType, PropPayloadFormat, PropExpiryAt, PropEmptyPayload}
	want := []string{"MQTT_TOPIC", "MQTT_QOS", "MQTT_RETAIN", "MQTT_CLIENT_ID", "MQTT_USERNAME", "MQTT_USER_PROPERTIES",
		"MQTT_RESPONSE_TOPIC", "MQTT_CORRELATION_DATA", "MQTT_CONTENT_TYPE", "MQTT_PAYLOAD_FORMAT", "MQTT_EXPIRY_AT",
		"MQTT_EMPTY_PAYLOAD"}
	if !slices.Equal(got, want) {
		t.Fatalf("property names %v, want %v", got, want)
	}
	doc, err := os.ReadFile("doc.go")
	if err != nil {
		t.Fatal(err)
	}
	for _, n := range want {
		if !bytes.Contains(doc, []byte(n)) {
			t.Errorf("doc.go does not document %s", n)
		}
	}
	exp := time.UnixMilli(1_900_000_000_123)
	m := &mqtt.Message{Topic: "a/b", Payload: []byte("x"), QoS: 2, Retain: true, HasPayloadFormat: true, PayloadFormat: 1,
		ContentType: "text/plain", ResponseTopic: "r/t", CorrelationData: []byte{0, 1, 2, 0xff},
		User:   []mqtt.UserProperty{{Key: "b", Value: "2"}, {Key: "a", Value: "1\x01"}, {Key: "b", Value: "3"}},
		Expiry: exp, ClientID: "dev1", Username: "u"}
	cm, err := toBroker(m, "T")
	if err != nil {
		t.Fatal(err)
	}
	wantProps := map[string]string{"MQTT_TOPIC": "a/b", "MQTT_QOS": "2", "MQTT_RETAIN": "1", "MQTT_CLIENT_ID": "dev1",
		"MQTT_USERNAME": "u", "MQTT_USER_PROPERTIES": `[["b","2"],["a","1\u0001"],["b","3"]]`, "MQTT_RESPONSE_TOPIC": "r/t",
		"MQTT_CORRELATION_DATA": "AAEC/w==", "MQTT_CONTENT_TYPE": "text/plain", "MQTT_PAYLOAD_FORMAT": "1",
		"MQTT_EXPIRY_AT": "1900000000123"}
	if fmt.Sprint(cm.Properties) != fmt.Sprint(wantProps) || cm.Topic != "T" || string(cm.Body) != "x" {
		t.Fatalf("properties\n got %v\nwant %v", cm.Properties, wantProps)
	}
	back := fromBroker(&client.MessageExt{Message: *cm})
	back.Expiry = back.Expiry.Round(0)
	m.Expiry = m.Expiry.Round(0)
	if fmt.Sprintf("%+v", back) != fmt.Sprintf("%+v", m) {
		t.Fatalf("round trip\n got %+v\nwant %+v", back, m)
	}
	empty, _ := toBroker(&mqtt.Message{Topic: "e", QoS: 1}, "T")
	if string(empty.Body) != "\x00" || empty.Properties[PropEmptyPayload] != "1" {
		t.Fatalf("empty payload encoded as %q %v", empty.Body, empty.Properties)
	}
	if e := fromBroker(&client.MessageExt{Message: *empty}); len(e.Payload) != 0 {
		t.Fatalf("empty payload decoded as %q", e.Payload)
	}
	if _, err := toBroker(&mqtt.Message{Topic: "bad\x02topic"}, "T"); err == nil {
		t.Fatal("topic with 0x02 accepted")
	}
}

// TestBridgeIngress: device -> bridge -> broker -> SmartGo consumer, with
// every MQTT property and the per-client order.
func TestBridgeIngress(t *testing.T) {
	c := startCluster(t)
	b := startBridge(t, c, nil)
	dev := connected(t, addrOf(b), packets.Version5, "dev-1")
	p := &packets.Publish{Topic: "devices/d1/telemetry", Payload: []byte("21.5")}
	pr := &p.Properties
	pr.Present.Add(packets.PropContentType)
	pr.ContentType = "text/plain"
	pr.Present.Add(packets.PropResponseTopic)
	pr.ResponseTopic = "devices/d1/reply"
	pr.Present.Add(packets.PropCorrelationData)
	pr.CorrelationData = []byte{9, 8, 7}
	pr.Present.Add(packets.PropPayloadFormat)
	pr.PayloadFormat = 1
	pr.Present.Add(packets.PropMessageExpiry)
	pr.MessageExpiry = 600
	pr.User = []packets.UserProperty{{Key: "unit", Value: "C"}, {Key: "unit", Value: "K"}}
	if a := dev.publish1(1, p); a.ReasonCode != 0 {
		t.Fatalf("PUBACK %v", a.ReasonCode)
	}
	// Acknowledged means stored: the consumer finds it.
	got := pollN(t, newPull(t, c, "TELEMETRY"), 1)[0]
	props := got.Properties
	if string(got.Body) != "21.5" || props[PropTopic] != "devices/d1/telemetry" || props[PropQoS] != "1" ||
		props[PropClientID] != "dev-1" || props[PropContentType] != "text/plain" || props[PropResponseTopic] != "devices/d1/reply" ||
		props[PropCorrelationData] != "CQgH" || props[PropPayloadFormat] != "1" || props[PropExpiryAt] == "" ||
		props[PropUserProperties] != `[["unit","C"],["unit","K"]]` || props[PropRetain] != "" {
		t.Fatalf("stored message %q %v", got.Body, props)
	}
	// Unrouted topics go to the default topic; one client's messages keep
	// their order (one queue).
	const n = 40
	for i := range n {
		if a := dev.publish1(uint16(2+i), &packets.Publish{Topic: "other/x", Payload: fmt.Appendf(nil, "%d", i)}); a.ReasonCode != 0 {
			t.Fatalf("PUBACK %v", a.ReasonCode)
		}
	}
	msgs := pollN(t, newPull(t, c, DefaultDefaultTopic), n)
	for i, m := range msgs {
		if string(m.Body) != fmt.Sprint(i) || m.Queue != msgs[0].Queue {
			t.Fatalf("message %d: %q on %v (first on %v)", i, m.Body, m.Queue, msgs[0].Queue)
		}
	}
}

// TestBridgeEgress: SmartGo producer -> broker -> bridge -> device, and
// device -> device through the brokers.
func TestBridgeEgress(t *testing.T) {
	c := startCluster(t)
	b := startBridge(t, c, nil)
	dev := connected(t, addrOf(b), packets.Version5, "dev-e")
	if sa := dev.subscribe(1, sub("cmd/dev-e/#", 1), sub("devices/+/telemetry", 1)); sa.ReasonCodes[0] != 1 {
		t.Fatalf("SUBACK %v", sa.ReasonCodes)
	}
	prod := newProducer(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	_, err := prod.Send(ctx, &client.Message{Topic: DefaultEgressTopic, Body: []byte("reboot"),
		Properties: map[string]string{PropTopic: "cmd/dev-e/reboot", PropQoS: "1", PropUserProperties: `[["by","ops"]]`}})
	if err != nil {
		t.Fatal(err)
	}
	pub := dev.expectPublish()
	if pub.Topic != "cmd/dev-e/reboot" || string(pub.Payload) != "reboot" || pub.QoS != 1 ||
		len(pub.Properties.User) != 1 || pub.Properties.User[0] != (packets.UserProperty{Key: "by", Value: "ops"}) {
		t.Fatalf("delivered %+v", pub)
	}
	other := connected(t, addrOf(b), packets.Version311, "dev-o")
	if a := other.publish1(7, &packets.Publish{Topic: "devices/o/telemetry", Payload: []byte("1")}); a.ReasonCode != 0 {
		t.Fatal(a.ReasonCode)
	}
	if pub := dev.expectPublish(); pub.Topic != "devices/o/telemetry" || string(pub.Payload) != "1" {
		t.Fatalf("delivered %+v", pub)
	}
}

// TestBridgeACLDenied: a denied publish gets 0x87 and is not stored.
func TestBridgeACLDenied(t *testing.T) {
	c := startCluster(t)
	acl := filepath.Join(t.TempDir(), "acl")
	if err := os.WriteFile(acl, []byte("default allow\nall\ndeny publish secret/#\n"), 0o600); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, c, func(mo *mqtt.Options, _ *Options) { mo.ACLFile = acl })
	dev := connected(t, addrOf(b), packets.Version5, "dev-acl")
	if a := dev.publish1(1, &packets.Publish{Topic: "secret/x", Payload: []byte("no")}); a.ReasonCode != packets.ReasonNotAuthorized {
		t.Fatalf("PUBACK %v, want not authorized", a.ReasonCode)
	}
	if a := dev.publish1(2, &packets.Publish{Topic: "open/x", Payload: []byte("yes")}); a.ReasonCode != 0 {
		t.Fatalf("PUBACK %v", a.ReasonCode)
	}
	got := pollN(t, newPull(t, c, DefaultDefaultTopic), 1)
	if string(got[0].Body) != "yes" {
		t.Fatalf("stored %q", got[0].Body)
	}
}

// wrapped counts SaveSession calls through a WrapBackend hook.
type wrapped struct {
	mqtt.Backend
	saves chan string
}

func (w *wrapped) SaveSession(ctx context.Context, s *mqtt.SessionState) error {
	w.saves <- s.ClientID
	return w.Backend.SaveSession(ctx, s)
}

// TestBridgeExtensible: WrapBackend hooks the server's backend and Server
// takes internal handlers (the state store front uses both).
func TestBridgeExtensible(t *testing.T) {
	c := startCluster(t)
	w := &wrapped{saves: make(chan string, 4)}
	b := startBridge(t, c, func(_ *mqtt.Options, bo *Options) {
		bo.WrapBackend = func(be mqtt.Backend) mqtt.Backend { w.Backend = be; return w }
	})
	handled := make(chan string, 1)
	b.Server().Handle("$internal/#", func(_ context.Context, from mqtt.ClientInfo, m *mqtt.Message) error {
		handled <- from.ClientID + " " + m.Topic
		return nil
	})
	dev, _ := persistent(t, addrOf(b), "hooked", true)
	if a := dev.publish1(1, &packets.Publish{Topic: "$internal/x", Payload: []byte("h")}); a.ReasonCode != 0 {
		t.Fatalf("PUBACK %v", a.ReasonCode)
	}
	if got := <-handled; got != "hooked $internal/x" {
		t.Fatalf("handler got %q", got)
	}
	dev.disconnect()
	select {
	case id := <-w.saves:
		if id != "hooked" {
			t.Fatalf("saved %q", id)
		}
	case <-time.After(10 * time.Second):
		t.Fatal("SaveSession did not go through the wrapper")
	}
}
