package bridge

import (
	"bytes"
	"context"
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/internal/cluster"
)

// BenchmarkAMQPLogAppend is a durable queue's store path as the engine
// drives it under make compare-amqp's persistent workload: one op is an
// Append of 150 persistent messages with 128-byte bodies, stored through
// the backend's producer in a broker of the same process, waited for.
// It checks that each Append's messages get consecutive offsets.
func BenchmarkAMQPLogAppend(b *testing.B) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: b.TempDir(), Brokers: 1})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { c.Close() })
	l := openAMQP(b, newAMQPBackend(b, c, 0), "/", "bench")
	msgs := make([]amqp.StoredMessage, 150)
	for i := range msgs {
		msgs[i] = amqp.StoredMessage{RoutingKey: "bench", Properties: []byte{0x10, 0x00, 0x02}, Body: bytes.Repeat([]byte{'x'}, 128)}
	}
	next := appendWait(b, l, msgs...).first + uint64(len(msgs))
	b.ReportAllocs()
	for b.Loop() {
		r := appendWait(b, l, msgs...)
		if r.err != nil || r.first != next {
			b.Fatalf("append: first %d, %v; want first %d", r.first, r.err, next)
		}
		next += uint64(len(msgs))
	}
}
