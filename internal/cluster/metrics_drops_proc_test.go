//go:build cluster

package cluster

import (
	"bufio"
	"context"
	"encoding/binary"
	"fmt"
	"io"
	"net"
	"os/exec"
	"path/filepath"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/eclipse/paho.golang/paho"

	"github.com/smartgo/smartgo/internal/testutil"
)

// mqttPacket is an MQTT 3.1.1 packet: the first byte, the remaining
// length, then the parts (strings length-prefixed, []byte raw).
func mqttPacket(first byte, parts ...any) []byte {
	var body []byte
	for _, p := range parts {
		switch p := p.(type) {
		case string:
			body = binary.BigEndian.AppendUint16(body, uint16(len(p)))
			body = append(body, p...)
		case []byte:
			body = append(body, p...)
		}
	}
	out := []byte{first}
	for n := len(body); ; {
		b := byte(n % 128)
		if n /= 128; n > 0 {
			b |= 0x80
		}
		out = append(out, b)
		if n == 0 {
			break
		}
	}
	return append(out, body...)
}

// TestClusterProcBridgeDropMetrics: the bridge counters that only bad or
// slow clients move, scraped from a real bridge process: a wrong password
// (smartgo_mqtt_auth_failures_total), and a QoS 0 subscriber that stops
// reading while a publisher floods its topic through the broker: its
// messages are dropped (smartgo_mqtt_dropped_qos0_total,
// smartgo_mqtt_messages_dropped_total) and it is cut off as a slow reader
// (smartgo_mqtt_slow_reader_disconnects_total).
func TestClusterProcBridgeDropMetrics(t *testing.T) {
	dir := t.TempDir()
	ports := freePorts(t, 4)
	addr := func(i int) string { return "127.0.0.1:" + strconv.Itoa(ports[i]) }
	reg, mqttAddr, mBridge := addr(0), addr(2), addr(3)
	creds := filepath.Join(dir, "mqtt.passwd")
	if out, err := exec.Command(smartgoBin(t), "passwd", "-f", creds, "-u", "dev", "-p", "dev-pw").CombinedOutput(); err != nil {
		t.Fatalf("passwd: %v %s", err, out)
	}
	rp := start(t, dir, "registry", "registry", "-set", "registry.listen="+reg, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"))
	bp := start(t, dir, "broker", "broker", "-listen", addr(1), "-data", filepath.Join(dir, "b"), "-registries", reg,
		"-set", "broker.advertise_ip=127.0.0.1", "-set", "store.segment_size=64MiB")
	brp := start(t, dir, "bridge", "bridge", "-listen", mqttAddr, "-registries", reg, "-set", "metrics.listen="+mBridge,
		"-set", "bridge.credentials_file="+creds, "-set", "bridge.max_outbound=256KiB", "-set", "bridge.slow_reader_timeout=1s")
	logsOnFailure(t, rp, bp, brp)
	waitReady(t, "bridge", mBridge)
	before := scrape(t, mBridge)
	for _, n := range []string{"smartgo_mqtt_auth_failures_total", "smartgo_mqtt_dropped_qos0_total", "smartgo_mqtt_messages_dropped_total",
		"smartgo_mqtt_slow_reader_disconnects_total"} {
		if v, ok := sum(before, n); !ok || v != 0 {
			t.Fatalf("%s before any client: %v %v", n, v, ok)
		}
	}

	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()
	dial := func(id, pass string) (*paho.Client, byte) {
		nc, err := net.Dial("tcp", mqttAddr)
		if err != nil {
			t.Fatal(err)
		}
		pc := paho.NewClient(paho.ClientConfig{ClientID: id, Conn: nc})
		ack, err := pc.Connect(ctx, &paho.Connect{ClientID: id, CleanStart: true, KeepAlive: 30, Username: "dev", UsernameFlag: true,
			Password: []byte(pass), PasswordFlag: true})
		if ack == nil {
			t.Fatalf("connect %s: %v", id, err)
		}
		if ack.ReasonCode == 0 {
			t.Cleanup(func() { _ = pc.Disconnect(&paho.Disconnect{}) })
		}
		return pc, ack.ReasonCode
	}
	if _, code := dial("intruder", "wrong"); code != 0x86 {
		t.Fatalf("wrong password: CONNACK %#x, want 0x86", code)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		if v, _ := sum(scrape(t, mBridge), "smartgo_mqtt_auth_failures_total"); v != 1 {
			return fmt.Errorf("auth failures %v, want 1", v)
		}
		return nil
	})

	// The slow subscriber speaks MQTT 3.1.1 by hand so that nothing reads
	// its socket once it is subscribed.
	slow, err := net.Dial("tcp", mqttAddr)
	if err != nil {
		t.Fatal(err)
	}
	defer slow.Close()
	if err := slow.(*net.TCPConn).SetReadBuffer(64 << 10); err != nil {
		t.Fatal(err)
	}
	br := bufio.NewReader(slow)
	expect := func(what string, want []byte) {
		t.Helper()
		got := make([]byte, len(want))
		_ = slow.SetReadDeadline(time.Now().Add(10 * time.Second))
		if _, err := io.ReadFull(br, got); err != nil || string(got) != string(want) {
			t.Fatalf("%s: % x %v, want % x", what, got, err, want)
		}
	}
	write := func(p []byte) {
		if _, err := slow.Write(p); err != nil {
			t.Fatal(err)
		}
	}
	write(mqttPacket(0x10, "MQTT", []byte{4, 0xC2, 0, 60}, "slow-sub", "dev", "dev-pw")) // user, password, clean session
	expect("CONNACK", []byte{0x20, 2, 0, 0})
	write(mqttPacket(0x82, []byte{0, 1}, "flood/#", []byte{0}))
	expect("SUBACK", []byte{0x90, 3, 0, 1, 0})

	pub, _ := dial("flooder", "dev-pw")
	payload := []byte(strings.Repeat("f", 4<<10))
	start := time.Now()
	for {
		for range 64 {
			if _, err := pub.Publish(ctx, &paho.Publish{Topic: "flood/x", QoS: 0, Payload: payload}); err != nil {
				t.Fatal(err)
			}
		}
		if v, _ := sum(scrape(t, mBridge), "smartgo_mqtt_slow_reader_disconnects_total"); v >= 1 {
			break
		}
		if time.Since(start) > 90*time.Second {
			t.Fatal("the subscriber that stopped reading was never cut off")
		}
	}
	after := scrape(t, mBridge)
	for _, n := range []string{"smartgo_mqtt_dropped_qos0_total", "smartgo_mqtt_messages_dropped_total", "smartgo_mqtt_slow_reader_disconnects_total"} {
		if v, _ := sum(after, n); v <= 0 {
			t.Errorf("%s did not move: %v", n, v)
		}
	}
	q0, _ := sum(after, "smartgo_mqtt_dropped_qos0_total")
	if all, _ := sum(after, "smartgo_mqtt_messages_dropped_total"); q0 > all {
		t.Errorf("more QoS 0 drops (%v) than drops (%v)", q0, all)
	}
}
