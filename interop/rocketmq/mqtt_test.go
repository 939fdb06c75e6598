package rocketmq

import (
	"context"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
)

// mosquittoOrSkip returns the path of a mosquitto client, skipping the
// test when Debian's mosquitto-clients is not installed.
func mosquittoOrSkip(t *testing.T, name string) string {
	t.Helper()
	p, err := exec.LookPath(name)
	if err != nil {
		t.Skipf("%s not installed (apt-get install mosquitto-clients)", name)
	}
	return p
}

// TestInteropMQTTBridgeBothWays: an MQTT 5 publish from mosquitto_pub
// reaches a rocketmq-client-go push consumer of MQTT_INGRESS with its MQTT
// side in the properties docs/protocols.md lists, and a message that
// rocketmq-client-go sends to MQTT_EGRESS with MQTT_TOPIC (and the other
// MQTT_* properties) reaches mosquitto_sub as an MQTT 5 PUBLISH carrying
// them.
func TestInteropMQTTBridgeBothWays(t *testing.T) {
	pub := mosquittoOrSkip(t, "mosquitto_pub")
	subBin := mosquittoOrSkip(t, "mosquitto_sub")
	s := startStandalone(t)
	host, port, _ := net.SplitHostPort(s.mqtt)
	// The bridge creates MQTT_INGRESS and MQTT_EGRESS as it starts, after
	// the broker registered.
	for deadline := time.Now().Add(60 * time.Second); !s.logContains("standalone running"); {
		if time.Now().After(deadline) {
			t.Fatal("standalone: the bridge did not start")
		}
		time.Sleep(20 * time.Millisecond)
	}

	// Device -> broker.
	got := make(chan *primitive.MessageExt, 16)
	newPushConsumer(t, s, "interop-mqtt-ingress", "mqtt-in", "MQTT_INGRESS", consumer.Clustering,
		func(m *primitive.MessageExt) consumer.ConsumeResult { got <- m; return consumer.ConsumeSuccess })
	out, err := exec.Command(pub, "-V", "mqttv5", "-h", host, "-p", port, "-i", "interop-dev1", "-u", "alice",
		"-t", "devices/dev1/temp", "-q", "1", "-m", "21.5",
		"-D", "publish", "content-type", "text/plain", "-D", "publish", "response-topic", "replies/dev1",
		"-D", "publish", "correlation-data", "req-7", "-D", "publish", "user-property", "unit", "C",
		"-D", "publish", "user-property", "unit", "K", "-D", "publish", "payload-format-indicator", "1").CombinedOutput()
	if err != nil {
		t.Fatalf("mosquitto_pub: %v %s", err, out)
	}
	var in *primitive.MessageExt
	select {
	case in = <-got:
	case <-time.After(60 * time.Second):
		t.Fatal("the MQTT publish never reached the rocketmq-client-go consumer")
	}
	if string(in.Body) != "21.5" {
		t.Errorf("body %q", in.Body)
	}
	for k, v := range map[string]string{
		"MQTT_TOPIC": "devices/dev1/temp", "MQTT_QOS": "1", "MQTT_CLIENT_ID": "interop-dev1", "MQTT_USERNAME": "alice",
		"MQTT_CONTENT_TYPE": "text/plain", "MQTT_RESPONSE_TOPIC": "replies/dev1",
		"MQTT_CORRELATION_DATA": "cmVxLTc=", "MQTT_USER_PROPERTIES": `[["unit","C"],["unit","K"]]`, "MQTT_PAYLOAD_FORMAT": "1",
	} {
		if g := in.GetProperty(k); g != v {
			t.Errorf("property %s = %q, want %q", k, g, v)
		}
	}
	if in.GetProperty("MQTT_RETAIN") != "" {
		t.Errorf("MQTT_RETAIN %q on a message published without retain", in.GetProperty("MQTT_RETAIN"))
	}

	// Broker -> device: a persistent session subscribes and leaves, the
	// message is sent, the device comes back for it.
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	session := []string{"-V", "mqttv5", "-h", host, "-p", port, "-i", "interop-dev2", "-c", "-x", "600", "-t", "cmd/dev2/#", "-q", "1"}
	if out, err := exec.CommandContext(ctx, subBin, append(session, "-E")...).CombinedOutput(); err != nil {
		t.Fatalf("mosquitto_sub -E: %v %s", err, out)
	}
	p := newProducer(t, s, "mqtt-out")
	m := primitive.NewMessage("MQTT_EGRESS", []byte("reboot"))
	m.WithKeys([]string{"dev2"})
	m.WithProperty("MQTT_TOPIC", "cmd/dev2/reboot")
	m.WithProperty("MQTT_QOS", "1")
	m.WithProperty("MQTT_CONTENT_TYPE", "text/plain")
	m.WithProperty("MQTT_RESPONSE_TOPIC", "replies/dev2")
	m.WithProperty("MQTT_CORRELATION_DATA", "cmVxLTg=")
	m.WithProperty("MQTT_USER_PROPERTIES", `[["by","ops"]]`)
	if res, err := p.SendSync(ctx, m); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send to MQTT_EGRESS: %v %v", res, err)
	}
	out, err = exec.CommandContext(ctx, subBin, append(session, "-C", "1", "-F", "%t|%q|%p|%C|%R|%D|%P")...).CombinedOutput()
	if err != nil {
		t.Fatalf("mosquitto_sub: %v %s", err, out)
	}
	if l := strings.TrimSpace(string(out)); l != "cmd/dev2/reboot|1|reboot|text/plain|replies/dev2|req-8|by:ops" {
		t.Errorf("mosquitto_sub printed %q", l)
	}
}
