package mqtt

import (
	"context"
	"log/slog"
	"net"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/mqtttest"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

type testServer struct {
	*Server
	addr    string
	backend *MemoryBackend
	logs    *testutil.LogBuffer
}

// startServer runs a server on 127.0.0.1:0 with a fresh MemoryBackend
// (unless one is given) and closes it at cleanup.
func startServer(t testing.TB, mod func(*Options), backend ...*MemoryBackend) *testServer {
	t.Helper()
	opts := DefaultOptions()
	opts.Listen = []string{"127.0.0.1:0"}
	lb := &testutil.LogBuffer{}
	opts.Logger = slog.New(slog.NewTextHandler(lb, &slog.HandlerOptions{Level: slog.LevelInfo}))
	if mod != nil {
		mod(&opts)
	}
	b := NewMemoryBackend()
	if len(backend) > 0 {
		b = backend[0]
	}
	s, err := NewServer(opts, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return &testServer{Server: s, addr: s.Addrs()[0].String(), backend: b, logs: lb}
}

// serveBackend runs a server with opts (listening on 127.0.0.1:0) over
// backend b, closes it at cleanup and returns its address.
func serveBackend(t testing.TB, opts Options, b Backend) string {
	t.Helper()
	return serveBackendServer(t, opts, b).Addrs()[0].String()
}

// serveBackendServer is serveBackend returning the server.
func serveBackendServer(t testing.TB, opts Options, b Backend) *Server {
	t.Helper()
	opts.Listen = []string{"127.0.0.1:0"}
	s, err := NewServer(opts, b)
	if err != nil {
		t.Fatal(err)
	}
	if err := s.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { s.Close() })
	return s
}

// rawClient speaks MQTT with the packets codec over a plain socket: the
// v3.1.1 test client and the tool for protocol violations.
type rawClient struct {
	*mqtttest.Conn
	t  testing.TB
	nc net.Conn
	v  packets.Version
}

func dialRaw(t testing.TB, addr string, v packets.Version) *rawClient {
	t.Helper()
	c := mqtttest.Dial(t, addr, v)
	return &rawClient{Conn: c, t: t, nc: c.NC, v: v}
}

// wrapRaw makes a test client of a connection the test dialled itself
// (closed when the test ends).
func wrapRaw(t testing.TB, nc net.Conn, v packets.Version) *rawClient {
	return &rawClient{Conn: mqtttest.New(t, nc, v), t: t, nc: nc, v: v}
}

func (r *rawClient) send(p packets.Packet) { r.t.Helper(); r.Send(p) }
func (r *rawClient) sendBytes(b []byte)    { r.t.Helper(); r.SendBytes(b) }
func (r *rawClient) recv() packets.Packet  { r.t.Helper(); return r.Recv() }
func (r *rawClient) closed() int           { r.t.Helper(); return r.Closed() }
func (r *rawClient) connect(cp *packets.Connect) *packets.Connack {
	r.t.Helper()
	return r.Connect(cp)
}

// next returns the next packet, or an error (io.EOF when the server closed).
func (r *rawClient) next(timeout time.Duration) (packets.Packet, error) { return r.Next(timeout) }

// nothing asserts no packet arrives within d.
func (r *rawClient) nothing(d time.Duration) {
	r.t.Helper()
	if p, err := r.next(d); err == nil {
		r.t.Fatalf("unexpected %T %+v", p, p)
	}
}

// connected dials and connects a client with the given id (clean start).
func connected(t testing.TB, addr string, v packets.Version, id string) *rawClient {
	t.Helper()
	r := dialRaw(t, addr, v)
	ack := r.connect(&packets.Connect{ClientID: id, CleanStart: true, KeepAlive: 60})
	if ack.ReasonCode != 0 {
		t.Fatalf("CONNACK %v", ack.ReasonCode)
	}
	return r
}

func (r *rawClient) subscribe(id uint16, subs ...packets.Subscription) *packets.Suback {
	r.t.Helper()
	r.send(&packets.Subscribe{PacketID: id, Subscriptions: subs})
	return r.expectSuback()
}

func (r *rawClient) expectSuback() *packets.Suback {
	r.t.Helper()
	p := r.recv()
	sa, ok := p.(*packets.Suback)
	if !ok {
		r.t.Fatalf("want SUBACK, got %T %+v", p, p)
	}
	return sa
}

func (r *rawClient) expectPublish() *packets.Publish {
	r.t.Helper()
	p := r.recv()
	pub, ok := p.(*packets.Publish)
	if !ok {
		r.t.Fatalf("want PUBLISH, got %T %+v", p, p)
	}
	return pub
}

func (r *rawClient) publish1(id uint16, topic, payload string) *packets.Puback {
	r.t.Helper()
	r.send(&packets.Publish{QoS: 1, PacketID: id, Topic: topic, Payload: []byte(payload)})
	p := r.recv()
	a, ok := p.(*packets.Puback)
	if !ok {
		r.t.Fatalf("want PUBACK, got %T %+v", p, p)
	}
	return a
}

func sub(filter string, qos byte) packets.Subscription {
	return packets.Subscription{Filter: filter, QoS: qos}
}
