package packets

import (
	"bytes"
	"errors"
	"reflect"
	"testing"
)

func addSeeds(f *testing.F, v Version) {
	for _, tc := range vectors {
		if tc.v == v || (v == Version311 && tc.v == Version31) {
			f.Add(hx(tc.hex))
		}
	}
	for _, tc := range badCases {
		if tc.v == v {
			f.Add(hx(tc.hex))
		}
	}
	g := newGen(uint64(v))
	for i := 0; i < 50; i++ {
		b, err := AppendPacket(nil, g.anyPacket(v), v)
		if err != nil {
			f.Fatal(err)
		}
		f.Add(b)
	}
}

var fuzzAlias = &Decoder{alias: true}

// fuzzDecode checks, for any input: no panic; a failure is a classified
// *Error (or ErrIncomplete) with a failure reason code; copying and aliasing
// decoders agree; a decoded packet re-encodes, the re-encoding decodes to
// the same packet and encodes to the same bytes.
func fuzzDecode(t *testing.T, v Version, data []byte) {
	p, err := Decode(v, data)
	pa, erra := fuzzAlias.Decode(v, data)
	if (err == nil) != (erra == nil) {
		t.Fatalf("copy and alias decoders disagree: %v / %v", err, erra)
	}
	if err != nil {
		var e *Error
		if err != ErrIncomplete && !errors.As(err, &e) {
			t.Fatalf("unclassified error %v", err)
		}
		if rc := ReasonCodeOf(err); rc < 0x80 || rc == ReasonUnspecifiedError {
			t.Fatalf("error %v maps to reason code 0x%02X", err, byte(rc))
		}
		return
	}
	if !reflect.DeepEqual(p, pa) {
		t.Fatalf("copy and alias decoders differ:\n%+v\n%+v", p, pa)
	}
	// In place into a Scratch (the poller's inline requests), twice: the
	// second decode reuses what the first left in the Scratch.
	var s Scratch
	for range 2 {
		ps, n, err := fuzzAlias.NextScratchAlias(v, data, &s)
		if err != nil || n != len(data) || !reflect.DeepEqual(p, ps) {
			t.Fatalf("in-place decode differs (%d of %d bytes, %v):\n%+v\n%+v", n, len(data), err, p, ps)
		}
	}
	ev := v
	if c, ok := p.(*Connect); ok {
		ev = c.Version
	}
	b, err := AppendPacket(nil, p, ev)
	if err != nil {
		t.Fatalf("decoded %+v does not encode: %v", p, err)
	}
	if n, err := Size(p, ev); err != nil || n != len(b) {
		t.Fatalf("Size %d %v, encoded %d", n, err, len(b))
	}
	p2, err := Decode(ev, b)
	if err != nil {
		t.Fatalf("re-encoded % X does not decode: %v", b, err)
	}
	if !reflect.DeepEqual(p, p2) {
		t.Fatalf("round trip differs:\n%+v\n%+v", p, p2)
	}
	if b2, _ := AppendPacket(nil, p2, ev); !bytes.Equal(b, b2) {
		t.Fatalf("re-encoding not stable:\n% X\n% X", b, b2)
	}
}

func FuzzDecodeV311(f *testing.F) {
	addSeeds(f, Version311)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzDecode(t, Version311, data) })
}

func FuzzDecodeV5(f *testing.F) {
	addSeeds(f, Version5)
	f.Fuzz(func(t *testing.T, data []byte) { fuzzDecode(t, Version5, data) })
}

// FuzzFixedHeader checks DecodeFixedHeader under a random size limit: an
// accepted header re-encodes to the same bytes, fits the limit, and each of
// its proper prefixes is only incomplete (the early size check never rejects
// a packet that fits); a too-large verdict is confirmed by completing the
// length with the smallest possible final byte.
func FuzzFixedHeader(f *testing.F) {
	for _, s := range []string{"30 00", "30 7F", "30 80 01", "30 FF FF FF 7F", "30 FF FF FF FF 01", "C0 80 00",
		"62 02", "F0 00", "00 00", "36 00", "30 80 80 80"} {
		f.Add(hx(s), uint32(1000))
	}
	f.Fuzz(func(t *testing.T, data []byte, limit uint32) {
		m := int(limit % (MaxPacketSizeLimit + 1))
		if m < 2 {
			m = 2
		}
		d, err := NewDecoder(Options{MaxPacketSize: m})
		if err != nil {
			t.Fatal(err)
		}
		typ, flags, rl, hl, err := d.DecodeFixedHeader(data)
		switch {
		case err == nil:
			if typ < 1 || typ > 15 || flags > 15 || hl < 2 || hl > 5 || hl > len(data) || rl > MaxVarInt || hl+rl > m {
				t.Fatalf("bad result typ %d flags %d rl %d hl %d", typ, flags, rl, hl)
			}
			if enc := appendVarInt([]byte{byte(typ<<4 | flags)}, rl); !bytes.Equal(enc, data[:hl]) {
				t.Fatalf("header % X re-encodes as % X", data[:hl], enc)
			}
			for k := 0; k < hl; k++ {
				if _, _, _, _, err := d.DecodeFixedHeader(data[:k]); err != ErrIncomplete {
					t.Fatalf("prefix of %d bytes: %v", k, err)
				}
			}
		case err == ErrIncomplete:
			if len(data) >= 5 {
				t.Fatalf("%d bytes reported incomplete", len(data))
			}
		case errors.Is(err, ErrPacketTooLarge):
			full := bytes.Clone(data)
			nolimit := &Decoder{maxPacketSize: MaxPacketSizeLimit}
			for i := 0; i < 5; i++ {
				_, _, rl, hl, err := nolimit.DecodeFixedHeader(full)
				if err == ErrIncomplete {
					full = append(full, 0x01)
					continue
				}
				if err == nil && hl+rl <= m {
					t.Fatalf("rejected as too large but completes to %d <= %d bytes", hl+rl, m)
				}
				break
			}
		case errors.Is(err, ErrMalformed):
		default:
			t.Fatalf("unexpected error %v", err)
		}
	})
}
