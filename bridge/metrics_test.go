package bridge

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"
	"github.com/prometheus/client_golang/prometheus"
	dto "github.com/prometheus/client_model/go"

	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
)

// gathered returns the value of one sample (counter, gauge, or a
// histogram's count) of a registry, by name and label values in order.
func gathered(t *testing.T, reg *prometheus.Registry, name string, labels ...string) float64 {
	t.Helper()
	mfs, err := reg.Gather()
	if err != nil {
		t.Fatal(err)
	}
	for _, mf := range mfs {
		if mf.GetName() != name {
			continue
		}
		for _, m := range mf.GetMetric() {
			if !labelsAre(m, labels) {
				continue
			}
			switch {
			case m.Counter != nil:
				return m.Counter.GetValue()
			case m.Gauge != nil:
				return m.Gauge.GetValue()
			case m.Histogram != nil:
				return float64(m.Histogram.GetSampleCount())
			}
		}
	}
	t.Fatalf("no sample %s%v", name, labels)
	return 0
}

func labelsAre(m *dto.Metric, want []string) bool {
	if len(m.GetLabel()) != len(want) {
		return false
	}
	for i, l := range m.GetLabel() {
		if l.GetValue() != want[i] {
			return false
		}
	}
	return true
}

// TestBridgeMetricsMove: a node with a credentials file counts a refused
// password, messages in and out per QoS, connections, sessions and
// subscriptions, and times its produces; its readiness is met once
// started.
func TestBridgeMetricsMove(t *testing.T) {
	c := startCluster(t)
	creds := mqtttest.CredentialsFile(t, "dev", "secret")
	b := startBridge(t, c, func(mo *mqtt.Options, _ *Options) { mo.CredentialsFile = creds })
	testutil.WaitFor(t, 10*time.Second, "node ready (registered)", func() bool { return b.Ready() == nil })
	reg := prometheus.NewPedanticRegistry()
	reg.MustRegister(b.Collectors()...)

	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	expiry := uint32(600)
	dial := func(id, pass string, onPub func(*paho.Publish)) (*paho.Client, byte) {
		nc, err := net.Dial("tcp", addrOf(b))
		if err != nil {
			t.Fatal(err)
		}
		cfg := paho.ClientConfig{ClientID: id, Conn: nc}
		if onPub != nil {
			cfg.OnPublishReceived = []func(paho.PublishReceived) (bool, error){
				func(pr paho.PublishReceived) (bool, error) { onPub(pr.Packet); return true, nil }}
		}
		pc := paho.NewClient(cfg)
		ack, err := pc.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30, Username: "dev", UsernameFlag: true,
			Password: []byte(pass), PasswordFlag: true, Properties: &paho.ConnectProperties{SessionExpiryInterval: &expiry}})
		if ack == nil {
			t.Fatalf("connect %s: %v", id, err)
		}
		if ack.ReasonCode == 0 {
			t.Cleanup(func() { _ = pc.Disconnect(&paho.Disconnect{}) })
		}
		return pc, ack.ReasonCode
	}
	if _, code := dial("intruder", "wrong", nil); code != 0x86 {
		t.Fatalf("wrong password: CONNACK reason %#x, want 0x86", code)
	}
	if n := gathered(t, reg, "smartgo_mqtt_auth_failures_total"); n != 1 {
		t.Fatalf("auth failures %v, want 1", n)
	}
	got := make(chan *paho.Publish, 8)
	sub, _ := dial("m-sub", "secret", func(p *paho.Publish) { got <- p })
	if _, err := sub.Subscribe(ctx, &paho.Subscribe{Subscriptions: []paho.SubscribeOptions{{Topic: "m/#", QoS: 2}}}); err != nil {
		t.Fatal(err)
	}
	pub, _ := dial("m-pub", "secret", nil)
	for q := byte(0); q <= 2; q++ {
		if _, err := pub.Publish(ctx, &paho.Publish{Topic: fmt.Sprintf("m/%d", q), QoS: q, Payload: []byte("x")}); err != nil {
			t.Fatal(err)
		}
	}
	for range 3 {
		select {
		case <-got:
		case <-ctx.Done():
			t.Fatal("fewer than 3 messages delivered")
		}
	}
	for q := range 3 {
		qs := fmt.Sprint(q)
		if n := gathered(t, reg, "smartgo_mqtt_messages_received_total", qs); n != 1 {
			t.Errorf("received qos %d: %v", q, n)
		}
		testutil.WaitFor(t, 5*time.Second, "sent qos "+qs, func() bool { return gathered(t, reg, "smartgo_mqtt_messages_sent_total", qs) == 1 })
	}
	// Control packets of every type: at least two CONNECTs, a SUBSCRIBE,
	// three PUBLISHes and the QoS 2 PUBREL in; CONNACKs, the SUBACK,
	// the acknowledgements and three PUBLISHes out.
	if n := gathered(t, reg, "smartgo_mqtt_packets_received_total"); n < 7 {
		t.Errorf("packets received %v, want at least 7", n)
	}
	testutil.WaitFor(t, 5*time.Second, "packets sent", func() bool { return gathered(t, reg, "smartgo_mqtt_packets_sent_total") >= 9 })
	if n := gathered(t, reg, "smartgo_mqtt_connections"); n != 2 {
		t.Errorf("connections %v, want 2", n)
	}
	if n := gathered(t, reg, "smartgo_mqtt_subscriptions"); n != 1 {
		t.Errorf("subscriptions %v, want 1", n)
	}
	if n := gathered(t, reg, "smartgo_mqtt_sessions"); n != 2 {
		t.Errorf("sessions %v, want 2", n)
	}
	if n := gathered(t, reg, "smartgo_bridge_produce_latency_seconds"); n < 1 {
		t.Errorf("produce latency count %v", n)
	}
	if n := gathered(t, reg, "smartgo_bridge_produced_messages_total"); n != 3 {
		t.Errorf("produced %v, want 3", n)
	}
	// The subscriber's session has a record (its subscription), the
	// publisher's one too (its QoS 2 exchange was recorded), and it
	// stays when the publisher goes offline with its expiry.
	testutil.WaitFor(t, 5*time.Second, "cluster sessions", func() bool { return gathered(t, reg, "smartgo_bridge_cluster_sessions") == 2 })
	_ = pub.Disconnect(&paho.Disconnect{})
	testutil.WaitFor(t, 5*time.Second, "offline session", func() bool { return gathered(t, reg, "smartgo_bridge_cluster_sessions") == 2 })
	testutil.WaitFor(t, 5*time.Second, "connections", func() bool { return gathered(t, reg, "smartgo_mqtt_connections") == 1 })
}
