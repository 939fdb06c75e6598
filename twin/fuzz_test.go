package twin

import (
	"bytes"
	"encoding/json"
	"strings"
	"testing"
)

// FuzzTwinPatch feeds arbitrary bodies through the JSON patch path:
// parseJSON agrees with encoding/json on what is valid JSON (minus the
// package's own stricter rules), rendering a parsed value parses back to
// the same value, and Prepare + Apply of reported and twin patches never
// panic, answer with a status and an error text when they refuse, and
// leave the twin a valid JSON document within its limits.
func FuzzTwinPatch(f *testing.F) {
	for _, s := range []string{
		`{"a":1}`, `{"a":{"b":null,"c":[1,"x",true,null,{"d":1.5e-7}]}}`, `{"a.b":1}`, `{"$version":3,"x":"\u00e9\ud83d\ude00"}`,
		`{"tags":{"t":1},"properties":{"desired":{"k":"v","$metadata":{}}}}`, `{`, `[]`, `{"a":1,"a":2}`, `"x"`,
		`{"n":4503599627370496}`, `{"n":-0.0}`, `{"s":"\ud800"}`, ` {"x" : [ ] } `, `{"x":1e400}`, `{"":1}`,
	} {
		f.Add([]byte(s))
	}
	f.Fuzz(func(t *testing.T, body []byte) {
		v, err := parseJSON(body)
		var std any
		stdErr := json.Unmarshal(body, &std)
		if err == nil {
			if stdErr != nil {
				t.Fatalf("parseJSON accepted %q, encoding/json says %v", body, stdErr)
			}
			out := appendValue(nil, &v)
			again, err := parseJSON(out)
			if err != nil || !again.equal(&v) {
				t.Fatalf("%q renders as %q, which parses to something else (%v)", body, out, err)
			}
		} else if AsError(err).Status != StatusBadRequest {
			t.Fatalf("parse error with status %d", AsError(err).Status)
		}
		e := mustEngine(t, Options{Rand: &counterReader{}})
		newDevice(t, e, "d")
		for _, op := range []Op{OpPatchReported, OpUpdateTwin, OpReplaceTwin} {
			entry, rep, needsLog := e.Prepare(&Request{Op: op, DeviceID: "d", Body: body})
			if needsLog {
				out, err := e.Apply(entry, t0)
				if err != nil {
					t.Fatalf("%s: Prepare's entry does not apply: %v", op, err)
				}
				rep = out.Reply
			}
			if rep.Status >= 400 && (rep.Err == nil || rep.Err.Msg == "") {
				t.Fatalf("%s: status %d without an error text", op, rep.Status)
			}
		}
		doc, _ := e.Get("d", "")
		if !json.Valid(doc) {
			t.Fatalf("twin is not JSON after %q: %s", body, doc)
		}
		r := e.recs["d"]
		for _, c := range []struct {
			n   *node
			sec Section
		}{{&r.tags, SectionTags}, {&r.desired, SectionDesired}, {&r.reported, SectionReported}} {
			if err := checkSection(c.n, c.sec); err != nil {
				t.Fatalf("%s breaks a rule after %q: %v", c.sec, body, err)
			}
			if err := checkSize(c.n, c.sec); err != nil {
				t.Fatalf("%s over its size after %q", c.sec, body)
			}
		}
	})
}

// FuzzTwinQuery: the parser never panics and refuses with 400; a query it
// accepts runs on a small engine without panicking, and its projection
// and aggregate bodies are JSON.
func FuzzTwinQuery(f *testing.F) {
	for _, s := range []string{
		"SELECT * FROM devices", "SELECT * FROM devices.modules WHERE deviceId = 'a'",
		"SELECT deviceId, tags.x AS y FROM devices WHERE tags.x IN ['a', 1, true] AND NOT IS_DEFINED(tags.z)",
		"SELECT tags.r, COUNT() AS n FROM devices WHERE STARTSWITH(deviceId, 'a') OR properties.reported.$version >= 2 GROUP BY tags.r",
		"select * from devices where (((a = 1)))", "SELECT * FROM devices WHERE 'x' < tags.a", "SELECT", "",
		"SELECT * FROM devices WHERE tags.a = 'it''s' OR ENDSWITH(tags.b, \"q\")", "SELECT COUNT() FROM devices",
		"SELECT TOP 2 * FROM devices", "SELECT TOP 1 tags.r, COUNT() FROM devices GROUP BY tags.r",
	} {
		f.Add(s)
	}
	e := mustEngine(f, Options{IndexPaths: []string{"properties.reported.r"}})
	for _, id := range []string{"a", "b", "c"} {
		newDevice(f, e, id)
		do(f, e, &Request{Op: OpUpdateTwin, DeviceID: id, Body: []byte(`{"tags":{"x":"a","r":1}}`)}, t0)
		do(f, e, &Request{Op: OpPatchReported, DeviceID: id, Body: []byte(`{"r":"v"}`)}, t0)
	}
	do(f, e, &Request{Op: OpPutModule, DeviceID: "a", ModuleID: "m"}, t0)
	f.Fuzz(func(t *testing.T, text string) {
		q, err := ParseQuery(text)
		if err != nil {
			if AsError(err).Status != StatusBadRequest || !strings.HasPrefix(AsError(err).Msg, "query: ") {
				t.Fatalf("parse error %v", err)
			}
			return
		}
		_, rep, _ := e.Prepare(&Request{Op: OpQuery, Body: []byte(text), Limit: 2})
		if rep.Err != nil {
			t.Fatalf("accepted query %q fails to run: %v", text, rep.Err)
		}
		if !json.Valid(rep.Body) {
			t.Fatalf("query %q: body is not JSON: %s", text, rep.Body)
		}
		if q.Aggregate() {
			g, err := DecodeGroups(rep.Body)
			if err != nil {
				t.Fatal(err)
			}
			for _, row := range q.AggregateRows(MergeGroups(g, g)) {
				if !json.Valid(row) {
					t.Fatalf("row %s is not JSON", row)
				}
			}
		}
	})
}

// FuzzTwinDecode: the decoders of untrusted bytes (log entries, wire
// bodies, snapshots) never panic; what they accept re-encodes to the same
// bytes (entries and wire requests) or restores cleanly.
func FuzzTwinDecode(f *testing.F) {
	e := mustEngine(f, Options{Rand: &counterReader{}})
	for _, r := range []Request{
		{Op: OpPutDevice, DeviceID: "d", Body: []byte(`{"status":"disabled"}`)},
		{Op: OpPatchReported, DeviceID: "d", IfVersion: 2, Body: []byte(`{"a":[1,{"b":null}]}`)},
		{Op: OpUpdateTwin, DeviceID: "d", IfMatch: "*", Body: []byte(`{"tags":{"x":1},"properties":{"desired":{"y":"z"}}}`)},
		{Op: OpSetConnection, DeviceID: "d", ModuleID: "m", Connected: true, ConnID: "c"},
		{Op: OpSetConnection, DeviceID: "d", Connected: true, ConnID: "c", Body: []byte("dtmi:com:example:Thermostat;1")},
		{Op: OpEnqueueC2D, DeviceID: "d", Body: []byte(`{"messageId":"m","expiry":1696374485000,"maxDepth":50}`)},
		{Op: OpAckC2D, DeviceID: "d", Body: []byte(`{"messageId":"m"}`)},
	} {
		entry, _, _ := e.Prepare(&r)
		f.Add(entry)
		f.Add(r.AppendBinary(nil))
	}
	f.Add((&Reply{Status: 200, Body: []byte("{}")}).AppendBinary(nil))
	f.Add(AppendWatch(nil, WatchAdd, []string{"a"}))
	f.Fuzz(func(t *testing.T, b []byte) {
		if le, err := decodeEntry(b); err == nil {
			if !bytes.Equal(le.encode(), b) {
				t.Fatalf("entry %x re-encodes to %x", b, le.encode())
			}
			fresh := mustEngine(t, Options{})
			if _, err := fresh.Apply(b, t0); err != nil {
				t.Fatalf("decoded entry does not apply: %v", err)
			}
		}
		if r, err := DecodeRequest(b); err == nil {
			if !bytes.Equal(r.AppendBinary(nil), b) {
				t.Fatalf("request %x re-encodes differently", b)
			}
			fresh := mustEngine(t, Options{})
			if entry, _, needsLog := fresh.Prepare(r); needsLog {
				if _, err := fresh.Apply(entry, t0); err != nil {
					t.Fatal(err)
				}
			}
		}
		_, _ = DecodeReply(b)
		_, _ = DecodeDesiredChanges(b)
		_, _, _ = DecodeWatch(b)
		_ = mustEngine(t, Options{}).Restore(bytes.NewReader(b))
	})
}
