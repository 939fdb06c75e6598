package wire

import (
	"bufio"
	"bytes"
	"errors"
	"io"
	"math"
	"reflect"
	"sort"
	"strings"
	"testing"
	"time"
	"unicode/utf8"
)

// allMethods returns an empty value of every method the codec knows, in
// id order.
func allMethods(t *testing.T) []Method {
	t.Helper()
	keys := make([]uint32, 0, len(methodNames))
	for k := range methodNames {
		keys = append(keys, k)
	}
	sort.Slice(keys, func(i, j int) bool { return keys[i] < keys[j] })
	var ms []Method
	for _, k := range keys {
		m := newMethod(k)
		if m == nil {
			t.Fatalf("%s has a name but no type", methodNames[k])
		}
		if methodKey(m.ClassID(), m.MethodID()) != k {
			t.Fatalf("%T says ids %d,%d, registered as %s", m, m.ClassID(), m.MethodID(), methodNames[k])
		}
		ms = append(ms, m)
	}
	return ms
}

// fill sets every field of the method m points to a distinct non-zero
// value (bools to b).
func fill(m Method, b bool) {
	v := reflect.ValueOf(m).Elem()
	for i := 0; i < v.NumField(); i++ {
		f := v.Field(i)
		name := v.Type().Field(i).Name
		switch f.Kind() {
		case reflect.String:
			f.SetString("v-" + name)
		case reflect.Uint8, reflect.Uint16, reflect.Uint32, reflect.Uint64:
			f.SetUint(uint64(i+1) * 0x0101)
		case reflect.Bool:
			f.SetBool(b)
		case reflect.Struct: // noArgs
		case reflect.Map:
			f.Set(reflect.ValueOf(Table{"x-" + name: int32(i), "nested": Table{"s": "str"}}))
		default:
			panic("unhandled field kind " + f.Kind().String())
		}
	}
}

// roundTrip writes m as a frame on channel 7, reads the frame back and
// decodes it.
func roundTrip(t *testing.T, m Method) Method {
	t.Helper()
	frame := AppendMethodFrame(nil, 7, m)
	r := NewReader(bytes.NewReader(frame), FrameMinSize)
	f, err := r.ReadFrame()
	if err != nil {
		t.Fatalf("%s: ReadFrame: %v", Name(m), err)
	}
	if f.Type != FrameMethod || f.Channel != 7 {
		t.Fatalf("%s: frame type %d channel %d", Name(m), f.Type, f.Channel)
	}
	got, err := DecodeMethod(f.Payload)
	if err != nil {
		t.Fatalf("%s: DecodeMethod: %v", Name(m), err)
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("%s: after the frame: %v, want io.EOF", Name(m), err)
	}
	return got
}

func TestMethodRoundTrip(t *testing.T) {
	ms := allMethods(t)
	if len(ms) != 64 {
		t.Fatalf("%d methods, want 64 (RabbitMQ's 0-9-1 without access)", len(ms))
	}
	for _, m := range ms {
		for _, b := range []bool{false, true} {
			fill(m, b)
			if got := roundTrip(t, m); !reflect.DeepEqual(got, m) {
				t.Errorf("%s: decoded %#v, want %#v", Name(m), got, m)
			}
		}
	}
}

// TestMethodBitsIndependent sets one bit field at a time: each lands in
// its own bit and decodes to the same field.
func TestMethodBitsIndependent(t *testing.T) {
	for _, m := range allMethods(t) {
		v := reflect.ValueOf(m).Elem()
		for i := 0; i < v.NumField(); i++ {
			if v.Field(i).Kind() != reflect.Bool {
				continue
			}
			fill(m, false)
			v.Field(i).SetBool(true)
			if got := roundTrip(t, m); !reflect.DeepEqual(got, m) {
				t.Errorf("%s with only %s: decoded %#v", Name(m), v.Type().Field(i).Name, got)
			}
		}
	}
}

// TestMethodTruncatedAndTrailing: every prefix of a method's payload is
// malformed, and so is one byte more; none panics.
func TestMethodTruncatedAndTrailing(t *testing.T) {
	for _, m := range allMethods(t) {
		fill(m, true)
		p := AppendMethodPayload(nil, m)
		for n := 0; n < len(p); n++ {
			if _, err := DecodeMethod(p[:n]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s cut to %d of %d bytes: %v, want ErrMalformed", Name(m), n, len(p), err)
			}
		}
		_, err := DecodeMethod(append(p, 0))
		if !errors.Is(err, ErrMalformed) || !strings.Contains(err.Error(), Name(m)) {
			t.Fatalf("%s with a trailing byte: %v, want ErrMalformed naming the method", Name(m), err)
		}
	}
}

func TestDecodeMethodUnknown(t *testing.T) {
	for _, p := range [][]byte{
		{0, 30, 0, 10},  // access.request: not part of the RabbitMQ dialect served
		{0, 60, 0, 200}, // basic, no such method
		{0xff, 0xff, 0, 1},
	} {
		if _, err := DecodeMethod(p); !errors.Is(err, ErrUnknownMethod) {
			t.Errorf("% x: %v, want ErrUnknownMethod", p, err)
		}
	}
}

func TestShortstrCutAt255(t *testing.T) {
	long := strings.Repeat("é", 200) // 400 bytes
	got := roundTrip(t, &ChannelClose{ReplyCode: NotFound, ReplyText: long})
	// 255 bytes would end inside an "é": the cut comes before it.
	if txt := got.(*ChannelClose).ReplyText; txt != long[:254] || !utf8.ValidString(txt) {
		t.Fatalf("reply text of %d bytes, want the first 254", len(txt))
	}
	ascii := strings.Repeat("a", 300)
	got = roundTrip(t, &ChannelClose{ReplyCode: NotFound, ReplyText: ascii})
	if txt := got.(*ChannelClose).ReplyText; txt != ascii[:255] {
		t.Fatalf("reply text of %d bytes, want the first 255", len(txt))
	}
}

func TestMethodNames(t *testing.T) {
	for m, want := range map[Method]string{
		&BasicPublish{}: "basic.publish", &ConnectionUpdateSecretOk{}: "connection.update-secret-ok",
		&ExchangeUnbindOk{}: "exchange.unbind-ok", &ConfirmSelect{}: "confirm.select",
		&BasicRecoverAsync{}: "basic.recover-async", &TxRollbackOk{}: "tx.rollback-ok",
	} {
		if got := Name(m); got != want {
			t.Errorf("Name(%T) = %q, want %q", m, got, want)
		}
	}
	if got := MethodName(70, 10); got != "class 70 method 10" {
		t.Errorf("unknown method named %q", got)
	}
	content := map[string]bool{"basic.publish": true, "basic.return": true, "basic.deliver": true, "basic.get-ok": true}
	for _, m := range allMethods(t) {
		if m.HasContent() != content[Name(m)] {
			t.Errorf("%s: HasContent %v", Name(m), m.HasContent())
		}
	}
}

// everyType is a table with a value of every type the encoding knows,
// as DecodeTable returns them.
func everyType() Table {
	return Table{
		"bool": true, "false": false, "int8": int8(-5), "uint8": uint8(250),
		"int16": int16(-300), "uint16": uint16(65000), "int32": int32(-70000),
		"uint32": uint32(4000000000), "int64": int64(math.MinInt64),
		"float32": float32(1.5), "float64": math.Pi,
		"decimal": Decimal{Scale: 2, Value: -12345}, "string": "héllo",
		"bytes": []byte{0, 1, 2}, "empty bytes": []byte{},
		"array": []any{int32(1), "two", []any{}, Table{"k": nil}},
		"time":  time.Unix(1700000000, 0).UTC(), "table": Table{"inner": Table{}},
		"void": nil,
	}
}

func TestTableRoundTrip(t *testing.T) {
	want := everyType()
	b, err := AppendTable([]byte{0xAA}, want)
	if err != nil {
		t.Fatal(err)
	}
	got, n, err := DecodeTable(append(b[1:], 0xBB))
	if err != nil {
		t.Fatal(err)
	}
	if n != len(b)-1 {
		t.Fatalf("consumed %d bytes, want %d", n, len(b)-1)
	}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded\n%#v\nwant\n%#v", got, want)
	}
}

func TestTableGoTypesWidened(t *testing.T) {
	b, err := AppendTable(nil, Table{"int": 7, "uint64": uint64(8), "uint": uint(9),
		"map": map[string]any{"a": "b"}, "time": time.Unix(5, 999)})
	if err != nil {
		t.Fatal(err)
	}
	got, _, err := DecodeTable(b)
	if err != nil {
		t.Fatal(err)
	}
	want := Table{"int": int64(7), "uint64": int64(8), "uint": int64(9),
		"map": Table{"a": "b"}, "time": time.Unix(5, 0).UTC()}
	if !reflect.DeepEqual(got, want) {
		t.Fatalf("decoded %#v, want %#v", got, want)
	}
}

func TestTableEncodeErrors(t *testing.T) {
	deep := Table{}
	for i := 0; i < MaxTableDepth+1; i++ {
		deep = Table{"d": deep}
	}
	for name, tb := range map[string]Table{
		"struct":     {"k": struct{}{}},
		"uint64 big": {"k": uint64(math.MaxUint64)},
		"nested":     {"k": Table{"j": []any{complex(1, 2)}}},
		"long key":   {strings.Repeat("k", 256): 1},
		"deep":       deep,
	} {
		dst := []byte("keep")
		out, err := AppendTable(dst, tb)
		if err == nil {
			t.Errorf("%s: no error", name)
		}
		if string(out) != "keep" {
			t.Errorf("%s: dst changed to %q", name, out)
		}
	}
	// In method arguments, which cannot fail, an unknown value is void.
	got := roundTrip(t, &QueueDeclare{Queue: "q", Arguments: Table{"bad": struct{}{}, "ok": "yes"}})
	if args := got.(*QueueDeclare).Arguments; !reflect.DeepEqual(args, Table{"bad": nil, "ok": "yes"}) {
		t.Fatalf("arguments %#v", args)
	}
}

func TestDecodeTableMalformed(t *testing.T) {
	good, _ := AppendTable(nil, everyType())
	for n := 0; n < len(good); n++ {
		cut := append([]byte{}, good[:n]...)
		if _, _, err := DecodeTable(cut); !errors.Is(err, ErrMalformed) {
			t.Fatalf("cut to %d bytes: %v, want ErrMalformed", n, err)
		}
	}
	// A table whose length is right but whose content is cut inside a value.
	bad := []byte{0, 0, 0, 4, 1, 'k', 'I', 0}
	if _, _, err := DecodeTable(bad); !errors.Is(err, ErrMalformed) {
		t.Fatalf("value cut inside the table: %v", err)
	}
	if _, _, err := DecodeTable([]byte{0, 0, 0, 3, 1, 'k', 'Z'}); !errors.Is(err, ErrMalformed) {
		t.Fatalf("unknown type letter: %v", err)
	}
	// Nesting beyond the limit, built by hand: each level is 'F' inside 'A'.
	var deep []byte
	deep = []byte{0, 0, 0, 0}
	for i := 0; i < MaxTableDepth; i++ {
		inner := append([]byte{1, 'k', 'F'}, deep...)
		deep = append(appendLong(nil, uint32(len(inner))), inner...)
	}
	if _, _, err := DecodeTable(deep); !errors.Is(err, ErrMalformed) {
		t.Fatalf("%d levels: %v, want ErrMalformed", MaxTableDepth+1, err)
	}
	if _, err := skipTable(deep, 0); !errors.Is(err, ErrMalformed) {
		t.Fatalf("skipTable of %d levels: %v, want ErrMalformed", MaxTableDepth+1, err)
	}
}

func TestPropertiesRoundTrip(t *testing.T) {
	full := Properties{
		ContentType: "text/plain", ContentEncoding: "gzip", Headers: everyType(),
		DeliveryMode: 2, Priority: 9, CorrelationID: "corr", ReplyTo: "amq.rabbitmq.reply-to",
		Expiration: "60000", MessageID: "id-1", Timestamp: time.Unix(1700000001, 0).UTC(),
		Type: "t", UserID: "guest", AppID: "app", ClusterID: "c",
	}
	for name, p := range map[string]Properties{
		"none": {}, "full": full, "delivery mode": {DeliveryMode: 1},
		"zero priority flagged": {Flags: FlagPriority | FlagContentType},
	} {
		raw, err := AppendProperties(nil, p)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		frame := AppendContentHeaderFrame(nil, 3, 60, 12345, raw)
		f, err := NewReader(bytes.NewReader(frame), 0).ReadFrame()
		if err != nil || f.Type != FrameHeader || f.Channel != 3 {
			t.Fatalf("%s: frame %+v, %v", name, f, err)
		}
		h, err := DecodeContentHeader(f.Payload)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		if h.ClassID != 60 || h.BodySize != 12345 || !bytes.Equal(h.Raw, raw) {
			t.Fatalf("%s: header %+v, raw % x", name, h, raw)
		}
		got, err := DecodeProperties(h.Raw)
		if err != nil {
			t.Fatalf("%s: %v", name, err)
		}
		want := p
		if want.Flags == 0 {
			want.Flags = p.presentFlags()
		}
		if !reflect.DeepEqual(got, want) {
			t.Fatalf("%s: decoded\n%#v\nwant\n%#v", name, got, want)
		}
		for n := 0; n < len(h.Raw); n++ {
			if _, err := DecodeProperties(h.Raw[:n]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s cut to %d: %v", name, n, err)
			}
			if _, err := DecodeContentHeader(f.Payload[:12+n]); !errors.Is(err, ErrMalformed) {
				t.Fatalf("%s header cut to %d: %v", name, n, err)
			}
		}
	}
}

func TestPropertiesFlagWords(t *testing.T) {
	// A continuation word that flags nothing is accepted and skipped.
	raw := []byte{0x80, 0x01, 0x00, 0x00, 2, 'h', 'i'}
	p, err := DecodeProperties(raw)
	if err != nil || p.ContentType != "hi" || p.Flags != FlagContentType {
		t.Fatalf("with an empty continuation word: %+v, %v", p, err)
	}
	for _, bad := range [][]byte{
		{0x00, 0x02},             // bit 1 is no property
		{0x00, 0x01, 0x00, 0x80}, // a property in the second word
		{0x00, 0x01},             // continuation word missing
	} {
		if _, err := DecodeProperties(bad); !errors.Is(err, ErrMalformed) {
			t.Errorf("% x: %v, want ErrMalformed", bad, err)
		}
	}
	if _, err := AppendProperties(nil, Properties{Flags: 1}); err == nil {
		t.Error("Flags with the continuation bit encoded")
	}
	if _, err := AppendProperties(nil, Properties{MessageID: strings.Repeat("m", 256)}); err == nil {
		t.Error("a 256-byte message-id encoded")
	}
	if _, err := AppendProperties(nil, Properties{Headers: Table{"k": struct{}{}}}); err == nil {
		t.Error("a header of an unknown type encoded")
	}
}

func TestReaderFrames(t *testing.T) {
	var stream []byte
	stream = AppendHeartbeat(stream)
	stream = AppendMethodFrame(stream, 1, &BasicAck{DeliveryTag: 9, Multiple: true})
	body := bytes.Repeat([]byte("b"), 10000)
	stream = AppendBodyFrames(stream, 1, body, FrameMinSize)
	r := NewReader(bytes.NewReader(stream), 0)
	f, err := r.ReadFrame()
	if err != nil || f.Type != FrameHeartbeat || f.Channel != 0 || len(f.Payload) != 0 {
		t.Fatalf("heartbeat: %+v, %v", f, err)
	}
	f, err = r.ReadFrame()
	if err != nil || f.Type != FrameMethod {
		t.Fatalf("method: %+v, %v", f, err)
	}
	m, err := DecodeMethod(f.Payload)
	if err != nil || !reflect.DeepEqual(m, &BasicAck{DeliveryTag: 9, Multiple: true}) {
		t.Fatalf("ack: %#v, %v", m, err)
	}
	var got []byte
	for len(got) < len(body) {
		f, err = r.ReadFrame()
		if err != nil || f.Type != FrameBody || len(f.Payload)+8 > FrameMinSize {
			t.Fatalf("body frame: type %d, %d bytes, %v", f.Type, len(f.Payload), err)
		}
		got = append(got, f.Payload...)
	}
	if !bytes.Equal(got, body) {
		t.Fatal("body differs")
	}
	if _, err := r.ReadFrame(); err != io.EOF {
		t.Fatalf("at the end: %v, want io.EOF", err)
	}
}

func TestReaderLimits(t *testing.T) {
	big := AppendFrame(nil, FrameBody, 1, make([]byte, 5000))
	if _, err := NewReader(bytes.NewReader(big), 0).ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("5008-byte frame at the minimum limit: %v", err)
	}
	r := NewReader(bytes.NewReader(big), 0)
	r.SetMax(5008)
	if f, err := r.ReadFrame(); err != nil || len(f.Payload) != 5000 {
		t.Fatalf("5008-byte frame with max 5008: %v", err)
	}
	r = NewReader(bytes.NewReader(big), 5007)
	if _, err := r.ReadFrame(); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("5008-byte frame with max 5007: %v", err)
	}
	bad := AppendHeartbeat(nil)
	bad[len(bad)-1] = 0xCD
	if _, err := NewReader(bytes.NewReader(bad), 0).ReadFrame(); !errors.Is(err, ErrBadFrameEnd) {
		t.Fatalf("bad frame end: %v", err)
	}
	ok := AppendMethodFrame(nil, 1, &BasicQosOk{})
	for n := 1; n < len(ok); n++ {
		if _, err := NewReader(bytes.NewReader(ok[:n]), 0).ReadFrame(); err != io.ErrUnexpectedEOF {
			t.Fatalf("frame cut to %d bytes: %v, want io.ErrUnexpectedEOF", n, err)
		}
	}
}

func TestReadProtocolHeader(t *testing.T) {
	if err := ReadProtocolHeader(bytes.NewReader([]byte("AMQP\x00\x00\x09\x01rest"))); err != nil {
		t.Fatal(err)
	}
	for _, h := range []string{"AMQP\x01\x01\x00\x09", "AMQP\x00\x00\x09\x00", "GET / HT"} {
		if err := ReadProtocolHeader(strings.NewReader(h)); !errors.Is(err, ErrBadProtocolHeader) {
			t.Errorf("%q: %v, want ErrBadProtocolHeader", h, err)
		}
	}
	if err := ReadProtocolHeader(strings.NewReader("AMQP")); !errors.Is(err, io.ErrUnexpectedEOF) {
		t.Errorf("short header: %v", err)
	}
}

// TestReaderUsesCallersBuffer: a caller that owns a bufio.Reader can ask
// it how much is buffered, which is what decides when to flush writes.
func TestReaderUsesCallersBuffer(t *testing.T) {
	var stream []byte
	for i := 0; i < 3; i++ {
		stream = AppendHeartbeat(stream)
	}
	br := bufio.NewReaderSize(bytes.NewReader(stream), 64<<10)
	r := NewReader(br, 0)
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if br.Buffered() != 16 {
		t.Fatalf("caller's reader has %d bytes buffered after one of three heartbeats, want 16", br.Buffered())
	}
}

// TestReaderLetsLargeBufferGo: after a 200 KiB frame, a heartbeat
// releases the large buffer, so an idle connection does not hold it.
func TestReaderLetsLargeBufferGo(t *testing.T) {
	stream := AppendFrame(nil, FrameBody, 1, make([]byte, 200<<10))
	stream = AppendHeartbeat(stream)
	stream = AppendFrame(stream, FrameBody, 1, make([]byte, 100<<10))
	r := NewReader(bytes.NewReader(stream), 1<<20)
	if f, err := r.ReadFrame(); err != nil || len(f.Payload) != 200<<10 {
		t.Fatalf("large frame: %v", err)
	}
	if _, err := r.ReadFrame(); err != nil {
		t.Fatal(err)
	}
	if cap(r.buf) > keepBuffer {
		t.Fatalf("after a heartbeat the reader holds %d bytes", cap(r.buf))
	}
	if f, err := r.ReadFrame(); err != nil || len(f.Payload) != 100<<10 {
		t.Fatalf("second large frame: %v", err)
	}
}
