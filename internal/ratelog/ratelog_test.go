package ratelog

import (
	"bytes"
	"encoding/json"
	"fmt"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"
)

type fakeClock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *fakeClock) now() time.Time {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.t
}

func (c *fakeClock) advance(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

func TestRatelogAllowOnePerIntervalWithCount(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := New(time.Second, clk.now)
	if ok, n := l.Allow("a"); !ok || n != 0 {
		t.Fatalf("first line: ok=%v n=%d", ok, n)
	}
	for range 5 {
		if ok, _ := l.Allow("a"); ok {
			t.Fatal("second line within the interval allowed")
		}
	}
	if ok, _ := l.Allow("b"); !ok {
		t.Fatal("another reason is limited separately")
	}
	clk.advance(999 * time.Millisecond)
	if ok, _ := l.Allow("a"); ok {
		t.Fatal("allowed before the interval passed")
	}
	clk.advance(time.Millisecond)
	if ok, n := l.Allow("a"); !ok || n != 6 {
		t.Fatalf("after the interval: ok=%v suppressed=%d, want true 6", ok, n)
	}
	clk.advance(time.Second)
	if ok, n := l.Allow("a"); !ok || n != 0 {
		t.Fatalf("quiet interval: ok=%v suppressed=%d", ok, n)
	}
}

func TestRatelogNilLimiterAllows(t *testing.T) {
	var l *Limiter
	if ok, n := l.Allow("x"); !ok || n != 0 {
		t.Fatal("nil limiter must allow")
	}
}

func TestRatelogKeysBounded(t *testing.T) {
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := New(time.Minute, clk.now)
	allowed := 0
	for i := range 10 * MaxKeys {
		if ok, _ := l.Allow(fmt.Sprint("peer-", i)); ok {
			allowed++
			// Each key once, then suppressed: none can be swept.
			l.Allow(fmt.Sprint("peer-", i))
		}
	}
	if len(l.keys) > MaxKeys {
		t.Fatalf("%d keys tracked, bound is %d", len(l.keys), MaxKeys)
	}
	// MaxKeys-1 distinct keys, then the overflow key lets one line through.
	if allowed != MaxKeys {
		t.Fatalf("%d lines allowed for %d distinct keys, want %d", allowed, 10*MaxKeys, MaxKeys)
	}
	// Once the interval passed, keys with nothing suppressed are swept.
	clk.advance(time.Minute)
	for i := range MaxKeys {
		l.Allow(fmt.Sprint("peer-", i))
	}
	if len(l.keys) > MaxKeys {
		t.Fatalf("%d keys tracked after sweep", len(l.keys))
	}
}

func jsonLines(t *testing.T, buf *bytes.Buffer) []map[string]any {
	t.Helper()
	var out []map[string]any
	for _, line := range strings.Split(strings.TrimSpace(buf.String()), "\n") {
		if line == "" {
			continue
		}
		var m map[string]any
		if err := json.Unmarshal([]byte(line), &m); err != nil {
			t.Fatalf("bad log line %q: %v", line, err)
		}
		out = append(out, m)
	}
	return out
}

func TestRatelogHandlerLimitsFloodKeepsDebugAndAttrs(t *testing.T) {
	var buf bytes.Buffer
	clk := &fakeClock{t: time.Unix(1000, 0)}
	base := slog.New(slog.NewJSONHandler(&buf, &slog.HandlerOptions{Level: slog.LevelDebug}))
	log := slog.New(NewHandler(base.Handler(), New(time.Second, clk.now), slog.LevelInfo)).With("component", "x")
	for i := range 1000 {
		log.Warn("closing connection", "peer", fmt.Sprint("10.0.0.1:", i))
		log.Info("refused", "peer", i)
	}
	log.Debug("debug line")
	log.Debug("debug line")
	clk.advance(time.Second)
	log.Warn("closing connection", "peer", "last")
	lines := jsonLines(t, &buf)
	if len(lines) != 5 {
		t.Fatalf("%d lines for a flood of 2001, want 5:\n%s", len(lines), buf.String())
	}
	last := lines[4]
	if last["msg"] != "closing connection" || last["peer"] != "last" || last["component"] != "x" {
		t.Fatalf("last line %v", last)
	}
	if n, _ := last[SuppressedKey].(float64); n != 999 {
		t.Fatalf("suppressed = %v, want 999", last[SuppressedKey])
	}
	if _, ok := lines[0][SuppressedKey]; ok {
		t.Fatal("first line carries a suppressed count")
	}
}

func TestRatelogWrapNilAndIdempotent(t *testing.T) {
	Wrap(nil, 0).Error("discarded") // must not panic
	var buf bytes.Buffer
	w := Wrap(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	ww := Wrap(w, time.Hour)
	w.Warn("m")
	ww.Warn("m") // same limiter: suppressed
	if c := strings.Count(buf.String(), "msg=m"); c != 1 {
		t.Fatalf("%d lines, want 1 (wrapping twice shares the limiter)", c)
	}
}

func TestRatelogLimiterLog(t *testing.T) {
	var buf bytes.Buffer
	clk := &fakeClock{t: time.Unix(1000, 0)}
	l := New(time.Second, clk.now)
	log := slog.New(slog.NewJSONHandler(&buf, nil))
	for range 3 {
		l.Log(log, slog.LevelWarn, "reject", "connection rejected", "peer", "p")
	}
	l.Log(log, slog.LevelDebug, "dbg", "not enabled") // below the handler's level: not counted
	clk.advance(time.Second)
	l.Log(log, slog.LevelWarn, "reject", "connection rejected", "peer", "q")
	lines := jsonLines(t, &buf)
	if len(lines) != 2 || lines[1][SuppressedKey].(float64) != 2 {
		t.Fatalf("lines %v", lines)
	}
	if _, ok := l.keys["dbg"]; ok {
		t.Fatal("a disabled level must not touch the limiter")
	}
}

func TestRatelogConcurrent(t *testing.T) {
	l := New(time.Hour, nil)
	var wg sync.WaitGroup
	var mu sync.Mutex
	allowed := 0
	for range 8 {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range 1000 {
				if ok, _ := l.Allow("k"); ok {
					mu.Lock()
					allowed++
					mu.Unlock()
				}
			}
		}()
	}
	wg.Wait()
	if allowed != 1 {
		t.Fatalf("%d lines allowed in one interval", allowed)
	}
}

func TestRatelogHandlerKeysOnReasonWithoutDigits(t *testing.T) {
	var buf bytes.Buffer
	log := Wrap(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	for i := range 50 {
		log.Warn("closing connection", "peer", fmt.Sprint("10.0.0.", i, ":1234"), "reason", fmt.Errorf("frame too large: %d bytes", 1000+i))
		log.Warn("closing connection", "peer", fmt.Sprint("10.0.0.", i, ":1234"), "reason", fmt.Errorf("malformed header at %d", i))
		log.Warn("closing connection", "err", fmt.Errorf("idle for %ds", i))
	}
	if c := strings.Count(buf.String(), "\n"); c != 3 {
		t.Fatalf("%d lines, want one per reason (3):\n%s", c, buf.String())
	}
}

// Names a peer picks, quoted in the error text (%q), do not make new
// reasons; the text outside the quotes does.
func TestRatelogHandlerKeysWithoutQuotedNames(t *testing.T) {
	var buf bytes.Buffer
	log := Wrap(slog.New(slog.NewTextHandler(&buf, nil)), time.Hour)
	for _, id := range []string{"dev-a", "dev-b", `dev-\"c"`, "dev-\x00d", "dev-e"} {
		log.Warn("delete session", "client", id, "err", fmt.Errorf("store session %q: disk full", id))
		log.Warn("delete session", "client", id, "err", fmt.Errorf("store session %q: timeout", id))
	}
	if c := strings.Count(buf.String(), "\n"); c != 2 {
		t.Fatalf("%d lines, want one per reason (2):\n%s", c, buf.String())
	}
	if got := string(AppendReason(nil, `a "x\"y" b "z`)); got != `a "" b "` {
		t.Fatalf("AppendReason: %q", got)
	}
}

// A standard logger fed one failed handshake per peer writes one line per
// kind of error and interval, with the text of the first.
func TestStdLoggerLimitsPerReason(t *testing.T) {
	var buf bytes.Buffer
	l := StdLogger(slog.New(slog.NewTextHandler(&buf, nil)), slog.LevelWarn, "https: server error")
	for i := range 200 {
		l.Printf("http: TLS handshake error from 127.0.0.%d:%d: EOF", i%250, 40000+i)
	}
	l.Printf("http: panic serving 127.0.0.1:1: boom")
	out := buf.String()
	if n := strings.Count(out, "\n"); n != 2 {
		t.Fatalf("want 2 lines (one per reason), got %d:\n%s", n, out)
	}
	if !strings.Contains(out, `reason="http: TLS handshake error from 127.0.0.0:40000: EOF"`) || !strings.Contains(out, "level=WARN") {
		t.Fatalf("first handshake line not written as is:\n%s", out)
	}
}
