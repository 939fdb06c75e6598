package wire

import (
	"bytes"
	"testing"
)

// TestHotPathAllocations pins what the publish → deliver → ack path
// allocates: reading a frame, checking a content header and writing a
// delivery nothing; decoding an ack its struct, a publish its struct and
// two strings.
func TestHotPathAllocations(t *testing.T) {
	if raceEnabled {
		t.Skip("the race detector allocates on its own")
	}
	r := NewReader(&loopReader{b: hotPath(t)}, 131072)
	publish := payloadOf(AppendMethodFrame(nil, 1, &BasicPublish{Exchange: "amq.topic", RoutingKey: "a.b"}))
	ack := payloadOf(AppendMethodFrame(nil, 1, &BasicAck{DeliveryTag: 9}))
	raw, _ := AppendProperties(nil, Properties{ContentType: "text/plain", Headers: Table{"k": "v"}})
	header := payloadOf(AppendContentHeaderFrame(nil, 1, 60, 5, raw))
	deliver := &BasicDeliver{ConsumerTag: "c", Exchange: "amq.topic", RoutingKey: "a.b"}
	body := bytes.Repeat([]byte("x"), 64)
	buf := make([]byte, 0, 512)
	for name, c := range map[string]struct {
		max float64
		f   func()
	}{
		"ReadFrame":            {0, func() { _, _ = r.ReadFrame() }},
		"DecodeContentHeader":  {0, func() { _, _ = DecodeContentHeader(header) }},
		"DecodeMethod ack":     {1, func() { _, _ = DecodeMethod(ack) }},
		"DecodeMethod publish": {3, func() { _, _ = DecodeMethod(publish) }},
		"append a whole delivery": {0, func() {
			buf = AppendMethodFrame(buf[:0], 1, deliver)
			buf = AppendContentHeaderFrame(buf, 1, 60, uint64(len(body)), raw)
			buf = AppendBodyFrames(buf, 1, body, 131072)
		}},
	} {
		if got := testing.AllocsPerRun(200, c.f); got > c.max {
			t.Errorf("%s: %.1f allocations, want at most %.0f", name, got, c.max)
		}
	}
}
