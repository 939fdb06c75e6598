package protocol

import (
	"maps"
	"testing"
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
		if !decodeJSONHeaderFast([]byte(tc.hdr), &c, allRaw) {
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

// Strings decoded from a field list are not slices of the frame: a
// frame's receive buffer may be reused as soon as the command is
// recycled, and the header must not change then.
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

func only10(code int32) bool { return code == 10 }

// checkFastHeader decodes hdr with the one-pass decoder and, where it
// accepts hdr, checks that the general path decodes it to the same
// command.
func checkFastHeader(t *testing.T, hdr []byte) {
	t.Helper()
	for _, raw := range []RawFields{allRaw, only10} {
		var fast, scan Command
		if !decodeJSONHeaderFast(hdr, &fast, raw) {
			continue
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
		if decodeJSONHeaderFast([]byte(h[:n]), &c, allRaw) {
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
