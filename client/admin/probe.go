package admin

import (
	"bytes"
	"context"
	"io"
	"net"
	"time"
)

// probeTimeout bounds the look at what answers an address that failed a
// request (wrongPortHint).
const probeTimeout = 3 * time.Second

// Probes of wrongPortHint. The MQTT one is a CONNECT naming protocol
// level 127, which an MQTT server refuses with a CONNACK (packet type 2:
// first byte 0x20) and no session; the HTTP one a request any web server
// answers ("HTTP/").
var (
	mqttProbe = []byte{0x10, 12, 0, 4, 'M', 'Q', 'T', 'T', 127, 0x02, 0, 60, 0, 0}
	httpProbe = []byte("HEAD / HTTP/1.0\r\n\r\n")
	// haProbe is a slave's hello (store/ha/wire.go: magic "SGHA", version
	// 1, no flags, segment size 1, offsets 0..0, broker name
	// "smartgo-admin-probe", no address). A master's HA port answers any
	// well-formed hello with its own (magic first), then refuses the
	// stranger (its log names the probe); it closes at once at the first
	// bytes of a remoting frame, as an MQTT port does.
	haProbe = append([]byte("SGHA\x00\x01\x00\x00"+
		"\x00\x00\x00\x00\x00\x00\x00\x01"+
		"\x00\x00\x00\x00\x00\x00\x00\x00"+
		"\x00\x00\x00\x00\x00\x00\x00\x00"+
		"\x00\x13"), "smartgo-admin-probe\x00\x00"...)
)

// wrongPortHint says what answers at addr when a request to it failed in
// a way a peer that is not RocketMQ remoting causes: an MQTT server or a
// master's HA port closes at the first bytes of a remoting frame (closed),
// a web server waits for the end of a request line that never comes
// (timed out). It asks the peer in the protocols suspected (MQTT first,
// then HA) and returns "" when the peer answers in none (a busy or stopped
// broker, say).
func wrongPortHint(ctx context.Context, addr string, closed bool) string {
	if !closed {
		return probePort(ctx, addr, httpProbe, []byte("HTTP/"), "HTTP: a web port (the console or a /metrics endpoint?)")
	}
	if hint := probePort(ctx, addr, mqttProbe, []byte{0x20}, "MQTT: an MQTT bridge's device port"); hint != "" {
		return hint
	}
	return probePort(ctx, addr, haProbe, []byte("SGHA"),
		"SmartGo HA replication: a master broker's HA port (broker.ha_listen, by default the broker's port + 1)")
}

// probePort sends probe to addr and returns the hint for a peer that
// answers with answer first, "" for any other.
func probePort(ctx context.Context, addr string, probe, answer []byte, what string) string {
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), probeTimeout)
	defer cancel()
	var d net.Dialer
	c, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return ""
	}
	defer c.Close()
	if dl, ok := ctx.Deadline(); ok {
		_ = c.SetDeadline(dl)
	}
	if _, err := c.Write(probe); err != nil {
		return ""
	}
	got := make([]byte, len(answer))
	if _, err := io.ReadFull(c, got); err != nil || !bytes.Equal(got, answer) {
		return ""
	}
	return addr + " answers " + what + ", not RocketMQ remoting: registries listen on port 9876 by default, brokers on 10911"
}
