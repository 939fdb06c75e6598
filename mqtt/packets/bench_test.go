package packets

import (
	"bytes"
	"testing"

	paho "github.com/eclipse/paho.golang/packets"
)

// Benchmarks: decode and encode one PUBLISH QoS 1 with a 128-byte payload,
// at 3.1.1, at 5 without properties and at 5 with properties (message
// expiry, content type, response topic, correlation data, two user
// properties), next to paho.golang's ReadPacket/WriteTo on the same bytes
// and a raw copy of those bytes as the floor. paho.golang has no 3.1.1
// codec, so its nearest comparison for v3 is the v5 packet without
// properties (one byte longer).

type benchCase struct {
	name string
	v    Version
	p    *Publish
}

func benchCases() []benchCase {
	v3 := &Publish{QoS: 1, Topic: "devices/42/telemetry", PacketID: 7, Payload: bytes.Repeat([]byte("x"), 128)}
	return []benchCase{
		{"v311", Version311, v3},
		{"v5-noprops", Version5, v3},
		{"v5-props", Version5, v5Publish()},
	}
}

// BenchmarkMQTTPacketsRawCopy is the floor: copying the packet's bytes.
func BenchmarkMQTTPacketsRawCopy(b *testing.B) {
	for _, c := range benchCases() {
		src, _ := AppendPacket(nil, c.p, c.v)
		dst := make([]byte, len(src))
		b.Run(c.name, func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				copy(dst, src)
			}
		})
	}
}

func BenchmarkMQTTPacketsDecodePublish(b *testing.B) {
	alias := &Decoder{alias: true}
	for _, c := range benchCases() {
		src, err := AppendPacket(nil, c.p, c.v)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/ours-alias", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := alias.Decode(c.v, src); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(c.name+"/ours-copy", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := Decode(c.v, src); err != nil {
					b.Fatal(err)
				}
			}
		})
		if c.v != Version5 {
			continue
		}
		b.Run(c.name+"/paho", func(b *testing.B) {
			b.SetBytes(int64(len(src)))
			b.ReportAllocs()
			r := bytes.NewReader(src)
			for b.Loop() {
				r.Reset(src)
				if _, err := paho.ReadPacket(r); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

func BenchmarkMQTTPacketsEncodePublish(b *testing.B) {
	for _, c := range benchCases() {
		n, err := Size(c.p, c.v)
		if err != nil {
			b.Fatal(err)
		}
		b.Run(c.name+"/ours", func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			buf := make([]byte, 0, 1024)
			for b.Loop() {
				if _, err := AppendPacket(buf[:0], c.p, c.v); err != nil {
					b.Fatal(err)
				}
			}
		})
		if c.v != Version5 {
			continue
		}
		pp := toPaho(c.p)
		b.Run(c.name+"/paho", func(b *testing.B) {
			b.SetBytes(int64(n))
			b.ReportAllocs()
			var buf bytes.Buffer
			buf.Grow(1024)
			for b.Loop() {
				buf.Reset()
				if _, err := pp.WriteTo(&buf); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}

// BenchmarkMQTTPacketsMatch measures topic matching for a typical device
// topic against a wildcard filter.
func BenchmarkMQTTPacketsMatch(b *testing.B) {
	b.ReportAllocs()
	for b.Loop() {
		if !Match("devices/+/telemetry/#", "devices/42/telemetry/temp/c") {
			b.Fatal("no match")
		}
	}
}
