package amqp

import (
	"bufio"
	"context"
	"errors"
	"fmt"
	"net"
	"reflect"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// This file is a small AMQP 0-9-1 client on amqp/wire for the engine's
// tests: real sockets on 127.0.0.1.

// startServer runs a Server with opts on a 127.0.0.1 listener until the
// test ends.
func startServer(t testing.TB, opts Options) (*Server, string) {
	t.Helper()
	if opts.Logger == nil {
		opts.Logger = quietLogger()
	}
	s, err := NewServer(opts)
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), ln) }()
	t.Cleanup(func() {
		s.Close()
		if err := <-done; err != nil {
			t.Errorf("Serve: %v", err)
		}
	})
	return s, ln.Addr().String()
}

// tmsg is what the client read: a method and, for content-bearing
// methods, the properties and body.
type tmsg struct {
	ch    uint16
	m     wire.Method
	props wire.Properties
	body  []byte
}

type tclient struct {
	t      testing.TB
	nc     net.Conn
	r      *wire.Reader
	max    uint32
	cancel bool // announce consumer_cancel_notify
	// noBlocked: do not announce connection.blocked.
	noBlocked bool
	// frameMax, when set, is the frame-max asked in tune-ok (and the
	// largest frame read); else the server's.
	frameMax uint32
}

const testTimeout = 10 * time.Second

// dialRaw connects without the handshake.
func dialRaw(t testing.TB, addr string) *tclient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, testTimeout)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	return &tclient{t: t, nc: nc, r: wire.NewReader(bufio.NewReader(nc), 1<<20), max: 131072, cancel: true}
}

// dial connects and logs in as guest to vhost "/".
func dial(t testing.TB, addr string) *tclient {
	t.Helper()
	c := dialRaw(t, addr)
	if err := c.handshake("guest", "guest", "/", 0); err != nil {
		t.Fatal(err)
	}
	return c
}

func (c *tclient) write(b []byte) {
	c.t.Helper()
	c.nc.SetWriteDeadline(time.Now().Add(testTimeout))
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatalf("write: %v", err)
	}
}

func (c *tclient) send(ch uint16, m wire.Method) {
	c.t.Helper()
	c.write(wire.AppendMethodFrame(nil, ch, m))
}

// handshake runs the client side of connection.start to open-ok; an
// error is what the server said instead.
func (c *tclient) handshake(user, pass, vhost string, heartbeat uint16) error {
	c.t.Helper()
	c.write(wire.ProtocolHeader[:])
	m, err := c.read()
	if err != nil {
		return err
	}
	if _, ok := m.m.(*wire.ConnectionStart); !ok {
		return fmt.Errorf("got %s, want connection.start", wire.Name(m.m))
	}
	caps := wire.Table{"consumer_cancel_notify": c.cancel, "basic.nack": true, "publisher_confirms": true,
		"connection.blocked": !c.noBlocked}
	c.send(0, &wire.ConnectionStartOk{ClientProperties: wire.Table{"product": "test", "capabilities": caps},
		Mechanism: "PLAIN", Response: "\x00" + user + "\x00" + pass, Locale: "en_US"})
	if m, err = c.read(); err != nil {
		return err
	}
	tune, ok := m.m.(*wire.ConnectionTune)
	if !ok {
		return fmt.Errorf("got %s %+v, want connection.tune", wire.Name(m.m), m.m)
	}
	fm := tune.FrameMax
	if c.frameMax != 0 {
		fm = c.frameMax
		c.r.SetMax(fm)
	}
	c.send(0, &wire.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: fm, Heartbeat: heartbeat})
	c.send(0, &wire.ConnectionOpen{VirtualHost: vhost})
	if m, err = c.read(); err != nil {
		return err
	}
	if _, ok := m.m.(*wire.ConnectionOpenOk); !ok {
		return fmt.Errorf("got %s %+v, want connection.open-ok", wire.Name(m.m), m.m)
	}
	return nil
}

// read returns the next method (with its content), skipping heartbeats.
func (c *tclient) read() (tmsg, error) {
	for {
		c.nc.SetReadDeadline(time.Now().Add(testTimeout))
		f, err := c.r.ReadFrame()
		if err != nil {
			return tmsg{}, err
		}
		if f.Type == wire.FrameHeartbeat {
			continue
		}
		if f.Type != wire.FrameMethod {
			return tmsg{}, fmt.Errorf("frame type %d, want a method", f.Type)
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			return tmsg{}, err
		}
		out := tmsg{ch: f.Channel, m: m}
		if !m.HasContent() {
			return out, nil
		}
		if f, err = c.r.ReadFrame(); err != nil {
			return out, err
		}
		h, err := wire.DecodeContentHeader(f.Payload)
		if err != nil {
			return out, err
		}
		if out.props, err = wire.DecodeProperties(h.Raw); err != nil {
			return out, err
		}
		out.body = []byte{}
		for uint64(len(out.body)) < h.BodySize {
			if f, err = c.r.ReadFrame(); err != nil {
				return out, err
			}
			if f.Type != wire.FrameBody {
				return out, fmt.Errorf("frame type %d inside content", f.Type)
			}
			out.body = append(out.body, f.Payload...)
		}
		return out, nil
	}
}

// next reads the next method, failing the test on error.
func (c *tclient) next() tmsg {
	c.t.Helper()
	m, err := c.read()
	if err != nil {
		c.t.Fatalf("read: %v", err)
	}
	return m
}

// expect reads the next method and requires its type to be T's.
func expect[T wire.Method](c *tclient) T {
	c.t.Helper()
	m := c.next()
	v, ok := m.m.(T)
	if !ok {
		var want T
		c.t.Fatalf("got %s %+v, want %T", wire.Name(m.m), m.m, want)
	}
	return v
}

// expectMsg reads the next method and requires it to be T with content.
func expectMsg[T wire.Method](c *tclient) (T, tmsg) {
	c.t.Helper()
	m := c.next()
	v, ok := m.m.(T)
	if !ok {
		var want T
		c.t.Fatalf("got %s %+v, want %T", wire.Name(m.m), m.m, want)
	}
	return v, m
}

// call sends m and reads the reply as T.
func call[T wire.Method](c *tclient, ch uint16, m wire.Method) T {
	c.t.Helper()
	c.send(ch, m)
	return expect[T](c)
}

// openChannel opens channel id.
func (c *tclient) openChannel(id uint16) {
	c.t.Helper()
	call[*wire.ChannelOpenOk](c, id, &wire.ChannelOpen{})
}

// publishFrames is basic.publish with its content as bytes.
func publishFrames(ch uint16, exchange, key string, props wire.Properties, body []byte, mandatory bool) []byte {
	b := wire.AppendMethodFrame(nil, ch, &wire.BasicPublish{Exchange: exchange, RoutingKey: key, Mandatory: mandatory})
	raw, err := wire.AppendProperties(nil, props)
	if err != nil {
		panic(err)
	}
	b = wire.AppendContentHeaderFrame(b, ch, 60, uint64(len(body)), raw)
	return wire.AppendBodyFrames(b, ch, body, 131072)
}

func (c *tclient) publish(ch uint16, exchange, key string, body string) {
	c.t.Helper()
	c.write(publishFrames(ch, exchange, key, wire.Properties{}, []byte(body), false))
}

func (c *tclient) publishProps(ch uint16, exchange, key string, props wire.Properties, body string, mandatory bool) {
	c.t.Helper()
	c.write(publishFrames(ch, exchange, key, props, []byte(body), mandatory))
}

// declareQueue declares a plain queue and returns its name.
func (c *tclient) declareQueue(ch uint16, name string, args wire.Table) string {
	c.t.Helper()
	return call[*wire.QueueDeclareOk](c, ch, &wire.QueueDeclare{Queue: name, Arguments: args}).Queue
}

func (c *tclient) bind(ch uint16, q, x, key string, args wire.Table) {
	c.t.Helper()
	call[*wire.QueueBindOk](c, ch, &wire.QueueBind{Queue: q, Exchange: x, RoutingKey: key, Arguments: args})
}

func (c *tclient) consume(ch uint16, q, tag string, noAck bool) string {
	c.t.Helper()
	return call[*wire.BasicConsumeOk](c, ch, &wire.BasicConsume{Queue: q, ConsumerTag: tag, NoAck: noAck}).ConsumerTag
}

// deliver reads the next basic.deliver and returns it with its body.
func (c *tclient) deliver() (*wire.BasicDeliver, string) {
	c.t.Helper()
	d, m := expectMsg[*wire.BasicDeliver](c)
	return d, string(m.body)
}

// get does basic.get; ok false for get-empty.
func (c *tclient) get(ch uint16, q string, noAck bool) (*wire.BasicGetOk, string, bool) {
	c.t.Helper()
	c.send(ch, &wire.BasicGet{Queue: q, NoAck: noAck})
	m := c.next()
	switch v := m.m.(type) {
	case *wire.BasicGetOk:
		return v, string(m.body), true
	case *wire.BasicGetEmpty:
		return nil, "", false
	}
	c.t.Fatalf("got %s, want get-ok or get-empty", wire.Name(m.m))
	return nil, "", false
}

// expectChannelClose reads channel.close with code, answers close-ok.
func (c *tclient) expectChannelClose(ch uint16, code uint16) *wire.ChannelClose {
	c.t.Helper()
	m := c.next()
	cl, ok := m.m.(*wire.ChannelClose)
	if !ok || m.ch != ch {
		c.t.Fatalf("got %s %+v on channel %d, want channel.close %d on %d", wire.Name(m.m), m.m, m.ch, code, ch)
	}
	if cl.ReplyCode != code {
		c.t.Fatalf("channel.close %d %q, want %d", cl.ReplyCode, cl.ReplyText, code)
	}
	c.send(ch, &wire.ChannelCloseOk{})
	return cl
}

// expectConnClose reads connection.close with code, answers close-ok and
// requires the server to close the socket.
func (c *tclient) expectConnClose(code uint16) *wire.ConnectionClose {
	c.t.Helper()
	m := c.next()
	cl, ok := m.m.(*wire.ConnectionClose)
	if !ok {
		c.t.Fatalf("got %s %+v, want connection.close %d", wire.Name(m.m), m.m, code)
	}
	if cl.ReplyCode != code {
		c.t.Fatalf("connection.close %d %q, want %d", cl.ReplyCode, cl.ReplyText, code)
	}
	c.send(0, &wire.ConnectionCloseOk{})
	c.expectEOF()
	return cl
}

// expectEOF requires the server to close the connection.
func (c *tclient) expectEOF() {
	c.t.Helper()
	for {
		_, err := c.read()
		if err == nil {
			continue
		}
		var ne net.Error
		if errors.As(err, &ne) && ne.Timeout() {
			c.t.Fatalf("the server did not close the connection")
		}
		return
	}
}

// waitFor polls cond until it holds or the test times out.
func waitFor(t testing.TB, what string, cond func() bool) {
	t.Helper()
	deadline := time.Now().Add(testTimeout)
	for !cond() {
		if time.Now().After(deadline) {
			t.Fatalf("timed out waiting for %s", what)
		}
		time.Sleep(time.Millisecond)
	}
}

func equal(a, b any) bool { return reflect.DeepEqual(a, b) }
