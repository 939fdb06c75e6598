package wire

import (
	"bytes"
	"testing"
)

// loopReader returns the same bytes forever.
type loopReader struct {
	b   []byte
	off int
}

func (l *loopReader) Read(p []byte) (int, error) {
	n := copy(p, l.b[l.off:])
	l.off = (l.off + n) % len(l.b)
	return n, nil
}

// hotPath is a publish with its header and body, as a client sends it.
func hotPath(b testing.TB) []byte {
	raw, err := AppendProperties(nil, Properties{ContentType: "text/plain", DeliveryMode: 2})
	if err != nil {
		b.Fatal(err)
	}
	s := AppendMethodFrame(nil, 1, &BasicPublish{Exchange: "amq.topic", RoutingKey: "devices.d1.telemetry"})
	s = AppendContentHeaderFrame(s, 1, 60, 64, raw)
	return AppendBodyFrames(s, 1, bytes.Repeat([]byte("x"), 64), 131072)
}

func BenchmarkReadFrame(b *testing.B) {
	r := NewReader(&loopReader{b: hotPath(b)}, 131072)
	b.ReportAllocs()
	for b.Loop() {
		if _, err := r.ReadFrame(); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeBasicPublish(b *testing.B) {
	p := payloadOf(AppendMethodFrame(nil, 1, &BasicPublish{Exchange: "amq.topic", RoutingKey: "devices.d1.telemetry"}))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeMethod(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeBasicAck(b *testing.B) {
	p := payloadOf(AppendMethodFrame(nil, 1, &BasicAck{DeliveryTag: 1 << 40}))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeMethod(p); err != nil {
			b.Fatal(err)
		}
	}
}

func BenchmarkDecodeContentHeader(b *testing.B) {
	raw, _ := AppendProperties(nil, Properties{ContentType: "text/plain", DeliveryMode: 2, Headers: Table{"k": "v", "n": int32(1)}})
	p := payloadOf(AppendContentHeaderFrame(nil, 1, 60, 64, raw))
	b.ReportAllocs()
	for b.Loop() {
		if _, err := DecodeContentHeader(p); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkAppendDelivery writes a delivery (method, header, body) into a
// reused buffer, as the engine does for each message it sends.
func BenchmarkAppendDelivery(b *testing.B) {
	raw, _ := AppendProperties(nil, Properties{ContentType: "text/plain", DeliveryMode: 2})
	body := bytes.Repeat([]byte("x"), 64)
	m := &BasicDeliver{ConsumerTag: "amq.ctag-1", Exchange: "amq.topic", RoutingKey: "devices.d1.telemetry"}
	buf := make([]byte, 0, 512)
	b.ReportAllocs()
	for b.Loop() {
		m.DeliveryTag++
		buf = AppendMethodFrame(buf[:0], 1, m)
		buf = AppendContentHeaderFrame(buf, 1, 60, uint64(len(body)), raw)
		buf = AppendBodyFrames(buf, 1, body, 131072)
	}
}
