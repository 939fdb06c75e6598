package console

import (
	"bytes"
	"compress/gzip"
	"encoding/json"
	"errors"
	"io"
	"net/http"
	"net/http/httptest"
	"strings"
	"sync"
	"testing"
	"time"
)

// clock is a settable time for the login limiter.
type clock struct {
	mu sync.Mutex
	t  time.Time
}

func (c *clock) now() time.Time { c.mu.Lock(); defer c.mu.Unlock(); return c.t }
func (c *clock) add(d time.Duration) {
	c.mu.Lock()
	c.t = c.t.Add(d)
	c.mu.Unlock()
}

// newTestConsole serves a console's handler on a real socket; its
// registry is not there, which the pages and logins tested here do not
// need.
func newTestConsole(t *testing.T, mod func(*Options)) (*Console, *httptest.Server) {
	t.Helper()
	o := Options{Listen: "127.0.0.1:0", Registries: []string{"127.0.0.1:1"},
		Authenticate: func(user string, pw []byte) bool {
			return user == "alice" && string(pw) == "pw" || user == "bob" && string(pw) == "pw"
		},
		AdminUsers: []string{"alice"}}
	if mod != nil {
		mod(&o)
	}
	c, err := New(o)
	if err != nil {
		t.Fatal(err)
	}
	srv := httptest.NewServer(c.Handler())
	t.Cleanup(func() { srv.Close(); c.Close() })
	return c, srv
}

func post(t *testing.T, url string, body string, hdr map[string]string) (*http.Response, map[string]any) {
	t.Helper()
	req, _ := http.NewRequest("POST", url, strings.NewReader(body))
	req.Header.Set("Content-Type", "application/json")
	for k, v := range hdr {
		req.Header.Set(k, v)
	}
	resp, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	var m map[string]any
	_ = json.NewDecoder(resp.Body).Decode(&m)
	return resp, m
}

// TestConsoleLoginLockout: five wrong passwords from one address lock it
// out (429 with Retry-After) for 30 s, the next lockout 60 s; a success
// resets the count; another address is not affected.
func TestConsoleLoginLockout(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	c, srv := newTestConsole(t, func(o *Options) { o.Now = clk.now })
	login := func(pass string) int {
		resp, _ := post(t, srv.URL+"/api/login", `{"user":"alice","password":"`+pass+`"}`, nil)
		return resp.StatusCode
	}
	for i := range 4 {
		if code := login("wrong"); code != http.StatusUnauthorized {
			t.Fatalf("failure %d: %d", i, code)
		}
	}
	if login("pw") != http.StatusOK {
		t.Fatal("right password refused before the lockout")
	}
	for range 5 {
		login("wrong")
	}
	resp, _ := post(t, srv.URL+"/api/login", `{"user":"alice","password":"pw"}`, nil)
	if resp.StatusCode != http.StatusTooManyRequests || resp.Header.Get("Retry-After") == "" {
		t.Fatalf("locked out: %d %q", resp.StatusCode, resp.Header.Get("Retry-After"))
	}
	clk.add(31 * time.Second)
	for range 5 {
		login("wrong")
	}
	clk.add(31 * time.Second)
	if code := login("pw"); code != http.StatusTooManyRequests {
		t.Fatalf("second lockout should last 60 s: %d", code)
	}
	clk.add(30 * time.Second)
	if code := login("pw"); code != http.StatusOK {
		t.Fatalf("after the second lockout: %d", code)
	}
	// Another address has its own count.
	if locked, _ := c.auth.locked("10.9.9.9"); locked {
		t.Fatal("another address locked")
	}
	if resp, _ := post(t, srv.URL+"/api/login", `not json`, nil); resp.StatusCode != http.StatusBadRequest {
		t.Fatalf("bad body: %d", resp.StatusCode)
	}
	if resp, _ := post(t, srv.URL+"/api/login", `{"user":"alice","password":"pw"}`, map[string]string{"Content-Type": "text/plain"}); resp.StatusCode != http.StatusUnsupportedMediaType {
		t.Fatalf("login as a form: %d", resp.StatusCode)
	}
}

// TestConsoleSessionsAndRoles: a session cookie lasts SessionTTL after its
// last use; bob is read-only; a change needs the CSRF token.
func TestConsoleSessionsAndRoles(t *testing.T) {
	clk := &clock{t: time.Unix(1_700_000_000, 0)}
	_, srv := newTestConsole(t, func(o *Options) { o.Now = clk.now; o.SessionTTL = time.Hour })
	resp, m := post(t, srv.URL+"/api/login", `{"user":"bob","password":"pw"}`, nil)
	if resp.StatusCode != 200 || m["role"] != "read-only" || m["csrf"] == "" {
		t.Fatalf("bob: %d %v", resp.StatusCode, m)
	}
	cookie := resp.Cookies()[0]
	if !cookie.HttpOnly || cookie.SameSite != http.SameSiteStrictMode {
		t.Fatalf("cookie %+v", cookie)
	}
	withCookie := map[string]string{"Cookie": cookie.Name + "=" + cookie.Value, "X-CSRF-Token": m["csrf"].(string)}
	if resp, m := post(t, srv.URL+"/api/topics", `{"name":"T","readQueues":1,"writeQueues":1,"perm":6}`, withCookie); resp.StatusCode != http.StatusForbidden ||
		!strings.Contains(m["error"].(string), "admin role") {
		t.Fatalf("read-only change: %d %v", resp.StatusCode, m)
	}
	clk.add(59 * time.Minute)
	if resp, _ := post(t, srv.URL+"/api/logout", ``, withCookie); resp.StatusCode != 200 {
		t.Fatalf("logout within the TTL: %d", resp.StatusCode)
	}
	if resp, _ := post(t, srv.URL+"/api/logout", ``, withCookie); resp.StatusCode != http.StatusUnauthorized {
		t.Fatalf("after logout: %d", resp.StatusCode)
	}
	resp, _ = post(t, srv.URL+"/api/login", `{"user":"alice","password":"pw"}`, nil)
	cookie = resp.Cookies()[0]
	clk.add(61 * time.Minute)
	req, _ := http.NewRequest("GET", srv.URL+"/api/session", nil)
	req.AddCookie(cookie)
	r, err := http.DefaultClient.Do(req)
	if err != nil {
		t.Fatal(err)
	}
	r.Body.Close()
	if r.StatusCode != http.StatusUnauthorized {
		t.Fatalf("session past its TTL: %d", r.StatusCode)
	}
}

// TestConsoleAssets: the pages are served gzipped with an ETag (304 on a
// reload), with security headers; unknown paths are 404, unknown API
// calls a JSON 404.
func TestConsoleAssets(t *testing.T) {
	_, srv := newTestConsole(t, nil)
	for _, p := range []string{"/", "/lib.js", "/pages.js", "/app.css", "/theme.js", "/icon.svg"} {
		req, _ := http.NewRequest("GET", srv.URL+p, nil)
		req.Header.Set("Accept-Encoding", "gzip")
		resp, err := http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		b, _ := io.ReadAll(resp.Body)
		resp.Body.Close()
		if resp.StatusCode != 200 || resp.Header.Get("Content-Encoding") != "gzip" || resp.Header.Get("ETag") == "" ||
			!strings.Contains(resp.Header.Get("Content-Security-Policy"), "default-src 'self'") {
			t.Fatalf("%s: %d %v", p, resp.StatusCode, resp.Header)
		}
		zr, err := gzip.NewReader(bytes.NewReader(b))
		if err != nil {
			t.Fatalf("%s: %v", p, err)
		}
		if plain, err := io.ReadAll(zr); err != nil || len(plain) == 0 {
			t.Fatalf("%s: gzip body: %v", p, err)
		}
		req.Header.Set("If-None-Match", resp.Header.Get("ETag"))
		resp, err = http.DefaultTransport.RoundTrip(req)
		if err != nil {
			t.Fatal(err)
		}
		resp.Body.Close()
		if resp.StatusCode != http.StatusNotModified {
			t.Fatalf("%s reload: %d", p, resp.StatusCode)
		}
	}
	if resp, err := http.Get(srv.URL + "/nothing.js"); err != nil || resp.StatusCode != 404 {
		t.Fatalf("unknown asset: %v %v", resp, err)
	}
	resp, m := post(t, srv.URL+"/api/nothing", `{}`, nil)
	if resp.StatusCode != 404 || m["error"] == nil {
		t.Fatalf("unknown API call: %d %v", resp.StatusCode, m)
	}
}

func TestConsoleOptions(t *testing.T) {
	for _, c := range []struct {
		o  Options
		ok bool
	}{
		{Options{Listen: "127.0.0.1:8080", Registries: []string{"r:1"}}, true},
		{Options{Listen: "localhost:8080", Registries: []string{"r:1"}}, true},
		{Options{Listen: "0.0.0.0:8080", Registries: []string{"r:1"}}, false}, // open console beyond loopback
		{Options{Listen: "0.0.0.0:8080", Registries: []string{"r:1"}, Authenticate: func(string, []byte) bool { return false }}, true},
		{Options{Listen: "127.0.0.1:8080"}, false},
		{Options{Listen: "nonsense", Registries: []string{"r:1"}}, false},
		{Options{Listen: "127.0.0.1:8080", Registries: []string{"r:1"}, SampleInterval: time.Minute, History: time.Second}, false},
	} {
		err := c.o.Validate()
		if (err == nil) != c.ok || (err != nil && !errors.Is(err, ErrBadOptions)) {
			t.Errorf("%+v: %v", c.o.Listen, err)
		}
	}
}
