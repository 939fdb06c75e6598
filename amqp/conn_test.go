package amqp

import (
	"bytes"
	"io"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

func quietLogger() *slog.Logger { return slog.New(slog.NewTextHandler(io.Discard, nil)) }

func TestHandshakeAndServerProperties(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.write(wire.ProtocolHeader[:])
	start := expect[*wire.ConnectionStart](c)
	if start.VersionMajor != 0 || start.VersionMinor != 9 {
		t.Errorf("version %d.%d, want 0.9", start.VersionMajor, start.VersionMinor)
	}
	if start.ServerProperties["product"] != "SmartGo" {
		t.Errorf("product %v", start.ServerProperties["product"])
	}
	caps, _ := start.ServerProperties["capabilities"].(wire.Table)
	for _, k := range []string{"publisher_confirms", "exchange_exchange_bindings", "basic.nack", "consumer_cancel_notify", "authentication_failure_close", "per_consumer_qos", "connection.blocked"} {
		if caps[k] != true {
			t.Errorf("capability %s = %v, want true", k, caps[k])
		}
	}
	if !strings.Contains(start.Mechanisms, "PLAIN") || !strings.Contains(start.Mechanisms, "AMQPLAIN") {
		t.Errorf("mechanisms %q", start.Mechanisms)
	}
	// AMQPLAIN: a table without its length.
	tb, _ := wire.AppendTable(nil, wire.Table{"LOGIN": "guest", "PASSWORD": "guest"})
	c.send(0, &wire.ConnectionStartOk{Mechanism: "AMQPLAIN", Response: string(tb[4:]), Locale: "en_US"})
	tune := expect[*wire.ConnectionTune](c)
	if tune.ChannelMax != 2047 || tune.FrameMax != 131072 || tune.Heartbeat != 60 {
		t.Errorf("tune %+v, want 2047/131072/60", tune)
	}
	c.send(0, &wire.ConnectionTuneOk{ChannelMax: 10, FrameMax: 4096})
	c.send(0, &wire.ConnectionOpen{VirtualHost: "/"})
	expect[*wire.ConnectionOpenOk](c)
	// channel-max lowered to 10 by the client: channel 11 is a
	// connection error.
	c.send(11, &wire.ChannelOpen{})
	c.expectConnClose(wire.ChannelError)
}

func TestAuthRefused(t *testing.T) {
	_, addr := startServer(t, Options{Authenticate: func(u, p string) (bool, error) { return u == "ann" && p == "secret", nil }})
	c := dialRaw(t, addr)
	if err := c.handshake("ann", "wrong", "/", 0); err == nil {
		t.Fatal("login with a wrong password succeeded")
	}
	// handshake read the close already? It returns at the first
	// non-tune method: connection.close 403.
	c2 := dialRaw(t, addr)
	c2.write(wire.ProtocolHeader[:])
	expect[*wire.ConnectionStart](c2)
	c2.send(0, &wire.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00ann\x00wrong"})
	cl := expect[*wire.ConnectionClose](c2)
	if cl.ReplyCode != wire.AccessRefused {
		t.Fatalf("close %d %q, want 403", cl.ReplyCode, cl.ReplyText)
	}
	c2.expectEOF()
	if err := dialRaw(t, addr).handshake("ann", "secret", "/", 0); err != nil {
		t.Fatalf("right password refused: %v", err)
	}
}

func TestBadProtocolHeader(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dialRaw(t, addr)
	c.write([]byte("AMQP\x01\x01\x00\x0a"))
	c.nc.SetReadDeadline(time.Now().Add(testTimeout))
	got, err := io.ReadAll(c.nc)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(got, wire.ProtocolHeader[:]) {
		t.Fatalf("got %q, want the server's protocol header and EOF", got)
	}
}

func TestUnknownVirtualHost(t *testing.T) {
	_, addr := startServer(t, Options{VirtualHosts: []string{"/", "prod"}})
	if err := dialRaw(t, addr).handshake("guest", "guest", "prod", 0); err != nil {
		t.Fatalf("vhost prod: %v", err)
	}
	c := dialRaw(t, addr)
	err := c.handshake("guest", "guest", "other", 0)
	if err == nil || !strings.Contains(err.Error(), "530") && !strings.Contains(err.Error(), "NOT_ALLOWED") {
		t.Fatalf("vhost other: %v, want 530 NOT_ALLOWED", err)
	}
}

func TestHeartbeatTimeout(t *testing.T) {
	s, addr := startServer(t, Options{Heartbeat: time.Second})
	c := dialRaw(t, addr)
	if err := c.handshake("guest", "guest", "/", 1); err != nil {
		t.Fatal(err)
	}
	// The server sends heartbeats while the client stays quiet.
	c.nc.SetReadDeadline(time.Now().Add(testTimeout))
	f, err := c.r.ReadFrame()
	if err != nil || f.Type != wire.FrameHeartbeat {
		t.Fatalf("first frame %+v %v, want a heartbeat", f, err)
	}
	waitFor(t, "the silent client to be dropped", func() bool { return s.Stats().Connections == 0 })
	// A client that sends heartbeats stays.
	c2 := dialRaw(t, addr)
	if err := c2.handshake("guest", "guest", "/", 1); err != nil {
		t.Fatal(err)
	}
	for range 6 {
		time.Sleep(500 * time.Millisecond)
		c2.write(wire.AppendHeartbeat(nil))
	}
	if n := s.Stats().Connections; n != 1 {
		t.Fatalf("connections %d, want the heartbeating one", n)
	}
}

func TestConnectionErrors(t *testing.T) {
	_, addr := startServer(t, Options{})
	for name, tc := range map[string]struct {
		frames []byte
		code   uint16
	}{
		"method on channel 0":     {wire.AppendMethodFrame(nil, 0, &wire.QueueDeclare{Queue: "x"}), wire.CommandInvalid},
		"unopened channel":        {wire.AppendMethodFrame(nil, 3, &wire.QueueDeclare{Queue: "x"}), wire.ChannelError},
		"content without publish": {wire.AppendContentHeaderFrame(nil, 1, 60, 0, []byte{0, 0}), wire.UnexpectedFrame},
		"bad frame type":          {wire.AppendFrame(nil, 9, 1, nil), wire.FrameError},
		"bad frame end":           {[]byte{1, 0, 1, 0, 0, 0, 0, 0}, wire.FrameError},
		"body over size": {func() []byte {
			b := wire.AppendMethodFrame(nil, 1, &wire.BasicPublish{RoutingKey: "q"})
			b = wire.AppendContentHeaderFrame(b, 1, 60, 2, []byte{0, 0})
			return wire.AppendFrame(b, wire.FrameBody, 1, []byte("abc"))
		}(), wire.FrameError},
		"method inside content": {func() []byte {
			b := wire.AppendMethodFrame(nil, 1, &wire.BasicPublish{RoutingKey: "q"})
			return wire.AppendMethodFrame(b, 1, &wire.BasicQos{})
		}(), wire.UnexpectedFrame},
		"immediate": {wire.AppendMethodFrame(nil, 1, &wire.BasicPublish{RoutingKey: "q", Immediate: true}), wire.NotImplemented},
	} {
		t.Run(name, func(t *testing.T) {
			c := dial(t, addr)
			c.openChannel(1)
			c.write(tc.frames)
			c.expectConnClose(tc.code)
		})
	}
}
