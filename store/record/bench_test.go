package record

import (
	"fmt"
	"net/netip"
	"testing"
	"time"
)

// benchMessage is a typical producer message: short topic, KEYS, TAGS,
// UNIQ_KEY and WAIT properties, IPv4 hosts.
func benchMessage(bodySize int) *Message {
	body := make([]byte, bodySize)
	for i := range body {
		body[i] = byte('a' + i%26)
	}
	return &Message{
		Topic:          "BenchTopic",
		QueueID:        1,
		QueueOffset:    123456,
		PhysicalOffset: 1 << 30,
		BornTimestamp:  1700000000000,
		BornHost:       netip.MustParseAddrPort("10.0.0.2:50000"),
		StoreTimestamp: 1700000000001,
		StoreHost:      netip.MustParseAddrPort("10.0.0.1:10911"),
		Body:           body,
		Properties:     "KEYS\x01order-1\x02TAGS\x01TagA\x02UNIQ_KEY\x017F0000010A8418B4AAC2000000000000\x02WAIT\x01true",
	}
}

var benchSizes = []int{128, 1024}

func sizeName(n int) string {
	if n >= 1024 {
		return fmt.Sprintf("%dKiB", n/1024)
	}
	return fmt.Sprintf("%dB", n)
}

// benchMemcpy is the baseline: copying a record of the same size.
func benchMemcpy(b *testing.B, n int) {
	src, dst := make([]byte, n), make([]byte, n)
	b.SetBytes(int64(n))
	b.ReportAllocs()
	for b.Loop() {
		copy(dst, src)
	}
}

// loop runs op like b.Loop and then reports how many times slower than a
// memcpy of n bytes one op was ("x-memcpy"), the memcpy timed right after
// in the same process.
func loop(b *testing.B, n int, op func()) {
	b.SetBytes(int64(n))
	b.ReportAllocs()
	iters := 0
	for b.Loop() {
		op()
		iters++
	}
	elapsed := b.Elapsed()
	src, dst := make([]byte, n), make([]byte, n)
	start := time.Now()
	for range iters {
		copy(dst, src)
	}
	if base := time.Since(start); base > 0 {
		b.ReportMetric(float64(elapsed)/float64(base), "x-memcpy")
	}
}

func BenchmarkRecordEncode(b *testing.B) {
	for _, size := range benchSizes {
		m := benchMessage(size)
		n := Size(m)
		b.Run(sizeName(size)+"/EncodeTo", func(b *testing.B) {
			dst := make([]byte, n)
			loop(b, n, func() {
				if _, err := EncodeTo(dst, m); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(sizeName(size)+"/memcpy", func(b *testing.B) { benchMemcpy(b, n) })
	}
}

func BenchmarkRecordParse(b *testing.B) {
	for _, size := range benchSizes {
		rec, _ := AppendRecord(nil, benchMessage(size))
		for _, crc := range []bool{false, true} {
			name := "/Parse"
			if crc {
				name = "/ParseCRC"
			}
			b.Run(sizeName(size)+name, func(b *testing.B) {
				loop(b, len(rec), func() {
					if _, err := Parse(rec, crc); err != nil {
						b.Fatal(err)
					}
				})
			})
		}
		b.Run(sizeName(size)+"/memcpy", func(b *testing.B) { benchMemcpy(b, len(rec)) })
	}
}

func BenchmarkRecordDecode(b *testing.B) {
	for _, size := range benchSizes {
		rec, _ := AppendRecord(nil, benchMessage(size))
		b.Run(sizeName(size)+"/Decode", func(b *testing.B) {
			loop(b, len(rec), func() {
				if _, _, err := Decode(rec, true); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(sizeName(size)+"/DecodeInto", func(b *testing.B) {
			var m Message
			loop(b, len(rec), func() {
				if _, err := DecodeInto(&m, rec, true); err != nil {
					b.Fatal(err)
				}
			})
		})
		b.Run(sizeName(size)+"/memcpy", func(b *testing.B) { benchMemcpy(b, len(rec)) })
	}
}

func BenchmarkRecordLookupProperty(b *testing.B) {
	raw := []byte(benchMessage(0).Properties)
	b.ReportAllocs()
	for b.Loop() {
		if _, ok := LookupProperty(raw, PropertyUniqueClientMessageIDKeyIndex); !ok {
			b.Fatal("missing")
		}
	}
}

func BenchmarkRecordCompress(b *testing.B) {
	body := compressibleBody(16 << 10)
	for _, algo := range []Compression{CompressionAlgoZlib, CompressionAlgoZstd} {
		comp, flags, _ := CompressBody(nil, body, algo, CompressLevel)
		b.Run(algo.String()+"/compress", func(b *testing.B) {
			dst := make([]byte, 0, len(body))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, _, err := CompressBody(dst, body, algo, CompressLevel); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run(algo.String()+"/decompress", func(b *testing.B) {
			dst := make([]byte, 0, len(body))
			b.SetBytes(int64(len(body)))
			b.ReportAllocs()
			for b.Loop() {
				if _, err := DecompressBody(dst, comp, flags, len(body)); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
