package obs

import (
	"errors"
	"io"
	"net/http"
	"strings"
	"sync/atomic"
	"testing"

	"github.com/prometheus/client_golang/prometheus"
)

func get(t *testing.T, url string) (int, string) {
	t.Helper()
	resp, err := http.Get(url)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	b, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return resp.StatusCode, string(b)
}

// TestObsEndpoints: /healthz answers at once, /readyz is 503 until every
// check passes and names the failing one, /readyz/{name} answers for one
// check (404 for one the process has not), /metrics carries the process's
// and the components' series; Close is idempotent.
func TestObsEndpoints(t *testing.T) {
	reg := NewRegistry()
	c := prometheus.NewCounter(prometheus.CounterOpts{Name: "smartgo_test_total", Help: "test"})
	reg.MustRegister(c)
	c.Add(3)
	var h Health
	s, err := Serve("127.0.0.1:0", reg, &h, nil)
	if err != nil {
		t.Fatal(err)
	}
	base := "http://" + s.Addr()
	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz"); code != 503 || !strings.Contains(body, "starting") {
		t.Fatalf("/readyz with no component: %d %q", code, body)
	}
	var registered atomic.Bool
	h.Add("store", func() error { return nil })
	h.Add("broker", func() error {
		if !registered.Load() {
			return errors.New("not registered with any registry yet")
		}
		return nil
	})
	if code, body := get(t, base+"/readyz"); code != 503 || body != "ok store\nfail broker: not registered with any registry yet\n" {
		t.Fatalf("/readyz unregistered: %d %q", code, body)
	}
	// One part at a time: the store is ready while the broker is not.
	if code, body := get(t, base+"/readyz/store"); code != 200 || body != "ok store\n" {
		t.Fatalf("/readyz/store: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz/broker"); code != 503 || body != "fail broker: not registered with any registry yet\n" {
		t.Fatalf("/readyz/broker unregistered: %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz/bridge"); code != 404 || !strings.Contains(body, "store, broker") {
		t.Fatalf("/readyz/bridge (no such part): %d %q", code, body)
	}
	if code, body := get(t, base+"/readyz/"); code != 503 || body != "ok store\nfail broker: not registered with any registry yet\n" {
		t.Fatalf("/readyz/ (trailing slash) unregistered: %d %q", code, body)
	}
	registered.Store(true)
	for _, path := range []string{"/readyz", "/readyz/"} {
		if code, body := get(t, base+path); code != 200 || body != "ok store\nok broker\n" {
			t.Fatalf("%s ready: %d %q", path, code, body)
		}
	}
	if code, body := get(t, base+"/healthz/"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz/ (trailing slash): %d %q", code, body)
	}
	if code, _ := get(t, base+"/healthz/x"); code != 404 {
		t.Fatalf("/healthz/x: %d, want 404", code)
	}
	code, body := get(t, base+"/metrics")
	for _, want := range []string{"smartgo_test_total 3", "go_goroutines", "process_cpu_seconds_total"} {
		if code != 200 || !strings.Contains(body, want) {
			t.Errorf("/metrics lacks %q (%d)", want, code)
		}
	}
	if code, _ := get(t, base+"/nothing"); code != 404 {
		t.Errorf("unknown path: %d", code)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := http.Get(base + "/healthz"); err == nil {
		t.Fatal("still serving after Close")
	}
}

func TestObsListenError(t *testing.T) {
	var h Health
	if _, err := Serve("127.0.0.1:notaport", NewRegistry(), &h, nil); err == nil {
		t.Fatal("bad address accepted")
	}
}

// TestObsExpect: a component named by Expect fails /readyz as starting, in
// its place, until Add gives it its check; a check added for a name not
// expected comes after.
func TestObsExpect(t *testing.T) {
	var h Health
	h.Expect("registry", "broker")
	h.Add("registry", func() error { return nil })
	lines, ok := h.Ready()
	if ok || strings.Join(lines, "|") != "ok registry|fail broker: starting: not up yet" {
		t.Fatalf("broker expected, not added: %v %q", ok, lines)
	}
	h.Add("console", func() error { return nil })
	h.Add("broker", func() error { return nil })
	h.Expect("broker")
	lines, ok = h.Ready()
	if !ok || strings.Join(lines, "|") != "ok registry|ok broker|ok console" {
		t.Fatalf("all added: %v %q", ok, lines)
	}
}

// TestObsProfiling: /debug/pprof/ is served only with Profiling(true);
// the CPU profile endpoint returns a real profile (gzipped protobuf), and
// the other endpoints still answer beside it.
func TestObsProfiling(t *testing.T) {
	off, err := Serve("127.0.0.1:0", NewRegistry(), &Health{}, nil, Profiling(false))
	if err != nil {
		t.Fatal(err)
	}
	defer off.Close()
	if code, _ := get(t, "http://"+off.Addr()+"/debug/pprof/"); code != http.StatusNotFound {
		t.Fatalf("/debug/pprof/ without profiling: %d, want 404", code)
	}
	on, err := Serve("127.0.0.1:0", NewRegistry(), &Health{}, nil, Profiling(true))
	if err != nil {
		t.Fatal(err)
	}
	defer on.Close()
	base := "http://" + on.Addr()
	if code, body := get(t, base+"/debug/pprof/"); code != 200 || !strings.Contains(body, "goroutine") {
		t.Fatalf("/debug/pprof/: %d %q", code, body)
	}
	if code, body := get(t, base+"/debug/pprof/goroutine?debug=1"); code != 200 || !strings.Contains(body, "goroutine profile:") {
		t.Fatalf("/debug/pprof/goroutine: %d %.200q", code, body)
	}
	code, body := get(t, base+"/debug/pprof/profile?seconds=1")
	if code != 200 || !strings.HasPrefix(body, "\x1f\x8b") {
		t.Fatalf("/debug/pprof/profile: %d, body starts %q (want a gzipped profile)", code, body[:min(len(body), 16)])
	}
	if code, body := get(t, base+"/healthz"); code != 200 || body != "ok\n" {
		t.Fatalf("/healthz beside profiling: %d %q", code, body)
	}
	if code, body := get(t, base+"/metrics"); code != 200 || !strings.Contains(body, "go_goroutines") {
		t.Fatalf("/metrics beside profiling: %d %.200q", code, body)
	}
}
