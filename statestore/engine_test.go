package statestore

import (
	"bytes"
	"errors"
	"strconv"
	"testing"
	"time"
)

func TestStateStoreEngineOptions(t *testing.T) {
	d := DefaultOptions()
	if d.NodeID != "StateStore" || d.MaxClockSkew != time.Minute || d.MaxKeys != DefaultMaxKeys || d.HistoryLen != 1000 {
		t.Errorf("defaults %+v", d)
	}
	if err := (Options{}).Validate(); err != nil {
		t.Errorf("zero options: %v", err)
	}
	for _, o := range []Options{
		{NodeID: "a:b"}, {NodeID: string(make([]byte, 256))}, {MaxKeys: -1}, {MaxBytes: -1}, {MaxKeySize: -1},
		{MaxValueSize: maxFieldLen + 1}, {MaxClockSkew: -time.Second}, {HistoryLen: -1}, {HistoryBytes: -1}, {DedupLen: -1},
		{MaxWatchesPerClient: -1},
	} {
		if err := o.Validate(); !errors.Is(err, ErrBadOptions) {
			t.Errorf("%+v: %v", o, err)
		}
		if _, err := New(o, nil); !errors.Is(err, ErrBadOptions) {
			t.Errorf("New(%+v): %v", o, err)
		}
	}
	e := mustEngine(t, Options{NodeID: "shard-7"})
	r := &Request{Payload: cmd("SET", "k", "v")}
	r.SetUserProperty(PropTimestamp, "1:0:c")
	r.SetUserProperty("$partition", "ignored")
	if out := apply(t, e, prepare(t, e, t0, r), t0); out.Reply.Version.Node != "shard-7" {
		t.Errorf("version %v does not carry NodeID", out.Reply.Version)
	}
}

// Several entries in flight: Prepare decides nothing that depends on the
// table, Apply does, in log order. Two SET NX prepared together: the
// first applied wins. A redelivered request logged twice is executed once.
func TestStateStoreEnginePipelinedEntries(t *testing.T) {
	e := mustEngine(t, Options{})
	ts := func(r *Request) *Request { r.SetUserProperty(PropTimestamp, "1696374425000:0:c"); return r }
	a := prepare(t, e, t0, ts(&Request{Payload: cmd("SET", "lock", "A", "NX")}))
	b := prepare(t, e, t0, ts(&Request{Payload: cmd("SET", "lock", "B", "NX")}))
	dup := &Request{Payload: cmd("DEL", "lock"), DedupKey: []byte("x"), DedupTTL: time.Second}
	d1 := prepare(t, e, t0, dup)
	d2 := prepare(t, e, t0, dup) // not in the cache yet: logged again
	oa, ob := apply(t, e, a, t0), apply(t, e, b, t0)
	if string(oa.Reply.Payload) != "+OK\r\n" || string(ob.Reply.Payload) != ":-1\r\n" || ob.Reply.Version != oa.Reply.Version {
		t.Fatalf("NX race: %q %v / %q %v", oa.Reply.Payload, oa.Reply.Version, ob.Reply.Payload, ob.Reply.Version)
	}
	o1, o2 := apply(t, e, d1, t0), apply(t, e, d2, t0)
	if string(o1.Reply.Payload) != ":1\r\n" || string(o2.Reply.Payload) != ":1\r\n" || o1.Reply.Version != o2.Reply.Version {
		t.Fatalf("duplicate DEL: %q / %q", o1.Reply.Payload, o2.Reply.Payload)
	}
	// A third copy after the reply is cached is answered by Prepare.
	if _, out, needsLog := e.Prepare(dup, t0); needsLog || string(out.Reply.Payload) != ":1\r\n" {
		t.Fatalf("cached DEL: %q %v", out.Reply.Payload, needsLog)
	}
	// ... until its time is up (store time), after which it runs again.
	later := t0.Add(time.Second)
	if _, out, needsLog := e.Prepare(dup, later); !needsLog {
		t.Fatalf("expired cache entry answered: %q", out.Reply.Payload)
	}
}

func TestStateStoreEngineExpirySchedule(t *testing.T) {
	e := mustEngine(t, Options{})
	if _, ok := e.NextExpiry(); ok {
		t.Error("NextExpiry on an empty engine")
	}
	if _, ok := e.PrepareExpire(t0.Add(time.Hour)); ok {
		t.Error("PrepareExpire with nothing to expire")
	}
	set := func(key, px string, at time.Time) {
		r := &Request{Payload: cmd("SET", key, "v", "PX", px)}
		r.SetUserProperty(PropTimestamp, "1:0:c")
		apply(t, e, prepare(t, e, at, r), at)
	}
	set("b", "300", t0)
	set("a", "100", t0)
	set("c", "100", t0)
	if at, ok := e.NextExpiry(); !ok || !at.Equal(t0.Add(100*time.Millisecond)) {
		t.Errorf("NextExpiry = %v %v", at, ok)
	}
	// A SET without PX clears the expiry.
	r := &Request{Payload: cmd("SET", "c", "v")}
	r.SetUserProperty(PropTimestamp, "1:0:c")
	apply(t, e, prepare(t, e, t0, r), t0)
	if _, ok := e.PrepareExpire(t0.Add(99 * time.Millisecond)); ok {
		t.Error("expire entry before anything is due")
	}
	entry, ok := e.PrepareExpire(t0.Add(100 * time.Millisecond))
	if !ok {
		t.Fatal("nothing due at 100 ms")
	}
	// Expiry follows the store time given to Apply, not the Prepare time.
	if out := apply(t, e, entry, t0.Add(50*time.Millisecond)); len(out.Notifications) != 0 || e.Stats().Keys != 3 {
		t.Errorf("expired early: %+v", e.Stats())
	}
	apply(t, e, entry, t0.Add(time.Second))
	if st := e.Stats(); st.Keys != 1 || st.Expiring != 0 {
		t.Errorf("after expiry: %+v", st)
	}
	if _, _, ok := e.Get([]byte("c"), t0.Add(time.Hour)); !ok {
		t.Error("c lost although its expiry was cleared")
	}
}

// A front end that parsed the payload passes the Command along: Prepare
// uses it as it is and produces the same entries and replies as when it
// parses the payload itself (two engines fed the same requests).
func TestStateStoreEnginePreparsedCommand(t *testing.T) {
	own, given := mustEngine(t, Options{}), mustEngine(t, Options{})
	for _, args := range [][]string{
		{"SET", "k", "v", "NX", "PX", "1500"}, {"GET", "k"}, {"SET", "k", "w"}, {"VDEL", "k", "w"},
		{"KEYNOTIFY", "k"}, {"DEL", "k"}, {"GET", "k"},
	} {
		payload := cmd(args...)
		parsed, err := ParseCommand(payload)
		if err != nil {
			t.Fatal(err)
		}
		a := &Request{Payload: payload, ClientID: "c", DedupKey: []byte(args[0]), DedupTTL: time.Second}
		b := *a
		b.Command = &parsed
		a.SetUserProperty(PropTimestamp, "1696374425000:0:c")
		b.SetUserProperty(PropTimestamp, "1696374425000:0:c")
		ea, oa, la := own.Prepare(a, t0)
		eb, ob, lb := given.Prepare(&b, t0)
		if string(ea) != string(eb) || la != lb || string(oa.Reply.Payload) != string(ob.Reply.Payload) || oa.Reply.Version != ob.Reply.Version {
			t.Fatalf("%v: parsed by Prepare %q %q %v, given %q %q %v", args, ea, oa.Reply.Payload, la, eb, ob.Reply.Payload, lb)
		}
		if la {
			ra, rb := apply(t, own, ea, t0), apply(t, given, eb, t0)
			if string(ra.Reply.Payload) != string(rb.Reply.Payload) || ra.Reply.Version != rb.Reply.Version {
				t.Fatalf("%v: applied %q / %q", args, ra.Reply.Payload, rb.Reply.Payload)
			}
		}
	}
}

// PrepareAppend into one reused buffer: each entry is the one Prepare
// builds, and what Apply kept (values, the GET reply, the cached reply of
// a dedup key) survives the buffer's reuse by the next entry.
func TestStateStoreEnginePrepareAppendReuse(t *testing.T) {
	e, ref := mustEngine(t, Options{}), mustEngine(t, Options{})
	var buf []byte
	for i, v := range []string{"first-value", "second", "third-and-longest-value"} {
		r := &Request{Payload: cmd("SET", "k"+v[:1], v), DedupKey: []byte("req-" + v), DedupTTL: time.Minute}
		r.SetUserProperty(PropTimestamp, "1696374425000:0:c")
		entry, _, needsLog := e.PrepareAppend(buf[:0], r, t0)
		want, _, _ := ref.Prepare(r, t0)
		if !needsLog || string(entry) != string(want) {
			t.Fatalf("entry %d: %q, want %q", i, entry, want)
		}
		apply(t, e, entry, t0)
		buf = entry
	}
	for _, v := range []string{"first-value", "second", "third-and-longest-value"} {
		if got, _, ok := e.Get([]byte("k"+v[:1]), t0); !ok || string(got) != v {
			t.Errorf("k%s = %q %v, want %q", v[:1], got, ok, v)
		}
		_, out, _ := e.Prepare(&Request{Payload: cmd("GET", "k"+v[:1])}, t0)
		if want := "$" + strconv.Itoa(len(v)) + "\r\n" + v + "\r\n"; string(out.Reply.Payload) != want {
			t.Errorf("GET k%s: %q, want %q", v[:1], out.Reply.Payload, want)
		}
		r := &Request{Payload: cmd("SET", "k"+v[:1], v), DedupKey: []byte("req-" + v), DedupTTL: time.Minute}
		r.SetUserProperty(PropTimestamp, "1696374425000:0:c")
		if _, out, needsLog := e.Prepare(r, t0); needsLog || string(out.Reply.Payload) != "+OK\r\n" {
			t.Errorf("redelivered SET k%s: %q logged %v, want the cached +OK", v[:1], out.Reply.Payload, needsLog)
		}
	}
}

// Reply.VersionString is Version.String() for every reply (a SET's, a
// GET's from the key's kept text, a restored key's first GET, a refused
// NX's) and "" for a reply without a version.
func TestStateStoreEngineReplyVersionString(t *testing.T) {
	e := mustEngine(t, Options{})
	check := func(what string, r Reply) {
		t.Helper()
		want := ""
		if !r.Version.IsZero() {
			want = r.Version.String()
		}
		if got := r.VersionString(); got != want {
			t.Errorf("%s: VersionString %q, want %q", what, got, want)
		}
	}
	set := &Request{Payload: cmd("SET", "k", "v")}
	set.SetUserProperty(PropTimestamp, "1696374425000:0:c")
	out := apply(t, e, prepare(t, e, t0, set), t0)
	check("SET", out.Reply)
	_, get, _ := e.Prepare(&Request{Payload: cmd("GET", "k")}, t0)
	check("GET", get.Reply)
	if get.Reply.VersionString() != out.Reply.VersionString() {
		t.Errorf("GET version %q, SET's %q", get.Reply.VersionString(), out.Reply.VersionString())
	}
	nx := &Request{Payload: cmd("SET", "k", "w", "NX")}
	nx.SetUserProperty(PropTimestamp, "1696374425000:0:c")
	check("SET NX refused", apply(t, e, prepare(t, e, t0, nx), t0).Reply)
	_, miss, _ := e.Prepare(&Request{Payload: cmd("GET", "nope")}, t0)
	check("GET miss", miss.Reply)
	var snap bytes.Buffer
	if err := e.Snapshot(&snap); err != nil {
		t.Fatal(err)
	}
	r := mustEngine(t, Options{})
	if err := r.Restore(&snap); err != nil {
		t.Fatal(err)
	}
	_, restored, _ := r.Prepare(&Request{Payload: cmd("GET", "k")}, t0)
	check("GET restored", restored.Reply)
	if restored.Reply.VersionString() != out.Reply.VersionString() {
		t.Errorf("restored GET version %q, SET's %q", restored.Reply.VersionString(), out.Reply.VersionString())
	}
}
