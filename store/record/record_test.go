package record

import (
	"bytes"
	"encoding/binary"
	"errors"
	"math/rand/v2"
	"net/netip"
	"reflect"
	"strings"
	"testing"
)

// field is one named piece of a hand-built expected record.
type field struct {
	name string
	b    []byte
}

func u32(v uint32) []byte { return binary.BigEndian.AppendUint32(nil, v) }
func u64(v uint64) []byte { return binary.BigEndian.AppendUint64(nil, v) }
func u16(v uint16) []byte { return binary.BigEndian.AppendUint16(nil, v) }

// checkFields compares got with the concatenation of want, field by field.
func checkFields(t *testing.T, got []byte, want []field) {
	t.Helper()
	off := 0
	for _, f := range want {
		end := off + len(f.b)
		if end > len(got) {
			t.Fatalf("record too short: field %s needs bytes [%d,%d), have %d", f.name, off, end, len(got))
		}
		if !bytes.Equal(got[off:end], f.b) {
			t.Errorf("field %s at offset %d: got % X, want % X", f.name, off, got[off:end], f.b)
		}
		off = end
	}
	if off != len(got) {
		t.Errorf("record has %d bytes, fields cover %d", len(got), off)
	}
}

// goldenMessage is the message the golden vectors encode.
func goldenMessage(born, store netip.AddrPort) *Message {
	return &Message{
		Topic:                     "TopicTest",
		QueueID:                   3,
		Flag:                      -2,
		QueueOffset:               0x0102030405060708,
		PhysicalOffset:            1 << 40,
		SysFlag:                   FlagCompressed | TxCommit, // host bits derived by Encode
		BornTimestamp:             1700000000123,
		BornHost:                  born,
		StoreTimestamp:            1700000000456,
		StoreHost:                 store,
		ReconsumeTimes:            2,
		PreparedTransactionOffset: 77,
		Body:                      []byte("hello"),
		Properties:                "TAGS\x01TagA\x02KEYS\x01k1 k2",
	}
}

func TestRecordGoldenIPv4(t *testing.T) {
	m := goldenMessage(netip.MustParseAddrPort("192.168.1.10:54321"), netip.MustParseAddrPort("10.0.0.1:10911"))
	props := "TAGS\x01TagA\x02KEYS\x01k1 k2"
	const total = 91 + 5 + 9 + 20
	want := []field{
		{"TOTALSIZE", u32(total)},
		{"MAGICCODE", []byte{0xDA, 0xA3, 0x20, 0xA7}},
		{"BODYCRC", u32(0x3610A686)}, // CRC32("hello") = 0x3610A686, high bit already clear
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
		{"PROPERTIESLEN", u16(uint16(len(props)))},
		{"PROPERTIES", []byte(props)},
	}
	if got := Size(m); got != total {
		t.Fatalf("Size = %d, want %d", got, total)
	}
	buf := make([]byte, total+10)
	n, err := EncodeTo(buf, m)
	if err != nil {
		t.Fatal(err)
	}
	if n != total {
		t.Fatalf("EncodeTo wrote %d bytes, want %d", n, total)
	}
	checkFields(t, buf[:n], want)

	// The fixed offsets the store patches.
	if got := binary.BigEndian.Uint64(buf[OffsetPhysicalOffset:]); got != 1<<40 {
		t.Errorf("PHYSICALOFFSET via OffsetPhysicalOffset = %d", got)
	}
	if got := binary.BigEndian.Uint32(buf[OffsetSysFlag:]); got != 0x9 {
		t.Errorf("SYSFLAG via OffsetSysFlag = %#x", got)
	}
	if !bytes.Equal(buf[OffsetBornHost:OffsetBornHost+4], []byte{192, 168, 1, 10}) {
		t.Errorf("BORNHOST via OffsetBornHost = % X", buf[OffsetBornHost:OffsetBornHost+4])
	}
}

func TestRecordGoldenIPv6(t *testing.T) {
	born := netip.MustParseAddrPort("[2001:db8::1]:40000")
	store := netip.MustParseAddrPort("[fe80::abcd:1]:10911")
	m := goldenMessage(born, store)
	m.SysFlag = FlagStoreHostV6 // wrong on purpose only for the born bit; Encode derives both
	props := m.Properties
	const total = 91 + 24 + 5 + 9 + 20
	bip, sip := born.Addr().As16(), store.Addr().As16()
	want := []field{
		{"TOTALSIZE", u32(total)},
		{"MAGICCODE", u32(0xDAA320A7)},
		{"BODYCRC", u32(0x3610A686)},
		{"QUEUEID", u32(3)},
		{"FLAG", u32(0xFFFFFFFE)},
		{"QUEUEOFFSET", u64(0x0102030405060708)},
		{"PHYSICALOFFSET", u64(1 << 40)},
		{"SYSFLAG", u32(0x30)},
		{"BORNTIMESTAMP", u64(1700000000123)},
		{"BORNHOST ip", bip[:]},
		{"BORNHOST port", u32(40000)},
		{"STORETIMESTAMP", u64(1700000000456)},
		{"STOREHOST ip", sip[:]},
		{"STOREHOST port", u32(10911)},
		{"RECONSUMETIMES", u32(2)},
		{"PREPAREDTXOFFSET", u64(77)},
		{"BODYLEN", u32(5)},
		{"BODY", []byte("hello")},
		{"TOPICLEN", []byte{9}},
		{"TOPIC", []byte("TopicTest")},
		{"PROPERTIESLEN", u16(uint16(len(props)))},
		{"PROPERTIES", []byte(props)},
	}
	out, err := AppendRecord([]byte("prefix"), m)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.HasPrefix(out, []byte("prefix")) {
		t.Fatalf("AppendRecord lost the prefix")
	}
	checkFields(t, out[len("prefix"):], want)
	if m.SysFlag != FlagStoreHostV6 {
		t.Errorf("EncodeTo modified m.SysFlag to %#x", m.SysFlag)
	}

	// Mixed: IPv6 born host, IPv4 store host.
	m = goldenMessage(born, netip.MustParseAddrPort("10.0.0.1:10911"))
	rec, err := AppendRecord(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 91+12+5+9+20 {
		t.Fatalf("mixed record size %d", len(rec))
	}
	if got := binary.BigEndian.Uint32(rec[OffsetSysFlag:]); got != 0x19 {
		t.Errorf("mixed SYSFLAG = %#x, want 0x19", got)
	}
	v, err := Parse(rec, true)
	if err != nil {
		t.Fatal(err)
	}
	if len(v.BornHost) != 20 || len(v.StoreHost) != 8 || !bytes.Equal(v.StoreHost, []byte{10, 0, 0, 1, 0, 0, 0x2A, 0x9F}) {
		t.Errorf("mixed hosts % X / % X", v.BornHost, v.StoreHost)
	}
}

func TestRecordBlank(t *testing.T) {
	seg := bytes.Repeat([]byte{0xEE}, 100)
	if err := PutBlank(seg[40:]); err != nil {
		t.Fatal(err)
	}
	checkFields(t, seg[40:48], []field{{"TOTALSIZE", u32(60)}, {"MAGICCODE", []byte{0xCB, 0xD4, 0x31, 0x94}}})
	if seg[48] != 0xEE || seg[39] != 0xEE {
		t.Errorf("PutBlank wrote outside [0,8)")
	}
	size, magic, err := PeekHeader(seg[40:])
	if err != nil || size != 60 || magic != MagicBlank {
		t.Errorf("PeekHeader = %d, %#x, %v", size, magic, err)
	}
	v, err := Parse(seg[40:], true)
	if !errors.Is(err, ErrBlank) || errors.Is(err, ErrCorrupt) {
		t.Fatalf("Parse(blank) err = %v, want ErrBlank", err)
	}
	if v.TotalSize != 60 || v.Magic != MagicBlank {
		t.Errorf("Parse(blank) view = %d %#x", v.TotalSize, v.Magic)
	}
	if !strings.Contains(err.Error(), "60") {
		t.Errorf("blank error %q does not carry the size", err)
	}
	m, n, err := Decode(seg[40:], false)
	if !errors.Is(err, ErrBlank) || m != nil || n != 60 {
		t.Errorf("Decode(blank) = %v, %d, %v", m, n, err)
	}
	if err := PutBlank(make([]byte, 7)); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("PutBlank(7 bytes) err = %v", err)
	}
	if _, _, err := PeekHeader(make([]byte, 7)); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("PeekHeader(7 bytes) err = %v", err)
	}
	// A filler smaller than its own header is corrupt.
	bad := append(u32(4), u32(MagicBlank)...)
	if _, err := Parse(bad, false); !errors.Is(err, ErrCorrupt) {
		t.Errorf("Parse(blank of size 4) err = %v", err)
	}
}

// randMessage returns a random valid message and the message Decode must
// give back for it.
func randMessage(r *rand.Rand) (in, want *Message) {
	randBytes := func(n int) []byte {
		if n == 0 {
			return nil
		}
		b := make([]byte, n)
		for i := range b {
			b[i] = byte(r.UintN(256))
		}
		return b
	}
	randHost := func() netip.AddrPort {
		var a netip.Addr
		if r.IntN(2) == 0 {
			a = netip.AddrFrom4([4]byte(randBytes(4)))
		} else {
			a = netip.AddrFrom16([16]byte(randBytes(16)))
		}
		return netip.AddrPortFrom(a, uint16(r.UintN(65536)))
	}
	bodyLen := r.IntN(2000)
	if r.IntN(10) == 0 {
		bodyLen = 0
	}
	in = &Message{
		Topic:                     string(randBytes(r.IntN(MaxTopicLen + 1))),
		QueueID:                   int32(r.Uint32()),
		Flag:                      int32(r.Uint32()),
		QueueOffset:               int64(r.Uint64()),
		PhysicalOffset:            int64(r.Uint64()),
		SysFlag:                   int32(r.Uint32()),
		BornTimestamp:             int64(r.Uint64()),
		BornHost:                  randHost(),
		StoreTimestamp:            int64(r.Uint64()),
		StoreHost:                 randHost(),
		ReconsumeTimes:            int32(r.Uint32()),
		PreparedTransactionOffset: int64(r.Uint64()),
		BodyCRC:                   r.Uint32(), // ignored by Encode
		Body:                      randBytes(bodyLen),
		Properties:                string(randBytes(r.IntN(300))),
	}
	if r.IntN(20) == 0 {
		in.Properties = string(randBytes(MaxPropertiesLen))
	}
	w := *in
	w.SysFlag = EncodedSysFlag(in)
	w.BodyCRC = BodyCRC(in.Body)
	return in, &w
}

func TestRecordRoundTripRandom(t *testing.T) {
	r := rand.New(rand.NewPCG(1, 2))
	var stream []byte
	var wants []*Message
	for i := range 3000 {
		in, want := randMessage(r)
		rec, err := AppendRecord(nil, in)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if len(rec) != Size(in) {
			t.Fatalf("message %d: record of %d bytes, Size says %d", i, len(rec), Size(in))
		}
		got, n, err := Decode(rec, true)
		if err != nil {
			t.Fatalf("message %d: %v", i, err)
		}
		if n != len(rec) {
			t.Fatalf("message %d: consumed %d of %d", i, n, len(rec))
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("message %d: decode(encode(m)) differs:\n got %+v\nwant %+v", i, got, want)
		}
		if i < 200 {
			stream = append(stream, rec...)
			wants = append(wants, want)
		}
	}
	// Back-to-back records (a pull response body or a segment).
	var m Message
	for i, off := 0, 0; off < len(stream); i++ {
		n, err := DecodeInto(&m, stream[off:], true)
		if err != nil {
			t.Fatalf("stream record %d at %d: %v", i, off, err)
		}
		if !reflect.DeepEqual(&m, wants[i]) {
			t.Fatalf("stream record %d differs", i)
		}
		off += n
	}
}

func TestRecordViewHosts(t *testing.T) {
	born := netip.MustParseAddrPort("[::ffff:1.2.3.4]:80") // IPv4-mapped: stays IPv6 for a lossless round trip
	store := netip.MustParseAddrPort("5.6.7.8:0")
	m := goldenMessage(born, store)
	rec, err := AppendRecord(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	v, err := Parse(rec, true)
	if err != nil {
		t.Fatal(err)
	}
	if a, err := v.BornAddr(); err != nil || a != born {
		t.Errorf("BornAddr = %v, %v; want %v", a, err, born)
	}
	if a, err := v.StoreAddr(); err != nil || a != store {
		t.Errorf("StoreAddr = %v, %v; want %v", a, err, store)
	}
	if string(v.Topic) != m.Topic || string(v.Properties) != m.Properties || string(v.Body) != "hello" {
		t.Errorf("view slices: %q %q %q", v.Topic, v.Properties, v.Body)
	}
	// Slices are capacity-limited: appending must not clobber the record.
	orig := bytes.Clone(rec)
	_ = append(v.Body, 'X', 'X', 'X')
	_ = append(v.Topic, 'Y')
	if !bytes.Equal(rec, orig) {
		t.Errorf("appending to view slices modified the record")
	}
}

func TestRecordEncodeErrors(t *testing.T) {
	base := goldenMessage(netip.MustParseAddrPort("1.2.3.4:5"), netip.MustParseAddrPort("6.7.8.9:10"))
	cases := []struct {
		name   string
		mutate func(m *Message)
		want   error
	}{
		{"topic 128 bytes", func(m *Message) { m.Topic = strings.Repeat("t", 128) }, ErrTopicTooLong},
		{"properties 32768 bytes", func(m *Message) { m.Properties = strings.Repeat("p", 32768) }, ErrPropertiesTooLong},
		{"zero born host", func(m *Message) { m.BornHost = netip.AddrPort{} }, ErrBadHost},
		{"zero store host", func(m *Message) { m.StoreHost = netip.AddrPort{} }, ErrBadHost},
	}
	for _, c := range cases {
		m := *base
		c.mutate(&m)
		buf := bytes.Repeat([]byte{0xAA}, 70000)
		if _, err := EncodeTo(buf, &m); !errors.Is(err, c.want) {
			t.Errorf("%s: EncodeTo err = %v, want %v", c.name, err, c.want)
		}
		if !bytes.Equal(buf, bytes.Repeat([]byte{0xAA}, 70000)) {
			t.Errorf("%s: EncodeTo wrote despite a validation error", c.name)
		}
		if _, err := AppendRecord(nil, &m); !errors.Is(err, c.want) {
			t.Errorf("%s: AppendRecord err = %v, want %v", c.name, err, c.want)
		}
	}
	// Limits themselves are fine.
	m := *base
	m.Topic = strings.Repeat("t", MaxTopicLen)
	m.Properties = strings.Repeat("p", MaxPropertiesLen)
	rec, err := AppendRecord(nil, &m)
	if err != nil {
		t.Fatalf("max topic and properties: %v", err)
	}
	if got, _, err := Decode(rec, true); err != nil || got.Topic != m.Topic || got.Properties != m.Properties {
		t.Errorf("max sizes do not round-trip: %v", err)
	}
	short := make([]byte, Size(base)-1)
	if _, err := EncodeTo(short, base); !errors.Is(err, ErrShortBuffer) {
		t.Errorf("short buffer err = %v", err)
	}
}

func TestRecordEncodeAllocs(t *testing.T) {
	m := goldenMessage(netip.MustParseAddrPort("1.2.3.4:5"), netip.MustParseAddrPort("[2001:db8::7]:10911"))
	m.Body = bytes.Repeat([]byte("x"), 1024)
	buf := make([]byte, Size(m))
	if a := testing.AllocsPerRun(1000, func() {
		if _, err := EncodeTo(buf, m); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("EncodeTo allocates %.1f times per call, want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		if _, err := Parse(buf, true); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("Parse allocates %.1f times per call, want 0", a)
	}
	if a := testing.AllocsPerRun(1000, func() {
		if _, _, err := PeekHeader(buf); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("PeekHeader allocates %.1f times per call, want 0", a)
	}
	dst := make([]byte, 0, 4*len(buf))
	if a := testing.AllocsPerRun(1000, func() {
		var err error
		if dst, err = AppendRecord(dst[:0], m); err != nil {
			t.Fatal(err)
		}
	}); a != 0 {
		t.Errorf("AppendRecord with spare capacity allocates %.1f times per call, want 0", a)
	}
	var into Message
	if _, err := DecodeInto(&into, buf, true); err != nil {
		t.Fatal(err)
	}
	if a := testing.AllocsPerRun(1000, func() {
		if _, err := DecodeInto(&into, buf, true); err != nil {
			t.Fatal(err)
		}
	}); a != 2 {
		t.Errorf("DecodeInto into a reused Message allocates %.1f times per call, want 2 (topic, properties)", a)
	}
}

// corruptCase mutates a valid record (see corruptBase) into a bad one.
type corruptCase struct {
	name     string
	mutate   func(b []byte) []byte
	checkCRC bool
	field    string
	offset   int
	msg      string // exact Error() if non-empty
}

// corruptBase is a 120-byte IPv4 record: body 6, topic 9, properties 14.
func corruptBase(t *testing.T) []byte {
	t.Helper()
	m := goldenMessage(netip.MustParseAddrPort("1.2.3.4:5"), netip.MustParseAddrPort("6.7.8.9:10"))
	m.Body = []byte("hello!")
	m.Properties = "KEYS\x01k1\x02TAGS\x01A"
	rec, err := AppendRecord(nil, m)
	if err != nil {
		t.Fatal(err)
	}
	if len(rec) != 120 {
		t.Fatalf("base record is %d bytes", len(rec))
	}
	return rec
}

func TestRecordCorrupt(t *testing.T) {
	const bodyLenOff, topicLenOff, propsLenOff = 84, 84 + 4 + 6, 84 + 4 + 6 + 1 + 9
	put32 := func(off int, v uint32) func([]byte) []byte {
		return func(b []byte) []byte { binary.BigEndian.PutUint32(b[off:], v); return b }
	}
	cases := []corruptCase{
		{name: "short header", mutate: func(b []byte) []byte { return b[:5] }, field: "TOTALSIZE", offset: 0},
		{name: "bad magic", mutate: put32(4, 0xDAA320A8), field: "MAGICCODE", offset: 4,
			msg: "record: corrupt MAGICCODE at offset 4: 0xDAA320A8 is neither message nor blank magic"},
		{name: "size below minimum", mutate: put32(0, 90), field: "TOTALSIZE", offset: 0},
		{name: "negative size", mutate: put32(0, 0xFFFFFFF0), field: "TOTALSIZE", offset: 0},
		{name: "size overruns input", mutate: func(b []byte) []byte { return b[:119] }, field: "TOTALSIZE", offset: 0,
			msg: "record: corrupt TOTALSIZE at offset 0: size 120 overruns input of 119 bytes"},
		{name: "body length overruns", mutate: put32(bodyLenOff, 5000), field: "BODYLEN", offset: 84,
			msg: "record: corrupt BODYLEN at offset 84: length 5000 overruns record of 120 bytes"},
		{name: "negative body length", mutate: put32(bodyLenOff, 0xFFFFFFFF), field: "BODYLEN", offset: 84},
		{name: "negative topic length", mutate: func(b []byte) []byte { b[topicLenOff] = 0x80; return b }, field: "TOPICLEN", offset: topicLenOff},
		{name: "topic length overruns", mutate: func(b []byte) []byte { b[topicLenOff] = 30; return b }, field: "TOPICLEN", offset: topicLenOff},
		{name: "negative properties length", mutate: func(b []byte) []byte { b[propsLenOff] = 0x80; return b }, field: "PROPERTIESLEN", offset: propsLenOff},
		{name: "properties length overruns", mutate: func(b []byte) []byte { b[propsLenOff+1] = 15; return b }, field: "PROPERTIESLEN", offset: propsLenOff},
		{name: "properties length short", mutate: func(b []byte) []byte { b[propsLenOff+1] = 13; return b }, field: "PROPERTIESLEN", offset: propsLenOff,
			msg: "record: corrupt PROPERTIESLEN at offset 104: length 13 leaves 1 unused bytes in record of 120 bytes"},
		{name: "body length short", mutate: put32(bodyLenOff, 5), field: "TOPICLEN", offset: topicLenOff - 1,
			msg: "record: corrupt TOPICLEN at offset 93: length 33 overruns record of 120 bytes"}, // reads '!' as TOPICLEN
		{name: "body crc", mutate: func(b []byte) []byte { b[90] ^= 1; return b }, checkCRC: true, field: "BODYCRC", offset: 8},
		{name: "v6 flags shift lengths", mutate: put32(OffsetSysFlag, uint32(FlagBornHostV6|FlagStoreHostV6)), field: "BODYLEN", offset: 108},
		{name: "v6 born flag shifts lengths", mutate: put32(OffsetSysFlag, uint32(FlagBornHostV6)), field: "BODYLEN", offset: 96},
	}
	// Both hosts IPv6 on a record shorter than the 115-byte IPv6 minimum.
	cases = append(cases, corruptCase{name: "v6 flags on a small record", field: "TOTALSIZE", offset: 0,
		mutate: func(b []byte) []byte {
			binary.BigEndian.PutUint32(b[OffsetSysFlag:], uint32(FlagBornHostV6|FlagStoreHostV6))
			binary.BigEndian.PutUint32(b[OffsetTotalSize:], 110)
			return b
		},
		msg: "record: corrupt TOTALSIZE at offset 0: size 110 below minimum 115 for the host widths in SYSFLAG 0x30"})
	for _, c := range cases {
		t.Run(c.name, func(t *testing.T) {
			b := c.mutate(corruptBase(t))
			_, err := Parse(b, c.checkCRC)
			var ce *CorruptError
			if !errors.As(err, &ce) || !errors.Is(err, ErrCorrupt) {
				t.Fatalf("Parse err = %v, want *CorruptError", err)
			}
			if ce.Field != c.field || ce.Offset != c.offset {
				t.Errorf("error names %s at %d, want %s at %d (%v)", ce.Field, ce.Offset, c.field, c.offset, err)
			}
			if c.msg != "" && err.Error() != c.msg {
				t.Errorf("Error() = %q\n          want %q", err.Error(), c.msg)
			}
			if m, _, err := Decode(b, c.checkCRC); !errors.Is(err, ErrCorrupt) || m != nil {
				t.Errorf("Decode = %v, %v; want ErrCorrupt", m, err)
			}
		})
	}
	// The CRC is only checked on request.
	b := corruptBase(t)
	b[90] ^= 1
	if _, err := Parse(b, false); err != nil {
		t.Errorf("Parse without CRC check: %v", err)
	}
}

func TestRecordCorruptPort(t *testing.T) {
	b := corruptBase(t)
	binary.BigEndian.PutUint32(b[52:], 70000) // BORNHOST port
	if _, err := Parse(b, true); err != nil {
		t.Fatalf("Parse does not look at ports: %v", err)
	}
	_, _, err := Decode(b, true)
	var ce *CorruptError
	if !errors.As(err, &ce) || ce.Field != "BORNHOST" || ce.Offset != 52 {
		t.Errorf("Decode err = %v, want BORNHOST port at 52", err)
	}
	b = corruptBase(t)
	binary.BigEndian.PutUint32(b[68:], 0x80000000) // STOREHOST port
	_, _, err = Decode(b, true)
	if !errors.As(err, &ce) || ce.Field != "STOREHOST" || ce.Offset != 68 {
		t.Errorf("Decode err = %v, want STOREHOST port at 68", err)
	}
}

func TestRecordTruncationsNeverPanic(t *testing.T) {
	r := rand.New(rand.NewPCG(3, 4))
	for range 50 {
		in, _ := randMessage(r)
		rec, err := AppendRecord(nil, in)
		if err != nil {
			t.Fatal(err)
		}
		for n := 0; n < len(rec); n += 1 + n/8 {
			if _, err := Parse(rec[:n], true); !errors.Is(err, ErrCorrupt) {
				t.Fatalf("truncated to %d of %d: err = %v", n, len(rec), err)
			}
		}
		// Random byte flips: never a panic, errors always classified.
		for range 200 {
			b := bytes.Clone(rec)
			b[r.IntN(len(b))] ^= byte(1 + r.IntN(255))
			if _, _, err := Decode(b, true); err != nil && !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrBlank) {
				t.Fatalf("unclassified error %v", err)
			}
		}
	}
}
