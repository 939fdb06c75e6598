package protocol

import "testing"

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
