package amqp

import (
	"bytes"
	"fmt"
	"testing"

	"github.com/smartgo/smartgo/amqp/wire"
)

// BenchmarkPublishConfirmDurable is the path of `make compare-amqp`'s
// first workload over real sockets: persistent publishes under confirms
// (window 1,000) to a durable queue on a Backend that finishes its
// Appends on another goroutine, one consumer with prefetch 1,000 acking
// every 100 deliveries, 128-byte bodies. It checks that every publish is
// confirmed (acked, never nacked) and every message delivered.
func BenchmarkPublishConfirmDurable(b *testing.B) {
	be := newMemBackend()
	be.async = true
	_, addr := startServer(b, Options{Backend: be})
	cons := dial(b, addr)
	cons.openChannel(1)
	call[*wire.QueueDeclareOk](cons, 1, &wire.QueueDeclare{Queue: "bench", Durable: true})
	call[*wire.BasicQosOk](cons, 1, &wire.BasicQos{PrefetchCount: 1000})
	cons.consume(1, "bench", "c", false)
	pub := dial(b, addr)
	pub.openChannel(1)
	call[*wire.ConfirmSelectOk](pub, 1, &wire.ConfirmSelect{})
	frame := publishFrames(1, "", "bench", wire.Properties{DeliveryMode: 2}, bytes.Repeat([]byte("x"), 128), false)
	const window, burst = 1000, 50
	n := b.N
	delivered := make(chan error, 1)
	go func() {
		for i := 1; i <= n; i++ {
			m, err := cons.read()
			if err != nil {
				delivered <- err
				return
			}
			d := m.m.(*wire.BasicDeliver)
			if i%100 == 0 || i == n {
				if _, err := cons.nc.Write(wire.AppendMethodFrame(nil, 1, &wire.BasicAck{DeliveryTag: d.DeliveryTag, Multiple: true})); err != nil {
					delivered <- err
					return
				}
			}
		}
		delivered <- nil
	}()
	// The confirms: a reader that hands back credit as they come.
	credit := make(chan int, window)
	confirmed := make(chan error, 1)
	go func() {
		var acked uint64
		for acked < uint64(n) {
			m, err := pub.read()
			if err != nil {
				confirmed <- err
				return
			}
			a, ok := m.m.(*wire.BasicAck)
			if !ok {
				confirmed <- fmt.Errorf("%s, want basic.ack", wire.Name(m.m))
				return
			}
			k := a.DeliveryTag - acked
			if !a.Multiple && k != 1 || k == 0 || k > window {
				confirmed <- fmt.Errorf("basic.ack %d (multiple %v) after %d", a.DeliveryTag, a.Multiple, acked)
				return
			}
			acked = a.DeliveryTag
			credit <- int(k)
		}
		confirmed <- nil
	}()
	b.ReportAllocs()
	b.SetBytes(128)
	b.ResetTimer()
	batch := make([]byte, 0, burst*len(frame))
	inflight := 0
	for i := 0; i < n; {
		for inflight+burst > window {
			inflight -= <-credit
		}
		batch = batch[:0]
		for j := 0; j < burst && i < n; j++ {
			batch = append(batch, frame...)
			i++
			inflight++
		}
		pub.write(batch)
	}
	if err := <-confirmed; err != nil {
		b.Fatal(err)
	}
	if err := <-delivered; err != nil {
		b.Fatal(err)
	}
}
