package protocol

import (
	"bytes"
	"testing"
)

type countRef struct{ n int }

func (r *countRef) Unref() { r.n++ }

// Received buffers are reused once a command is recycled, so everything
// but Body must be a copy: Remark and every ExtFields key and value keep
// their text when the frame's bytes are overwritten, in both header
// encodings. Recycle drops the reference once and clears Body.
func TestRemotingCodecRecycleHeaderCopies(t *testing.T) {
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		req := NewRequest(SendMessageV2, nil, []byte("body bytes"))
		req.SerializeType = st
		req.Remark = "a remark"
		req.ExtFields = ExtFields{"topic": "TopicA", "escaped\"key": "line\nbreak", "n": "42"}
		frame, err := EncodeFrame(req)
		if err != nil {
			t.Fatal(err)
		}
		buf := bytes.Clone(frame[4:])
		ref := &countRef{}
		got, err := DecodeFrameRef(buf, ref)
		if err != nil {
			t.Fatal(err)
		}
		for i := range buf {
			buf[i] = 'X'
		}
		if got.Remark != req.Remark {
			t.Fatalf("%v: remark %q after the buffer was overwritten", st, got.Remark)
		}
		if len(got.ExtFields) != len(req.ExtFields) {
			t.Fatalf("%v: extFields %v", st, got.ExtFields)
		}
		for k, v := range req.ExtFields {
			if got.ExtFields[k] != v {
				t.Fatalf("%v: extFields[%q] = %q after the buffer was overwritten, want %q", st, k, got.ExtFields[k], v)
			}
		}
		if !bytes.Equal(got.Body, bytes.Repeat([]byte("X"), len("body bytes"))) {
			t.Fatalf("%v: Body should alias the frame", st)
		}
		got.Recycle()
		got.Recycle()
		if ref.n != 1 || got.Body != nil || got.Remark != req.Remark {
			t.Fatalf("%v: after two Recycles: %d unrefs, body %q, remark %q", st, ref.n, got.Body, got.Remark)
		}
	}
}
