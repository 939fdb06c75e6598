package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"hash/crc32"
	"math/rand/v2"
	"net/netip"
	"strconv"
	"strings"
	"testing"
)

// The sealed golden record: the v1 record of TestRecordGoldenIPv4 with a
// separator and RocketMQ 5's CRC property appended to PROPERTIES. The CRC
// (1912040457 = 0x71F76C09) was computed outside Go (zlib.crc32 of the
// first 126 bytes, masked to 31 bits); its digits are stored least
// significant first.
func TestRecordSealedGolden(t *testing.T) {
	m := goldenMessage(netip.MustParseAddrPort("192.168.1.10:54321"), netip.MustParseAddrPort("10.0.0.1:10911"))
	props := "TAGS\x01TagA\x02KEYS\x01k1 k2"
	sealedProps := props + "\x02" + "__CRC32#\x01" + "7540402191" + "\x02"
	const total = 91 + 5 + 9 + 20 + 1 + 20
	want := []field{
		{"TOTALSIZE", u32(total)},
		{"MAGICCODE", []byte{0xDA, 0xA3, 0x20, 0xA7}},
		{"BODYCRC", u32(0x3610A686)},
		{"QUEUEID", u32(3)},
		{"FLAG", []byte{0xFF, 0xFF, 0xFF, 0xFE}},
		{"QUEUEOFFSET", []byte{1, 2, 3, 4, 5, 6, 7, 8}},
		{"PHYSICALOFFSET", []byte{0, 0, 1, 0, 0, 0, 0, 0}},
		{"SYSFLAG", u32(0x9)},
		{"BORNTIMESTAMP", u64(1700000000123)},
		{"BORNHOST ip", []byte{192, 168, 1, 10}},
		{"BORNHOST port", u32(54321)},
		{"STORETIMESTAMP", u64(1700000000456)},
		{"STOREHOST ip", []byte{10, 0, 0, 1}},
		{"STOREHOST port", []byte{0, 0, 0x2A, 0x9F}},
		{"RECONSUMETIMES", u32(2)},
		{"PREPAREDTXOFFSET", u64(77)},
		{"BODYLEN", u32(5)},
		{"BODY", []byte("hello")},
		{"TOPICLEN", []byte{9}},
		{"TOPIC", []byte("TopicTest")},
		{"PROPERTIESLEN", u16(uint16(len(sealedProps)))},
		{"PROPERTIES", []byte(props)},
		{"separator", []byte{0x02}},
		{"CRC key", []byte("__CRC32#\x01")},
		{"CRC digits", []byte("7540402191")},
		{"CRC end", []byte{0x02}},
	}
	if got := SealedSize(m); got != total {
		t.Fatalf("SealedSize = %d, want %d", got, total)
	}
	buf := make([]byte, total+7)
	n, err := EncodeSealedTo(buf, m)
	if err != nil || n != total {
		t.Fatalf("EncodeSealedTo = %d, %v; want %d", n, err, total)
	}
	checkFields(t, buf[:n], want)
	if got := crc32.ChecksumIEEE(buf[:total-TrailerSize]) & 0x7FFFFFFF; got != 1912040457 {
		t.Fatalf("CRC of the covered bytes = %d", got)
	}
	if integ, err := Verify(buf[:n]); err != nil || integ != Sealed {
		t.Fatalf("Verify = %v, %v", integ, err)
	}

	// A RocketMQ 4.x reader (the v1 format) sees one more property; a
	// RocketMQ 5 broker reads the digits back the way it wrote them.
	got, _, err := Decode(buf[:n], true)
	if err != nil {
		t.Fatal(err)
	}
	if got.Properties != sealedProps {
		t.Fatalf("properties %q", got.Properties)
	}
	v, ok := LookupPropertyString(got.Properties, PropertyCRC32)
	if !ok {
		t.Fatal("CRC property not found by the properties parser")
	}
	java := 0
	for i := len(v) - 1; i >= 0; i-- {
		java = java*10 + int(v[i]-'0')
	}
	if java != 1912040457 {
		t.Fatalf("CRC read Java's way = %d", java)
	}
	if string(UserProperties([]byte(got.Properties))) != props+"\x02" {
		t.Fatalf("UserProperties = %q", UserProperties([]byte(got.Properties)))
	}
}

// Properties that already end with 0x02 (as the Go client writes them), or
// that are empty, get no extra separator.
func TestRecordSealedSeparator(t *testing.T) {
	for _, props := range []string{"", "A\x01b\x02", "A\x01b"} {
		m := &Message{Topic: "T", BornHost: netip.MustParseAddrPort("1.2.3.4:5"), StoreHost: netip.MustParseAddrPort("1.2.3.4:6"), Properties: props}
		rec := make([]byte, SealedSize(m))
		if _, err := EncodeSealedTo(rec, m); err != nil {
			t.Fatal(err)
		}
		v, err := Parse(rec, true)
		if err != nil {
			t.Fatalf("%q: %v", props, err)
		}
		want := len(props) + TrailerSize
		if props == "A\x01b" {
			want++
		}
		if len(v.Properties) != want || SealedPropertiesLen(len(props), lastByte(props)) != want {
			t.Fatalf("%q: PROPERTIESLEN %d, SealedPropertiesLen %d, want %d", props, len(v.Properties), SealedPropertiesLen(len(props), lastByte(props)), want)
		}
		if !IsSealed(v.Properties) {
			t.Fatalf("%q: not sealed", props)
		}
	}
}

func lastByte(s string) byte {
	if s == "" {
		return 0
	}
	return s[len(s)-1]
}

func TestRecordSealedTooLong(t *testing.T) {
	m := &Message{Topic: "T", BornHost: netip.MustParseAddrPort("1.2.3.4:5"), StoreHost: netip.MustParseAddrPort("1.2.3.4:6"),
		Properties: string(bytes.Repeat([]byte("a"), MaxPropertiesLen-TrailerSize))}
	if _, err := EncodeSealedTo(make([]byte, 1<<16), m); !errors.Is(err, ErrPropertiesTooLong) {
		t.Fatalf("err = %v, want ErrPropertiesTooLong (separator + trailer overflow PROPERTIESLEN)", err)
	}
	m.Properties = m.Properties[:len(m.Properties)-1] + "\x02"
	if _, err := EncodeSealedTo(make([]byte, 1<<16), m); err != nil {
		t.Fatalf("properties ending with a separator fit exactly: %v", err)
	}
	if _, err := EncodeSealedTo(make([]byte, 10), m); !errors.Is(err, ErrShortBuffer) {
		t.Fatalf("short buffer: %v", err)
	}
}

func sealedSample(t testing.TB, r *rand.Rand) []byte {
	t.Helper()
	m, _ := randMessage(r)
	m.Body = m.Body[:min(len(m.Body), 300)]
	m.Properties = m.Properties[:min(len(m.Properties), 100)]
	rec := make([]byte, SealedSize(m))
	if _, err := EncodeSealedTo(rec, m); err != nil {
		t.Fatal(err)
	}
	return rec
}

// Every single bit flip anywhere in a sealed record, header, body, topic,
// properties or trailer, is detected.
func TestRecordSealedEveryBitFlipDetected(t *testing.T) {
	r := rand.New(rand.NewPCG(5, 6))
	for range 20 {
		rec := sealedSample(t, r)
		if _, err := Verify(rec); err != nil {
			t.Fatal(err)
		}
		for i := range rec {
			for bit := range 8 {
				rec[i] ^= 1 << bit
				if integ, err := Verify(rec); err == nil {
					t.Fatalf("flip of bit %d at %d of %d not detected (%v)", bit, i, len(rec), integ)
				}
				rec[i] ^= 1 << bit
			}
		}
	}
}

// Random damage of several bytes, and any zeroed range, is detected.
func TestRecordSealedBurstsDetected(t *testing.T) {
	r := rand.New(rand.NewPCG(7, 8))
	for range 2000 {
		rec := sealedSample(t, r)
		orig := bytes.Clone(rec)
		for range 1 + r.IntN(8) {
			rec[r.IntN(len(rec))] = byte(r.Uint32())
		}
		if bytes.Equal(rec, orig) {
			continue
		}
		if _, err := Verify(rec); err == nil {
			t.Fatalf("damage not detected:\n% X\n% X", orig, rec)
		}
	}
	rec := sealedSample(t, r)
	for from := range len(rec) {
		for to := from + 1; to <= len(rec); to++ {
			d := bytes.Clone(rec)
			clear(d[from:to])
			if bytes.Equal(d, rec) {
				continue
			}
			if _, err := Verify(d); err == nil {
				t.Fatalf("zeroed range [%d,%d) of %d not detected", from, to, len(rec))
			}
		}
	}
}

// A legacy record (no trailer) stays readable and is checked by BODYCRC;
// a damaged one is refused.
func TestRecordLegacyStillVerified(t *testing.T) {
	m := goldenMessage(netip.MustParseAddrPort("192.168.1.10:54321"), netip.MustParseAddrPort("10.0.0.1:10911"))
	rec, err := AppendRecord(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if integ, err := Verify(rec); err != nil || integ != Legacy {
		t.Fatalf("Verify(legacy) = %v, %v", integ, err)
	}
	body := bytes.Index(rec, []byte("hello"))
	rec[body] ^= 1
	if _, err := Verify(rec); !errors.Is(err, ErrCorrupt) {
		t.Fatalf("legacy body damage: %v", err)
	}
	// Legacy properties that end like a trailer without being one (a
	// ten-digit value, Go's trailing separator) are not taken for damage.
	for _, props := range []string{
		"TIMER\x011700000000\x02",
		"UNIQ_KEY\x017F0000010000A1B2C3D4\x02",
		"__STARTDELIVERTIME\x011700000000123",
		"MAX_RECONSUME_TIMES\x0116\x02TRACE_ON\x01true",
	} {
		m.Properties = props
		rec, err := AppendRecord(nil, m)
		if err != nil {
			t.Fatal(err)
		}
		if integ, err := Verify(rec); err != nil || integ != Legacy {
			t.Fatalf("legacy %q: %v, %v", props, integ, err)
		}
	}
}

func TestRecordStripCRCProperty(t *testing.T) {
	tests := []struct{ in, want string }{
		{"", ""},
		{"A\x01b", "A\x01b"},
		{"A\x01b\x02__CRC32#\x011234567890\x02", "A\x01b\x02"},
		{"__CRC32#\x011234567890\x02A\x01b", "A\x01b"},
		{"A\x01b\x02__CRC32#\x01x\x02C\x01d\x02__CRC32#\x012\x02", "A\x01b\x02C\x01d\x02"},
		{"__CRC32#X\x01b", "__CRC32#X\x01b"},                          // another key that starts the same
		{"K#\x01v#\x02UNIQ_KEY\x01x", "K#\x01v#\x02UNIQ_KEY\x01x"},    // '#' without the key
		{"K#\x01v\x02__CRC32#\x011\x02", "K#\x01v\x02"},               // both
		{"UNIQ_KEY\x01_#\x02__CRC32#\x011\x02", "UNIQ_KEY\x01_#\x02"}, // '_' and '#' before it
	}
	for _, tc := range tests {
		if got := StripCRCProperty(tc.in); got != tc.want {
			t.Errorf("StripCRCProperty(%q) = %q, want %q", tc.in, got, tc.want)
		}
		if got, want := HasCRCProperty(tc.in), strings.Contains(tc.in, PropertyCRC32); got != want {
			t.Errorf("HasCRCProperty(%q) = %v, want %v", tc.in, got, want)
		}
	}
}

// BenchmarkRecordStripCRCProperty is the put's check of a send's usual
// properties (rocketmq-client-go's, as stored), which hold no CRC.
func BenchmarkRecordStripCRCProperty(b *testing.B) {
	props := "UNIQ_KEY\x017F0000010001000000000000000000000003\x02TAGS\x01tag\x02KEYS\x01order-1234\x02MSG_REGION\x01DefaultRegion\x02TRACE_ON\x01true\x02"
	for range b.N {
		if StripCRCProperty(props) != props {
			b.Fatal("stripped")
		}
	}
}

// A record sealed here carries the CRC RocketMQ 5 computes: re-sealing the
// same bytes with an independent implementation of its rule gives the same
// trailer.
func TestRecordSealedMatchesIndependentRule(t *testing.T) {
	r := rand.New(rand.NewPCG(11, 12))
	for range 200 {
		rec := sealedSample(t, r)
		n := binary.BigEndian.Uint32(rec)
		crc := crc32.ChecksumIEEE(rec[:n-20]) & 0x7FFFFFFF
		s := []byte(strconv.FormatUint(uint64(crc), 10))
		for i, j := 0, len(s)-1; i < j; i, j = i+1, j-1 {
			s[i], s[j] = s[j], s[i]
		}
		for len(s) < 10 {
			s = append(s, '0')
		}
		want := append(append([]byte("__CRC32#\x01"), s...), 0x02)
		if !bytes.Equal(rec[n-20:], want) {
			t.Fatalf("trailer %q, want %q", rec[n-20:], want)
		}
	}
}
