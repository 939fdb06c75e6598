package amqp

import (
	"bytes"
	"testing"

	"github.com/smartgo/smartgo/amqp/wire"
)

// BenchmarkPublishConsume is the hot path over real sockets: one
// publisher, one consumer with prefetch 100 acking every 50 messages,
// 256-byte bodies.
func BenchmarkPublishConsume(b *testing.B) {
	_, addr := startServer(b, Options{})
	cons := dial(b, addr)
	cons.openChannel(1)
	cons.declareQueue(1, "bench", nil)
	call[*wire.BasicQosOk](cons, 1, &wire.BasicQos{PrefetchCount: 100})
	cons.consume(1, "bench", "c", false)
	pub := dial(b, addr)
	pub.openChannel(1)
	frame := publishFrames(1, "", "bench", wire.Properties{DeliveryMode: 2}, bytes.Repeat([]byte("x"), 256), false)
	done := make(chan error, 1)
	n := b.N
	go func() {
		for i := 1; i <= n; i++ {
			m, err := cons.read()
			if err != nil {
				done <- err
				return
			}
			d := m.m.(*wire.BasicDeliver)
			if i%50 == 0 || i == n {
				if _, err := cons.nc.Write(wire.AppendMethodFrame(nil, 1, &wire.BasicAck{DeliveryTag: d.DeliveryTag, Multiple: true})); err != nil {
					done <- err
					return
				}
			}
		}
		done <- nil
	}()
	b.ReportAllocs()
	b.SetBytes(256)
	b.ResetTimer()
	batch := make([]byte, 0, 64*len(frame))
	for i := 0; i < n; {
		batch = batch[:0]
		for j := 0; j < 64 && i < n; j++ {
			batch = append(batch, frame...)
			i++
		}
		pub.write(batch)
	}
	if err := <-done; err != nil {
		b.Fatal(err)
	}
}
