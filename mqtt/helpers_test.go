package mqtt

import (
	"bytes"
	"context"
	"errors"
	"io"
	"log/slog"
	"net"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// logBuf collects slog output so tests can assert on log lines.
type logBuf struct {
	mu sync.Mutex
	b  bytes.Buffer
}

func (l *logBuf) Write(p []byte) (int, error) {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.Write(p)
}

func (l *logBuf) String() string {
	l.mu.Lock()
	defer l.mu.Unlock()
	return l.b.String()
}

type testServer struct {
	*Server
	addr    string
	backend *MemoryBackend
	logs    *logBuf
}

// startServer runs a server on 127.0.0.1:0 with a fresh MemoryBackend
// (unless one is given) and closes it at cleanup.
func startServer(t testing.TB, mod func(*Options), backend ...*MemoryBackend) *testServer {
	t.Helper()
	opts := DefaultOptions()
	opts.Listen = []string{"127.0.0.1:0"}
	lb := &logBuf{}
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

// checkFor polls fn until it returns true or the timeout passes.
func checkFor(t testing.TB, timeout time.Duration, what string, fn func() bool) {
	t.Helper()
	deadline := time.Now().Add(timeout)
	for !fn() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(5 * time.Millisecond)
	}
}

// rawClient speaks MQTT with the packets codec over a plain socket: the
// v3.1.1 test client and the tool for protocol violations.
type rawClient struct {
	t   testing.TB
	nc  net.Conn
	v   packets.Version
	buf []byte
	dec *packets.Decoder
}

func dialRaw(t testing.TB, addr string, v packets.Version) *rawClient {
	t.Helper()
	nc, err := net.Dial("tcp", addr)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	dec, _ := packets.NewDecoder(packets.Options{MaxPacketSize: packets.MaxPacketSizeLimit})
	return &rawClient{t: t, nc: nc, v: v, dec: dec}
}

func (r *rawClient) send(p packets.Packet) {
	r.t.Helper()
	b, err := packets.AppendPacket(nil, p, r.v)
	if err != nil {
		r.t.Fatal(err)
	}
	r.sendBytes(b)
}

func (r *rawClient) sendBytes(b []byte) {
	r.t.Helper()
	if _, err := r.nc.Write(b); err != nil {
		r.t.Fatal(err)
	}
}

// next returns the next packet, or an error (io.EOF when the server closed).
func (r *rawClient) next(timeout time.Duration) (packets.Packet, error) {
	deadline := time.Now().Add(timeout)
	for {
		if len(r.buf) > 0 {
			p, n, err := r.dec.Next(r.v, r.buf)
			if err == nil {
				r.buf = r.buf[n:]
				return p, nil
			}
			if err != packets.ErrIncomplete {
				return nil, err
			}
		}
		r.nc.SetReadDeadline(deadline)
		tmp := make([]byte, 64<<10)
		n, err := r.nc.Read(tmp)
		r.buf = append(r.buf, tmp[:n]...)
		if err != nil && n == 0 {
			return nil, err
		}
	}
}

func (r *rawClient) recv() packets.Packet {
	r.t.Helper()
	p, err := r.next(5 * time.Second)
	if err != nil {
		r.t.Fatalf("recv: %v", err)
	}
	return p
}

// nothing asserts no packet arrives within d.
func (r *rawClient) nothing(d time.Duration) {
	r.t.Helper()
	if p, err := r.next(d); err == nil {
		r.t.Fatalf("unexpected %T %+v", p, p)
	}
}

// closed asserts the server closes the connection, after an optional
// DISCONNECT whose reason code it returns (-1 when none was sent).
func (r *rawClient) closed() int {
	r.t.Helper()
	code := -1
	for {
		p, err := r.next(5 * time.Second)
		if err != nil {
			var ne net.Error
			if errors.Is(err, io.EOF) || strings.Contains(err.Error(), "reset") || !(errors.As(err, &ne) && ne.Timeout()) {
				return code
			}
			r.t.Fatalf("connection not closed: %v", err)
		}
		if d, ok := p.(*packets.Disconnect); ok {
			code = int(d.ReasonCode)
		}
	}
}

func (r *rawClient) connect(cp *packets.Connect) *packets.Connack {
	r.t.Helper()
	r.send(cp)
	p := r.recv()
	ack, ok := p.(*packets.Connack)
	if !ok {
		r.t.Fatalf("want CONNACK, got %T", p)
	}
	return ack
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
