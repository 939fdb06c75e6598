package twin

import (
	"bytes"
	"encoding/json"
	"errors"
	"fmt"
	"math/rand/v2"
	"strings"
	"testing"
	"time"
)

func newDevice(t testing.TB, e *Engine, id string) {
	t.Helper()
	if rep := do(t, e, &Request{Op: OpPutDevice, DeviceID: id}, t0); rep.Err != nil {
		t.Fatal(rep.Err)
	}
}

// The size rules at their edges: a key of 1024 bytes, a string of 4096
// bytes and sections of exactly 8 KiB / 32 KiB pass; one more fails with
// the rule's name, and the twin is unchanged.
func TestTwinLimitEdges(t *testing.T) {
	e := mustEngine(t, Options{})
	newDevice(t, e, "d")
	check := func(name string, op Op, body string, wantStatus int, wantText string) {
		t.Helper()
		before, _ := e.Get("d", "")
		rep := do(t, e, &Request{Op: op, DeviceID: "d", Body: []byte(body)}, t0)
		if rep.Status != wantStatus || (wantText != "" && (rep.Err == nil || !strings.Contains(rep.Err.Msg, wantText))) {
			t.Fatalf("%s: got %d %v, want %d %q", name, rep.Status, rep.Err, wantStatus, wantText)
		}
		if rep.Err != nil {
			if after, _ := e.Get("d", ""); !bytes.Equal(before, after) {
				t.Fatalf("%s: a refused request changed the twin", name)
			}
		}
	}
	k := strings.Repeat("k", MaxKeyBytes)
	check("key 1024", OpPatchReported, `{"`+k+`":1}`, 204, "")
	check("key 1025", OpPatchReported, `{"`+k+`k":1}`, 400, "key rules")
	check("key of 1024 multi-byte", OpPatchReported, `{"`+strings.Repeat("é", 513)+`":1}`, 400, "key rules")
	s := strings.Repeat("s", MaxStringBytes)
	check("string 4096", OpPatchReported, `{"s":"`+s+`"}`, 204, "")
	check("string 4097", OpPatchReported, `{"s":"`+s+`x"}`, 400, "string length")
	check("reset", OpPatchReported, `{"`+k+`":null,"s":null}`, 204, "")

	// tags: key "t" (1) + string value; 8192 in all.
	check("tags 8192", OpUpdateTwin, `{"tags":{"t":"`+strings.Repeat("v", 4095)+`","u":"`+strings.Repeat("v", 4095)+`"}}`, 200, "")
	check("tags 8193", OpUpdateTwin, `{"tags":{"w":1}}`, 413, "tags size: 8201 bytes")
	// Control characters do not count, a multi-byte character counts once.
	check("tags with control chars", OpUpdateTwin, `{"tags":{"u":"`+strings.Repeat("v", 4094)+`\n\u0001"}}`, 200, "")
	check("tags with é", OpUpdateTwin, `{"tags":{"u":"`+strings.Repeat("é", 2047)+`"}}`, 200, "")

	// desired: 8 members of key (1 char) + 4095 chars = 32768.
	var b strings.Builder
	b.WriteString(`{"properties":{"desired":{`)
	for i := 0; i < 8; i++ {
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%c":"%s"`, 'a'+i, strings.Repeat("x", 4095))
	}
	b.WriteString(`}}}`)
	check("desired 32768", OpUpdateTwin, b.String(), 200, "")
	check("desired 32769", OpUpdateTwin, `{"properties":{"desired":{"z":true}}}`, 413, "properties.desired size")
	check("desired shrink", OpUpdateTwin, `{"properties":{"desired":{"a":null,"z":true}}}`, 200, "")

	// reported: numbers count 8 each.
	b.Reset()
	b.WriteString(`{`)
	for i := 0; i < 32768/12; i++ { // key "nnnn" (4) + number (8)
		if i > 0 {
			b.WriteByte(',')
		}
		fmt.Fprintf(&b, `"%04d":%d`, i, i)
	}
	b.WriteString(`}`)
	check("reported 2730 numbers", OpPatchReported, b.String(), 204, "")
	check("reported over", OpPatchReported, `{"more":"12345678901"}`, 413, "properties.reported size: 32775 bytes")
	check("body over 256 KiB", OpPatchReported, `{"x":"`+strings.Repeat(" ", MaxBodyBytes)+`"}`, 413, "body")
}

// Reads of the twin document always parse as JSON and carry the
// identity's root fields.
func TestTwinDocumentIsJSON(t *testing.T) {
	e := mustEngine(t, Options{})
	newDevice(t, e, "d")
	do(t, e, &Request{Op: OpPatchReported, DeviceID: "d", Body: []byte(`{"s":"a\"b\\c\u0001\u2028é","n":-0.000001,"big":1e21,"arr":[{},[]]}`)}, t0)
	doc, _ := e.Get("d", "")
	var v map[string]any
	if err := json.Unmarshal(doc, &v); err != nil {
		t.Fatalf("twin is not JSON: %v\n%s", err, doc)
	}
	rep := v["properties"].(map[string]any)["reported"].(map[string]any)
	if rep["s"] != "a\"b\\c\u0001\u2028é" || rep["n"] != -0.000001 || rep["big"] != 1e21 {
		t.Fatalf("values did not survive: %v", rep)
	}
}

// A replica applying the master's entries with the same store times ends
// with the same snapshot bytes, and the restored snapshot answers the
// same reads, over a random mix of writes (including ones that fail).
func TestTwinReplicaDeterminism(t *testing.T) {
	master := mustEngine(t, Options{IndexPaths: []string{"properties.reported.n"}})
	slave := mustEngine(t, Options{IndexPaths: []string{"properties.reported.n"}})
	rng := rand.New(rand.NewPCG(1, 2))
	now := t0
	for i := 0; i < 3000; i++ {
		now = now.Add(time.Duration(rng.IntN(5)) * time.Millisecond)
		r := randomRequest(rng)
		entry, _, needsLog := master.Prepare(r)
		if !needsLog {
			continue
		}
		mo := apply(t, master, entry, now)
		so := apply(t, slave, entry, now)
		if mo.Reply.Status != so.Reply.Status || !bytes.Equal(mo.Reply.Body, so.Reply.Body) || len(mo.Events) != len(so.Events) {
			t.Fatalf("step %d (%s): master %d, slave %d", i, r.Op, mo.Reply.Status, so.Reply.Status)
		}
	}
	var a, b bytes.Buffer
	if err := master.Snapshot(&a); err != nil {
		t.Fatal(err)
	}
	if err := slave.Snapshot(&b); err != nil {
		t.Fatal(err)
	}
	if !bytes.Equal(a.Bytes(), b.Bytes()) {
		t.Fatal("replica diverged")
	}
	restored := mustEngine(t, Options{IndexPaths: []string{"properties.reported.n"}})
	if err := restored.Restore(bytes.NewReader(a.Bytes())); err != nil {
		t.Fatal(err)
	}
	if master.Stats() != restored.Stats() {
		t.Fatalf("restored stats %+v, master %+v", restored.Stats(), master.Stats())
	}
	for _, q := range []string{"SELECT * FROM devices", "SELECT * FROM devices.modules WHERE properties.reported.n = 3",
		"SELECT tags.g, COUNT() FROM devices GROUP BY tags.g"} {
		r := &Request{Op: OpQuery, Body: []byte(q)}
		_, ra, _ := master.Prepare(r)
		_, rb, _ := restored.Prepare(r)
		if !bytes.Equal(ra.Body, rb.Body) {
			t.Fatalf("%s differs after restore", q)
		}
	}
}

var randIDs = []string{"a", "b", "c", "d", "e"}

func randomRequest(rng *rand.Rand) *Request {
	dev := randIDs[rng.IntN(len(randIDs))]
	mod := ""
	if rng.IntN(3) == 0 {
		mod = []string{"m1", "m2"}[rng.IntN(2)]
	}
	val := func() string {
		switch rng.IntN(4) {
		case 0:
			return "null"
		case 1:
			return fmt.Sprint(rng.IntN(5))
		case 2:
			return fmt.Sprintf(`{"x":%d,"y":null}`, rng.IntN(3))
		}
		return fmt.Sprintf(`"s%d"`, rng.IntN(3))
	}
	r := &Request{DeviceID: dev, ModuleID: mod}
	switch rng.IntN(9) {
	case 0:
		r.Op = OpPutDevice
		r.ModuleID = ""
		r.Body = []byte(`{}`)
	case 1:
		r.Op = OpPutModule
		if r.ModuleID == "" {
			r.ModuleID = "m1"
		}
	case 2:
		r.Op = OpDeleteDevice
		r.ModuleID = ""
		if rng.IntN(4) != 0 {
			r.Op = OpPutDevice
		}
	case 3, 4:
		r.Op = OpPatchReported
		r.Body = []byte(fmt.Sprintf(`{"n":%s,"o":%s}`, val(), val()))
		if rng.IntN(5) == 0 {
			r.IfVersion = int64(1 + rng.IntN(4))
		}
	case 5:
		r.Op = OpUpdateTwin
		r.Body = []byte(fmt.Sprintf(`{"tags":{"g":%s},"properties":{"desired":{"d":%s}}}`, val(), val()))
		if rng.IntN(5) == 0 {
			r.IfMatch = Etag(int64(1 + rng.IntN(5)))
		}
	case 6:
		r.Op = OpReplaceTwin
		r.Body = []byte(fmt.Sprintf(`{"tags":{"g":%s}}`, val()))
	case 7:
		r.Op = OpSetConnection
		r.Connected = rng.IntN(2) == 0
		r.ConnID = []string{"c1", "c2", ""}[rng.IntN(3)]
	default:
		r.Op = OpDeleteModule
		if r.ModuleID == "" {
			r.ModuleID = "m2"
		}
	}
	return r
}

// Queries answer the same whether the planner uses the index, a key
// range, or scans everything: the reference evaluates every twin.
func TestTwinQueryIndexMatchesScan(t *testing.T) {
	e := mustEngine(t, Options{IndexPaths: []string{"properties.reported.fw"}})
	rng := rand.New(rand.NewPCG(3, 4))
	for i := 0; i < 400; i++ {
		id := fmt.Sprintf("dev%03d", i)
		newDevice(t, e, id)
		body := fmt.Sprintf(`{"tags":{"region":"%s","floor":%d,"nested":{"k":"%c"},"rank":%d}}`, []string{"us", "eu", "apac"}[rng.IntN(3)], rng.IntN(4), 'a'+rng.IntN(3), i)
		do(t, e, &Request{Op: OpUpdateTwin, DeviceID: id, Body: []byte(body)}, t0)
		do(t, e, &Request{Op: OpPatchReported, DeviceID: id, Body: []byte(fmt.Sprintf(`{"fw":"1.%d","b":%d}`, rng.IntN(3), rng.IntN(100)))}, t0)
		if rng.IntN(4) == 0 {
			do(t, e, &Request{Op: OpSetConnection, DeviceID: id, Connected: true, ConnID: "x"}, t0)
		}
		if rng.IntN(5) == 0 {
			do(t, e, &Request{Op: OpPutModule, DeviceID: id, ModuleID: "m"}, t0)
			do(t, e, &Request{Op: OpPatchReported, DeviceID: id, ModuleID: "m", Body: []byte(`{"fw":"1.1"}`)}, t0)
		}
	}
	queries := []string{
		"SELECT * FROM devices WHERE tags.region = 'us'",
		"SELECT * FROM devices WHERE tags.region = 'us' AND tags.floor = 2",
		"SELECT * FROM devices WHERE tags.region IN ['eu', 'apac'] AND properties.reported.b > 50",
		"SELECT * FROM devices WHERE tags.nested.k = 'b' AND NOT (tags.floor = 1)",
		"SELECT * FROM devices WHERE properties.reported.fw = '1.2' AND connectionState = 'Connected'",
		"SELECT * FROM devices WHERE status = 'enabled' AND STARTSWITH(deviceId, 'dev01')",
		"SELECT * FROM devices WHERE deviceId IN ['dev005', 'dev123', 'nope'] AND tags.region != 'none'",
		"SELECT * FROM devices WHERE deviceId = 'dev010'",
		"SELECT * FROM devices WHERE tags.region = 'mars'",
		"SELECT * FROM devices.modules WHERE properties.reported.fw = '1.1'",
		"SELECT * FROM devices.modules WHERE deviceId = 'dev020'",
		"SELECT * FROM devices WHERE tags.rank < 20",
		"SELECT * FROM devices WHERE tags.rank >= 390 AND tags.floor >= 1",
		"SELECT * FROM devices WHERE 7 >= tags.rank",
		"SELECT * FROM devices WHERE tags.floor = 1 OR tags.floor = 3",
	}
	// Order comparisons the planner leaves to a scan (too many matches
	// for a page of 7 out of 400), and one that matches nothing.
	scans := []string{
		"SELECT * FROM devices WHERE tags.rank > 100",
		"SELECT * FROM devices WHERE tags.region < 'f'",
		"SELECT * FROM devices WHERE properties.reported.fw <= '1.1' AND tags.nested.k > 'a'",
		"SELECT * FROM devices WHERE tags.rank > 1000",
	}
	for i, qs := range append(queries, scans...) {
		q, err := ParseQuery(qs)
		if err != nil {
			t.Fatal(err)
		}
		// Every query but the OR of two terms has a term the planner can use.
		if src := e.planLocked(q, 7); (src.ks == &e.devs || src.ks == &e.mods) && src.prefix == "" && i < len(queries)-1 {
			t.Errorf("%s: planned as a full scan", qs)
		}
		var want []string
		for _, r := range e.recs {
			if r.isModule() == q.Modules && eval(q.Where, r) == triTrue {
				want = append(want, r.key)
			}
		}
		sortStrings(want)
		// Page through with a small page size.
		var got []string
		after := ""
		for pages := 0; ; pages++ {
			_, rep, _ := e.Prepare(&Request{Op: OpQuery, Body: []byte(qs), After: after, Limit: 7})
			if rep.Err != nil {
				t.Fatal(rep.Err)
			}
			var items []struct {
				DeviceID string `json:"deviceId"`
				ModuleID string `json:"moduleId"`
			}
			if err := json.Unmarshal(rep.Body, &items); err != nil {
				t.Fatal(err)
			}
			for _, it := range items {
				got = append(got, TwinKey(it.DeviceID, it.ModuleID))
			}
			if rep.Next == "" {
				break
			}
			after = rep.Next
			if pages > 1000 {
				t.Fatal("paging does not end")
			}
		}
		if strings.Join(got, ",") != strings.Join(want, ",") {
			t.Errorf("%s:\n got %v\nwant %v", qs, got, want)
		}
	}
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}

// Aggregates merged across shards equal the aggregate over one engine
// holding everything.
func TestTwinGroupsMerge(t *testing.T) {
	all := mustEngine(t, Options{})
	shards := []*Engine{mustEngine(t, Options{}), mustEngine(t, Options{}), mustEngine(t, Options{})}
	for i := 0; i < 90; i++ {
		id := fmt.Sprintf("d%d", i)
		body := fmt.Sprintf(`{"tags":{"k":%d}}`, i%4)
		if i%7 == 0 {
			body = `{"tags":{}}`
		}
		for _, e := range []*Engine{all, shards[ShardOf(id, 3)]} {
			newDevice(t, e, id)
			do(t, e, &Request{Op: OpUpdateTwin, DeviceID: id, Body: []byte(body)}, t0)
		}
	}
	qs := "SELECT tags.k AS k, COUNT() AS n FROM devices GROUP BY tags.k"
	q, _ := ParseQuery(qs)
	var lists [][]Group
	for _, e := range shards {
		_, rep, _ := e.Prepare(&Request{Op: OpQuery, Body: []byte(qs)})
		g, err := DecodeGroups(rep.Body)
		if err != nil {
			t.Fatal(err)
		}
		lists = append(lists, g)
	}
	_, whole, _ := all.Prepare(&Request{Op: OpQuery, Body: []byte(qs)})
	wg, _ := DecodeGroups(whole.Body)
	got := bytes.Join(q.AggregateRows(MergeGroups(lists...)), []byte(","))
	want := bytes.Join(q.AggregateRows(MergeGroups(wg)), []byte(","))
	if !bytes.Equal(got, want) || !bytes.Contains(got, []byte(`{"n":13}`)) {
		t.Fatalf("merged %s\n  whole %s", got, want)
	}
}

// Errors unwrap to the sentinel of their status.
func TestTwinErrorSentinels(t *testing.T) {
	e := mustEngine(t, Options{})
	for _, c := range []struct {
		r    Request
		want error
	}{
		{Request{Op: OpGetTwin, DeviceID: "nobody"}, ErrNotFound},
		{Request{Op: OpPatchReported, DeviceID: "d", Body: []byte("{")}, ErrInvalid},
		{Request{Op: OpQuery, Body: []byte("SELECT")}, ErrInvalid},
		{Request{Op: Op(99), DeviceID: "d"}, ErrInvalid},
	} {
		rep := do(t, e, &c.r, t0)
		if rep.Err == nil || !errors.Is(rep.Err, c.want) {
			t.Errorf("%s: %v, want %v", c.r.Op, rep.Err, c.want)
		}
	}
}

// Reads (gets, chunked query scans, snapshots) run while writes apply;
// under -race this checks the locking, and every read sees a consistent
// document.
func TestTwinConcurrentReadsAndWrites(t *testing.T) {
	e := mustEngine(t, Options{})
	for i := 0; i < 300; i++ {
		newDevice(t, e, fmt.Sprintf("d%03d", i))
	}
	done := make(chan struct{})
	errs := make(chan error, 4)
	for g := 0; g < 3; g++ {
		go func() {
			for {
				select {
				case <-done:
					errs <- nil
					return
				default:
				}
				_, rep, _ := e.Prepare(&Request{Op: OpQuery, Body: []byte("SELECT * FROM devices WHERE properties.reported.n >= 0"), Limit: 50})
				_, get, _ := e.Prepare(&Request{Op: OpGetTwin, DeviceID: "d007"})
				var buf bytes.Buffer
				if rep.Err != nil || get.Err != nil || !json.Valid(rep.Body) || !json.Valid(get.Body) || e.Snapshot(&buf) != nil {
					errs <- fmt.Errorf("read failed: %v %v", rep.Err, get.Err)
					return
				}
			}
		}()
	}
	for i := 0; i < 900; i++ {
		id := fmt.Sprintf("d%03d", i%300)
		do(t, e, &Request{Op: OpPatchReported, DeviceID: id, Body: []byte(fmt.Sprintf(`{"n":%d}`, i))}, t0)
		if i%100 == 0 {
			do(t, e, &Request{Op: OpDeleteDevice, DeviceID: id}, t0)
			newDevice(t, e, id)
		}
	}
	close(done)
	for g := 0; g < 3; g++ {
		if err := <-errs; err != nil {
			t.Fatal(err)
		}
	}
}

func TestTwinCheckModelID(t *testing.T) {
	for _, ok := range []string{"dtmi:com:example:Thermostat;1", "dtmi:a;999999999", "dtmi:a:b_c:D9", "dtmi:dtdl:context;3.1",
		"dtmi:" + strings.Repeat("a", MaxModelIDBytes-7) + ";1"} {
		if err := CheckModelID(ok); err != nil {
			t.Errorf("%.40q: %v", ok, err)
		}
	}
	for _, bad := range []string{"", "dtmi:", "DTMI:a;1", "urn:a;1", "dtmi:a;0", "dtmi:a;01", "dtmi:a;1234567890", "dtmi:a;1.", "dtmi:a;",
		"dtmi:a_;1", "dtmi:_a;1", "dtmi:1a;1", "dtmi:a::b;1", "dtmi:a b;1", "dtmi:a;1;2", "dtmi:a\x00;1",
		"dtmi:" + strings.Repeat("a", MaxModelIDBytes-6) + ";1"} {
		if err := CheckModelID(bad); !errors.Is(err, ErrInvalid) {
			t.Errorf("%.40q: %v", bad, err)
		}
	}
}
