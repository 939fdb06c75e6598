package protocol

import (
	"encoding/binary"
	"fmt"
	"maps"
	"reflect"
	"strconv"
	"strings"
	"testing"
)

// allRaw keeps the extFields text of every request.
func allRaw(int32) bool { return true }

// directHeaders are fresh values of the headers with generated JSON
// decoders and writers (Header.Direct in headergen's table).
func directHeaders() []interface {
	HeaderDecoder
	HeaderEncoder
} {
	return []interface {
		HeaderDecoder
		HeaderEncoder
	}{
		new(SendMessageRequestHeader), new(SendMessageRequestHeaderV2), new(SendMessageResponseHeader),
		new(PullMessageRequestHeader), new(PullMessageResponseHeader),
	}
}

// sameDecode decodes the JSON header hdr as a map (DecodeFrame) and as
// text (DecodeFrameWith) and checks that every direct header decodes the
// same from both: the same values and the same error. A header whose
// extFields are malformed fails the map decode at the frame and the text
// decode at DecodeHeader.
func sameDecode(t *testing.T, hdr []byte) {
	t.Helper()
	frame := frameOf(SerializeJSON, hdr, nil)[4:]
	eager, eerr := DecodeFrame(frame)
	lazy, lerr := DecodeFrameWith(frame, nil, allRaw)
	if lerr != nil {
		if eerr == nil {
			t.Fatalf("%s: text decode failed (%v), map decode did not", hdr, lerr)
		}
		return
	}
	if eerr != nil {
		// Only a malformed extFields object may pass the frame decode.
		if lazy.listErr == nil {
			t.Fatalf("%s: map decode failed (%v), text decode did not, and kept no error", hdr, eerr)
		}
		for _, h := range directHeaders() {
			if err := lazy.DecodeHeader(h); err == nil {
				t.Fatalf("%s: malformed extFields (%v) decoded into %T", hdr, eerr, h)
			}
		}
		if f := lazy.Fields(); f != nil {
			t.Fatalf("%s: malformed extFields gave %v", hdr, f)
		}
		return
	}
	if eager.Code != lazy.Code || eager.Remark != lazy.Remark || eager.Opaque != lazy.Opaque || eager.Flag != lazy.Flag {
		t.Fatalf("%s: commands differ: %+v vs %+v", hdr, eager, lazy)
	}
	for _, h := range directHeaders() {
		h2 := reflect.New(reflect.TypeOf(h).Elem()).Interface().(HeaderDecoder)
		err1 := eager.DecodeHeader(h)
		// A fresh copy of the lazy command each time: a failed direct
		// decode builds the map, which the next header would then use.
		c := *lazy
		err2 := c.DecodeHeader(h2)
		if fmt.Sprint(err1) != fmt.Sprint(err2) || !reflect.DeepEqual(h, h2) {
			t.Fatalf("%s: %T from the map: %+v, %v; from the text: %+v, %v", hdr, h, h, err1, h2, err2)
		}
	}
	if f := lazy.Fields(); !maps.Equal(f, eager.ExtFields) || (f == nil) != (eager.ExtFields == nil) {
		t.Fatalf("%s: Fields %v, map decode %v", hdr, f, eager.ExtFields)
	}
}

func TestRemotingRawFieldsDecodeAsTheMap(t *testing.T) {
	const props = `"properties":"UNIQ_KEY\u00017F000001\u0002WAIT\u0001true\u0002TAGS\u0001tag"`
	for _, ext := range []string{
		// rocketmq-client-go's SEND_MESSAGE and SEND_MESSAGE_V2
		`{"producerGroup":"pg","topic":"T","defaultTopic":"TBW102","defaultTopicQueueNums":"4","queueId":"3","sysFlag":"0","bornTimestamp":"1764120000000","flag":"0",` + props + `,"reconsumeTimes":"0","unitMode":"false","batch":"false","maxReconsumeTimes":"16"}`,
		`{"a":"pg","b":"T","c":"TBW102","d":"4","e":"3","f":"0","g":"1764120000000","h":"0",` + strings.Replace(props, "properties", "i", 1) + `,"j":"0","k":"false","m":"true","n":"broker-a"}`,
		// numbers and booleans as JSON scalars, nulls, nested values, unknown keys, spaces
		` { "producerGroup" : "pg" , "topic":"T","defaultTopic":"D","defaultTopicQueueNums":4,"queueId":-1,"sysFlag":0,"bornTimestamp":1,"flag":0,"unitMode":true,"batch":"TRUE","x":{"y":[1,"}"]},"bname":null,"sgResend":"true" } `,
		// duplicates: the last value wins; a null does not remove
		`{"producerGroup":"a","producerGroup":"b","topic":"T","topic":null,"defaultTopic":"D","defaultTopicQueueNums":"1","queueId":"x","queueId":"2","sysFlag":"0","bornTimestamp":"0","flag":"0"}`,
		`{"producerGroup":"a","topic":"T","defaultTopic":"D","defaultTopicQueueNums":"1","queueId":"2","queueId":"x","sysFlag":"0","bornTimestamp":"0","flag":"0"}`,
		// missing and malformed fields: the map decoder's errors
		`{"producerGroup":"pg"}`,
		`{"producerGroup":"pg","topic":"T","defaultTopic":"D","defaultTopicQueueNums":"99999999999","queueId":"0","sysFlag":"0","bornTimestamp":"0","flag":"0"}`,
		`{"producerGroup":"pg","topic":"T","defaultTopic":"D","defaultTopicQueueNums":"1","queueId":"0","sysFlag":"0","bornTimestamp":"0","flag":"0","maxReconsumeTimes":"-"}`,
		// pulls and responses
		`{"consumerGroup":"cg","topic":"T","queueId":"1","queueOffset":"12345","maxMsgNums":"32","sysFlag":"3","commitOffset":"0","suspendTimeoutMillis":"15000","subscription":"*","subVersion":"1","expressionType":"TAG"}`,
		`{"MSG_REGION":"DefaultRegion","TRACE_ON":"true","msgId":"7F00000100002A9F0000000000001234","queueId":"3","queueOffset":"12345"}`,
		`{"suggestWhichBrokerId":"0","nextBeginOffset":"10","minOffset":"0","maxOffset":"10"}`,
		`{"escaped\"key":"v\\\"\/\b\f\n\r\t\ud83d\ude00","topic":"\u0054"}`,
		`{}`, `null`,
		// malformed objects: errors
		`{"a" "b"}`, `{"a":"b",}`, `{"a":"b" "c":"d"}`, `{"a":"\x"}`, `{,}`, `{"a":}`, `{"a":"b"]`, `{1:2}`,
	} {
		for _, code := range []string{"10", "310", "11", "0"} {
			sameDecode(t, []byte(`{"code":`+code+`,"extFields":`+ext+`,"flag":0,"language":"GO","opaque":1,"version":317}`))
		}
	}
}

// A response, and a request whose code is not kept as text (here a second
// "code" changed it), get their map when the frame is decoded.
func TestRemotingRawFieldsOnlyForRequests(t *testing.T) {
	only10 := func(code int32) bool { return code == 10 }
	for _, hdr := range []string{
		`{"code":10,"extFields":{"topic":"T"},"flag":1}`,
		`{"code":10,"extFields":{"topic":"T"},"code":11,"flag":0}`,
		`{"extFields":{"topic":"T"},"code":10,"flag":0}`,
	} {
		c, err := DecodeFrameWith(frameOf(SerializeJSON, []byte(hdr), nil)[4:], nil, only10)
		if err != nil || c.ExtFields["topic"] != "T" || c.list != "" {
			t.Fatalf("%s: %+v %v", hdr, c, err)
		}
	}
	c, err := DecodeFrameWith(frameOf(SerializeJSON, []byte(`{"code":10,"extFields":{"topic":"T"},"flag":0}`), nil)[4:], nil, only10)
	if err != nil || c.ExtFields != nil || c.list != "\xff\x00\x00\x05topic\x00\x00\x01T" {
		t.Fatalf("request: %+v %v", c, err)
	}
	// Written again (a command forwarded as it was received), the text
	// goes out as the map would.
	want, _ := EncodeFrame(&Command{Code: 10, ExtFields: ExtFields{"topic": "T"}})
	got, _ := EncodeFrame(c)
	if string(got) != string(want) {
		t.Fatalf("re-encoded %q, want %q", got, want)
	}
	c.SerializeType = SerializeRocketMQ
	want, _ = EncodeFrame(&Command{Code: 10, ExtFields: ExtFields{"topic": "T"}, SerializeType: SerializeRocketMQ})
	if got, _ := EncodeFrame(c); string(got) != string(want) {
		t.Fatalf("re-encoded binary %q, want %q", got, want)
	}
}

// The generated writers write the bytes the map would: every direct
// header, with fields set and unset.
func TestRemotingWithHeaderWritesTheMapBytes(t *testing.T) {
	full := []HeaderEncoder{
		&SendMessageRequestHeader{ProducerGroup: "pg", Topic: "T\"\x01", DefaultTopic: "TBW102", DefaultTopicQueueNums: 4, QueueID: -1,
			SysFlag: 2, BornTimestamp: 1764120000000, Flag: 3, Properties: "K\x01V\x02", ReconsumeTimes: 1, UnitMode: true, Batch: true,
			MaxReconsumeTimes: 16, HasMaxReconsumeTimes: true, BrokerName: "b", Resend: true},
		&SendMessageRequestHeaderV2{ProducerGroup: "pg", Topic: "T", MaxReconsumeTimes: 3, HasMaxReconsumeTimes: true, Resend: true},
		&SendMessageResponseHeader{MsgID: "7F00000100002A9F0000000000001234", QueueID: 3, QueueOffset: 1 << 40, TransactionID: "tx",
			Region: "DefaultRegion", TraceOn: true},
		&PullMessageRequestHeader{ConsumerGroup: "cg", Topic: "T", QueueID: 1, QueueOffset: 2, MaxMsgNums: 32, SysFlag: 3,
			CommitOffset: 4, SuspendTimeoutMillis: 15000, Subscription: "a || b", SubVersion: 5, ExpressionType: "TAG", BrokerName: "b"},
		&PullMessageResponseHeader{SuggestWhichBrokerID: 1, NextBeginOffset: 2, MinOffset: 3, MaxOffset: 4},
	}
	for _, h := range directHeaders() {
		full = append(full, h) // zero values: optional fields left out
	}
	// The send's answer is written by hand (its constant text in one
	// piece): each way its head can go.
	for _, h := range []SendMessageResponseHeader{
		{MsgID: "m", QueueID: -1, QueueOffset: -5, Region: DefaultRegion},
		{MsgID: "m\"\x01é", QueueID: 1 << 30, Region: "Region\"\x02", TraceOn: true, TransactionID: "t\\x"},
		{MsgID: "", Region: "", TraceOn: true, TransactionID: "tx"},
		{MsgID: "a,b", Region: "DefaultRegion2", TraceOn: true},
	} {
		full = append(full, &h)
	}
	for _, h := range full {
		for _, st := range []SerializeType{SerializeJSON, SerializeRocketMQ} {
			viaMap := NewResponse(Success, "r").SetHeader(h)
			viaMap.SerializeType = st
			direct := NewResponse(Success, "r").WithHeader(h)
			direct.SerializeType = st
			if direct.ExtFields != nil || direct.hdr == nil {
				t.Fatalf("%T: WithHeader built the map", h)
			}
			want, err1 := EncodeFrame(viaMap)
			got, err2 := EncodeFrame(direct)
			if err1 != nil || err2 != nil || string(got) != string(want) {
				t.Fatalf("%T %v: wrote\n%q\nwant\n%q (%v %v)", h, st, got, want, err1, err2)
			}
			if f := direct.Fields(); !maps.Equal(f, viaMap.ExtFields) || direct.hdr != nil {
				t.Fatalf("%T: Fields %v, want %v", h, f, viaMap.ExtFields)
			}
		}
	}
}

// The bytes of a send's answer as the broker writes it, pinned.
func TestRemotingSendResponseBytes(t *testing.T) {
	resp := NewResponse(Success, "").WithHeader(&SendMessageResponseHeader{MsgID: "7F00000100002A9F0000000000001234", QueueID: 3,
		QueueOffset: 12345, Region: "DefaultRegion", TraceOn: true})
	resp.Opaque = 77
	frame, err := EncodeFrame(resp)
	if err != nil {
		t.Fatal(err)
	}
	want := `{"code":0,"extFields":{"MSG_REGION":"DefaultRegion","TRACE_ON":"true","msgId":"7F00000100002A9F0000000000001234","queueId":"3","queueOffset":"12345"},"flag":1,"language":"GO","opaque":77,"serializeTypeCurrentRPC":"JSON","version":409}`
	if int(binary.BigEndian.Uint32(frame)) != len(frame)-4 || string(frame[8:]) != want {
		t.Fatalf("frame %q\nwant header %s", frame, want)
	}
}

// A header set on top of one kept by WithHeader keeps both.
func TestRemotingWithHeaderThenSetHeader(t *testing.T) {
	c := NewResponse(Success, "").WithHeader(&PullMessageResponseHeader{MaxOffset: 9})
	c.SetHeader(&OffsetResponseHeader{Offset: 7})
	if c.ExtFields["maxOffset"] != "9" || c.ExtFields["offset"] != "7" || c.hdr != nil {
		t.Fatalf("fields %v", c.ExtFields)
	}
}

func FuzzRawFields(f *testing.F) {
	f.Add([]byte(`{"producerGroup":"pg","topic":"T","defaultTopic":"D","defaultTopicQueueNums":"4","queueId":"3","sysFlag":"0","bornTimestamp":"1","flag":"0","properties":"a\u0001b"}`))
	f.Add([]byte(`{"a":"pg","b":"T","c":"D","d":4,"e":"3","f":"0","g":"1","h":"0","l":"2","sgResend":"true"}`))
	f.Add([]byte(`{"consumerGroup":"cg","topic":"T","queueId":"1","queueOffset":"1","maxMsgNums":"32","sysFlag":"3","commitOffset":"0","suspendTimeoutMillis":"1","subVersion":"1","x":[{}]}`))
	f.Add([]byte(`{"a":null,"a":{"b":"}"}}`))
	f.Fuzz(func(t *testing.T, ext []byte) {
		for _, code := range []string{"10", "310", "11"} {
			sameDecode(t, []byte(`{"code":`+code+`,"extFields":`+string(ext)+`,"flag":0}`))
		}
	})
}

// plainRun's and asciiRun's eight-bytes-at-a-time scans, and escapedLen
// built on plainRun, find what a byte loop finds.
func FuzzPlainRun(f *testing.F) {
	f.Add("abcdefgh\"ijk")
	f.Add("0123456789abcdef\\")
	f.Add("\x00\x1f\x20\x7f\x80\xff\"\\")
	f.Add("héllo wörld, 日本語 and then \x01")
	f.Fuzz(func(t *testing.T, s string) {
		want := len(s)
		for i := 0; i < len(s); i++ {
			if c := s[i]; c == '"' || c == '\\' || c < 0x20 {
				want = i
				break
			}
		}
		if got := plainRun(s); got != want {
			t.Fatalf("plainRun(%q) = %d, want %d", s, got, want)
		}
		want = len(s)
		for i := 0; i < len(s); i++ {
			if c := s[i]; c == '"' || c == '\\' || c < 0x20 || c >= 0x80 {
				want = i
				break
			}
		}
		if got := asciiRun(s); got != want {
			t.Fatalf("asciiRun(%q) = %d, want %d", s, got, want)
		}
		want = len(s)
		for i := 0; i < len(s); i++ {
			if s[i] == '\\' {
				i++
			} else if s[i] == '"' {
				want = i
				break
			}
		}
		if got := escapedLen(s); got != want {
			t.Fatalf("escapedLen(%q) = %d, want %d", s, got, want)
		}
	})
}

// objectEnd ends a well-formed value where skip does, and never reads
// past its input.
func TestRemotingObjectEnd(t *testing.T) {
	for _, v := range []string{`{}`, `{"a":"b"}`, `{"a":"}\"{","b":[1,{"c":"]"}]}`, `[{"x":"\\"}]`, `{"k":"\u0001\u0002"}`} {
		s := jsonScanner{s: v + ` ,"rest":1`}
		if err := s.skip(); err != nil {
			t.Fatal(err)
		}
		if n, ok := objectEnd(v + ` ,"rest":1`); !ok || n != s.i || n != len(v) {
			t.Fatalf("%s: objectEnd %d %v, skip %d", v, n, ok, s.i)
		}
	}
	for _, v := range []string{`{`, `{"a":"b`, `{"a":"b\`, `{"a":"b\"}`, `{"a":{}`, `{"a":"\x01`} {
		if n, ok := objectEnd(v); ok {
			t.Fatalf("%q: end %d", v, n)
		}
	}
}

// parseDec accepts and reads what strconv.ParseInt(v, 10, bits) does.
func FuzzParseDec(f *testing.F) {
	for _, v := range []string{"0", "-0", "+7", "2147483647", "2147483648", "-2147483648", "-2147483649",
		"9223372036854775807", "9223372036854775808", "-9223372036854775808", "00000000000000000000001", "", "-", "+", "1_0", " 1", "1x", "١"} {
		f.Add(v)
	}
	f.Fuzz(func(t *testing.T, v string) {
		for _, bits := range []uint{32, 64} {
			want, err := strconv.ParseInt(v, 10, int(bits))
			got, ok := parseDec(v, bits)
			if ok != (err == nil) || (ok && got != want) {
				t.Fatalf("parseDec(%q, %d) = %d %v; strconv: %d %v", v, bits, got, ok, want, err)
			}
		}
	})
}
