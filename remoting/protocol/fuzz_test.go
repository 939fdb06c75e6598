package protocol

import (
	"bytes"
	"encoding/binary"
	"testing"
	"unicode/utf8"
)

func FuzzFrameDecode(f *testing.F) {
	f.Add(frameOf(SerializeJSON, []byte(javaRouteRequest), []byte("body"))[4:])
	bin, _ := EncodeFrame(&Command{Code: 10, Remark: "r", ExtFields: ExtFields{"a": "b"}, SerializeType: SerializeRocketMQ, Body: []byte{1}})
	f.Add(bin[4:])
	f.Add([]byte{0, 0, 0, 2, '{', '}'})
	f.Fuzz(func(t *testing.T, frame []byte) {
		c, err := DecodeFrame(frame)
		if err != nil {
			return
		}
		// Whatever decodes must encode and decode again to the same command.
		enc, err := EncodeFrame(c)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if _, err := FrameLength(binary.BigEndian.Uint32(enc), 1<<30); err != nil {
			t.Fatalf("length: %v", err)
		}
		c2, err := DecodeFrame(enc[4:])
		if err != nil {
			t.Fatalf("decode of re-encoded frame: %v\n%q", err, enc)
		}
		if c2.Code != c.Code || c2.Opaque != c.Opaque || c2.Flag != c.Flag || !bytes.Equal(c2.Body, c.Body) ||
			(len(c2.ExtFields) != len(c.ExtFields) && validKeys(c.ExtFields)) {
			t.Fatalf("unstable round trip %+v vs %+v", c, c2)
		}
	})
}

func FuzzJSONHeader(f *testing.F) {
	f.Add([]byte(javaRouteRequest))
	f.Add([]byte(`{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T"}}`))
	f.Add([]byte(`{"x":[{"y":"\ud83d\ude00"}],"extFields":{"a":1,"b":null}}`))
	f.Fuzz(func(t *testing.T, hdr []byte) {
		var c Command
		if err := decodeJSONHeader(hdr, &c, nil, false, nil); err != nil {
			return
		}
		var c2 Command
		enc := appendJSONHeader(nil, &c)
		if err := decodeJSONHeader(enc, &c2, nil, false, nil); err != nil {
			t.Fatalf("re-decode %q: %v", enc, err)
		}
		if c2.Code != c.Code || (c2.Remark != c.Remark && utf8.ValidString(c.Remark)) ||
			(len(c2.ExtFields) != len(c.ExtFields) && validKeys(c.ExtFields)) {
			t.Fatalf("unstable: %+v vs %+v", c, c2)
		}
	})
}

// validKeys reports whether every key is valid UTF-8 (the JSON encoder
// replaces invalid bytes, which may merge keys).
func validKeys(f ExtFields) bool {
	for k := range f {
		if !utf8.ValidString(k) {
			return false
		}
	}
	return true
}

func FuzzBinaryHeader(f *testing.F) {
	f.Add(appendBinaryHeader(nil, &Command{Code: 11, Remark: "x", ExtFields: ExtFields{"topic": "T", "queueId": "1"}}))
	f.Add(make([]byte, 21))
	f.Fuzz(func(t *testing.T, hdr []byte) {
		var c Command
		if err := decodeBinaryHeader(hdr, &c); err != nil {
			return
		}
		var c2 Command
		if err := decodeBinaryHeader(appendBinaryHeader(nil, &c), &c2); err != nil {
			t.Fatalf("re-decode: %v", err)
		}
		if c2.Code != c.Code || c2.Remark != c.Remark || len(c2.ExtFields) != len(c.ExtFields) {
			t.Fatalf("unstable: %+v vs %+v", c, c2)
		}
	})
}

func FuzzBodyJSON(f *testing.F) {
	f.Add([]byte(`{"brokerDatas":[{"brokerAddrs":{0:"a"}}],"queueDatas":[]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		q := QuoteBareKeys(b)
		var rd TopicRouteData
		_ = DecodeJSON(q, &rd)
		if q2 := QuoteBareKeys(q); !bytes.Equal(q, q2) && len(q) == len(b) {
			// once quoted, a second pass must not find more bare keys that
			// the first one skipped in already well-formed input
			t.Fatalf("not idempotent: %q -> %q -> %q", b, q, q2)
		}
	})
}
