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

// A request whose owner is Done with it hands its Command to the next
// decode in a shared receive buffer: decoding (in one pass, the field
// list written over the header) and Done cost no allocation. With
// poisoning on, a Command is not reused but poisoned: a stale reference
// answers nobody.
func TestRemotingCommandDoneReused(t *testing.T) {
	orig := frameOf(SerializeJSON, []byte(`{"code":10,"opaque":7,"flag":0,"language":"GO","version":317,"extFields":{"topic":"T"}}`), []byte("body"))[4:]
	frame := make([]byte, len(orig))
	ref := &countRef{}
	decode := func() *Command {
		copy(frame, orig) // as if read again: the list was written over the header
		c, err := DecodeFrameWith(frame, ref, allRaw)
		if err != nil || c.Code != 10 || c.Opaque != 7 || string(c.Body) != "body" || c.Remark != "" || !c.lent {
			t.Fatalf("%+v %v", c, err)
		}
		return c
	}
	defer SetPoisonRecycled(SetPoisonRecycled(false)) // also under the build tag smartgo_poison
	if !raceBuild {
		if n := testing.AllocsPerRun(100, func() { decode().Done() }); n != 0 {
			t.Fatalf("%v allocations per decode and Done", n)
		}
	}
	c := decode()
	unrefs := ref.n
	c.Done()
	c.Done() // a second Done is a no-op
	if ref.n != unrefs+1 {
		t.Fatalf("Done dropped %d references", ref.n-unrefs)
	}
	SetPoisonRecycled(true)
	c = decode()
	c.Done()
	if c.Opaque != poisonCode || c.Code != poisonCode || c.Body != nil || !c.IsResponse() {
		t.Fatalf("poisoned command %+v", c)
	}
	if d := decode(); d == c {
		t.Fatal("a poisoned command was reused")
	}
	// Commands not decoded in a shared buffer are left alone.
	n := NewRequest(10, nil, []byte("b"))
	n.Opaque = 3
	n.Done()
	if n.Opaque != 3 || string(n.Body) != "b" {
		t.Fatalf("Done changed an owned command: %+v", n)
	}
}
