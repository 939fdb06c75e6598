package browsertest

import (
	"net"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// amqpClient is a minimal AMQP 0-9-1 client on the amqp/wire codec, with
// channel 1 open, for the console's AMQP page.
type amqpClient struct {
	t  *testing.T
	nc net.Conn
	r  *wire.Reader
}

func dialAMQP(t *testing.T, addr string) *amqpClient {
	t.Helper()
	nc, err := net.DialTimeout("tcp", addr, 10*time.Second)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { nc.Close() })
	c := &amqpClient{t: t, nc: nc, r: wire.NewReader(nc, 1<<20)}
	if _, err := nc.Write(wire.ProtocolHeader[:]); err != nil {
		t.Fatal(err)
	}
	c.method(0) // connection.start
	c.send(0, &wire.ConnectionStartOk{ClientProperties: wire.Table{"product": "browsertest"}, Mechanism: "PLAIN",
		Response: "\x00guest\x00guest", Locale: "en_US"})
	tune, ok := c.method(0).(*wire.ConnectionTune)
	if !ok {
		t.Fatal("no connection.tune")
	}
	c.send(0, &wire.ConnectionTuneOk{ChannelMax: tune.ChannelMax, FrameMax: tune.FrameMax})
	c.send(0, &wire.ConnectionOpen{VirtualHost: "/"})
	c.method(0)
	c.call(&wire.ChannelOpen{})
	return c
}

func (c *amqpClient) send(ch uint16, m wire.Method) {
	c.t.Helper()
	if _, err := c.nc.Write(wire.AppendMethodFrame(nil, ch, m)); err != nil {
		c.t.Fatalf("send %s: %v", wire.Name(m), err)
	}
}

// method reads frames up to the next method on channel ch.
func (c *amqpClient) method(ch uint16) wire.Method {
	c.t.Helper()
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(60 * time.Second))
		f, err := c.r.ReadFrame()
		if err != nil {
			c.t.Fatalf("read frame: %v", err)
		}
		if f.Type != wire.FrameMethod || f.Channel != ch {
			continue // heartbeats, deliveries' content
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			c.t.Fatal(err)
		}
		if _, ok := m.(*wire.BasicDeliver); ok {
			continue
		}
		return m
	}
}

// call sends m on channel 1 and reads its answer.
func (c *amqpClient) call(m wire.Method) wire.Method {
	c.t.Helper()
	c.send(1, m)
	return c.method(1)
}

func (c *amqpClient) publish(queue, body string) {
	c.t.Helper()
	b := wire.AppendMethodFrame(nil, 1, &wire.BasicPublish{RoutingKey: queue})
	b = wire.AppendContentHeaderFrame(b, 1, 60, uint64(len(body)), []byte{0, 0})
	b = wire.AppendBodyFrames(b, 1, []byte(body), 1<<20)
	if _, err := c.nc.Write(b); err != nil {
		c.t.Fatal(err)
	}
}

// closedWith reads up to the server's connection.close and answers it.
func (c *amqpClient) closedWith() (uint16, string) {
	c.t.Helper()
	cl, ok := c.method(0).(*wire.ConnectionClose)
	if !ok {
		c.t.Fatal("want connection.close")
	}
	c.send(0, &wire.ConnectionCloseOk{})
	return cl.ReplyCode, cl.ReplyText
}
