package main

import (
	"context"
	"fmt"
	"net"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
	"github.com/smartgo/smartgo/internal/testutil"
)

// amqpConn is a minimal AMQP 0-9-1 client on the amqp/wire codec, with
// channel 1 open.
type amqpConn struct {
	t  *testing.T
	nc net.Conn
	r  *wire.Reader
}

func dialAMQP(t *testing.T, addr, user, password string) *amqpConn {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &amqpConn{t: t, nc: nc, r: wire.NewReader(nc, 1<<20)}
	if _, err := nc.Write(wire.ProtocolHeader[:]); err != nil {
		t.Fatal(err)
	}
	if _, ok := c.expect(0).(*wire.ConnectionStart); !ok {
		t.Fatal("no connection.start")
	}
	c.send(0, &wire.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00" + user + "\x00" + password, Locale: "en_US"})
	tune, ok := c.expect(0).(*wire.ConnectionTune)
	if !ok {
		t.Fatal("no connection.tune")
	}
	c.send(0, &wire.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax})
	c.send(0, &wire.ConnectionOpen{VirtualHost: "/"})
	if m, ok := c.expect(0).(*wire.ConnectionOpenOk); !ok {
		t.Fatalf("want connection.open-ok, got %T", m)
	}
	c.send(1, &wire.ChannelOpen{})
	if m, ok := c.expect(1).(*wire.ChannelOpenOk); !ok {
		t.Fatalf("want channel.open-ok, got %T", m)
	}
	return c
}

func (c *amqpConn) send(ch uint16, m wire.Method) {
	c.t.Helper()
	if _, err := c.nc.Write(wire.AppendMethodFrame(nil, ch, m)); err != nil {
		c.t.Fatalf("send %s: %v", wire.Name(m), err)
	}
}

// frame reads the next frame other than a heartbeat.
func (c *amqpConn) frame() wire.Frame {
	c.t.Helper()
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(20 * time.Second))
		f, err := c.r.ReadFrame()
		if err != nil {
			c.t.Fatalf("read frame: %v", err)
		}
		if f.Type != wire.FrameHeartbeat {
			return f
		}
	}
}

// expect reads the next method, on channel ch.
func (c *amqpConn) expect(ch uint16) wire.Method {
	c.t.Helper()
	f := c.frame()
	if f.Type != wire.FrameMethod || f.Channel != ch {
		c.t.Fatalf("want a method frame on channel %d, got type %d on %d", ch, f.Type, f.Channel)
	}
	m, err := wire.DecodeMethod(f.Payload)
	if err != nil {
		c.t.Fatal(err)
	}
	return m
}

// publish sends a persistent message on channel 1.
func (c *amqpConn) publish(exchange, key, body string) {
	c.t.Helper()
	raw, err := wire.AppendProperties(nil, wire.Properties{DeliveryMode: 2, ContentType: "text/plain"})
	if err != nil {
		c.t.Fatal(err)
	}
	b := wire.AppendMethodFrame(nil, 1, &wire.BasicPublish{Exchange: exchange, RoutingKey: key})
	b = wire.AppendContentHeaderFrame(b, 1, 60, uint64(len(body)), raw)
	b = wire.AppendBodyFrames(b, 1, []byte(body), 1<<20)
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// get takes one message from queue with basic.get and acknowledges it.
func (c *amqpConn) get(queue string) (wire.Properties, string) {
	c.t.Helper()
	c.send(1, &wire.BasicGet{Queue: queue})
	ok, isOK := c.expect(1).(*wire.BasicGetOk)
	if !isOK {
		c.t.Fatalf("basic.get %s: no message", queue)
	}
	f := c.frame()
	if f.Type != wire.FrameHeader {
		c.t.Fatalf("want a content header, got frame type %d", f.Type)
	}
	h, err := wire.DecodeContentHeader(f.Payload)
	if err != nil {
		c.t.Fatal(err)
	}
	props, err := wire.DecodeProperties(h.Raw)
	if err != nil {
		c.t.Fatal(err)
	}
	var body []byte
	for uint64(len(body)) < h.BodySize {
		f := c.frame()
		if f.Type != wire.FrameBody {
			c.t.Fatalf("want a body frame, got type %d", f.Type)
		}
		body = append(body, f.Payload...)
	}
	c.send(1, &wire.BasicAck{DeliveryTag: ok.DeliveryTag})
	return props, string(body)
}

// A standalone serves AMQP on amqp.listen with its durable state in its
// broker: a persistent message confirmed in a durable queue is there
// after a SIGKILL and a restart of the process on the same data.
func TestCmdBinaryStandaloneAMQPSurvivesKill(t *testing.T) {
	data := t.TempDir()
	args := []string{"standalone", "-data", data, "-set", "registry.listen=127.0.0.1:0", "-set", "broker.listen=127.0.0.1:0",
		"-set", "bridge.listen=127.0.0.1:0", "-set", "console.listen=", "-set", "amqp.listen=127.0.0.1:0",
		"-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB", "-set", "metrics.listen=127.0.0.1:0"}
	listening := regexp.MustCompile(`AMQP 0-9-1 listening.* listen=(\S+)`)
	p := startBin(t, args...)
	maddr := p.waitLog(t, regexp.MustCompile(`metrics listening.* addr=(\S+)`), 30*time.Second)[1]
	addr := p.waitLog(t, listening, 60*time.Second)[1]

	// store.max_message_size=1MiB is below amqp.max_message_size (16 MiB):
	// the start says what that means for durable queues.
	if !strings.Contains(p.stderr.String(), "amqp.max_message_size is above store.max_message_size") {
		t.Errorf("no word on amqp.max_message_size above store.max_message_size:\n%s", p.stderr.String())
	}
	c := dialAMQP(t, addr, "guest", "guest")
	c.send(1, &wire.QueueDeclare{Queue: "orders", Durable: true})
	if ok, isOK := c.expect(1).(*wire.QueueDeclareOk); !isOK || ok.Queue != "orders" {
		t.Fatalf("queue.declare: %+v", ok)
	}
	c.send(1, &wire.ConfirmSelect{})
	if _, ok := c.expect(1).(*wire.ConfirmSelectOk); !ok {
		t.Fatal("no confirm.select-ok")
	}
	c.publish("", "orders", "order 1")
	c.publish("", "orders", "order 2")
	for acked := uint64(0); acked < 2; {
		m := c.expect(1)
		ack, ok := m.(*wire.BasicAck)
		if !ok {
			t.Fatalf("want basic.ack, got %s %+v", wire.Name(m), m)
		}
		if ack.Multiple {
			acked = ack.DeliveryTag
		} else {
			acked++
		}
	}
	testutil.WaitFor(t, 30*time.Second, "/readyz 200 with the AMQP listener", func() bool {
		code, body := readyz(t, maddr)
		return code == 200 && strings.Contains(body, "ok amqp")
	})
	if m := metricsText(t, maddr); !strings.Contains(m, "\nsmartgo_amqp_published_total 2\n") || !strings.Contains(m, "\nsmartgo_amqp_connections 1\n") {
		t.Fatalf("/metrics after two publishes on one connection:\n%s", m)
	}
	if err := p.cmd.Process.Signal(syscall.SIGKILL); err != nil {
		t.Fatal(err)
	}
	<-p.done

	p = startBin(t, args...)
	addr = p.waitLog(t, listening, 60*time.Second)[1]
	c = dialAMQP(t, addr, "guest", "guest")
	c.send(1, &wire.QueueDeclare{Queue: "orders", Passive: true})
	if ok, isOK := c.expect(1).(*wire.QueueDeclareOk); !isOK || ok.MessageCount != 2 {
		t.Fatalf("the durable queue after the restart: %+v", ok)
	}
	for i := 1; i <= 2; i++ {
		props, body := c.get("orders")
		if want := fmt.Sprintf("order %d", i); body != want || props.DeliveryMode != 2 || props.ContentType != "text/plain" {
			t.Fatalf("message %d after the restart: %q %+v", i, body, props)
		}
	}
	if code, _ := p.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, p.stderr.String())
	}
}

// An AMQP listen address in use stops the start with an error naming
// amqp.listen, and a user not in amqp.credentials_file is refused.
func TestCmdStandaloneAMQPListenInUseAndCredentials(t *testing.T) {
	busy, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer busy.Close()
	standalone := func(amqpListen string, extra ...string) []string {
		return append([]string{"standalone", "-data", t.TempDir(), "-set", "registry.listen=127.0.0.1:0", "-set", "broker.listen=127.0.0.1:0",
			"-set", "bridge.listen=127.0.0.1:0", "-set", "console.listen=", "-set", "store.segment_size=4MiB",
			"-set", "store.max_message_size=1MiB", "-set", "amqp.listen=" + amqpListen}, extra...)
	}
	var out, errb testutil.LogBuffer
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	code := run(ctx, standalone(busy.Addr().String()), &out, &errb)
	if code == exitOK || !strings.Contains(errb.String(), "amqp.listen "+busy.Addr().String()) ||
		!strings.Contains(errb.String(), "address already in use") {
		t.Fatalf("exit %d with the AMQP port in use:\n%s", code, errb.String())
	}

	creds := filepath.Join(t.TempDir(), "amqp.passwd")
	if code, _, stderr := runCmd(t, "passwd", "-f", creds, "-u", "app", "-p", "app-secret"); code != exitOK {
		t.Fatalf("passwd: %d %s", code, stderr)
	}
	p := startBin(t, standalone("127.0.0.1:0", "-set", "amqp.credentials_file="+creds)...)
	addr := p.waitLog(t, regexp.MustCompile(`AMQP 0-9-1 listening.* listen=(\S+)`), 60*time.Second)[1]
	dialAMQP(t, addr, "app", "app-secret") // fails the test unless logged in

	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	c := &amqpConn{t: t, nc: nc, r: wire.NewReader(nc, 1<<20)}
	if _, err := nc.Write(wire.ProtocolHeader[:]); err != nil {
		t.Fatal(err)
	}
	c.expect(0)
	c.send(0, &wire.ConnectionStartOk{Mechanism: "PLAIN", Response: "\x00app\x00wrong", Locale: "en_US"})
	m := c.expect(0)
	if cl, ok := m.(*wire.ConnectionClose); !ok || cl.ReplyCode != wire.AccessRefused {
		t.Fatalf("a wrong password: want connection.close 403, got %s %+v", wire.Name(m), m)
	}
}
