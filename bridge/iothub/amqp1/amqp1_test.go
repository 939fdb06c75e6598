package amqp1

import (
	"bytes"
	"encoding/hex"
	"errors"
	"reflect"
	"strings"
	"testing"
	"time"
)

func unhex(t *testing.T, s string) []byte {
	t.Helper()
	b, err := hex.DecodeString(strings.ReplaceAll(s, " ", ""))
	if err != nil {
		t.Fatal(err)
	}
	return b
}

// TestFrameBytes pins an open frame as the hub writes it.
func TestFrameBytes(t *testing.T) {
	got := AppendFrame(nil, TypeAMQP, 0, Perf(CodeOpen, "c", nil, uint32(65536), uint16(15), uint32(240000)), nil)
	want := unhex(t, "0000001f 02 00 0000 00 53 10 c0 12 05 a1 01 63 40 70 00010000 60 000f 70 0003a980")
	if !bytes.Equal(got, want) {
		t.Fatalf("open frame\n got % x\nwant % x", got, want)
	}
	// A heartbeat is a bare header.
	if hb := AppendFrame(nil, TypeAMQP, 0, nil, nil); !bytes.Equal(hb, unhex(t, "00000008 02 00 0000")) {
		t.Fatalf("heartbeat % x", hb)
	}
	// SASL mechanisms: an array32 of sym32.
	got = AppendFrame(nil, TypeSASL, 0, Perf(CodeSASLMechanisms, Array{Symbol("PLAIN")}), nil)
	want = unhex(t, "00000021 02 01 0000 00 53 40 c0 14 01 f0 0000000e 00000001 b3 00000005 504c41494e")
	if !bytes.Equal(got, want) {
		t.Fatalf("sasl-mechanisms\n got % x\nwant % x", got, want)
	}
}

// TestDecodeValues decodes each constructor the package knows.
func TestDecodeValues(t *testing.T) {
	u := UUID{1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16}
	for _, c := range []struct {
		in   string
		want any
	}{
		{"40", nil}, {"41", true}, {"42", false}, {"56 01", true}, {"56 00", false},
		{"50 07", uint8(7)}, {"60 0102", uint16(258)}, {"70 00000102", uint32(258)}, {"52 09", uint32(9)}, {"43", uint32(0)},
		{"80 0000000000000102", uint64(258)}, {"53 09", uint64(9)}, {"44", uint64(0)},
		{"51 ff", int8(-1)}, {"61 fffe", int16(-2)}, {"71 fffffffd", int32(-3)}, {"54 fc", int32(-4)},
		{"81 fffffffffffffffb", int64(-5)}, {"55 fa", int64(-6)},
		{"72 3f800000", float32(1)}, {"82 3ff0000000000000", float64(1)},
		{"73 00000041", Char('A')},
		{"83 0000000000000064", time.UnixMilli(100).UTC()},
		{"98 0102030405060708090a0b0c0d0e0f10", u},
		{"a0 02 0102", []byte{1, 2}}, {"b0 00000001 ff", []byte{0xff}},
		{"a1 02 6869", "hi"}, {"b1 00000002 6869", "hi"},
		{"a3 02 6869", Symbol("hi")}, {"b3 00000002 6869", Symbol("hi")},
		{"45", []any{}},
		{"c0 03 02 41 42", []any{true, false}},
		{"d0 00000006 00000002 41 42", []any{true, false}},
		{"c1 05 02 a1 01 6b 41", &Map{Keys: []any{"k"}, Values: []any{true}}},
		{"e0 04 02 52 01 02", Array{uint32(1), uint32(2)}},
		{"00 53 24 45", &Described{Descriptor: uint64(0x24), Value: []any{}}},
		{"00 a3 01 78 41", &Described{Descriptor: Symbol("x"), Value: true}},
	} {
		v, rest, err := Decode(unhex(t, c.in))
		if err != nil || len(rest) != 0 || !reflect.DeepEqual(v, c.want) {
			t.Errorf("%s: %#v %d left %v, want %#v", c.in, v, len(rest), err, c.want)
		}
	}
	if got := u.String(); got != "01020304-0506-0708-090a-0b0c0d0e0f10" {
		t.Errorf("uuid %s", got)
	}
}

// TestDecodeMalformed: bad bytes are ErrMalformed, never a panic or a
// huge allocation.
func TestDecodeMalformed(t *testing.T) {
	deep := strings.Repeat("c0 ff 01 ", 40)
	for _, in := range []string{
		"", "ff", "70 0001", "a1 05 6869", "b1 ffffffff 00", "a1 01 ff", "56 02",
		"c0 05 09 41", "d0 7fffffff 00000001 41", "d0 00000004 7fffffff", "c1 03 01 41", "e0 02 01 00",
		"00 41 41", "00", deep,
	} {
		if v, _, err := Decode(unhex(t, in)); !errors.Is(err, ErrMalformed) {
			t.Errorf("%q: %v %v, want ErrMalformed", in, v, err)
		}
	}
}

// TestAppendRoundTrip: what Append writes, Decode reads back.
func TestAppendRoundTrip(t *testing.T) {
	long := strings.Repeat("x", 300)
	for _, v := range []any{
		nil, true, uint8(1), uint16(2), uint32(0), uint32(3), uint32(70000), uint64(0), uint64(4), uint64(1 << 40),
		int32(-5), int32(1 << 20), int64(-7), int64(1 << 40), "s", long, Symbol("sym"), []byte{1}, []byte(long),
		time.UnixMilli(1_700_000_000_123).UTC(), UUID{9},
		[]any{}, []any{"a", uint32(1), []any{true}},
		&Map{Keys: []any{"status-code", "status-description"}, Values: []any{int32(200), "OK"}},
		Array{Symbol("A"), Symbol("B")},
		Perf(CodeDisposition, RoleReceiver, uint32(1), nil, true, Perf(CodeAccepted)),
	} {
		b := Append(nil, v)
		got, rest, err := Decode(b)
		if err != nil || len(rest) != 0 {
			t.Fatalf("%#v: % x: %v", v, b, err)
		}
		want := v
		if d, ok := v.(*Described); ok {
			// Perf drops trailing nulls only; the list is as given.
			want = d
		}
		if l, ok := v.([]any); ok && len(l) == 0 {
			want = []any{}
		}
		if !reflect.DeepEqual(got, want) {
			t.Errorf("round trip %#v -> % x -> %#v", v, b, got)
		}
	}
}

// TestMessageSections decodes a message as the service SDK sends one.
func TestMessageSections(t *testing.T) {
	exp := time.UnixMilli(1_800_000_000_000).UTC()
	var b []byte
	b = Append(b, Perf(CodeProperties, UUID{1}, []byte("u"), "/devices/d1/messages/devicebound", nil, nil, "corr", Symbol("text/plain"), Symbol("utf-8"), exp))
	b = Append(b, &Described{Descriptor: uint64(CodeApplicationProperties), Value: &Map{Keys: []any{"color"}, Values: []any{"red"}}})
	b = Append(b, &Described{Descriptor: uint64(CodeData), Value: []byte("he")})
	b = Append(b, &Described{Descriptor: uint64(CodeData), Value: []byte("llo")})
	m, err := DecodeMessage(b)
	if err != nil {
		t.Fatal(err)
	}
	if IDString(m.MessageID) != "01000000-0000-0000-0000-000000000000" || string(m.UserID) != "u" || m.To != "/devices/d1/messages/devicebound" ||
		IDString(m.CorrelationID) != "corr" || m.ContentType != "text/plain" || m.Encoding != "utf-8" || !m.Expiry.Equal(exp) || string(m.Data) != "hello" {
		t.Fatalf("%+v", m)
	}
	if v, _ := m.Properties.Get("color"); v != "red" {
		t.Fatalf("color %v", v)
	}
	if _, err := DecodeMessage(Append(nil, "not a section")); !errors.Is(err, ErrMalformed) {
		t.Fatalf("a bare string: %v", err)
	}
}

// TestFrameReader: sizes the frame header cannot hold, and frames over
// the agreed maximum, are refused before their body is read.
func TestFrameReader(t *testing.T) {
	ok := AppendFrame(nil, TypeAMQP, 3, Perf(CodeEnd), nil)
	fr := &FrameReader{R: bytes.NewReader(ok), Max: 512}
	f, err := fr.ReadFrame()
	if err != nil || f.Channel != 3 || f.Type != TypeAMQP {
		t.Fatalf("%+v %v", f, err)
	}
	if code, fields, rest, err := Performative(f.Body); err != nil || code != CodeEnd || len(fields) != 0 || len(rest) != 0 {
		t.Fatalf("%#x %v %v %v", code, fields, rest, err)
	}
	for _, in := range []string{"00000004 02 00 0000", "00000010 01 00 0000", "00000010 05 00 0000", "ffffffff 02 00 0000"} {
		fr := &FrameReader{R: bytes.NewReader(unhex(t, in)), Max: 512}
		if _, err := fr.ReadFrame(); !errors.Is(err, ErrMalformed) {
			t.Errorf("%s: %v", in, err)
		}
	}
	if _, _, _, err := Performative(unhex(t, "41")); !errors.Is(err, ErrMalformed) {
		t.Errorf("a bare true as a performative: %v", err)
	}
}
