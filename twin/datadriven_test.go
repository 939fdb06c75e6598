package twin

import (
	"bytes"
	"flag"
	"fmt"
	"strconv"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/datadriven"
)

// The datadriven scripts under testdata/*.txt drive an Engine the way a
// broker does (Prepare, then Apply at the simulated store time for
// writes) and pin every reply, document, event and desired notification
// byte for byte. `go test ./twin -run TestTwinScripts -rewrite`
// regenerates the expected outputs after a deliberate change; review the
// diff.
//
// Directives:
//
//	new [max-modules=N] [index=path,path]
//	clock set=<unix ms> | advance=<duration>
//	req op=<Op name> [device=D] [module=M] [if-match=E] [if-version=N]
//	    [mode=upsert|create|update] [connected=true|false] [conn=ID]
//	    [after=K] [limit=N] [store=+<duration>]
//	    input: the JSON body (lines joined by newlines)
//	twin device=D [module=M]   the full twin document
//	snapshot                   Snapshot, Restore into a new engine, compare
//	stats                      Engine.Stats
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of datadriven scripts under testdata/")

func TestTwinScripts(t *testing.T) {
	datadriven.RunGlob(t, "testdata/*.txt", *rewrite, func(t *testing.T) func(*datadriven.Case) string {
		h := &harness{t: t, now: time.UnixMilli(1696374425000)}
		h.e = mustEngine(t, Options{Rand: &counterReader{}})
		// cloudToDeviceMessageCount is read at the script's clock.
		prev := wallNow
		wallNow = func() int64 { return h.now.UnixMilli() }
		t.Cleanup(func() { wallNow = prev })
		return h.run
	})
}

// counterReader yields 0, 1, 2, ... (mod 256): a fixed "random" source so
// generated keys and generation ids are pinned.
type counterReader struct{ n byte }

func (c *counterReader) Read(p []byte) (int, error) {
	for i := range p {
		p[i] = c.n
		c.n++
	}
	return len(p), nil
}

func mustEngine(t testing.TB, o Options) *Engine {
	t.Helper()
	e, err := New(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

type harness struct {
	t   *testing.T
	e   *Engine
	now time.Time
}

func (h *harness) run(c *datadriven.Case) (out string) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprintf("panic: %v\n", r)
		}
	}()
	name, kv, _ := c.Args()
	switch name {
	case "new":
		o := Options{Rand: &counterReader{}}
		if v, ok := kv["max-modules"]; ok {
			o.MaxModulesPerDevice = h.atoi(v)
		}
		if v, ok := kv["index"]; ok {
			o.IndexPaths = strings.Split(v, ",")
		}
		e, err := New(o, nil)
		if err != nil {
			return fmt.Sprintf("error: %v\n", err)
		}
		h.e = e
		return "ok\n"
	case "clock":
		if v, ok := kv["set"]; ok {
			h.now = time.UnixMilli(int64(h.atoi(v)))
		}
		if v, ok := kv["advance"]; ok {
			d, err := time.ParseDuration(v)
			if err != nil {
				h.t.Fatal(err)
			}
			h.now = h.now.Add(d)
		}
		return fmt.Sprintf("now=%d %s\n", h.now.UnixMilli(), FormatTime(h.now.UnixMilli()))
	case "req":
		return h.req(c, kv)
	case "twin":
		doc, ok := h.e.Get(kv["device"], kv["module"])
		if !ok {
			return "absent\n"
		}
		return string(doc) + "\n"
	case "stats":
		s := h.e.Stats()
		return fmt.Sprintf("devices=%d modules=%d connected=%d index=%d\n", s.Devices, s.Modules, s.Connected, s.IndexEntries)
	case "snapshot":
		return h.snapshot()
	}
	h.t.Fatalf("%s: unknown directive %q", c.Pos, name)
	return ""
}

func (h *harness) snapshot() string {
	var s1, s2 bytes.Buffer
	if err := h.e.Snapshot(&s1); err != nil {
		return fmt.Sprintf("error: %v\n", err)
	}
	e2 := mustEngine(h.t, h.e.Options())
	if err := e2.Restore(bytes.NewReader(s1.Bytes())); err != nil {
		return fmt.Sprintf("restore error: %v\n", err)
	}
	if err := e2.Snapshot(&s2); err != nil {
		return fmt.Sprintf("error: %v\n", err)
	}
	if !bytes.Equal(s1.Bytes(), s2.Bytes()) {
		return "snapshot differs after restore\n"
	}
	if a, b := h.e.Stats(), e2.Stats(); a != b {
		return fmt.Sprintf("stats differ after restore: %+v vs %+v\n", a, b)
	}
	for k := range h.e.recs {
		r := h.e.recs[k]
		d1, _ := h.e.Get(r.deviceID, r.moduleID)
		d2, _ := e2.Get(r.deviceID, r.moduleID)
		if !bytes.Equal(d1, d2) {
			return fmt.Sprintf("twin %s differs after restore\n", k)
		}
	}
	return fmt.Sprintf("ok, %d bytes, %d twins\n", s1.Len(), len(h.e.recs))
}

func (h *harness) atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func opByName(t *testing.T, name string) Op {
	for i, n := range opNames {
		if n == name && i > 0 {
			return Op(i)
		}
	}
	t.Fatalf("unknown op %q", name)
	return 0
}

func (h *harness) req(c *datadriven.Case, kv map[string]string) string {
	r := &Request{Op: opByName(h.t, kv["op"]), DeviceID: kv["device"], ModuleID: kv["module"], IfMatch: kv["if-match"],
		ConnID: kv["conn"], After: kv["after"], Body: []byte(strings.Join(c.Input, "\n"))}
	if v, ok := kv["if-version"]; ok {
		r.IfVersion = int64(h.atoi(v))
	}
	if v, ok := kv["limit"]; ok {
		r.Limit = h.atoi(v)
	}
	switch kv["mode"] {
	case "create":
		r.Mode = PutCreate
	case "update":
		r.Mode = PutUpdate
	}
	r.Connected = kv["connected"] == "true"
	entry, rep, needsLog := h.e.Prepare(r)
	var out Outcome
	via := ""
	if needsLog {
		st := h.now
		if v, ok := kv["store"]; ok {
			d, err := time.ParseDuration(strings.TrimPrefix(v, "+"))
			if err != nil {
				h.t.Fatal(err)
			}
			st = st.Add(d)
		}
		var err error
		if out, err = h.e.Apply(entry, st); err != nil {
			return fmt.Sprintf("apply error: %v\n", err)
		}
		via = " (log)"
	} else {
		out.Reply = rep
	}
	var b strings.Builder
	writeReply(&b, &out.Reply, via)
	for _, ev := range out.Events {
		fmt.Fprintf(&b, "event %s %s v=%d etag=%s at=%s %s\n", ev.OpType, TwinKey(ev.DeviceID, ev.ModuleID), ev.Version, ev.Etag, FormatTime(ev.Time), ev.Body)
	}
	for _, d := range out.Desired {
		if d.Revoked() {
			fmt.Fprintf(&b, "revoked %s\n", d.Key())
			continue
		}
		fmt.Fprintf(&b, "desired %s v=%d %s\n", d.Key(), d.Version, d.Patch)
	}
	return b.String()
}

func writeReply(b *strings.Builder, rep *Reply, via string) {
	fmt.Fprintf(b, "%d", rep.Status)
	if rep.Err != nil {
		fmt.Fprintf(b, " %s", rep.Err.Code)
	}
	if rep.Etag != "" {
		fmt.Fprintf(b, " etag=%s", rep.Etag)
	}
	if rep.Version != 0 {
		fmt.Fprintf(b, " version=%d", rep.Version)
	}
	if rep.Next != "" {
		fmt.Fprintf(b, " next=%s", rep.Next)
	}
	b.WriteString(via + "\n")
	if rep.Err != nil {
		fmt.Fprintf(b, "error: %s\n", rep.Err.Msg)
	}
	if len(rep.Body) > 0 {
		fmt.Fprintf(b, "%s\n", rep.Body)
	}
}
