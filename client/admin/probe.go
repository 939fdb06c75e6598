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
)

// wrongPortHint says what answers at addr when a request to it failed in
// a way a peer that is not RocketMQ remoting causes: an MQTT server closes
// at the first bytes of a remoting frame (closed), a web server waits for
// the end of a request line that never comes (timed out). It asks the
// peer once in the protocol suspected and returns "" when the peer does
// not answer in it (a busy or stopped broker, say).
func wrongPortHint(ctx context.Context, addr string, closed bool) string {
	probe, answer, what := httpProbe, []byte("HTTP/"), "HTTP: a web port (the console or a /metrics endpoint?)"
	if closed {
		probe, answer, what = mqttProbe, []byte{0x20}, "MQTT: an MQTT bridge's device port"
	}
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
