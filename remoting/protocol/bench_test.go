package protocol

import (
	"encoding/binary"
	"fmt"
	"math/rand/v2"
	"testing"
)

// Baseline: copying the frame bytes (what a zero-work decoder would cost).
func BenchmarkProtocolFrame(b *testing.B) {
	req := NewRequest(PullMessage, &PullMessageRequestHeader{ConsumerGroup: "cg", Topic: "TopicTest", QueueID: 1,
		QueueOffset: 12345, MaxMsgNums: 32, SysFlag: 3, SuspendTimeoutMillis: 15000, Subscription: "*"}, nil)
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		req.SerializeType = st
		frame, _ := EncodeFrame(req)
		b.Run("copy/"+st.String(), func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = append([]byte(nil), frame...)
			}
		})
		b.Run("decode/"+st.String(), func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c, err := DecodeFrame(frame[4:])
				if err != nil {
					b.Fatal(err)
				}
				var h PullMessageRequestHeader
				if err := c.DecodeHeader(&h); err != nil {
					b.Fatal(err)
				}
			}
		})
		b.Run("encode/"+st.String(), func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			buf := make([]byte, 0, 1024)
			for i := 0; i < b.N; i++ {
				buf, _ = AppendFrameHead(buf[:0], req)
			}
		})
	}
}

// BenchmarkProtocolDecodeResponse decodes the JSON headers of responses
// with no, few and many extFields (a SEND_MESSAGE response has 5), next
// to copying the frame.
func BenchmarkProtocolDecodeResponse(b *testing.B) {
	send := NewResponse(Success, "")
	send.SetHeader(&SendMessageResponseHeader{MsgID: "7F00000100002A9F0000000000001234", QueueID: 3, QueueOffset: 12345, Region: "DefaultRegion", TraceOn: true})
	many := NewResponse(Success, "")
	many.ExtFields = ExtFields{}
	for i := 0; i < 12; i++ {
		many.ExtFields[string(rune('a'+i))+"key"] = "value"
	}
	for _, tc := range []struct {
		name string
		c    *Command
	}{{"empty", NewResponse(Success, "")}, {"send", send}, {"12fields", many}} {
		frame, err := EncodeFrame(tc.c)
		if err != nil {
			b.Fatal(err)
		}
		b.Run("copy/"+tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				_ = append([]byte(nil), frame...)
			}
		})
		b.Run("decode/"+tc.name, func(b *testing.B) {
			b.SetBytes(int64(len(frame)))
			b.ReportAllocs()
			for i := 0; i < b.N; i++ {
				c, err := DecodeFrame(frame[4:])
				if err != nil || len(c.ExtFields) != len(tc.c.ExtFields) {
					b.Fatalf("%v %v", c, err)
				}
			}
		})
	}
}

// BenchmarkProtocolSendRequest decodes rocketmq-client-go's SEND_MESSAGE
// request frame and its send header: through the ExtFields map, straight
// from the text (DecodeFrameWith), and read by the header's learned shape
// (HeaderShapes.DecodeFrame, as the broker's reader does).
func BenchmarkProtocolSendRequest(b *testing.B) {
	req := NewRequest(SendMessage, &SendMessageRequestHeader{ProducerGroup: "cpu-producers", Topic: "CPU", DefaultTopic: "TBW102",
		DefaultTopicQueueNums: 8, QueueID: 3, BornTimestamp: 1764120000000,
		Properties: "UNIQ_KEY\x017F000001000100000000000000000003\x02WAIT\x01true\x02TAGS\x01tag"}, make([]byte, 1024))
	req.Version = 317
	frame, _ := EncodeFrame(req)
	// lent: in a receive buffer, the list written over the header (the
	// frame is copied back each round, as a new frame would be read).
	work := make([]byte, 64<<10)
	for _, tc := range []struct {
		name   string
		raw    RawFields
		ref    BufferRef
		shapes *HeaderShapes
	}{{"map", nil, nil, nil}, {"text", allRaw, nil, nil}, {"lent", allRaw, &countRef{}, nil}, {"shaped", allRaw, &countRef{}, &HeaderShapes{}},
		{"shaped-varying", allRaw, &countRef{}, &HeaderShapes{}}, {"map-order", allRaw, &countRef{}, &HeaderShapes{}}} {
		frames := [][]byte{frame}
		if tc.name == "shaped-varying" {
			// A producer's sends: queue, born time and unique key change.
			frames = nil
			for q := range 8 {
				req := NewRequest(SendMessage, &SendMessageRequestHeader{ProducerGroup: "cpu-producers", Topic: "CPU", DefaultTopic: "TBW102",
					DefaultTopicQueueNums: 8, QueueID: int32(q), BornTimestamp: 1764120000000 + int64(q),
					Properties: fmt.Sprintf("UNIQ_KEY\x017F00000100010000000000000000000%d\x02WAIT\x01true\x02TAGS\x01tag", q)}, make([]byte, 1024))
				req.Version = 317
				f, _ := EncodeFrame(req)
				frames = append(frames, f)
			}
		}
		if tc.name == "map-order" {
			// rocketmq-client-go's sends: the extFields members in Go's
			// map order, new almost every time (read through the member
			// table).
			frames = nil
			rng := rand.New(rand.NewPCG(3, 4))
			for i := range 64 {
				hdr := goMapOrderSend(i, i%8, 1764120000000+int64(i), fmt.Sprintf("C0000202%024X", i), rng.Perm(13))
				f := binary.BigEndian.AppendUint32(make([]byte, 4), uint32(len(hdr)))
				frames = append(frames, append(append(f, hdr...), make([]byte, 1024)...))
			}
		}
		b.Run(tc.name, func(b *testing.B) {
			b.ReportAllocs()
			n := 0
			for b.Loop() {
				n++
				f := frames[n%len(frames)]
				w := work[:len(f)-4]
				copy(w, f[4:])
				c, err := tc.shapes.DecodeFrame(w, tc.ref, tc.raw)
				if err != nil {
					b.Fatal(err)
				}
				var h SendMessageRequestHeader
				if _, err := DecodeSendHeaderEscaped(c, &h); err != nil { // as the broker does
					b.Fatal(err)
				}
				c.Done()
			}
		})
	}
}

// BenchmarkProtocolSendResponse writes the broker's answer to a send (a
// typed header kept by WithHeader) into a reused buffer, as the
// connection's writer does.
func BenchmarkProtocolSendResponse(b *testing.B) {
	hdr := &SendMessageResponseHeader{MsgID: "7F00000100002A9F0000000000001234", QueueID: 3, QueueOffset: 123456,
		Region: "DefaultRegion", TraceOn: true}
	resp := NewResponse(Success, "").WithHeader(hdr)
	resp.Opaque = 1234
	buf := make([]byte, 0, 1024)
	b.ReportAllocs()
	for b.Loop() {
		var err error
		if buf, err = AppendFramePrefix(buf[:0], resp); err != nil {
			b.Fatal(err)
		}
	}
}

// BenchmarkProtocolSeparatorsOnly checks a Go producer's properties, as
// its JSON header escapes them, for a lazy send list (separatorsOnly).
func BenchmarkProtocolSeparatorsOnly(b *testing.B) {
	v := []byte(`UNIQ_KEY\u00017F000001000100000000000000000003\u0002WAIT\u0001true\u0002TAGS\u0001tag","queueId":"3"}`)
	for b.Loop() {
		if _, ok := separatorsOnly(v, 0); !ok {
			b.Fatal("not separators only")
		}
	}
}
