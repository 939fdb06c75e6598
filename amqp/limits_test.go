package amqp

import (
	"bytes"
	"context"
	"net"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

func TestHandshakeTimeout(t *testing.T) {
	s, err := NewServer(Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	s.handshakeTimeout = 200 * time.Millisecond
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), ln) }()
	defer func() {
		s.Close()
		<-done
	}()
	c := dialRaw(t, ln.Addr().String())
	c.write(wire.ProtocolHeader[:])
	expect[*wire.ConnectionStart](c)
	start := time.Now()
	c.expectEOF() // no start-ok: dropped
	if d := time.Since(start); d > 5*time.Second {
		t.Fatalf("dropped after %v", d)
	}
}

func TestChannelFlowStopsDeliveries(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	c.declareQueue(1, "q", nil)
	c.consume(1, "q", "t", true)
	if ok := call[*wire.ChannelFlowOk](c, 1, &wire.ChannelFlow{Active: false}); ok.Active {
		t.Fatal("flow-ok active")
	}
	c.openChannel(2)
	c.publish(2, "", "q", "held")
	// A round trip on channel 2: the delivery did not come first.
	call[*wire.QueueDeclareOk](c, 2, &wire.QueueDeclare{Queue: "q", Passive: true})
	c.send(1, &wire.ChannelFlow{Active: true})
	expect[*wire.ChannelFlowOk](c)
	if _, body := c.deliver(); body != "held" {
		t.Fatalf("got %q", body)
	}
}

func TestAlternateExchange(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	c.declareQueue(1, "unrouted", nil)
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "ae", Type: "fanout"})
	c.bind(1, "unrouted", "ae", "", nil)
	call[*wire.ExchangeDeclareOk](c, 1, &wire.ExchangeDeclare{Exchange: "main", Type: "direct", Arguments: wire.Table{"alternate-exchange": "ae"}})
	c.publishProps(1, "main", "nobody", wire.Properties{}, "caught", true)
	if _, body, ok := c.get(1, "unrouted", true); !ok || body != "caught" {
		t.Fatalf("alternate exchange: %q %v", body, ok)
	}
}

func TestMessageAndQueueSizeLimits(t *testing.T) {
	s, addr := startServer(t, Options{MaxMessageSize: 1000, MaxQueueBytes: 2500})
	c := dial(t, addr)
	c.openChannel(1)
	c.declareQueue(1, "q", nil)
	body := bytes.Repeat([]byte("b"), 1000)
	for range 3 {
		c.write(publishFrames(1, "", "q", wire.Properties{}, body, false))
	}
	ok := call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "q", Passive: true})
	if ok.MessageCount != 2 || s.Stats().Dropped != 1 {
		t.Fatalf("declare-ok %+v, stats %+v: want 2 kept and 1 dropped over MaxQueueBytes", ok, s.Stats())
	}
	c.write(publishFrames(1, "", "q", wire.Properties{}, append(body, 'x'), false))
	cl := c.expectChannelClose(1, wire.PreconditionFailed)
	if !bytes.Contains([]byte(cl.ReplyText), []byte("larger than configured max size")) {
		t.Fatalf("reply text %q", cl.ReplyText)
	}
}
