package amqp

import (
	"context"
	"net"
	"runtime"
	"testing"

	"github.com/smartgo/smartgo/amqp/wire"
)

func TestTxCommitAndRollback(t *testing.T) {
	_, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	c.declareQueue(1, "q", nil)
	c.publish(1, "", "q", "before")
	call[*wire.TxSelectOk](c, 1, &wire.TxSelect{})
	c.publish(1, "", "q", "held")
	g, _, _ := c.get(1, "q", false) // "before"; get-ok is not transactional
	c.send(1, &wire.BasicAck{DeliveryTag: g.DeliveryTag})
	call[*wire.TxRollbackOk](c, 1, &wire.TxRollback{})
	// Rolled back: "held" never arrived, the ack never happened.
	if _, _, ok := c.get(1, "q", true); ok {
		t.Fatal("a rolled-back publish was delivered")
	}
	c.publish(1, "", "q", "kept")
	c.send(1, &wire.BasicAck{DeliveryTag: g.DeliveryTag})
	if ok := call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "q", Passive: true}); ok.MessageCount != 0 {
		t.Fatalf("publish visible before commit: %+v", ok)
	}
	call[*wire.TxCommitOk](c, 1, &wire.TxCommit{})
	if _, body, _ := c.get(1, "q", true); body != "kept" {
		t.Fatalf("after commit got %q", body)
	}
	// The ack of "before" was committed: nothing to requeue at close.
	call[*wire.ChannelCloseOk](c, 1, &wire.ChannelClose{})
	c.openChannel(1)
	if ok := call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "q", Passive: true}); ok.MessageCount != 0 {
		t.Fatalf("committed ack lost: %+v", ok)
	}
	c.send(1, &wire.TxCommit{})
	c.expectChannelClose(1, wire.PreconditionFailed)
	c.openChannel(1)
	call[*wire.TxSelectOk](c, 1, &wire.TxSelect{})
	c.send(1, &wire.ConfirmSelect{})
	c.expectChannelClose(1, wire.PreconditionFailed)
}

func TestShutdownClosesConnections(t *testing.T) {
	s, err := NewServer(Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan error, 1)
	go func() { done <- s.Serve(ctx, ln) }()
	c := dial(t, ln.Addr().String())
	cancel()
	c.expectConnClose(wire.ConnectionForced)
	if err := <-done; err != nil {
		t.Fatalf("Serve: %v", err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
}

func TestServeSeveralListeners(t *testing.T) {
	s, err := NewServer(Options{Logger: quietLogger()})
	if err != nil {
		t.Fatal(err)
	}
	var addrs []string
	done := make(chan error, 2)
	for range 2 {
		ln, err := net.Listen("tcp", "127.0.0.1:0")
		if err != nil {
			t.Fatal(err)
		}
		addrs = append(addrs, ln.Addr().String())
		go func() { done <- s.Serve(context.Background(), ln) }()
	}
	a, b := dial(t, addrs[0]), dial(t, addrs[1])
	a.openChannel(1)
	b.openChannel(1)
	a.declareQueue(1, "shared", nil)
	b.publish(1, "", "shared", "across listeners")
	call[*wire.QueueDeclareOk](b, 1, &wire.QueueDeclare{Queue: "shared", Passive: true})
	if _, body, _ := a.get(1, "shared", true); body != "across listeners" {
		t.Fatalf("got %q", body)
	}
	closed := make(chan uint16, 1)
	go func() {
		m, _ := a.read()
		cl, _ := m.m.(*wire.ConnectionClose)
		if cl == nil {
			closed <- 0
			return
		}
		a.nc.Write(wire.AppendMethodFrame(nil, 0, &wire.ConnectionCloseOk{}))
		closed <- cl.ReplyCode
	}()
	b.nc.Close()
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if code := <-closed; code != wire.ConnectionForced {
		t.Fatalf("a got close %d, want 320", code)
	}
	for range 2 {
		if err := <-done; err != nil {
			t.Fatalf("Serve: %v", err)
		}
	}
}

// TestCloseEndsEveryGoroutine: after Close and Serve's return, the
// server's goroutines (connections' readers and writers, the durable
// worker, the janitor) are gone.
func TestCloseEndsEveryGoroutine(t *testing.T) {
	before := runtime.NumGoroutine()
	s, err := NewServer(Options{Logger: quietLogger(), Backend: newMemBackend()})
	if err != nil {
		t.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), ln) }()
	for range 3 {
		c := dial(t, ln.Addr().String())
		c.openChannel(1)
		call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "d", Durable: true})
		c.consume(1, "d", "", false)
		c.publish(1, "", "d", "x")
		c.nc.Close()
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitFor(t, "the server's goroutines to end", func() bool { return runtime.NumGoroutine() <= before })
}
