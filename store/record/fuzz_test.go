package record

import (
	"bytes"
	"errors"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"slices"
	"testing"
)

// seedRecords returns valid encodings used to seed the record fuzzer.
func seedRecords(tb testing.TB) [][]byte {
	tb.Helper()
	var out [][]byte
	add := func(m *Message) {
		rec, err := AppendRecord(nil, m)
		if err != nil {
			tb.Fatal(err)
		}
		out = append(out, rec)
	}
	v4 := netip.MustParseAddrPort("10.0.0.1:10911")
	v6 := netip.MustParseAddrPort("[2001:db8::1]:10911")
	add(goldenMessage(v4, v4))
	add(goldenMessage(v6, v6))
	add(goldenMessage(v6, v4))
	add(&Message{BornHost: v4, StoreHost: v4})
	r := rand.New(rand.NewPCG(9, 10))
	for range 4 {
		m, _ := randMessage(r)
		m.Body = m.Body[:min(len(m.Body), 64)]
		m.Properties = m.Properties[:min(len(m.Properties), 64)]
		add(m)
	}
	blank := make([]byte, 16)
	_ = PutBlank(blank)
	out = append(out, blank)
	return out
}

func FuzzRecordParse(f *testing.F) {
	for _, rec := range seedRecords(f) {
		f.Add(rec)
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		v, perr := Parse(b, false)
		if perr != nil && !errors.Is(perr, ErrCorrupt) && !errors.Is(perr, ErrBlank) {
			t.Fatalf("Parse: unclassified error %v", perr)
		}
		_, _, _ = PeekHeader(b)
		m, n, err := Decode(b, false)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrBlank) {
				t.Fatalf("Decode: unclassified error %v", err)
			}
			if perr == nil && !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Parse accepted, Decode failed with %v", err)
			}
			return
		}
		if perr != nil {
			t.Fatalf("Decode accepted what Parse rejected: %v", perr)
		}
		if n != int(v.TotalSize) || n > len(b) {
			t.Fatalf("Decode consumed %d, TOTALSIZE %d, input %d", n, v.TotalSize, len(b))
		}
		// Re-encoding gives the same bytes, except BODYCRC, which Encode
		// recomputes.
		want := bytes.Clone(b[:n])
		be.PutUint32(want[OffsetBodyCRC:], BodyCRC(m.Body))
		got, err := AppendRecord(nil, m)
		if err != nil {
			t.Fatalf("re-encode: %v", err)
		}
		if !bytes.Equal(got, want) {
			t.Fatalf("re-encode differs:\n got % X\nwant % X", got, want)
		}
		// With the CRC check on, a record is accepted iff its CRC is right.
		_, _, cerr := Decode(b, true)
		if crcOK := be.Uint32(b[OffsetBodyCRC:]) == BodyCRC(m.Body); crcOK != (cerr == nil) {
			t.Fatalf("CRC ok %v but Decode(checkCRC) = %v", crcOK, cerr)
		}
		back, _, err := Decode(got, true)
		m.BodyCRC = BodyCRC(m.Body)
		if err != nil || !reflect.DeepEqual(back, m) {
			t.Fatalf("decode(encode(decode(b))) differs: %v", err)
		}
	})
}

func FuzzBatchDecode(f *testing.F) {
	f.Add([]byte{})
	f.Add(AppendBatchItem(nil, 1, []byte("body"), "TAGS\x01A\x02UNIQ_KEY\x01X"))
	f.Add(AppendBatchItem(AppendBatchItem(nil, 0, nil, ""), -1, []byte{0, 1, 2}, "K\x01V"))
	f.Fuzz(func(t *testing.T, b []byte) {
		var re []byte
		err := ForEachBatchItem(b, func(it BatchItem) error {
			if len(it.Properties) > MaxPropertiesLen {
				t.Fatalf("properties of %d bytes", len(it.Properties))
			}
			re = AppendBatchItem(re, it.Flag, it.Body, string(it.Properties))
			return nil
		})
		if err != nil {
			if !errors.Is(err, ErrCorrupt) {
				t.Fatalf("unclassified error %v", err)
			}
			var ce *CorruptError
			if !errors.As(err, &ce) || ce.Offset < 0 || ce.Offset > len(b) {
				t.Fatalf("bad error offset: %v", err)
			}
			return
		}
		// Same bytes, except MAGICCODE and BODYCRC, which clients write as 0.
		want := bytes.Clone(b)
		for off := 0; off < len(want); off += int(be.Uint32(want[off:])) {
			clear(want[off+4 : off+12])
		}
		if !bytes.Equal(re, want) {
			t.Fatalf("re-encode differs:\n got % X\nwant % X", re, want)
		}
	})
}

func FuzzPropertiesParse(f *testing.F) {
	f.Add("")
	f.Add("KEYS\x01a b\x02TAGS\x01TagA")
	f.Add("KEYS\x01a b\x02TAGS\x01TagA\x02")
	f.Add("\x02\x01\x02a\x01\x02\x01b\x02k\x01v\x01w")
	f.Add("UNIQ_KEY\x017F0000010A8418B4AAC2000000000000\x02WAIT\x01true\x02DELAY\x013")
	f.Fuzz(func(t *testing.T, s string) {
		p, err := ParseProperties(s)
		if err != nil {
			t.Fatalf("ParseProperties: %v", err)
		}
		var seq Properties
		for k, v := range AllProperties(s) {
			seq = append(seq, Property{k, v})
		}
		if !slices.Equal(seq, p) {
			t.Fatalf("AllProperties(%q) = %q, ParseProperties = %q", s, seq, p)
		}
		for _, kv := range p {
			if kv.Key == "" || kv.Value == "" {
				t.Fatalf("empty key or value in %q", p)
			}
			want, _ := p.Get(kv.Key)
			if v, ok := LookupProperty([]byte(s), kv.Key); !ok || string(v) != want {
				t.Fatalf("LookupProperty(%q) = %q %v, Get = %q", kv.Key, v, ok, want)
			}
		}
		// LookupProperties finds in one pass what LookupProperty finds
		// key by key, present or not.
		keys := []string{PropertyTags, PropertyKeys, PropertyUniqueClientMessageIDKeyIndex, "k", "a"}
		for _, kv := range p {
			keys = append(keys, kv.Key)
		}
		vals := make([][]byte, len(keys))
		LookupProperties([]byte(s), keys, vals)
		for i, k := range keys {
			v, ok := LookupProperty([]byte(s), k)
			if ok != (vals[i] != nil) || string(v) != string(vals[i]) {
				t.Fatalf("LookupProperties: %q = %q, LookupProperty: %q %v", k, vals[i], v, ok)
			}
		}
		// Round trip: encoding a parsed set and parsing it again is the
		// identity (values may keep inner 0x01: the split is at the first).
		enc := AppendProperties(nil, p)
		p2, _ := ParseProperties(string(enc))
		if !reflect.DeepEqual(p, p2) {
			t.Fatalf("round trip: %q -> %q -> %q", p, enc, p2)
		}
		// A valid set round-trips byte for byte and survives Set/Del.
		if p.Validate() == nil {
			if string(AppendProperties(nil, p2)) != string(enc) {
				t.Fatalf("valid set re-encodes differently")
			}
			q := append(Properties(nil), p...)
			q.Set("ZZ_FUZZ", "1")
			q.Del("ZZ_FUZZ")
			if !slices.Equal(q, withoutFuzzKey(p)) {
				t.Fatalf("Set/Del of a fresh key changed %q to %q", p, q)
			}
		}
	})
}

// withoutFuzzKey is p with pairs whose key is "ZZ_FUZZ" removed (what
// Set+Del of that key leaves).
func withoutFuzzKey(p Properties) Properties {
	var out Properties
	for _, kv := range p {
		if kv.Key != "ZZ_FUZZ" {
			out = append(out, kv)
		}
	}
	return out
}

// FuzzRecordVerify: Verify never panics and classifies every failure; a
// record it accepts as sealed is exactly what sealing its bytes gives.
func FuzzRecordVerify(f *testing.F) {
	r := rand.New(rand.NewPCG(13, 14))
	for _, rec := range seedRecords(f) {
		f.Add(rec)
	}
	for range 4 {
		f.Add(sealedSample(f, r))
	}
	f.Fuzz(func(t *testing.T, b []byte) {
		integ, err := Verify(b)
		if err != nil {
			if !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrBlank) {
				t.Fatalf("unclassified error %v", err)
			}
			return
		}
		v, err := Parse(b, true)
		if err != nil {
			t.Fatalf("Verify accepted, Parse(check) refused: %v", err)
		}
		if integ == Sealed {
			rec := bytes.Clone(b[:v.TotalSize])
			Seal(rec)
			if !bytes.Equal(rec, b[:v.TotalSize]) {
				t.Fatal("accepted sealed record differs from its resealed bytes")
			}
		}
	})
}

// FuzzRecordSealedDamage: any change to a sealed record is detected.
func FuzzRecordSealedDamage(f *testing.F) {
	f.Add(uint64(1), uint16(0), byte(1))
	f.Add(uint64(2), uint16(100), byte(0x80))
	f.Add(uint64(3), uint16(65535), byte(0xFF))
	f.Fuzz(func(t *testing.T, seed uint64, pos uint16, x byte) {
		if x == 0 {
			return
		}
		rec := sealedSample(t, rand.New(rand.NewPCG(seed, 1)))
		i := int(pos) % len(rec)
		rec[i] ^= x
		if _, err := Verify(rec); err == nil {
			t.Fatalf("xor 0x%02X at %d of %d not detected", x, i, len(rec))
		}
	})
}
