package protocol

import (
	"bytes"
	"fmt"
	"maps"
	"math/rand/v2"
	"strings"
	"testing"
	"unsafe"
)

// matchedShape reports whether one of s's shapes reads hdr.
func matchedShape(s *HeaderShapes, hdr []byte) bool {
	for k := range s.s {
		if _, ok := s.s[k].read(new(fastHeader), hdr, nil, false); ok {
			return true
		}
	}
	return false
}

// checkShapes teaches a HeaderShapes the headers in learn, then decodes
// hdr through it and checks that it decodes exactly as the one pass does
// (which checkFastHeader holds to the general path), accepting what the
// one pass accepts and nothing else, lent or not. It reports whether a
// learned shape read hdr.
func checkShapes(t *testing.T, hdr []byte, learn ...[]byte) bool {
	t.Helper()
	matched := false
	for k := range 8 {
		raw, lend, paused := []RawFields{allRaw, only10}[k&1], k&2 != 0, k&4 != 0
		{
			var s HeaderShapes
			if paused {
				// Learning paused: sends go through the member table,
				// learned from the first of learn.
				s.pause = maxLearnPause
			}
			for _, l := range learn {
				var c Command
				s.decode(bytes.Clone(l), &c, raw, lend)
			}
			matched = matchedShape(&s, hdr) || matched
			var fast, shaped Command
			fb, sb := bytes.Clone(hdr), bytes.Clone(hdr)
			okFast := decodeJSONHeaderFast(fb, &fast, raw, lend)
			okShaped := s.decode(sb, &shaped, raw, lend)
			if okFast != okShaped {
				t.Fatalf("%q after %q: one pass %v, shapes %v", hdr, learn, okFast, okShaped)
			}
			if !okFast {
				continue
			}
			// A lazy list (a send's, without the shape's constant members)
			// is the one pass's made whole, and lies where it would.
			lazy := shaped.shaped.lazy
			if fast.Code != shaped.Code || fast.Version != shaped.Version || fast.Opaque != shaped.Opaque ||
				fast.Flag != shaped.Flag || fast.Language != shaped.Language || fast.Remark != shaped.Remark ||
				fast.list != shaped.wholeList() || fast.lent != shaped.lent || (!lazy && !bytes.Equal(fb, sb)) ||
				(lazy && (!sendCode(shaped.Code) || len(shaped.list) >= len(fast.list) ||
					(shaped.lent && unsafe.StringData(string(shaped.list)) != unsafe.SliceData(sb)))) ||
				!maps.Equal(fast.ExtFields, shaped.ExtFields) || (fast.ExtFields == nil) != (shaped.ExtFields == nil) {
				t.Fatalf("%q after %q:\none pass %+v list %q\nshapes   %+v list %q", hdr, learn, fast, fast.list, shaped, shaped.list)
			}
			checkShapedSend(t, hdr, learn, &shaped, raw)
			checkWholeList(t, hdr, &fast, &shaped)
		}
	}
	return matched
}

// checkWholeList checks that what needs a command's whole list reads the
// same of a lazy one as of the one pass's: the send header's general
// decode, then the map (each made whole on the side, then in place).
func checkWholeList(t *testing.T, hdr []byte, fast, shaped *Command) {
	t.Helper()
	if f, g := fast.fieldsMap(), shaped.fieldsMap(); !maps.Equal(f, g) || (f == nil) != (g == nil) {
		t.Fatalf("%q: fields on the side %v, one pass %v", hdr, g, f)
	}
	own := *shaped
	if own.OwnFields(); own.list != fast.list || own.lent || own.shaped.lazy {
		t.Fatalf("%q: owned list %q, one pass %q", hdr, own.list, fast.list)
	}
	var got, want SendMessageRequestHeader
	errWant, errGot := fast.DecodeHeader(&want), shaped.DecodeHeader(&got)
	if (errWant == nil) != (errGot == nil) || got != want || shaped.shaped.lazy {
		t.Fatalf("%q: decoded %+v (%v), one pass %+v (%v)", hdr, got, errGot, want, errWant)
	}
	if f, g := fast.Fields(), shaped.Fields(); !maps.Equal(f, g) || (f == nil) != (g == nil) {
		t.Fatalf("%q: fields %v, one pass %v", hdr, g, f)
	}
}

// checkShapedSend checks that a send header decoded from c's shape
// template (either key set) is what the general decode of the one pass's
// field list makes of hdr.
func checkShapedSend(t *testing.T, hdr []byte, learn [][]byte, c *Command, raw RawFields) {
	t.Helper()
	for k := range 4 {
		v2, escaped := k&1 != 0, k&2 != 0
		var got SendMessageRequestHeader
		var esc string
		var escp *string
		if escaped {
			escp = &esc
		}
		if !c.decodeSendShaped(&got, v2, escp) {
			continue
		}
		if esc != "" {
			// Kept escaped: its only escapes are the separators'.
			if got.Properties != "" {
				t.Fatalf("%q: properties %q and escaped %q", hdr, got.Properties, esc)
			}
			got.Properties = unescapeSeparators(esc)
		}
		var one Command
		if !decodeJSONHeaderFast(bytes.Clone(hdr), &one, raw, false) {
			t.Fatalf("%q after %q: shaped send, but the one pass does not read it", hdr, learn)
		}
		var want SendMessageRequestHeader
		var err error
		if v2 {
			err = one.DecodeHeader((*SendMessageRequestHeaderV2)(&want))
		} else {
			err = one.DecodeHeader(&want)
		}
		if err != nil || got != want {
			t.Fatalf("%q after %q (v2 %v):\nshaped  %+v\ngeneral %+v (%v)", hdr, learn, v2, got, want, err)
		}
	}
}

// unescapeSeparators is esc, properties kept escaped, unescaped; it
// fails the test on any escape but the separators'.
func unescapeSeparators(esc string) string {
	r := strings.NewReplacer(`\u0001`, "\x01", `\u0002`, "\x02")
	out := r.Replace(esc)
	if strings.ContainsAny(out, `\"`) {
		panic(fmt.Sprintf("kept escaped: %q", esc))
	}
	return out
}

// goSendHeader is rocketmq-client-go's SEND_MESSAGE header (sorted keys)
// with the values that change from one send to the next.
func goSendHeader(opaque, queue int, born int64, uniq string) []byte {
	return fmt.Appendf(nil, `{"code":10,"extFields":{"batch":"false","bornTimestamp":"%d","defaultTopic":"TBW102",`+
		`"defaultTopicQueueNums":"8","flag":"0","maxReconsumeTimes":"16","producerGroup":"pg","properties":"UNIQ_KEY\u0001%s\u0002WAIT\u0001true\u0002TAGS\u0001tag",`+
		`"queueId":"%d","reconsumeTimes":"0","sysFlag":"0","topic":"T","unitMode":"false"},"flag":0,"language":"GO","opaque":%d,"remark":"","version":317}`,
		born, uniq, queue, opaque)
}

// javaSendHeader is the Java client's SEND_MESSAGE_V2 header.
func javaSendHeader(opaque, queue int) []byte {
	return fmt.Appendf(nil, `{"code":310,"extFields":{"a":"pg","b":"T","c":"TBW102","d":"4","e":"%d","f":"0","g":"1764120000000",`+
		`"h":"0","i":"KEYS\u0001k\u0002WAIT\u0001true\u0002","j":"0","k":"false","m":"false"},"flag":0,"language":"JAVA",`+
		`"opaque":%d,"serializeTypeCurrentRPC":"JSON","version":409}`, queue, opaque)
}

// The headers a client sends are read by the shape learned from its first
// one, decoded exactly as the one pass decodes them; a header of another
// shape is read by the one pass, and learned in place of the older shape.
func TestRemotingHeaderShapes(t *testing.T) {
	first := goSendHeader(1, 0, 1764120000000, "7F0000010001000000000000000000000")
	for _, h := range [][]byte{
		goSendHeader(2, 3, 1764120000001, "7F0000010001000000000000000000001"),
		goSendHeader(-2147483648, 7, 9, "x\\\"y\\u00e9"),
		[]byte(`{"code":10,"extFields":{"batch":"false","bornTimestamp":"1"}}`),
	} {
		if !checkShapes(t, h, first) && bytes.HasPrefix(h, []byte(`{"code":10,"extFields":{"batch":"false","bornTimestamp":"17`)) {
			t.Errorf("%q: not read by the learned shape", h)
		}
	}
	if !checkShapes(t, javaSendHeader(9, 2), javaSendHeader(8, 1)) {
		t.Error("Java's send header: not read by the learned shape")
	}
	// Two shapes kept: a client's sends and pulls on one connection.
	pull := []byte(`{"code":11,"extFields":{"consumerGroup":"g","topic":"T","queueId":"1","queueOffset":"5","maxMsgNums":"32","sysFlag":"2","commitOffset":"0","suspendTimeoutMillis":"20000","subscription":"*","subVersion":"0"},"flag":0,"language":"GO","opaque":3,"remark":null,"version":317}`)
	if !checkShapes(t, goSendHeader(5, 1, 2, "u"), first, pull) || !checkShapes(t, pull, pull, first) {
		t.Error("two shapes: one forgotten")
	}
	// Not learned: a response, a code not kept raw, a header the one pass
	// does not read; each then decodes as before.
	for _, h := range []string{
		`{"code":10,"extFields":{"a":"b"},"flag":1}`,
		`{"code":12,"extFields":{"a":"b"}}`,
		`{"extFields":{"a":"b"},"code":10}`,
		`{"code":10,"extFields":{"a":null}}`,
	} {
		if checkShapes(t, []byte(h), []byte(h)) {
			var s HeaderShapes
			var c Command
			if s.decode([]byte(h), &c, only10, false); s.s[0].ext || s.s[1].ext {
				t.Errorf("%q: learned", h)
			}
		}
	}
	// A value that differs in kind or spacing, and every truncation:
	// the one pass decides.
	base := []byte(`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","p":"a\u0001b","n":12}}`)
	for _, h := range []string{
		`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":null,"extFields":{"topic":"T","p":"a\u0001b","n":12}}`,
		`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"r","extFields":{"topic":"T","p":"a\u0001b","n":"12"}}`,
		`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","p":"a\u0001b","n":null}}`,
		`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","p":"a\u0001b","n":12 }}`,
		`{"code":10,"language":"GO","version":317,"opaque":1,"flag":1,"remark":"","extFields":{"topic":"T","p":"a\u0001b","n":12}}`,
		`{"code":11,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","p":"a\ud800b","n":12}}`,
		`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","p":"a\u0001b","n":12}} `,
		// the same values under other keys
		`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","q":"a\u0001b","n":12}}`,
		`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topix":"T","p":"a\u0001b","n":12}}`,
		`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","p":"a\u0001b"},"n":12}`,
		`{"code":10,"language":"GO","version":317,"opaquf":1,"flag":0,"remark":"","extFields":{"topic":"T","p":"a\u0001b","n":12}}`,
		`{"code":10,"language":"GO","version":317,"flag":1,"opaque":0,"remark":"","extFields":{"topic":"T","p":"a\u0001b","n":12}}`,
	} {
		checkShapes(t, []byte(h), base)
	}
	for n := range len(base) {
		checkShapes(t, base[:n], base)
	}
}

// A shape keeps its extFields strings' learned values: a header that has
// them, or values that start or end like them, an escaped form of the
// same text, a longer or shorter one, reads as the one pass reads it.
func TestRemotingHeaderShapesKeptValues(t *testing.T) {
	const pre = `{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"`
	learn := []byte(pre + `CPU","p":"a\u0001b","g":"pg","n":12}}`)
	for _, v := range []string{`CPU","p":"a\u0001b","g":"pg`, `CPU2","p":"a\u0001b","g":"pg`, `CP","p":"a\u0001b","g":"pg`,
		`CPU","p":"a\u0001bc","g":"pg`, `CPU","p":"a\u0002b","g":"pg`, `C\u0050U","p":"a\u0001b","g":"pgx`,
		`CPU","p":"a\u0001b","g":"`, `CPU\"","p":"a\u0001b","g":"pg`, `CPU","p":"a\u0001b","g":"pg\"`} {
		h := []byte(pre + v + `","n":12}}`)
		if !checkShapes(t, h, learn) {
			t.Errorf("%s: not read by the learned shape", h)
		}
	}
}

// A shape compares the values that stay the same from one header to the
// next as runs, each one piece of the learned header's text; a value seen
// to vary leaves its run. Whatever differs from a run (a top-level value,
// a member, a number's delimiter) reads as the one pass reads it.
func TestRemotingHeaderShapesRuns(t *testing.T) {
	first, second := goSendHeader(1, 0, 1764120000000, "u"), goSendHeader(2, 3, 1764120000001, "v")
	var s HeaderShapes
	for _, h := range [][]byte{first, second} {
		var c Command
		s.decode(bytes.Clone(h), &c, allRaw, true)
	}
	// code and batch; defaultTopic to producerGroup; reconsumeTimes to
	// language; remark and version (born time, properties, queue, opaque
	// between them).
	if sh := &s.s[s.last]; len(sh.runs) != 4 || sh.vary == 0 {
		t.Fatalf("%d runs, varying %b", len(sh.runs), sh.vary)
	}
	next := goSendHeader(7, 5, 1764120000009, "w")
	for _, d := range [][2]string{
		{``, ``},
		{`{"code":10,`, `{"code":11,`},
		{`{"code":10,`, `{"code":100,`},
		{`{"code":10,`, `{"code":10 ,`},
		{`"batch":"false"`, `"batch":"true"`},
		{`"topic":"T"`, `"topic":"T2"`},
		{`"unitMode":"false"},"flag":0,`, `"unitMode":"false"},"flag":1,`},
		{`"flag":0,"language":"GO"`, `"flag":0,"language":"JAVA"`},
		{`"remark":""`, `"remark":"r"`},
		{`"remark":""`, `"remark":null`},
		{`"version":317}`, `"version":3170}`},
		{`"version":317}`, `"version":317 }`},
	} {
		h := bytes.Replace(next, []byte(d[0]), []byte(d[1]), 1)
		checkShapes(t, h, first, second)
		checkShapes(t, next, first, second, h) // and after it
	}
}

// Reading a header by its shape costs no allocation.
func TestRemotingHeaderShapesAllocate(t *testing.T) {
	if raceBuild {
		t.Skip("allocations counted without -race")
	}
	var s HeaderShapes
	orig := goSendHeader(1, 2, 3, "u")
	buf := bytes.Clone(orig)
	var c Command
	s.decode(buf, &c, allRaw, true)
	if n := testing.AllocsPerRun(100, func() {
		copy(buf, orig)
		if !s.decode(buf, &c, allRaw, true) || !c.lent {
			t.Fatal("not decoded")
		}
	}); n != 0 {
		t.Fatalf("%v allocations per decode", n)
	}
	// Nor once values vary (the runs found again without them).
	var frames [][]byte
	for q := range 8 {
		frames = append(frames, goSendHeader(q, q, int64(q), fmt.Sprint(q)))
	}
	n, work := 0, make([]byte, 1024)
	if a := testing.AllocsPerRun(100, func() {
		n++
		f := frames[n%len(frames)]
		buf := work[:len(f)]
		copy(buf, f)
		if !s.decode(buf, &c, allRaw, true) || !c.lent || c.shaped.lazy == poisonRecycled.Load() {
			t.Fatal("not decoded")
		}
	}); a != 0 {
		t.Fatalf("%v allocations per decode", a)
	}
}

// FuzzHeaderShapes: whatever the shape learned from one header reads of
// another decodes exactly as the one pass decodes it.
func FuzzHeaderShapes(f *testing.F) {
	f.Add(goSendHeader(1, 0, 1, "u"), goSendHeader(2, 1, 2, "v"))
	f.Add(javaSendHeader(1, 0), javaSendHeader(2, 3))
	f.Add([]byte(`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":"","extFields":{"topic":"T","p":"a\u0001b","n":12}}`),
		[]byte(`{"code":10,"language":"GO","version":317,"opaque":1,"flag":0,"remark":null,"extFields":{"topic":"T","p":"a\u0001b","n":true}}`))
	f.Fuzz(func(t *testing.T, learn, hdr []byte) {
		checkShapes(t, hdr, learn)
	})
}

// A send read by a learned shape is decoded from the shape's constant
// members and the ones it read by value, exactly as the general decode of
// its whole list (checkShapedSend), including a constant that differs
// this time, and a required member that does not parse (the general
// decode's error).
func TestRemotingHeaderShapesDecodeSend(t *testing.T) {
	first := goSendHeader(1, 0, 1764120000000, "7F0000010001000000000000000000000")
	var s HeaderShapes
	var c0 Command
	s.decode(bytes.Clone(first), &c0, allRaw, true)
	for i, hdr := range [][]byte{
		goSendHeader(2, 3, 1764120000001, "7F0000010001000000000000000000001"),
		bytes.Replace(goSendHeader(3, 4, 5, "u"), []byte(`"topic":"T"`), []byte(`"topic":"Other"`), 1),
		bytes.Replace(goSendHeader(4, 4, 5, "u"), []byte(`"unitMode":"false"`), []byte(`"unitMode":"TRUE"`), 1),
		// Properties past what a list offset notes: queueId follows them.
		goSendHeader(5, 6, 7, strings.Repeat("p", 70<<10)),
	} {
		var c Command
		if !s.decode(bytes.Clone(hdr), &c, allRaw, true) || !matchedShape(&s, hdr) {
			t.Fatalf("header %d not read by the shape", i)
		}
		var got, want SendMessageRequestHeader
		if c.shaped.lazy != (i < 3 && !poisonRecycled.Load()) {
			t.Fatalf("header %d: lazy list %v", i, c.shaped.lazy)
		}
		if fromTmpl := c.decodeSendShaped(&got, false, nil); fromTmpl != (i < 3 && !poisonRecycled.Load()) { // poisoned: never
			t.Fatalf("header %d decoded from the template: %v", i, fromTmpl)
		}
		if err := DecodeSendHeader(&c, &got); err != nil {
			t.Fatal(err)
		}
		var one Command
		decodeJSONHeaderFast(bytes.Clone(hdr), &one, allRaw, false)
		if err := DecodeSendHeader(&one, &want); err != nil || got != want {
			t.Fatalf("header %d:\nshaped  %+v\ngeneral %+v (%v)", i, got, want, err)
		}
		checkShapedSend(t, hdr, [][]byte{first}, &c, allRaw)
	}
	// A queue that does not parse: the general decode's error.
	bad := bytes.Replace(goSendHeader(5, 1, 5, "u"), []byte(`"queueId":"1"`), []byte(`"queueId":"x"`), 1)
	var c, one Command
	if !s.decode(bytes.Clone(bad), &c, allRaw, true) || c.shaped.tmpl == nil {
		t.Fatal("bad queue not read by the shape")
	}
	decodeJSONHeaderFast(bytes.Clone(bad), &one, allRaw, false)
	var h SendMessageRequestHeader
	err, want := DecodeSendHeader(&c, &h), DecodeSendHeader(&one, &h)
	if err == nil || want == nil || err.Error() != want.Error() {
		t.Fatalf("bad queue: %v, general decode %v", err, want)
	}
	// The Java client's V2 letters.
	var sj HeaderShapes
	var cj Command
	sj.decode(javaSendHeader(1, 0), &cj, allRaw, true)
	jh := javaSendHeader(2, 3)
	var cv Command
	if !sj.decode(bytes.Clone(jh), &cv, allRaw, true) || cv.shaped.tmpl == nil {
		t.Fatal("V2 header not read by the shape")
	}
	var got, wantV2 SendMessageRequestHeader
	decodeJSONHeaderFast(bytes.Clone(jh), &one, allRaw, false)
	if err := DecodeSendHeader(&cv, &got); err != nil || DecodeSendHeader(&one, &wantV2) != nil || got != wantV2 || got.QueueID != 3 || got.Topic != "T" {
		t.Fatalf("V2:\nshaped  %+v\ngeneral %+v (%v)", got, wantV2, err)
	}
}

// A send's properties whose only escapes are the separators' are kept
// escaped in a lazy list and handed on so by DecodeSendHeaderEscaped;
// DecodeSendHeader, the whole list and the map read them unescaped, as
// the general decode does. Properties with another escape are unescaped
// as before.
func TestRemotingHeaderShapesPropertiesEscaped(t *testing.T) {
	if poisonRecycled.Load() {
		t.Skip("no lazy list under SetPoisonRecycled")
	}
	var s HeaderShapes
	var c0 Command
	s.decode(goSendHeader(1, 0, 5, "first"), &c0, allRaw, true)
	for i, tc := range []struct {
		hdr []byte
		esc string // what DecodeSendHeaderEscaped hands on
	}{
		{goSendHeader(2, 1, 5, "second"), `UNIQ_KEY\u0001second\u0002WAIT\u0001true\u0002TAGS\u0001tag`},
		{goSendHeader(3, 1, 5, "a\u00e9\\u0001b"), `UNIQ_KEY\u0001a` + "\u00e9" + `\u0001b\u0002WAIT\u0001true\u0002TAGS\u0001tag`},
		{goSendHeader(4, 1, 5, `x\"y`), ""},
		{goSendHeader(5, 1, 5, `x\u0003y`), ""},
		{goSendHeader(6, 1, 5, `x\\u0001y`), ""},
		{goSendHeader(7, 1, 5, ""), `UNIQ_KEY\u0001\u0002WAIT\u0001true\u0002TAGS\u0001tag`},
	} {
		var c Command
		if !s.decode(bytes.Clone(tc.hdr), &c, allRaw, true) || !matchedShape(&s, tc.hdr) {
			t.Fatalf("header %d not read by the shape", i)
		}
		var one Command
		decodeJSONHeaderFast(bytes.Clone(tc.hdr), &one, allRaw, false)
		var want SendMessageRequestHeader
		if err := DecodeSendHeader(&one, &want); err != nil {
			t.Fatal(err)
		}
		c2 := c
		var h SendMessageRequestHeader
		esc, err := DecodeSendHeaderEscaped(&c2, &h)
		if err != nil || esc != tc.esc || (esc != "" && h.Properties != "") {
			t.Fatalf("header %d: escaped %q, properties %q (%v); want escaped %q", i, esc, h.Properties, err, tc.esc)
		}
		if esc != "" {
			h.Properties = unescapeSeparators(esc)
		}
		if h != want {
			t.Fatalf("header %d:\nescaped %+v\ngeneral %+v", i, h, want)
		}
		var got SendMessageRequestHeader
		if err := DecodeSendHeader(&c, &got); err != nil || got != want {
			t.Fatalf("header %d:\nshaped  %+v\ngeneral %+v (%v)", i, got, want, err)
		}
		checkWholeList(t, tc.hdr, &one, &c)
	}
	// A reply's properties are read unescaped (its processor reads them
	// with DecodeSendHeader), its list lazy all the same.
	reply := func(opaque int, uniq string) []byte {
		return bytes.Replace(goSendHeader(opaque, 1, 5, uniq), []byte(`"code":10,`), []byte(fmt.Sprintf(`"code":%d,`, SendReplyMessage)), 1)
	}
	var rs HeaderShapes
	rs.decode(reply(1, "first"), &c0, allRaw, true)
	var c Command
	if !rs.decode(reply(2, "second"), &c, allRaw, true) || !c.shaped.lazy || c.shaped.esc != 0 {
		t.Fatalf("reply: lazy %v, escaped at %d", c.shaped.lazy, c.shaped.esc)
	}
	var h SendMessageRequestHeader
	if esc, err := DecodeSendHeaderEscaped(&c, &h); err != nil || esc != "" || h.Properties != "UNIQ_KEY\x01second\x02WAIT\x01true\x02TAGS\x01tag" {
		t.Fatalf("reply: escaped %q, properties %q (%v)", esc, h.Properties, err)
	}
	// A reply read by a send's shape: its list made whole, unescaped.
	hdr := reply(3, "third")
	var cr, one Command
	if !s.decode(bytes.Clone(hdr), &cr, allRaw, true) || !matchedShape(&s, hdr) || cr.shaped.lazy {
		t.Fatalf("reply by a send's shape: lazy %v", cr.shaped.lazy)
	}
	decodeJSONHeaderFast(bytes.Clone(hdr), &one, allRaw, false)
	if esc, err := DecodeSendHeaderEscaped(&cr, &h); err != nil || esc != "" || h.Properties != "UNIQ_KEY\x01third\x02WAIT\x01true\x02TAGS\x01tag" {
		t.Fatalf("reply by a send's shape: escaped %q, properties %q (%v)", esc, h.Properties, err)
	}
	checkWholeList(t, hdr, &one, &cr)
}

// TestHeaderShapeSeparatorsOnly: separatorsOnly's scan in line, eight
// bytes at a time, ends where the scan by plainRun ends and says the same,
// for values of every length around the word size with a quote, a
// backslash, a control byte or a byte above 0x7F anywhere.
func TestHeaderShapeSeparatorsOnly(t *testing.T) {
	byRun := func(b []byte, i int) (int, bool) {
		for {
			i += plainRun(string(b[i:]))
			switch {
			case i >= len(b):
				return i, false
			case b[i] == '"':
				return i + 1, true
			case b[i] == '\\' && isSeparatorEscape(b[i:]):
				i += 6
			default:
				return i, false
			}
		}
	}
	pieces := []string{"a", "UNIQ_KEY", `"`, `\`, `\u0001`, `\u0002`, `\u0003`, `\u000`, `\n`, "\x01", "\x1f", "\x7f", "\x80", "\xff", "é", " "}
	rng := rand.New(rand.NewPCG(1, 2))
	for range 20000 {
		var b []byte
		for n := rng.IntN(12); n > 0; n-- {
			b = append(b, pieces[rng.IntN(len(pieces))]...)
		}
		if rng.IntN(2) == 0 {
			b = append(b, `","queueId":"3"}`...)
		}
		for i := 0; i <= min(len(b), 3); i++ {
			gotEnd, gotOK := separatorsOnly(b, i)
			wantEnd, wantOK := byRun(b, i)
			if gotOK != wantOK || gotEnd != wantEnd {
				t.Fatalf("separatorsOnly(%q, %d) = %d, %v; by plainRun %d, %v", b, i, gotEnd, gotOK, wantEnd, wantOK)
			}
		}
	}
}
