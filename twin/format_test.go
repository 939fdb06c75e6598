package twin

import (
	"bytes"
	"encoding/hex"
	"errors"
	"strings"
	"testing"
	"time"
)

var t0 = time.UnixMilli(1696374425000)

func hexs(parts ...string) string { return strings.Join(parts, "") }

func prepareEntry(t testing.TB, e *Engine, r *Request) []byte {
	t.Helper()
	entry, rep, needsLog := e.Prepare(r)
	if !needsLog {
		t.Fatalf("Prepare(%s) answered %d %v without the log", r.Op, rep.Status, rep.Err)
	}
	return entry
}

func apply(t testing.TB, e *Engine, entry []byte, at time.Time) Outcome {
	t.Helper()
	out, err := e.Apply(entry, at)
	if err != nil {
		t.Fatal(err)
	}
	return out
}

func do(t testing.TB, e *Engine, r *Request, at time.Time) Reply {
	t.Helper()
	entry, rep, needsLog := e.Prepare(r)
	if !needsLog {
		return rep
	}
	return apply(t, e, entry, at).Reply
}

// The log entry format of doc.go, pinned byte for byte; the expected
// bytes were written field by field and their CRC32-C computed outside Go.
func TestTwinEntryBytesPinned(t *testing.T) {
	e := mustEngine(t, Options{Rand: &counterReader{}})
	cases := []struct {
		name string
		req  Request
		want string
	}{{
		"PatchReported with IfVersion",
		Request{Op: OpPatchReported, DeviceID: "d1", IfVersion: 3, Body: []byte(`{"b":"x","a":1,"c":null}`)},
		hexs("54", "01", "0d", "02", // magic, format, op 13, IFVERSION
			"02"+"6431", "00", "03", // device "d1", module "", ifVersion 3
			"05"+"03",                         // object, 3 members (sorted)
			"01"+"61"+"03"+"3ff0000000000000", // "a": 1.0
			"01"+"62"+"04"+"01"+"78",          // "b": "x"
			"01"+"63"+"00",                    // "c": null
			"e030c913"),                       // CRC32-C
	}, {
		"EnqueueC2D",
		Request{Op: OpEnqueueC2D, DeviceID: "d", Body: []byte(`{"messageId":"m1","expiry":1696374485000,"maxDepth":50}`)},
		hexs("54", "01", "10", "00", "01"+"64", "00", // op 16, device "d"
			"02"+"6d31", "90c0e3fcde62", "32", // message id "m1", expiry (zigzag), max depth 50
			"a5b062e6"),
	}, {
		"AckC2D",
		Request{Op: OpAckC2D, DeviceID: "d", Body: []byte(`{"messageId":"m1"}`)},
		hexs("54", "01", "11", "00", "01"+"64", "00", "02"+"6d31", "a7b5c943"),
	}, {
		"SetConnection of a module",
		Request{Op: OpSetConnection, DeviceID: "d", ModuleID: "m", Connected: true, ConnID: "n1"},
		hexs("54", "01", "0e", "10", "01"+"64", "01"+"6d", "02"+"6e31", "aaea8771"),
	}, {
		"SetConnection announcing a model id",
		Request{Op: OpSetConnection, DeviceID: "d", Connected: true, ConnID: "n1", Body: []byte("dtmi:a;1")},
		hexs("54", "01", "0e", "30", "01"+"64", "00", "02"+"6e31", // CONNECTED|MODELID
			"08"+hex.EncodeToString([]byte("dtmi:a;1")), "9cacc12c"),
	}, {
		"UpdateTwin with a quoted If-Match, tags, and desired cleared",
		Request{Op: OpUpdateTwin, DeviceID: "d", IfMatch: `"AAAAAAAAAAE="`, Body: []byte(`{"tags":{"t":true},"properties":{"desired":null}}`)},
		hexs("54", "01", "0a", "0d", "01"+"64", "00", "0c"+hex.EncodeToString([]byte("AAAAAAAAAAE=")),
			"05"+"01"+"01"+"74"+"02", // tags {"t":true}
			"00",                     // desired null
			"f1bec3a7"),
	}, {
		"DeleteModule",
		Request{Op: OpDeleteModule, DeviceID: "d", ModuleID: "m"},
		hexs("54", "01", "07", "00", "01"+"64", "01"+"6d", "75ff10ad"),
	}}
	for _, c := range cases {
		got := hex.EncodeToString(prepareEntry(t, e, &c.req))
		if got != c.want {
			t.Errorf("%s:\n got %s\nwant %s", c.name, got, c.want)
		}
	}
}

// Every truncation or bit flip of an entry is refused as corrupt and
// changes nothing.
func TestTwinApplyCorruptEntry(t *testing.T) {
	e := mustEngine(t, Options{Rand: &counterReader{}})
	do(t, e, &Request{Op: OpPutDevice, DeviceID: "d"}, t0)
	entry := prepareEntry(t, e, &Request{Op: OpPatchReported, DeviceID: "d", Body: []byte(`{"a":{"b":[1,2]}}`)})
	var before bytes.Buffer
	if err := e.Snapshot(&before); err != nil {
		t.Fatal(err)
	}
	for i := 0; i < len(entry); i++ {
		for _, bad := range [][]byte{entry[:i], flip(entry, i)} {
			if _, err := e.Apply(bad, t0); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedFormat) {
				t.Fatalf("Apply(%x) = %v, want ErrCorrupt", bad, err)
			}
		}
	}
	var after bytes.Buffer
	if err := e.Snapshot(&after); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(before.Bytes(), after.Bytes()) {
		t.Fatal("a refused entry changed the engine")
	}
}

func flip(b []byte, i int) []byte {
	c := bytes.Clone(b)
	c[i] ^= 0x40
	return c
}

// zigzag varints of t0 and t0+2s
const t0v, t2v = "d096dcfcde62", "f0b5dcfcde62"

// snapshotFormat1 is TestTwinSnapshotBytesPinned's state in snapshot
// format 1 (no MODELID), as SmartGo wrote it before format 2.
var snapshotFormat1 = hexs(hex.EncodeToString([]byte("SGTWIN\x00\x00")), "00000001", "0000000000000001",
	"01"+"64", "00", "02", "12"+hex.EncodeToString([]byte("630054748589213255")), "00", "00", t0v,
	"03", "00", "00", "00", "00", "00", "00", "00", "00", "00", t2v, "06", "02", "04",
	"05"+"01"+"01"+"61"+"03"+"3ff0000000000000", "05"+t0v+"02"+"00", "05"+t2v+"00"+"01"+"01"+"72"+"04"+t2v+"00"+"01"+"76",
	"89048241")

// snapshotFormat2 is that state in snapshot format 2 (no cloud-to-device
// ledger), as SmartGo wrote it before format 3.
var snapshotFormat2 = hexs(hex.EncodeToString([]byte("SGTWIN\x00\x00")), "00000002", "0000000000000001",
	"01"+"64", "00", "02", "12"+hex.EncodeToString([]byte("630054748589213255")), "00", "00", t0v,
	"03", "00", "00", "00", "00", "00", "00", "00", "00", "00", "00", t2v, "06", "02", "04",
	"05"+"01"+"01"+"61"+"03"+"3ff0000000000000", "05"+t0v+"02"+"00", "05"+t2v+"00"+"01"+"01"+"72"+"04"+t2v+"00"+"01"+"76",
	"4d16b7e0")

// The snapshot format of doc.go, pinned byte for byte.
func TestTwinSnapshotBytesPinned(t *testing.T) {
	e := mustEngine(t, Options{Rand: &counterReader{}})
	steps := []struct {
		r  Request
		at time.Time
	}{
		{Request{Op: OpPutDevice, DeviceID: "d", Body: []byte(`{"authentication":{"type":"none"}}`)}, t0},
		{Request{Op: OpUpdateTwin, DeviceID: "d", Body: []byte(`{"tags":{"a":1}}`)}, t0.Add(time.Second)},
		{Request{Op: OpPatchReported, DeviceID: "d", Body: []byte(`{"r":"v"}`)}, t0.Add(2 * time.Second)},
	}
	for _, s := range steps {
		if rep := do(t, e, &s.r, s.at); rep.Err != nil {
			t.Fatal(rep.Err)
		}
	}
	var buf bytes.Buffer
	if err := e.Snapshot(&buf); err != nil {
		t.Fatal(err)
	}
	want := hexs(hex.EncodeToString([]byte("SGTWIN\x00\x00")), "00000003", "0000000000000001",
		"01"+"64", "00", "02", // device "d", module "", identity etag version 1
		"12"+hex.EncodeToString([]byte("630054748589213255")), // generation id from the counting source
		"00", "00", t0v, // status enabled, no reason, status updated t0
		"03", "00", "00", "00", "00", // auth none, no keys, no thumbprints
		"00", "00", "00", "00", "00", "00", // iotEdge, managedBy, connected, connId, modelId, connUpdated
		t2v, "06", "02", "04", // last activity t0+2s, version 3, desired 1, reported 2
		"05"+"01"+"01"+"61"+"03"+"3ff0000000000000",          // tags {"a":1}
		"05"+t0v+"02"+"00",                                   // desired {} stamped t0, version 1
		"05"+t2v+"00"+"01"+"01"+"72"+"04"+t2v+"00"+"01"+"76", // reported {"r":"v"} stamped t0+2s
		"00", // no cloud-to-device messages outstanding
		"f6db6eeb")
	if got := hex.EncodeToString(buf.Bytes()); got != want {
		t.Errorf("snapshot\n got %s\nwant %s", got, want)
	}
	// The same state in format 1 (without MODELID) and 2 (without the
	// cloud-to-device ledger), as earlier versions wrote it, restores to
	// the same state.
	for i, older := range []string{snapshotFormat1, snapshotFormat2} {
		old, _ := hex.DecodeString(older)
		e1 := mustEngine(t, Options{})
		if err := e1.Restore(bytes.NewReader(old)); err != nil {
			t.Fatalf("format %d: %v", i+1, err)
		}
		var again bytes.Buffer
		if err := e1.Snapshot(&again); err != nil {
			t.Fatal(err)
		}
		if !bytes.Equal(again.Bytes(), buf.Bytes()) {
			t.Errorf("format %d restored to another state:\n got %x\nwant %x", i+1, again.Bytes(), buf.Bytes())
		}
	}
	// A device's outstanding cloud-to-device messages follow its
	// reported section: NC2D, then MID and EXPIRY of each.
	if rep := do(t, e, &Request{Op: OpEnqueueC2D, DeviceID: "d", Body: []byte(`{"messageId":"m1","expiry":1696374485000,"maxDepth":50}`)}, t0.Add(3*time.Second)); rep.Err != nil {
		t.Fatal(rep.Err)
	}
	var withC2D bytes.Buffer
	if err := e.Snapshot(&withC2D); err != nil {
		t.Fatal(err)
	}
	wantC2D := strings.TrimSuffix(want, "00"+"f6db6eeb") + "01" + "02" + "6d31" + "90c0e3fcde62" + "95c9bc6a" // 1 message: "m1", expiry 1696374485000 (zigzag)
	if got := hex.EncodeToString(withC2D.Bytes()); got != wantC2D {
		t.Errorf("snapshot with a ledger\n got %s\nwant %s", got, wantC2D)
	}
	ec := mustEngine(t, Options{})
	if err := ec.Restore(bytes.NewReader(withC2D.Bytes())); err != nil {
		t.Fatal(err)
	}
	prev := wallNow
	defer func() { wallNow = prev }()
	for _, c := range []struct {
		at   int64
		want string
	}{{1696374484999, `"cloudToDeviceMessageCount":1,`}, {1696374485000, `"cloudToDeviceMessageCount":0,`}} {
		wallNow = func() int64 { return c.at }
		if doc, _ := ec.Get("d", ""); !bytes.Contains(doc, []byte(c.want)) {
			t.Errorf("restored twin read at %d: want %s in %s", c.at, c.want, doc)
		}
	}
	// Every truncation and bit flip is refused and leaves the engine as it was.
	e2 := mustEngine(t, Options{})
	for i := 0; i < buf.Len(); i++ {
		for _, bad := range [][]byte{buf.Bytes()[:i], flip(buf.Bytes(), i)} {
			if err := e2.Restore(bytes.NewReader(bad)); !errors.Is(err, ErrCorrupt) && !errors.Is(err, ErrUnsupportedFormat) {
				t.Fatalf("Restore of a damaged snapshot (byte %d) = %v", i, err)
			}
		}
	}
	if st := e2.Stats(); st.Devices != 0 {
		t.Fatalf("a refused snapshot changed the engine: %+v", st)
	}
}

// The wire bodies of doc.go, pinned byte for byte.
func TestTwinWireBytesPinned(t *testing.T) {
	req := &Request{Op: OpPatchReported, DeviceID: "d1", IfVersion: 2, Limit: 5, Body: []byte(`{"a":1}`)}
	want := hexs("01", "0d", "00", "00", "02"+"6431", "00", "00", "04", "00", "00", "0a", "07"+hex.EncodeToString([]byte(`{"a":1}`)))
	if got := hex.EncodeToString(req.AppendBinary(nil)); got != want {
		t.Errorf("request\n got %s\nwant %s", got, want)
	}
	back, err := DecodeRequest(req.AppendBinary(nil))
	if err != nil || back.Op != req.Op || back.DeviceID != "d1" || back.IfVersion != 2 || back.Limit != 5 || string(back.Body) != `{"a":1}` {
		t.Fatalf("request round trip: %+v %v", back, err)
	}

	rep := &Reply{Status: 204, Etag: "AAAAAAAAAAI=", Version: 2}
	want = hexs("01", "cc01", "00", "00", "0c"+hex.EncodeToString([]byte("AAAAAAAAAAI=")), "04", "00", "00")
	if got := hex.EncodeToString(rep.AppendBinary(nil)); got != want {
		t.Errorf("reply\n got %s\nwant %s", got, want)
	}
	erep := &Reply{Status: 412, Err: &Error{Status: 412, Code: "PreconditionFailed", Msg: "m"}}
	want = hexs("01", "9c03", "12"+hex.EncodeToString([]byte("PreconditionFailed")), "01"+"6d", "00", "00", "00", "00")
	if got := hex.EncodeToString(erep.AppendBinary(nil)); got != want {
		t.Errorf("error reply\n got %s\nwant %s", got, want)
	}
	rb, err := DecodeReply(erep.AppendBinary(nil))
	if err != nil || rb.Err == nil || !errors.Is(rb.Err, ErrPrecondition) {
		t.Fatalf("reply round trip: %+v %v", rb, err)
	}

	patch := `{"x":1,"$version":2}`
	notes := []DesiredChange{{DeviceID: "d1", Version: 2, Patch: []byte(patch)}}
	want = hexs("01", "01", "02"+"6431", "00", "04", "14"+hex.EncodeToString([]byte(patch)))
	if got := hex.EncodeToString(AppendDesiredChanges(nil, notes)); got != want {
		t.Errorf("notification\n got %s\nwant %s", got, want)
	}
	want = hexs("01", "01", "02", "02"+"6431", "04"+hex.EncodeToString([]byte("d1/m")))
	if got := hex.EncodeToString(AppendWatch(nil, WatchAdd, []string{"d1", "d1/m"})); got != want {
		t.Errorf("watch\n got %s\nwant %s", got, want)
	}
	if got := hex.EncodeToString(AppendWatchReply(nil, 0x0102030405060708)); got != "01"+"0102030405060708" {
		t.Errorf("watch reply %s", got)
	}
	if e, err := DecodeWatchReply(AppendWatchReply(nil, 42)); err != nil || e != 42 {
		t.Errorf("watch reply round trip %d %v", e, err)
	}
}

// Decoders of untrusted bodies refuse every truncation with an error.
func TestTwinWireTruncated(t *testing.T) {
	bodies := map[string][]byte{
		"request": (&Request{Op: OpQuery, Body: []byte("SELECT * FROM devices"), After: "x"}).AppendBinary(nil),
		"reply":   (&Reply{Status: 200, Etag: "e", Body: []byte("{}")}).AppendBinary(nil),
		"notify":  AppendDesiredChanges(nil, []DesiredChange{{DeviceID: "d", Version: 1, Patch: []byte("{}")}}),
		"watch":   AppendWatch(nil, WatchReplace, []string{"a", "b"}),
		"wreply":  AppendWatchReply(nil, 7),
	}
	for name, b := range bodies {
		for i := 0; i < len(b); i++ {
			var err error
			switch name {
			case "request":
				_, err = DecodeRequest(b[:i])
			case "reply":
				_, err = DecodeReply(b[:i])
			case "notify":
				_, err = DecodeDesiredChanges(b[:i])
			case "wreply":
				_, err = DecodeWatchReply(b[:i])
			default:
				_, _, err = DecodeWatch(b[:i])
			}
			if err == nil {
				t.Errorf("%s truncated to %d bytes decoded", name, i)
			}
		}
	}
}
