package amqp

import (
	"context"
	"io"
	"net"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// FuzzServerFrames feeds raw bytes to a server after a good handshake:
// whatever they are, the server answers or closes, never panics or hangs,
// and keeps serving other connections.
func FuzzServerFrames(f *testing.F) {
	seed := func(ms ...wire.Method) []byte {
		var b []byte
		for _, m := range ms {
			b = wire.AppendMethodFrame(b, 1, m)
		}
		return b
	}
	f.Add(seed(&wire.ChannelOpen{}, &wire.QueueDeclare{Queue: "q"}, &wire.BasicConsume{Queue: "q"}))
	f.Add(append(seed(&wire.ChannelOpen{}, &wire.ConfirmSelect{}), publishFrames(1, "", "q", wire.Properties{Headers: wire.Table{"a": int32(1)}}, []byte("hi"), true)...))
	f.Add(append(seed(&wire.ChannelOpen{}, &wire.ExchangeDeclare{Exchange: "h", Type: "headers"},
		&wire.QueueDeclare{Queue: "q", Arguments: wire.Table{"x-max-length": int32(1), "x-dead-letter-exchange": "h"}},
		&wire.QueueBind{Queue: "q", Exchange: "h", Arguments: wire.Table{"x-match": "any", "a": int32(1)}}),
		publishFrames(1, "h", "", wire.Properties{Headers: wire.Table{"a": int32(1)}}, []byte("x"), false)...))
	f.Add(seed(&wire.ChannelOpen{}, &wire.BasicGet{Queue: "q"}, &wire.BasicAck{DeliveryTag: 1, Multiple: true}, &wire.TxSelect{}, &wire.TxCommit{}))
	f.Add([]byte{1, 0, 1, 0, 0, 0, 5, 0, 20, 0, 10, 0, 0xCE})
	f.Add([]byte{2, 0, 1, 0, 0, 0, 14, 0, 60, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1, 0x80, 0, 0xCE})
	f.Add([]byte{8, 0, 0, 0, 0, 0, 0, 0xCE, 3, 0, 1, 0xff, 0xff, 0xff, 0xff})

	s, err := NewServer(Options{Logger: quietLogger(), FrameMax: 8192})
	if err != nil {
		f.Fatal(err)
	}
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		f.Fatal(err)
	}
	done := make(chan error, 1)
	go func() { done <- s.Serve(context.Background(), ln) }()
	f.Cleanup(func() {
		s.Close()
		<-done
	})
	addr := ln.Addr().String()
	f.Fuzz(func(t *testing.T, data []byte) {
		c := dial(t, addr)
		c.nc.SetDeadline(time.Now().Add(testTimeout))
		go func() {
			c.nc.Write(data)
			c.nc.(*net.TCPConn).CloseWrite()
		}()
		if _, err := io.Copy(io.Discard, c.nc); err != nil {
			t.Fatalf("the server neither answered nor closed: %v", err)
		}
	})
}
