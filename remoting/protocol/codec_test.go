package protocol

import (
	"bytes"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"maps"
	"reflect"
	"runtime"
	"strconv"
	"strings"
	"testing"
)

// frameOf builds a frame by hand: length word, type|len word, header, body.
func frameOf(st SerializeType, hdr, body []byte) []byte {
	b := binary.BigEndian.AppendUint32(nil, uint32(4+len(hdr)+len(body)))
	b = binary.BigEndian.AppendUint32(b, uint32(st)<<24|uint32(len(hdr)))
	b = append(b, hdr...)
	return append(b, body...)
}

func decodeWhole(t *testing.T, frame []byte) *Command {
	t.Helper()
	n, err := FrameLength(binary.BigEndian.Uint32(frame), 0)
	if err != nil {
		t.Fatalf("FrameLength: %v", err)
	}
	if n != len(frame)-4 {
		t.Fatalf("length word %d, frame has %d bytes after it", n, len(frame)-4)
	}
	c, err := DecodeFrame(frame[4:])
	if err != nil {
		t.Fatalf("DecodeFrame: %v", err)
	}
	return c
}

// A GET_ROUTEINFO_BY_TOPIC request exactly as Java's 4.9.8 client frames it.
const javaRouteRequest = `{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":409}`

func TestRemotingCodecJavaJSONRequest(t *testing.T) {
	frame := frameOf(SerializeJSON, []byte(javaRouteRequest), nil)
	// Pin the framing bytes: header 123 = 0x7b bytes, length 4+123 = 0x7f.
	if got := hex.EncodeToString(frame[:8]); got != "0000007f0000007b" {
		t.Fatalf("frame prefix %s", got)
	}
	c := decodeWhole(t, frame)
	want := &Command{Code: GetRouteInfoByTopic, Language: LanguageJava, Version: 409, Opaque: 7,
		ExtFields: ExtFields{"topic": "T"}, SerializeType: SerializeJSON}
	if !reflect.DeepEqual(c, want) {
		t.Fatalf("decoded %+v, want %+v", c, want)
	}
	var h GetRouteInfoRequestHeader
	if err := c.DecodeHeader(&h); err != nil || h.Topic != "T" || h.AcceptStandardJSONOnly {
		t.Fatalf("header %+v err %v", h, err)
	}
	// Our encoder writes the same bytes for the same command.
	enc, err := EncodeFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(enc, frame) {
		t.Fatalf("re-encoded\n%q\nwant\n%q", enc[8:], frame[8:])
	}
}

// rocketmq-client-go v2.1.2 writes struct order, remark "" and no
// serializeTypeCurrentRPC.
func TestRemotingCodecGoClientJSONRequest(t *testing.T) {
	hdr := `{"code":105,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"TopicTest"}}`
	c := decodeWhole(t, frameOf(SerializeJSON, []byte(hdr), nil))
	if c.Code != 105 || c.Language != LanguageGo || c.Version != 317 || c.Opaque != 1 || c.Flag != 0 ||
		c.Remark != "" || c.ExtFields["topic"] != "TopicTest" {
		t.Fatalf("decoded %+v", c)
	}
}

func TestRemotingCodecJSONResponseBytes(t *testing.T) {
	resp := NewResponse(Success, "")
	resp.Language = LanguageJava
	resp.Version = 401
	frame, err := EncodeFrame(resp)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"code":0,"extFields":{},"flag":1,"language":"JAVA","opaque":0,"serializeTypeCurrentRPC":"JSON","version":401}`
	if string(frame[8:]) != want {
		t.Fatalf("header %s\nwant   %s", frame[8:], want)
	}
	resp2 := NewResponse(TopicNotExist, "No topic route info in name server for the topic: T\n\"q\"")
	resp2.Opaque = -5
	resp2.Body = []byte("xyz")
	resp2.SetHeader(&QueryDataVersionResponseHeader{Changed: true})
	frame, err = EncodeFrame(resp2)
	if err != nil {
		t.Fatal(err)
	}
	wantHdr := `{"code":17,"extFields":{"changed":"true"},"flag":1,"language":"GO","opaque":-5,"remark":"No topic route info in name server for the topic: T\n\"q\"","serializeTypeCurrentRPC":"JSON","version":409}`
	hl := int(binary.BigEndian.Uint32(frame[4:]) & 0xFFFFFF)
	if string(frame[8:8+hl]) != wantHdr || string(frame[8+hl:]) != "xyz" {
		t.Fatalf("frame %q", frame)
	}
	back := decodeWhole(t, frame)
	if back.Remark != resp2.Remark || back.Opaque != -5 || string(back.Body) != "xyz" || back.ExtFields["changed"] != "true" {
		t.Fatalf("round trip %+v", back)
	}
}

func TestRemotingCodecBinaryHeaderBytes(t *testing.T) {
	c := &Command{Code: 105, Language: LanguageJava, Version: 409, Opaque: 7, Flag: 2,
		Remark: "hi", ExtFields: ExtFields{"topic": "T"}, SerializeType: SerializeRocketMQ, Body: []byte{0xAB}}
	frame, err := EncodeFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	want := "00000028" + // length 40 = 4 + 35 header + 1 body
		"01000023" + // type 1, header 35 = 21 + 2 + 12
		"0069" + "00" + "0199" + "00000007" + "00000002" + // code lang version opaque flag
		"00000002" + "6869" + // remark "hi"
		"0000000c" + "0005" + "746f706963" + "00000001" + "54" + // ext: topic=T
		"ab"
	if got := hex.EncodeToString(frame); got != want {
		t.Fatalf("binary frame\n%s\nwant\n%s", got, want)
	}
	back := decodeWhole(t, frame)
	if !reflect.DeepEqual(back, c) {
		t.Fatalf("round trip %+v want %+v", back, c)
	}
}

func TestRemotingCodecJSONTolerance(t *testing.T) {
	hdr := ` { "unknown":{"a":[1,{"b":"}"}]}, "code":"34", "remark":null, "language":"KOTLIN",
		"extFields":{"n":12,"b":true,"z":null,"o":{"x":1},"e":"\u00e9\ud83d\ude00\n"}, "opaque":3 } `
	c := decodeWhole(t, frameOf(SerializeJSON, []byte(hdr), nil))
	if c.Code != 34 || c.Opaque != 3 || c.Language != LanguageOther || c.Remark != "" {
		t.Fatalf("decoded %+v", c)
	}
	want := ExtFields{"n": "12", "b": "true", "e": "é😀\n"}
	if !reflect.DeepEqual(c.ExtFields, want) {
		t.Fatalf("ext %q want %q", c.ExtFields, want)
	}
	// Escaping round trip of awkward strings.
	odd := "a\"b\\c\x01\t\xff日本"
	r := &Command{Code: 1, Remark: odd, ExtFields: ExtFields{odd: odd}}
	back := decodeWhole(t, mustEncode(t, r))
	wantOdd := strings.ReplaceAll(odd, "\xff", "\ufffd")
	if back.Remark != wantOdd || back.ExtFields[wantOdd] != wantOdd {
		t.Fatalf("escape round trip %q %q", back.Remark, back.ExtFields)
	}
}

func mustEncode(t *testing.T, c *Command) []byte {
	t.Helper()
	b, err := EncodeFrame(c)
	if err != nil {
		t.Fatal(err)
	}
	return b
}

func TestRemotingCodecBadInput(t *testing.T) {
	if _, err := FrameLength(DefaultMaxFrameSize-3, 0); !errors.Is(err, ErrFrameTooLarge) {
		t.Fatalf("oversize: %v", err)
	}
	if _, err := FrameLength(DefaultMaxFrameSize-4, 0); err != nil {
		t.Fatalf("max size frame rejected: %v", err)
	}
	if _, err := FrameLength(3, 0); !errors.Is(err, ErrBadFrame) {
		t.Fatalf("short: %v", err)
	}
	cases := []struct {
		name  string
		frame []byte
		want  error
	}{
		{"header longer than frame", []byte{0, 0, 0, 10, '{', '}'}, ErrBadFrame},
		{"unknown serialize type", []byte{2, 0, 0, 2, '{', '}'}, ErrUnknownSerializeType},
		{"bad json", []byte{0, 0, 0, 5, '{', '"', 'c', '"', '}'}, ErrBadHeader},
		{"trailing json", []byte{0, 0, 0, 3, '{', '}', 'x'}, ErrBadHeader},
		{"bad code", append([]byte{0, 0, 0, 12}, `{"code":1.5}`...), ErrBadHeader},
		{"short binary", []byte{1, 0, 0, 3, 0, 0, 0}, ErrBadHeader},
		{"binary remark overflow", append([]byte{1, 0, 0, 21}, make21(0x7fffffff, 0)...), ErrBadHeader},
		{"binary ext overflow", append([]byte{1, 0, 0, 21}, make21(0, 9)...), ErrBadHeader},
	}
	for _, tc := range cases {
		if _, err := DecodeFrame(tc.frame); !errors.Is(err, tc.want) {
			t.Errorf("%s: err %v, want %v", tc.name, err, tc.want)
		}
	}
}

func make21(remarkLen, extLen uint32) []byte {
	b := make([]byte, 13)
	b = binary.BigEndian.AppendUint32(b, remarkLen)
	return binary.BigEndian.AppendUint32(b, extLen)
}

func TestRemotingHeaderFields(t *testing.T) {
	long := SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T", DefaultTopic: DefaultTopic, DefaultTopicQueueNums: 4,
		QueueID: 2, SysFlag: 0, BornTimestamp: 1700000000000, Flag: 0, Properties: "KEYS\x01k\x02",
		ReconsumeTimes: 1, MaxReconsumeTimes: 16, HasMaxReconsumeTimes: true, Batch: true}
	f := ExtFields{}
	long.V2().EncodeFields(f)
	wantV2 := ExtFields{"a": "pg", "b": "T", "c": "TBW102", "d": "4", "e": "2", "f": "0", "g": "1700000000000",
		"h": "0", "i": "KEYS\x01k\x02", "j": "1", "k": "false", "l": "16", "m": "true"}
	if !reflect.DeepEqual(f, wantV2) {
		t.Fatalf("v2 fields %q", f)
	}
	got, err := DecodeSendMessageHeader(&Command{Code: SendMessageV2, ExtFields: f})
	if err != nil || !reflect.DeepEqual(*got, long) {
		t.Fatalf("v2 decode %+v %v", got, err)
	}
	f1 := ExtFields{}
	long.EncodeFields(f1)
	got, err = DecodeSendMessageHeader(&Command{Code: SendMessage, ExtFields: f1})
	if err != nil || !reflect.DeepEqual(*got, long) {
		t.Fatalf("v1 decode %+v %v", got, err)
	}
	delete(f1, "bornTimestamp")
	if _, err := DecodeSendMessageHeader(&Command{Code: SendMessage, ExtFields: f1}); !errors.Is(err, ErrMissingField) ||
		!strings.Contains(err.Error(), "SendMessageRequestHeader.bornTimestamp") {
		t.Fatalf("missing field error %v", err)
	}
	f1["bornTimestamp"] = "yesterday"
	if _, err := DecodeSendMessageHeader(&Command{Code: SendMessage, ExtFields: f1}); !errors.Is(err, ErrBadField) ||
		!strings.Contains(err.Error(), "bornTimestamp") {
		t.Fatalf("bad field error %v", err)
	}

	// Round trip every header type through ExtFields.
	type codec interface {
		HeaderEncoder
		HeaderDecoder
	}
	pairs := []struct{ in, out codec }{
		{&RegisterBrokerRequestHeader{"b", "1.2.3.4:10911", "c", "1.2.3.4:10912", 1, false, -5}, &RegisterBrokerRequestHeader{}},
		{&RegisterBrokerResponseHeader{"ha", "m"}, &RegisterBrokerResponseHeader{}},
		{&BrokerIdentityHeader{"b", "a", "c", 3}, &BrokerIdentityHeader{}},
		{&QueryDataVersionResponseHeader{true}, &QueryDataVersionResponseHeader{}},
		{&GetRouteInfoRequestHeader{"T", true}, &GetRouteInfoRequestHeader{}},
		{&KVConfigRequestHeader{PutKVConfig, "ns", "k", "v"}, &KVConfigRequestHeader{Code: PutKVConfig}},
		{&GetKVConfigResponseHeader{"v"}, &GetKVConfigResponseHeader{}},
		{&GetTopicsByClusterRequestHeader{"c"}, &GetTopicsByClusterRequestHeader{}},
		{&BrokerPermRequestHeader{"b"}, &BrokerPermRequestHeader{}},
		{&WipeWritePermResponseHeader{3}, &WipeWritePermResponseHeader{}},
		{&AddWritePermResponseHeader{4}, &AddWritePermResponseHeader{}},
		{&DeleteTopicInNamesrvRequestHeader{"T", "c"}, &DeleteTopicInNamesrvRequestHeader{}},
		{&SendMessageResponseHeader{"ID", 1, 99, "tx", "DefaultRegion", true}, &SendMessageResponseHeader{}},
		{&EndTransactionRequestHeader{"pg", 1, 2, 8, true, "m", "t"}, &EndTransactionRequestHeader{}},
		{&CheckTransactionStateRequestHeader{1, 2, "m", "t", "o"}, &CheckTransactionStateRequestHeader{}},
		{&PullMessageRequestHeader{"cg", "T", 1, 2, 32, 7, 3, 15000, "*", 17, "TAG", "b"}, &PullMessageRequestHeader{}},
		{&PullMessageResponseHeader{0, 5, 0, 9}, &PullMessageResponseHeader{}},
		{&QueryConsumerOffsetRequestHeader{"cg", "T", 3, false, false}, &QueryConsumerOffsetRequestHeader{}},
		{&QueryConsumerOffsetRequestHeader{"cg", "T", 3, false, true}, &QueryConsumerOffsetRequestHeader{}},
		{&QueryConsumerOffsetRequestHeader{"cg", "T", 3, true, true}, &QueryConsumerOffsetRequestHeader{}},
		{&UpdateConsumerOffsetRequestHeader{"cg", "T", 3, 77}, &UpdateConsumerOffsetRequestHeader{}},
		{&TopicQueueHeader{"T", 2}, &TopicQueueHeader{}},
		{&OffsetResponseHeader{-1}, &OffsetResponseHeader{}},
		{&SearchOffsetRequestHeader{"T", 1, 5, ""}, &SearchOffsetRequestHeader{}},
		{&SearchOffsetRequestHeader{"T", 1, 5, "UPPER"}, &SearchOffsetRequestHeader{}},
		{&GetEarliestMsgStoretimeResponseHeader{9}, &GetEarliestMsgStoretimeResponseHeader{}},
		{&ViewMessageRequestHeader{1 << 40}, &ViewMessageRequestHeader{}},
		{&QueryMessageRequestHeader{"T", "k", 32, 1, 2, true}, &QueryMessageRequestHeader{}},
		{&QueryMessageResponseHeader{1, 2}, &QueryMessageResponseHeader{}},
		{&ConsumerSendMsgBackRequestHeader{5, "g", 0, "o", "t", true, 16, true}, &ConsumerSendMsgBackRequestHeader{}},
		{&UnregisterClientRequestHeader{"cid", "pg", "cg"}, &UnregisterClientRequestHeader{}},
		{&ConsumerGroupHeader{"cg"}, &ConsumerGroupHeader{}},
		{&CreateTopicRequestHeader{"T", "TBW102", 8, 8, 6, "SINGLE_TAG", 0, true}, &CreateTopicRequestHeader{}},
		{&DeleteTopicRequestHeader{"T"}, &DeleteTopicRequestHeader{}},
	}
	for _, p := range pairs {
		f := ExtFields{}
		p.in.EncodeFields(f)
		for k, v := range f {
			if v == "" && k != "value" {
				t.Errorf("%T writes empty %s", p.in, k)
			}
		}
		if err := p.out.DecodeFields(f); err != nil {
			t.Fatalf("%T: %v", p.in, err)
		}
		if !reflect.DeepEqual(p.in, p.out) {
			t.Fatalf("%T round trip: %+v != %+v", p.in, p.out, p.in)
		}
		// Dropping any key a decoder requires names that key.
		for k := range f {
			g := ExtFields{}
			for k2, v := range f {
				if k2 != k {
					g[k2] = v
				}
			}
			if err := p.out.DecodeFields(g); err != nil && !strings.Contains(err.Error(), "."+k) {
				t.Fatalf("%T without %s: error %v does not name it", p.in, k, err)
			}
		}
	}
}

// The extFields map is sized from the entries before the first '}': a
// value holding braces or `":` only makes the estimate wrong, never the
// decoded fields; the binary map is counted the same way.
func TestRemotingCodecExtFieldsSizing(t *testing.T) {
	want := ExtFields{"a": `x}":{`, "b": "{}", "c": `":`}
	for i := 0; i < 12; i++ {
		want[fmt.Sprintf("k%02d", i)] = fmt.Sprint(i)
	}
	for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
		cmd := NewResponse(Success, "r")
		cmd.ExtFields = want
		cmd.SerializeType = st
		frame, err := EncodeFrame(cmd)
		if err != nil {
			t.Fatal(err)
		}
		got, err := DecodeFrame(frame[4:])
		if err != nil {
			t.Fatal(err)
		}
		if !maps.Equal(got.ExtFields, want) || got.Remark != "r" {
			t.Fatalf("%v: got %v", st, got.ExtFields)
		}
	}
}

// TestRemotingCodecExtFieldsHintBounded: a header of a million tiny
// entries (all the same key, so the map holds one) is decoded without
// allocating a map for a million entries up front, in either encoding.
func TestRemotingCodecExtFieldsHintBounded(t *testing.T) {
	const n = 1 << 20
	ext := bytes.Repeat([]byte{0, 0, 0, 0, 0, 0}, n) // binary: empty key, empty value
	bin := make([]byte, 0, binaryFixedLen+4+len(ext))
	bin = append(bin, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0, 0) // code .. flag, remark length 0
	bin = binary.BigEndian.AppendUint32(bin, uint32(len(ext)))
	bin = append(bin, ext...)
	json := []byte(`{"code":0,"extFields":{` + strings.Repeat(`"":"",`, n) + `"":""},"flag":0}`)
	for name, decode := range map[string]func() (*Command, error){
		"binary": func() (*Command, error) { var c Command; return &c, decodeBinaryHeader(bin, &c) },
		"json":   func() (*Command, error) { var c Command; return &c, decodeJSONHeader(json, &c, nil, false, nil) },
	} {
		var before, after runtime.MemStats
		runtime.ReadMemStats(&before)
		c, err := decode()
		runtime.ReadMemStats(&after)
		if err != nil || len(c.ExtFields) != 1 {
			t.Fatalf("%s: %d fields, %v", name, len(c.ExtFields), err)
		}
		// The header string copy is ~6-7 MB; a map sized for 2^20
		// entries would add tens of MB.
		if got := after.TotalAlloc - before.TotalAlloc; got > 16<<20 {
			t.Fatalf("%s: decoding allocated %d MB", name, got>>20)
		}
	}
}

// The JSON header of a SmartGo response (flag 1, language GO, the current
// version) is written from precomputed pieces; every other flag, language
// and version takes the general path. Both write the same layout.
func TestRemotingCodecJSONHeaderAroundOpaque(t *testing.T) {
	cases := []struct {
		c    Command
		want string
	}{
		{Command{Code: 0, Flag: FlagResponse, Language: LanguageGo, Version: CurrentVersion, Opaque: 42},
			`{"code":0,"extFields":{},"flag":1,"language":"GO","opaque":42,"serializeTypeCurrentRPC":"JSON","version":` + strconv.Itoa(int(CurrentVersion)) + `}`},
		{Command{Code: 0, Flag: FlagResponse, Language: LanguageGo, Version: 317, Opaque: 42, Remark: "r"},
			`{"code":0,"extFields":{},"flag":1,"language":"GO","opaque":42,"remark":"r","serializeTypeCurrentRPC":"JSON","version":317}`},
		{Command{Code: 1, Flag: FlagResponse | FlagOneway, Language: LanguageGo, Version: CurrentVersion, Opaque: -1},
			`{"code":1,"extFields":{},"flag":3,"language":"GO","opaque":-1,"serializeTypeCurrentRPC":"JSON","version":` + strconv.Itoa(int(CurrentVersion)) + `}`},
		{Command{Code: 2, Flag: FlagResponse, Language: LanguageJava, Version: CurrentVersion, Opaque: 7},
			`{"code":2,"extFields":{},"flag":1,"language":"JAVA","opaque":7,"serializeTypeCurrentRPC":"JSON","version":` + strconv.Itoa(int(CurrentVersion)) + `}`},
		{Command{Code: 10, Language: LanguageGo, Version: CurrentVersion, Opaque: 8},
			`{"code":10,"flag":0,"language":"GO","opaque":8,"serializeTypeCurrentRPC":"JSON","version":` + strconv.Itoa(int(CurrentVersion)) + `}`},
	}
	for _, tc := range cases {
		if got := string(appendJSONHeader(nil, &tc.c)); got != tc.want {
			t.Errorf("header\n%s\nwant\n%s", got, tc.want)
		}
	}
}
