package amqp1

import (
	"bytes"
	"testing"
)

// FuzzDecode: any bytes decode to a value or an error, and a value
// decoded encodes to bytes that decode again.
func FuzzDecode(f *testing.F) {
	for _, s := range [][]byte{
		AppendFrame(nil, TypeAMQP, 0, Perf(CodeOpen, "c", nil, uint32(65536)), nil)[8:],
		Append(nil, &Map{Keys: []any{"k"}, Values: []any{[]any{uint64(1), Symbol("s")}}}),
		Append(nil, Array{Symbol("A")}),
		{0x00, 0x53, 0x75, 0xa0, 0x01, 0x41},
	} {
		f.Add(s)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, _, err := Decode(b)
		if err != nil {
			return
		}
		if _, _, err := Decode(Append(nil, v)); err != nil {
			t.Fatalf("re-encoded %#v does not decode: %v", v, err)
		}
	})
}

// FuzzFrames: a byte stream read as frames, each body as a performative
// and a message, ends in an error or EOF, never a panic.
func FuzzFrames(f *testing.F) {
	var msg []byte
	msg = Append(msg, Perf(CodeProperties, "id", nil, "/devices/d/messages/devicebound"))
	msg = Append(msg, Perf(CodeData, []byte("x")))
	f.Add(AppendFrame(nil, TypeAMQP, 1, Perf(CodeTransfer, uint32(0), uint32(0), []byte{0}, uint32(0), false), msg))
	f.Add(AppendFrame(nil, TypeSASL, 0, Perf(CodeSASLInit, Symbol("PLAIN"), []byte("\x00u\x00p")), nil))
	f.Fuzz(func(t *testing.T, b []byte) {
		fr := &FrameReader{R: bytes.NewReader(b), Max: 4096}
		for {
			fm, err := fr.ReadFrame()
			if err != nil {
				return
			}
			if _, _, rest, err := Performative(fm.Body); err == nil {
				_, _ = DecodeMessage(rest)
			}
		}
	})
}
