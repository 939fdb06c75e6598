package protocol

import (
	"bytes"
	"encoding/json"
	"maps"
	"strings"
	"testing"
	"unsafe"
)

// The headers the clients write take the one-pass path: Java's (fastjson,
// keys sorted, the send header with short names) and rocketmq-client-go's
// (encoding/json, its struct's order, extFields last, the properties'
// separators escaped), and their send headers decode from the list.
func TestRemotingFastHeaderClients(t *testing.T) {
	const goProps = `UNIQ_KEY\u00017F000001000100000000000000000003\u0002WAIT\u0001true\u0002TAGS\u0001tag`
	for _, tc := range []struct{ name, hdr string }{
		{"go", `{"code":10,"language":"GO","version":317,"opaque":5,"flag":0,"remark":"","extFields":{"batch":"false","bornTimestamp":"1764120000000",` +
			`"defaultTopic":"TBW102","defaultTopicQueueNums":"4","flag":"0","producerGroup":"pg","properties":"` + goProps + `",` +
			`"queueId":"3","reconsumeTimes":"0","sysFlag":"0","topic":"T","unitMode":"false"}}`},
		{"java", `{"code":310,"extFields":{"a":"pg","b":"T","c":"TBW102","d":"4","e":"3","f":"0","g":"1764120000000","h":"0",` +
			`"i":"` + goProps + `","j":"0","k":"false","m":"false","n":"broker-a"},"flag":0,"language":"JAVA","opaque":5,` +
			`"serializeTypeCurrentRPC":"JSON","version":401}`},
	} {
		var c Command
		if !decodeJSONHeaderFast([]byte(tc.hdr), &c, allRaw, false) {
			t.Fatalf("%s: not decoded in one pass", tc.name)
		}
		if c.list == "" || c.ExtFields != nil || c.Opaque != 5 {
			t.Fatalf("%s: %+v", tc.name, c)
		}
		var h SendMessageRequestHeader
		if err := DecodeSendHeader(&c, &h); err != nil {
			t.Fatalf("%s: %v", tc.name, err)
		}
		want := "UNIQ_KEY\x017F000001000100000000000000000003\x02WAIT\x01true\x02TAGS\x01tag"
		if h.Topic != "T" || h.ProducerGroup != "pg" || h.QueueID != 3 || h.BornTimestamp != 1764120000000 || h.Properties != want {
			t.Fatalf("%s: header %+v", tc.name, h)
		}
		if c.ExtFields != nil {
			t.Fatalf("%s: the map was built", tc.name)
		}
	}
}

// Strings decoded from the field list of a frame decoded without a
// BufferRef are not slices of the frame: the caller may reuse its bytes
// at once, and the header must not change then.
func TestRemotingFastHeaderOwnsItsStrings(t *testing.T) {
	hdr := []byte(`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"rm","extFields":{"producerGroup":"pg","topic":"T",` +
		`"defaultTopic":"D","defaultTopicQueueNums":"1","queueId":"0","sysFlag":"0","bornTimestamp":"0","flag":"0","properties":"a\u0001b"}}`)
	frame := frameOf(SerializeJSON, hdr, []byte("body"))[4:]
	c, err := DecodeFrameWith(frame, nil, allRaw)
	if err != nil {
		t.Fatal(err)
	}
	var h SendMessageRequestHeader
	if err := DecodeSendHeader(c, &h); err != nil {
		t.Fatal(err)
	}
	for i := range frame {
		frame[i] = 'x'
	}
	if h.Topic != "T" || h.ProducerGroup != "pg" || h.DefaultTopic != "D" || h.Properties != "a\x01b" || c.Remark != "rm" {
		t.Fatalf("header changed with the frame: %+v remark %q", h, c.Remark)
	}
}

// A frame decoded in a shared receive buffer (with a BufferRef) gets its
// field list written over its own header: the header's strings are slices
// of the buffer, valid until Recycle, which poisons them when asked to
// (so that a test sees what kept one) and drops the list. OwnFields and
// Fields give strings that outlive Recycle.
func TestRemotingFastHeaderLentUntilRecycle(t *testing.T) {
	defer SetPoisonRecycled(SetPoisonRecycled(true))
	hdr := []byte(`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"rm","extFields":{"producerGroup":"pg","topic":"T",` +
		`"defaultTopic":"D","defaultTopicQueueNums":"1","queueId":"0","sysFlag":"0","bornTimestamp":"0","flag":"0","properties":"a\u0001b"}}`)
	decode := func() (*Command, *countRef, []byte) {
		frame := frameOf(SerializeJSON, hdr, []byte("body"))[4:]
		ref := &countRef{}
		c, err := DecodeFrameWith(frame, ref, allRaw)
		if err != nil {
			t.Fatal(err)
		}
		return c, ref, frame
	}
	c, ref, frame := decode()
	var h SendMessageRequestHeader
	if err := DecodeSendHeader(c, &h); err != nil {
		t.Fatal(err)
	}
	if h.Topic != "T" || h.ProducerGroup != "pg" || h.DefaultTopic != "D" || h.Properties != "a\x01b" || c.Remark != "rm" || string(c.Body) != "body" {
		t.Fatalf("header %+v remark %q body %q", h, c.Remark, c.Body)
	}
	if !c.lent || unsafe.StringData(string(c.list)) != &frame[4] || c.ExtFields != nil {
		t.Fatalf("the list is not written over the frame's header (lent %v)", c.lent)
	}
	c.Recycle()
	if ref.n != 1 || c.Body != nil || h.Topic != "\xDB" || h.Properties != "\xDB\xDB\xDB" || c.Remark != "rm" {
		t.Fatalf("after Recycle: %d unrefs, body %q, topic %q, properties %q, remark %q", ref.n, c.Body, h.Topic, h.Properties, c.Remark)
	}
	if err := DecodeSendHeader(c, &h); err == nil {
		t.Fatalf("a recycled command's list decoded: %+v", h)
	}

	// Kept beyond Recycle: OwnFields, then decode.
	c, _, frame = decode()
	c.OwnFields()
	c.Recycle()
	for i := range frame {
		frame[i] = 'x'
	}
	if err := DecodeSendHeader(c, &h); err != nil || h.Topic != "T" || h.Properties != "a\x01b" {
		t.Fatalf("after OwnFields and Recycle: %+v %v", h, err)
	}
	// Fields' map owns its strings.
	c, _, frame = decode()
	f := c.Fields()
	c.Recycle()
	for i := range frame {
		frame[i] = 'x'
	}
	if f["topic"] != "T" || f["properties"] != "a\x01b" || len(f) != 9 {
		t.Fatalf("Fields after Recycle: %v", f)
	}
}

// A list longer than the header it came from (numbers take 2 bytes more
// in the list than in JSON) is not lent: it takes its own allocation and
// stays valid after the frame's bytes are overwritten.
func TestRemotingFastHeaderNotLentWhenLonger(t *testing.T) {
	var sb strings.Builder
	sb.WriteString(`{"code":10,"extFields":{`)
	for i := range 40 {
		if i > 0 {
			sb.WriteByte(',')
		}
		sb.WriteString(`"` + string(rune('A'+i%26)) + string(rune('a'+i/26)) + `":1`)
	}
	sb.WriteString(`}}`)
	frame := frameOf(SerializeJSON, []byte(sb.String()), nil)[4:]
	c, err := DecodeFrameWith(frame, &countRef{}, allRaw)
	if err != nil {
		t.Fatal(err)
	}
	if c.lent || c.list == "" {
		t.Fatalf("lent %v, list %q", c.lent, c.list)
	}
	for i := range frame {
		frame[i] = 'x'
	}
	if f := c.Fields(); len(f) != 40 || f["Aa"] != "1" {
		t.Fatalf("fields %v", f)
	}
}

func only10(code int32) bool { return code == 10 }

// checkFastHeader decodes hdr with the one-pass decoder and, where it
// accepts hdr, checks that the general path decodes it to the same
// command.
func checkFastHeader(t *testing.T, hdr []byte) {
	t.Helper()
	for _, raw := range []RawFields{allRaw, only10} {
		var fast, scan, lent Command
		if !decodeJSONHeaderFast(hdr, &fast, raw, false) {
			continue
		}
		// Lent, over a copy of hdr: the same list, written over it.
		buf := bytes.Clone(hdr)
		if !decodeJSONHeaderFast(buf, &lent, raw, true) || lent.list != fast.list ||
			(lent.lent && unsafe.StringData(string(lent.list)) != &buf[0]) || (lent.lent && len(fast.list) > len(hdr)) ||
			(!lent.lent && fast.list != "" && len(fast.list) <= len(hdr)) {
			t.Fatalf("%q: lent list %q (lent %v), own %q", hdr, lent.list, lent.lent, fast.list)
		}
		if err := decodeJSONHeaderScan(hdr, &scan, raw); err != nil {
			t.Fatalf("%q: one pass decoded %+v, the general path failed: %v", hdr, fast, err)
		}
		if fast.Code != scan.Code || fast.Version != scan.Version || fast.Opaque != scan.Opaque || fast.Flag != scan.Flag ||
			fast.Language != scan.Language || fast.Remark != scan.Remark || fast.list != scan.list || scan.listErr != nil ||
			!maps.Equal(fast.ExtFields, scan.ExtFields) || (fast.ExtFields == nil) != (scan.ExtFields == nil) {
			t.Fatalf("%q:\none pass %+v list %q\ngeneral  %+v list %q", hdr, fast, fast.list, scan, scan.list)
		}
	}
}

func TestRemotingFastHeaderAsTheGeneralPath(t *testing.T) {
	for _, h := range []string{
		javaRouteRequest,
		`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","n":12,"b":true}}`,
		`{"code":10,"extFields":{"topic":"T"},"flag":1}`,
		`{"extFields":{"topic":"T"},"code":10}`,
		`{"code":11,"extFields":{"k":"v"}}`,
		` { "code" : 10 , "extFields" : { "a" : "b" , "c" : 1 } , "remark" : null } `,
		`{"code":10,"extFields":{"e":"\"\\\/\b\f\n\r\t\u00e9\u0001","a":"x","a":"y"}}`,
		`{"code":10,"extFields":{}}`, `{}`, `{"code":-7}`, `{"code":10,"language":"CPP","extFields":{"k":""}}`,
		// not taken: the general path decides
		`{"code":10,"extFields":{"a":null}}`, `{"code":10,"extFields":{"a":{"b":1}}}`, `{"code":10,"extFields":{"\u0061":"b"}}`,
		`{"code":10,"extFields":{"a":"\ud83d\ude00"}}`, `{"code":10,"x":1}`, `{"code":"10"}`, `{"code":10,"code":10}`,
		`{"code":10,"extFields":null}`, `{"code":10,"extFields":{"a":"b"},"extFields":{}}`, `{"code":10,"remark":"\n"}`,
		`{"code":10,"extFields":{"a":"b",}}`, `{"code":10,"extFields":{"a":"b"}`, `{"code":10}x`, `{"code":1e3}`,
	} {
		checkFastHeader(t, []byte(h))
	}
}

// A malformed header never decodes in one pass, at any length it is cut to.
func TestRemotingFastHeaderTruncated(t *testing.T) {
	h := `{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","p":"a\u0001b","n":12}}`
	for n := range len(h) {
		var c Command
		if decodeJSONHeaderFast([]byte(h[:n]), &c, allRaw, false) {
			t.Fatalf("%q decoded: %+v", h[:n], c)
		}
	}
}

func FuzzJSONHeaderFast(f *testing.F) {
	f.Add([]byte(javaRouteRequest))
	f.Add([]byte(`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","p":"a\u0001b","n":12}}`))
	f.Add([]byte(`{"code":310,"extFields":{"a":"pg","i":"\u00e9\n"},"flag":1,"language":"JAVA","serializeTypeCurrentRPC":"JSON"}`))
	f.Fuzz(checkFastHeader)
}

// The one pass reads the \u escapes of a value as encoding/json does,
// those of the ASCII control characters (taken a byte at a time) and the
// others alike, upper and lower case; a bad one is not read.
func TestRemotingFastHeaderUnicodeEscapes(t *testing.T) {
	for _, v := range []string{`\u0000`, `\u0001`, `\u0002x`, `a\u001fb`, `\u001F`, `\u000a\u000A`, `\u0010`,
		`\u0020`, `\u007f`, `\u00e9`, `\u00E9`, `\u0100`, `\u20ac`, `x\u0001\u0002y`} {
		var want string
		if err := json.Unmarshal([]byte(`"`+v+`"`), &want); err != nil {
			t.Fatal(err)
		}
		hdr := []byte(`{"code":10,"extFields":{"p":"` + v + `"},"flag":0,"language":"GO","opaque":1,"version":317}`)
		var c Command
		if !decodeJSONHeaderFast(hdr, &c, allRaw, false) {
			t.Fatalf("%s: not decoded in one pass", v)
		}
		if got := c.list.fields()["p"]; got != want {
			t.Fatalf("%s: read %q, want %q", v, got, want)
		}
	}
	for _, v := range []string{`\u00g1`, `\u001g`, `\u00`, `\u001`, `\u0:01`, `\u00/1`} {
		hdr := []byte(`{"code":10,"extFields":{"p":"` + v + `"},"flag":0,"language":"GO","opaque":1,"version":317}`)
		var c Command
		if decodeJSONHeaderFast(hdr, &c, allRaw, false) {
			t.Fatalf("%s: decoded as %q", v, c.list.fields()["p"])
		}
	}
}
