package statestore

import (
	"bytes"
	"fmt"
	"math/rand/v2"
	"sort"
	"strconv"
	"testing"
	"time"
)

type testRand struct{ *rand.Rand }

func newRand(seed uint64) *testRand {
	return &testRand{rand.New(rand.NewPCG(seed, seed*0x9e3779b97f4a7c15+1))}
}

func (r *testRand) intn(n int) int { return r.IntN(n) }

// randomRequest draws a request over a few keys and values: SET with any
// mix of NX/NEX/PX, GET, DEL, VDEL, sometimes fenced, sometimes with a
// dedup id.
func randomRequest(r *testRand, now time.Time) *Request {
	key := "k" + strconv.Itoa(r.intn(6))
	val := "v" + strconv.Itoa(r.intn(3))
	req := &Request{ClientID: "c" + strconv.Itoa(r.intn(2))}
	switch r.intn(10) {
	case 0, 1, 2, 3:
		args := []string{"SET", key, val}
		switch r.intn(4) {
		case 0:
			args = append(args, "NX")
		case 1:
			args = append(args, "NEX")
		}
		if r.intn(3) == 0 {
			args = append(args, "PX", strconv.Itoa(1+r.intn(200)))
		}
		req.Payload = cmd(args...)
		req.SetUserProperty(PropTimestamp, fmt.Sprintf("%d:%d:client", now.UnixMilli()-int64(r.intn(50)), r.intn(3)))
	case 4, 5:
		req.Payload = cmd("GET", key)
	case 6, 7:
		req.Payload = cmd("DEL", key)
	default:
		req.Payload = cmd("VDEL", key, val)
	}
	if r.intn(4) == 0 {
		// Tokens move forward with time, with some stale ones.
		req.SetUserProperty(PropFencingToken, fmt.Sprintf("%d:0:f", now.UnixMilli()-int64(r.intn(300))))
	}
	if r.intn(8) == 0 {
		req.DedupKey = []byte("id" + strconv.Itoa(r.intn(4)))
		req.DedupTTL = time.Duration(1+r.intn(2000)) * time.Millisecond
	}
	return req
}

type modelKey struct {
	value    string
	token    HLC
	expireAt int64
	version  HLC
}

// TestEngineModel runs random requests against the engine and a plain map
// model of the protocol's rules (conditions, fencing, expiry) and compares
// every reply and notification. The dedup cache is left out here (the
// scripts cover it).
func TestStateStoreEngineModel(t *testing.T) {
	seeds := 20
	if testing.Short() {
		seeds = 4
	}
	for seed := 1; seed <= seeds; seed++ {
		t.Run(strconv.Itoa(seed), func(t *testing.T) { runModel(t, uint64(seed), 2000) })
	}
}

func runModel(t *testing.T, seed uint64, steps int) {
	e := mustEngine(t, Options{})
	rng := newRand(seed)
	model := map[string]*modelKey{}
	now := t0
	watch := &Request{ClientID: "w", Payload: cmd("KEYNOTIFY", "k", "PREFIX")}
	if _, out, _ := e.Prepare(watch, now); string(out.Reply.Payload) != "+OK\r\n" {
		t.Fatalf("KEYNOTIFY: %q", out.Reply.Payload)
	}
	var last HLC
	seen := map[string]int{}
	defer func() {
		for _, k := range []string{"+OK\r\n", ":-1\r\n", ":0\r\n", ":1\r\n", "$-1\r\n", string(errorReply(ErrFencingRequired)), string(errorReply(ErrFencingStale)), "expired"} {
			if seen[k] == 0 && !t.Failed() {
				t.Errorf("seed %d: the random requests never produced %q: %v", seed, k, seen)
			}
		}
	}()
	for step := 0; step < steps; step++ {
		now = now.Add(time.Duration(rng.intn(30)) * time.Millisecond)
		req := randomRequest(rng, now)
		req.DedupKey = nil
		c, err := ParseCommand(req.Payload)
		if err != nil {
			t.Fatal(err)
		}
		nowMs := now.UnixMilli()
		// What the model expects to expire at this step (only applied entries expire).
		var expired []string
		if c.Verb != VerbGet {
			for k, m := range model {
				if m.expireAt != 0 && m.expireAt <= nowMs {
					expired = append(expired, k)
				}
			}
			// Earliest expiry first, ties by key.
			sort.Slice(expired, func(i, j int) bool {
				a, b := model[expired[i]], model[expired[j]]
				if a.expireAt != b.expireAt {
					return a.expireAt < b.expireAt
				}
				return expired[i] < expired[j]
			})
			for _, k := range expired {
				delete(model, k)
			}
		}
		wantReply, wantNote := modelExec(model, c, req, nowMs)
		seen[wantReply]++
		seen["expired"] += len(expired)

		entry, out, needsLog := e.Prepare(req, now)
		if needsLog != (c.Verb != VerbGet) {
			t.Fatalf("step %d: %q needsLog=%v", step, req.Payload, needsLog)
		}
		if needsLog {
			out = apply(t, e, entry, now)
		}
		ctx := fmt.Sprintf("seed %d step %d: %q ft=%q", seed, step, req.Payload, req.FencingToken)
		if string(out.Reply.Payload) != wantReply {
			t.Fatalf("%s: reply %q, model %q", ctx, out.Reply.Payload, wantReply)
		}
		// Versions: a SET's reply version is what GET returns later;
		// every applied change is newer than the last.
		if c.Verb == VerbSet && wantReply == "+OK\r\n" {
			model[string(c.Key)].version = out.Reply.Version
			ts, _ := ParseHLC(req.Timestamp)
			if out.Reply.Version.Compare(ts) <= 0 {
				t.Fatalf("%s: version %v not after __ts %v", ctx, out.Reply.Version, ts)
			}
		}
		if m := model[string(c.Key)]; m != nil && (wantReply[0] == '$' && wantReply != "$-1\r\n" || wantReply == ":-1\r\n") && out.Reply.Version != m.version {
			t.Fatalf("%s: version %v, the key's is %v", ctx, out.Reply.Version, m.version)
		}
		var notes []string
		for _, n := range out.Notifications {
			if n.ClientID != "w" || n.Version.Compare(last) <= 0 {
				t.Fatalf("%s: bad notification %+v after %v", ctx, n, last)
			}
			last = n.Version
			notes = append(notes, n.Op.String()+" "+n.Key+" "+string(n.Value))
		}
		var want []string
		for _, k := range expired {
			want = append(want, "DELETE "+k+" ")
		}
		if wantNote != "" {
			want = append(want, wantNote)
		}
		if fmt.Sprint(notes) != fmt.Sprint(want) {
			t.Fatalf("%s: notifications %q, model %q", ctx, notes, want)
		}
	}
}

// modelExec applies one command to the model and returns the expected
// reply payload and notification ("" for none).
func modelExec(model map[string]*modelKey, c Command, req *Request, nowMs int64) (string, string) {
	key := string(c.Key)
	m := model[key]
	if c.Verb == VerbGet {
		if m == nil || m.expireAt != 0 && m.expireAt <= nowMs {
			return "$-1\r\n", ""
		}
		return string(bulkReply([]byte(m.value))), ""
	}
	var ft HLC
	if req.HasFencingToken {
		ft, _ = ParseHLC(req.FencingToken)
	}
	if m != nil && !m.token.IsZero() {
		if ft.IsZero() {
			return string(errorReply(ErrFencingRequired)), ""
		}
		if ft.Compare(m.token) < 0 {
			return string(errorReply(ErrFencingStale)), ""
		}
	}
	switch c.Verb {
	case VerbSet:
		if m != nil && (c.Cond == CondNX || c.Cond == CondNEX && m.value != string(c.Value)) {
			return ":-1\r\n", ""
		}
		if m == nil {
			m = &modelKey{}
			model[key] = m
		}
		m.value = string(c.Value)
		if ft.Compare(m.token) > 0 {
			m.token = ft
		}
		m.expireAt = 0
		if c.Expiry > 0 {
			m.expireAt = nowMs + c.Expiry.Milliseconds()
		}
		return "+OK\r\n", "SET " + key + " " + m.value
	case VerbVDel:
		if m != nil && m.value != string(c.Value) {
			return ":-1\r\n", ""
		}
	}
	if m == nil {
		return ":0\r\n", ""
	}
	delete(model, key)
	return ":1\r\n", "DELETE " + key + " "
}

// Prepare and Apply from several goroutines (the race detector checks the
// locking), with the log order kept by one appender.
func TestStateStoreEngineConcurrentUse(t *testing.T) {
	e := mustEngine(t, Options{})
	type pending struct {
		entry []byte
		done  chan Outcome
	}
	logCh := make(chan pending)
	applierDone := make(chan struct{})
	go func() {
		defer close(applierDone)
		for p := range logCh {
			out, err := e.Apply(p.entry, time.Now())
			if err != nil {
				t.Error(err)
			}
			p.done <- out
		}
	}()
	workersDone := make(chan struct{})
	for w := 0; w < 4; w++ {
		go func(w int) {
			defer func() { workersDone <- struct{}{} }()
			for i := 0; i < 200; i++ {
				now := time.Now()
				key := "k" + strconv.Itoa(i%7)
				r := &Request{ClientID: "c" + strconv.Itoa(w), Payload: cmd("SET", key, "v", "PX", "5")}
				r.SetUserProperty(PropTimestamp, fmt.Sprintf("%d:0:c", now.UnixMilli()))
				if i%3 == 0 {
					r.Payload = cmd("KEYNOTIFY", key)
				}
				if i%5 == 0 {
					r.Payload = cmd("GET", key)
				}
				entry, _, needsLog := e.Prepare(r, now)
				if needsLog {
					p := pending{entry, make(chan Outcome, 1)}
					logCh <- p
					<-p.done
				}
				if i%50 == 0 {
					e.DropClient(r.ClientID)
					_ = e.Stats()
					_, _ = e.NextExpiry()
					var b bytes.Buffer
					_ = e.Snapshot(&b)
				}
			}
		}(w)
	}
	for w := 0; w < 4; w++ {
		<-workersDone
	}
	close(logCh)
	<-applierDone
	if e.Stats().Keys == 0 {
		t.Error("nothing was written")
	}
}
