package packets

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

var allVersions = []Version{Version31, Version311, Version5}

// TestMQTTPacketsRoundTripRandom encodes random valid packets of every type
// and version, decodes them (copying and aliasing) and expects the same
// packet back; re-encoding must give the same bytes, and Size must agree.
func TestMQTTPacketsRoundTripRandom(t *testing.T) {
	aliasDec, err := NewDecoder(Options{Alias: true})
	if err != nil {
		t.Fatal(err)
	}
	g := newGen(1)
	for _, v := range allVersions {
		for i := 0; i < 3000; i++ {
			p := g.anyPacket(v)
			b, err := AppendPacket(nil, p, v)
			if err != nil {
				t.Fatalf("v%s %T: encode: %v\n%+v", v, p, err, p)
			}
			n, err := Size(p, v)
			if err != nil || n != len(b) {
				t.Fatalf("v%s %T: Size = %d, %v; encoded %d bytes", v, p, n, err, len(b))
			}
			got, err := Decode(v, b)
			if err != nil {
				t.Fatalf("v%s %T: decode % X: %v\n%+v", v, p, b, err, p)
			}
			if !reflect.DeepEqual(got, p) {
				t.Fatalf("v%s round trip differs:\n got %+v\nwant %+v\nbytes % X", v, got, p, b)
			}
			aliased, err := aliasDec.Decode(v, b)
			if err != nil || !reflect.DeepEqual(aliased, p) {
				t.Fatalf("v%s alias decode differs: %v\n got %+v\nwant %+v", v, err, aliased, p)
			}
			again, err := AppendPacket(nil, got, v)
			if err != nil || !bytes.Equal(again, b) {
				t.Fatalf("v%s re-encode differs: %v\n% X\n% X", v, err, again, b)
			}
		}
	}
}

// TestMQTTPacketsNextStream decodes a stream of concatenated random packets
// with Next, as an event loop does.
func TestMQTTPacketsNextStream(t *testing.T) {
	g := newGen(2)
	var d Decoder
	for _, v := range allVersions {
		var stream []byte
		var want []Packet
		for i := 0; i < 200; i++ {
			p := g.anyPacket(v)
			if p.Type() == TypeConnect {
				continue
			}
			var err error
			if stream, err = AppendPacket(stream, p, v); err != nil {
				t.Fatal(err)
			}
			want = append(want, p)
		}
		for i, w := range want {
			p, n, err := d.Next(v, stream)
			if err != nil {
				t.Fatalf("packet %d: %v", i, err)
			}
			if !reflect.DeepEqual(p, w) {
				t.Fatalf("packet %d: got %+v want %+v", i, p, w)
			}
			stream = stream[n:]
		}
		if _, _, err := d.Next(v, stream); !errors.Is(err, ErrIncomplete) || len(stream) != 0 {
			t.Fatalf("end of stream: %v, %d bytes left", err, len(stream))
		}
	}
}

// TestMQTTPacketsIncremental feeds every random packet one byte at a time:
// each proper prefix gives ErrIncomplete (never another error), the whole
// packet decodes.
func TestMQTTPacketsIncremental(t *testing.T) {
	g := newGen(3)
	for _, v := range allVersions {
		for i := 0; i < 300; i++ {
			p := g.anyPacket(v)
			b, err := AppendPacket(nil, p, v)
			if err != nil {
				t.Fatal(err)
			}
			for k := 0; k < len(b); k++ {
				if _, _, _, _, err := DecodeFixedHeader(b[:k]); err != nil && !errors.Is(err, ErrIncomplete) {
					t.Fatalf("header of %d/%d bytes: %v", k, len(b), err)
				}
				if _, err := Decode(v, b[:k]); err != ErrIncomplete {
					t.Fatalf("%d/%d bytes of % X: err %v, want ErrIncomplete", k, len(b), b, err)
				}
			}
			if _, err := Decode(v, b); err != nil {
				t.Fatal(err)
			}
		}
	}
}
