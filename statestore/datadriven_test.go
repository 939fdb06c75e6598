package statestore

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
// broker would (Prepare, then Apply at the simulated store time) and pin
// every reply and notification. Run `go test ./statestore -run
// TestStateStoreScripts -rewrite` to regenerate the expected outputs after
// a deliberate change, then review the diff.
//
// Script syntax: a case is a directive line, optional input lines, a line
// "----", and the expected output up to a blank line. Lines starting with
// '#' between cases are comments. Directives:
//
//	new [node=N] [max-keys=N] [max-bytes=N] [max-key=N] [max-value=N] [history=N] [history-bytes=N] [dedup=N] [watches=N]
//	clock set=<unix ms> | advance=<duration>
//	req [client=C] [ts=<hlc>|now|now+<dur>|now-<dur>|$var] [ft=...] [dedup=ID ttl=<dur>] [save=var] [store=+<dur>]
//	    input: the command as words (Go-quoted words allowed) or `raw "<go-quoted payload>"`
//	expire                  PrepareExpire at the clock, then Apply
//	get <key>               Engine.Get at the clock
//	drop client=C           DropClient
//	stats                   Engine.Stats
//	snapshot                Snapshot, Restore into a new engine, compare bytes
var rewrite = flag.Bool("rewrite", false, "rewrite the expected output of datadriven scripts under testdata/")

func TestStateStoreScripts(t *testing.T) {
	datadriven.RunGlob(t, "testdata/*.txt", *rewrite, func(t *testing.T) func(*datadriven.Case) string { return newHarness(t).run })
}

type harness struct {
	t    *testing.T
	e    *Engine
	now  time.Time
	vars map[string]string
}

func newHarness(t *testing.T) *harness {
	h := &harness{t: t, now: time.UnixMilli(1696374425000), vars: map[string]string{}}
	h.e = mustEngine(t, Options{})
	return h
}

func mustEngine(t testing.TB, o Options) *Engine {
	t.Helper()
	e, err := New(o, nil)
	if err != nil {
		t.Fatal(err)
	}
	return e
}

func (h *harness) run(c *datadriven.Case) (out string) {
	defer func() {
		if r := recover(); r != nil {
			out = fmt.Sprintf("panic: %v\n", r)
		}
	}()
	name, kv, pos := c.Args()
	var b strings.Builder
	switch name {
	case "new":
		o := Options{NodeID: kv["node"]}
		ints := map[string]*int{"max-keys": &o.MaxKeys, "max-key": &o.MaxKeySize, "max-value": &o.MaxValueSize,
			"history": &o.HistoryLen, "dedup": &o.DedupLen, "watches": &o.MaxWatchesPerClient}
		for k, p := range ints {
			if v, ok := kv[k]; ok {
				*p = h.atoi(v)
			}
		}
		if v, ok := kv["max-bytes"]; ok {
			o.MaxBytes = int64(h.atoi(v))
		}
		if v, ok := kv["history-bytes"]; ok {
			o.HistoryBytes = int64(h.atoi(v))
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
			h.now = h.now.Add(h.dur(v))
		}
		return fmt.Sprintf("now=%d\n", h.now.UnixMilli())
	case "req":
		return h.req(c, kv)
	case "expire":
		entry, ok := h.e.PrepareExpire(h.now)
		if !ok {
			return "nothing due\n"
		}
		o, err := h.e.Apply(entry, h.now)
		if err != nil {
			return fmt.Sprintf("apply error: %v\n", err)
		}
		if len(o.Notifications) == 0 {
			b.WriteString("expired, no watchers\n")
		}
		writeNotes(&b, o.Notifications)
		return b.String()
	case "get":
		v, ver, ok := h.e.Get([]byte(pos[0]), h.now)
		if !ok {
			return "absent\n"
		}
		return fmt.Sprintf("%q ts=%s\n", v, ver)
	case "drop":
		return fmt.Sprintf("dropped %d\n", h.e.DropClient(kv["client"]))
	case "stats":
		s := h.e.Stats()
		return fmt.Sprintf("keys=%d bytes=%d expiring=%d history=%d cached=%d watches=%d applied=%s floor=%s\n",
			s.Keys, s.Bytes, s.Expiring, s.History, s.Cached, s.Watches, fmtHLC(s.Applied), fmtHLC(s.HistoryMin))
	case "snapshot":
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
		return fmt.Sprintf("ok, %d bytes\n", s1.Len())
	}
	h.t.Fatalf("%s: unknown directive %q", c.Pos, name)
	return ""
}

func (h *harness) atoi(s string) int {
	n, err := strconv.Atoi(s)
	if err != nil {
		h.t.Fatal(err)
	}
	return n
}

func (h *harness) dur(s string) time.Duration {
	d, err := time.ParseDuration(s)
	if err != nil {
		h.t.Fatal(err)
	}
	return d
}

// hlcArg resolves a ts= or ft= argument.
func (h *harness) hlcArg(v string) string {
	switch {
	case strings.HasPrefix(v, "$"):
		s, ok := h.vars[v[1:]]
		if !ok {
			h.t.Fatalf("no variable %s", v)
		}
		return s
	case v == "now":
		return fmt.Sprintf("%d:0:Client1", h.now.UnixMilli())
	case strings.HasPrefix(v, "now+"):
		return fmt.Sprintf("%d:0:Client1", h.now.Add(h.dur(v[4:])).UnixMilli())
	case strings.HasPrefix(v, "now-"):
		return fmt.Sprintf("%d:0:Client1", h.now.Add(-h.dur(v[4:])).UnixMilli())
	}
	return v
}

func (h *harness) req(c *datadriven.Case, kv map[string]string) string {
	r := &Request{ClientID: kv["client"]}
	if v, ok := kv["ts"]; ok {
		r.SetUserProperty(PropTimestamp, h.hlcArg(v))
	}
	if v, ok := kv["ft"]; ok {
		r.SetUserProperty(PropFencingToken, h.hlcArg(v))
	}
	if v, ok := kv["dedup"]; ok {
		r.DedupKey = DedupKey([]byte(v), "resp/topic")
		r.DedupTTL = h.dur(kv["ttl"])
	}
	in := strings.TrimSpace(strings.Join(c.Input, " "))
	if raw, ok := strings.CutPrefix(in, "raw "); ok {
		p, err := strconv.Unquote(raw)
		if err != nil {
			h.t.Fatalf("%s: %v", c.Pos, err)
		}
		r.Payload = []byte(p)
	} else {
		r.Payload = AppendRequest(nil, words(h.t, c.Pos, in)...)
	}
	entry, out, needsLog := h.e.Prepare(r, h.now)
	via := ""
	if needsLog {
		if out.Reply.Payload != nil || out.Notifications != nil {
			return "Prepare returned both an entry and an outcome\n"
		}
		st := h.now
		if v, ok := kv["store"]; ok {
			st = st.Add(h.dur(strings.TrimPrefix(v, "+")))
		}
		var err error
		if out, err = h.e.Apply(entry, st); err != nil {
			return fmt.Sprintf("apply error: %v\n", err)
		}
		via = " (log)"
	}
	var b strings.Builder
	fmt.Fprintf(&b, "%q", out.Reply.Payload)
	if !out.Reply.Version.IsZero() {
		fmt.Fprintf(&b, " ts=%s", out.Reply.Version)
	}
	b.WriteString(via + "\n")
	if v, ok := kv["save"]; ok {
		h.vars[v] = out.Reply.Version.String()
	}
	writeNotes(&b, out.Notifications)
	return b.String()
}

func writeNotes(b *strings.Builder, notes []Notification) {
	for _, n := range notes {
		fmt.Fprintf(b, "notify %s %s %q", n.ClientID, n.Op, n.Key)
		if n.Op == OpSet {
			fmt.Fprintf(b, " %q", n.Value)
		}
		fmt.Fprintf(b, " ts=%s\n", n.Version)
	}
}

// words splits a command line into arguments; a word in double quotes is
// a Go string literal (for empty or binary arguments).
func words(t *testing.T, pos, s string) [][]byte {
	var out [][]byte
	for s = strings.TrimSpace(s); s != ""; s = strings.TrimSpace(s) {
		if s[0] == '"' {
			end := 1
			for end < len(s) && (s[end] != '"' || s[end-1] == '\\') {
				end++
			}
			w, err := strconv.Unquote(s[:end+1])
			if err != nil {
				t.Fatalf("%s: %v", pos, err)
			}
			out = append(out, []byte(w))
			s = s[end+1:]
			continue
		}
		w, rest, _ := strings.Cut(s, " ")
		out = append(out, []byte(w))
		s = rest
	}
	return out
}

func fmtHLC(h HLC) string {
	if h.IsZero() {
		return "none"
	}
	return h.String()
}
