// Package mqtttest is the raw MQTT client the tests of mqtt, bridge
// and internal/cluster share: packets from mqtt/packets over a plain
// socket, with no session logic of its own, so a test can send exactly
// what it wants (protocol violations included) and see exactly what comes
// back.
package mqtttest

import (
	"errors"
	"io"
	"net"
	"os/exec"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// DefaultRecvTimeout bounds Recv unless Conn.RecvTimeout says otherwise.
const DefaultRecvTimeout = 10 * time.Second

// Conn is one test client connection. It fails its test on any error
// except from Next, which returns them.
type Conn struct {
	T           testing.TB
	NC          net.Conn
	V           packets.Version
	RecvTimeout time.Duration // 0: DefaultRecvTimeout

	buf []byte
	dec *packets.Decoder
}

// New wraps nc (closed when the test ends).
func New(t testing.TB, nc net.Conn, v packets.Version) *Conn {
	t.Cleanup(func() { _ = nc.Close() })
	dec, err := packets.NewDecoder(packets.Options{MaxPacketSize: packets.MaxPacketSizeLimit})
	if err != nil {
		t.Fatal(err)
	}
	return &Conn{T: t, NC: nc, V: v, dec: dec}
}

// Dial connects to addr.
func Dial(t testing.TB, addr string, v packets.Version) *Conn {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	return New(t, nc, v)
}

// Send encodes and writes p.
func (c *Conn) Send(p packets.Packet) {
	c.T.Helper()
	b, err := packets.AppendPacket(nil, p, c.V)
	if err != nil {
		c.T.Fatal(err)
	}
	c.SendBytes(b)
}

// SendBytes writes raw bytes (a malformed packet, half a packet, ...).
func (c *Conn) SendBytes(b []byte) {
	c.T.Helper()
	if _, err := c.NC.Write(b); err != nil {
		c.T.Fatal(err)
	}
}

// Next returns the next packet within timeout, or the error (io.EOF when
// the server closed, a timeout, or a decoding error).
func (c *Conn) Next(timeout time.Duration) (packets.Packet, error) {
	deadline := time.Now().Add(timeout)
	for {
		if len(c.buf) > 0 {
			p, n, err := c.dec.Next(c.V, c.buf)
			if err == nil {
				c.buf = c.buf[n:]
				return p, nil
			}
			if !errors.Is(err, packets.ErrIncomplete) {
				return nil, err
			}
		}
		_ = c.NC.SetReadDeadline(deadline)
		tmp := make([]byte, 64<<10)
		n, err := c.NC.Read(tmp)
		c.buf = append(c.buf, tmp[:n]...)
		if err != nil && n == 0 {
			return nil, err
		}
	}
}

// Recv returns the next packet or fails the test.
func (c *Conn) Recv() packets.Packet {
	c.T.Helper()
	timeout := c.RecvTimeout
	if timeout <= 0 {
		timeout = DefaultRecvTimeout
	}
	p, err := c.Next(timeout)
	if err != nil {
		c.T.Fatalf("recv: %v", err)
	}
	return p
}

// Connect sends cp and returns the CONNACK (whatever its reason code).
func (c *Conn) Connect(cp *packets.Connect) *packets.Connack {
	c.T.Helper()
	c.Send(cp)
	p := c.Recv()
	ack, ok := p.(*packets.Connack)
	if !ok {
		c.T.Fatalf("want CONNACK, got %T", p)
	}
	return ack
}

// Closed asserts the server closes the connection, after an optional
// DISCONNECT whose reason code it returns (-1 when none was sent). It
// waits up to 15 s for each packet (a loaded machine stalls for seconds);
// a test that needs the close sooner measures it.
func (c *Conn) Closed() int {
	c.T.Helper()
	code := -1
	for {
		p, err := c.Next(15 * time.Second)
		if err != nil {
			var ne net.Error
			if errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset") || !(errors.As(err, &ne) && ne.Timeout()) {
				return code
			}
			c.T.Fatalf("connection not closed: %v", err)
		}
		if d, ok := p.(*packets.Disconnect); ok {
			code = int(d.ReasonCode)
		}
	}
}

// Discard drops bytes read but not yet decoded, for a test that then
// reads the socket itself and knows it stopped at a packet boundary.
func (c *Conn) Discard() { c.buf = nil }

// Mosquitto returns the paths of mosquitto_sub and mosquitto_pub, or skips
// the test when they are not installed (apt-get install
// mosquitto-clients; .ci/run installs them).
func Mosquitto(t testing.TB) (sub, pub string) {
	t.Helper()
	sub, err1 := exec.LookPath("mosquitto_sub")
	pub, err2 := exec.LookPath("mosquitto_pub")
	if err1 != nil || err2 != nil {
		t.Skip("mosquitto_sub/mosquitto_pub not installed (apt-get install mosquitto-clients)")
	}
	return sub, pub
}
