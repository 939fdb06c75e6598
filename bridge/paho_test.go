package bridge

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/client"
)

// TestBridgePahoRequestResponse: a paho (MQTT 5) device sends a request
// with response topic and correlation data; a SmartGo consumer answers
// through MQTT_EGRESS with both echoed; the device gets the response.
func TestBridgePahoRequestResponse(t *testing.T) {
	c := startCluster(t)
	b := startBridge(t, c, nil)
	got := make(chan *paho.Publish, 4)
	nc, err := net.Dial("tcp", addrOf(b))
	if err != nil {
		t.Fatal(err)
	}
	pc := paho.NewClient(paho.ClientConfig{ClientID: "paho-dev", Conn: nc,
		OnPublishReceived: []func(paho.PublishReceived) (bool, error){
			func(pr paho.PublishReceived) (bool, error) { got <- pr.Packet; return true, nil }}})
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	if ack, err := pc.Connect(ctx, &paho.Connect{ClientID: "paho-dev", CleanStart: true, KeepAlive: 30}); err != nil || ack.ReasonCode != 0 {
		t.Fatalf("connect: %v %+v", err, ack)
	}
	defer pc.Disconnect(&paho.Disconnect{})
	if _, err := pc.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "reply/paho-dev", QoS: 1}}}); err != nil {
		t.Fatal(err)
	}
	corr := []byte{0xde, 0xad, 0x00, 0x01}
	if _, err := pc.Publish(ctx, &paho.Publish{Topic: "devices/paho-dev/telemetry", QoS: 1, Payload: []byte("ping"),
		Properties: &paho.PublishProperties{ResponseTopic: "reply/paho-dev", CorrelationData: corr,
			User: paho.UserProperties{{Key: "a", Value: "1"}, {Key: "a", Value: "2"}}}}); err != nil {
		t.Fatal(err)
	}
	req := pollN(t, newPull(t, c, "TELEMETRY"), 1)[0]
	if req.Properties[PropUserProperties] != `[["a","1"],["a","2"]]` {
		t.Fatalf("user properties %q", req.Properties[PropUserProperties])
	}
	prod := newProducer(t, c)
	if _, err := prod.Send(ctx, &client.Message{Topic: DefaultEgressTopic, Body: []byte("pong"), Properties: map[string]string{
		PropTopic: req.Properties[PropResponseTopic], PropCorrelationData: req.Properties[PropCorrelationData],
		PropContentType: "text/plain"}}); err != nil {
		t.Fatal(err)
	}
	select {
	case p := <-got:
		if p.Topic != "reply/paho-dev" || string(p.Payload) != "pong" || !bytes.Equal(p.Properties.CorrelationData, corr) ||
			p.Properties.ContentType != "text/plain" || p.QoS != 1 {
			t.Fatalf("response %+v %+v", p, p.Properties)
		}
	case <-ctx.Done():
		t.Fatal("no response")
	}
}
