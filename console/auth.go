package console

import (
	"crypto/rand"
	"crypto/subtle"
	"encoding/base64"
	"encoding/json"
	"log/slog"
	"net"
	"net/http"
	"net/url"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smartgo/smartgo/internal/ratelog"
)

// Access control.
//
// A user logs in with POST /api/login {"user","password"}; the console
// checks the password with Options.Authenticate and answers with a
// session cookie (HttpOnly, SameSite=Strict) and a CSRF token. Every
// request that changes something (POST, PUT, DELETE) must carry that
// token in the X-CSRF-Token header, a JSON body (Content-Type
// application/json; a cross-site form cannot send one without the
// browser asking first), and, when the browser sends an Origin, this
// console's own. Admin calls need the admin role (Options.AdminUsers);
// other users are read-only. Failed logins are counted per client
// address: after 5 within 10 minutes the address is refused (429) for 30
// s, doubling with each lockout up to 15 minutes; each failure is logged,
// at most one line per 10 s with the count of the others.
//
// Without Authenticate (no credentials file) there is no login: every
// request acts as the admin "anonymous", which New allows only on a
// loopback address. The CSRF rules still apply, and requests must name
// the console by an IP address or localhost (Host header), so that a web
// page whose DNS name is rebound to 127.0.0.1 cannot drive it.

const (
	cookieName   = "smartgo_console"
	csrfHeader   = "X-CSRF-Token"
	maxSessions  = 10000
	maxFailsKept = 10000
	failWindow   = 10 * time.Minute
	failsToLock  = 5
	firstLockout = 30 * time.Second
	maxLockout   = 15 * time.Minute
)

// Roles.
const (
	roleAdmin    = "admin"
	roleReadOnly = "read-only"
)

type session struct {
	user, role, csrf string
	token            string // the cookie value
	expires          time.Time
}

type failState struct {
	first       time.Time // start of the counting window
	fails       int
	lockouts    int
	lockedUntil time.Time
}

type authenticator struct {
	check   func(user string, password []byte) bool
	admins  map[string]bool
	ttl     time.Duration
	now     func() time.Time
	log     *slog.Logger
	lim     *ratelog.Limiter
	metrics *consoleMetrics
	open    *session // the implicit session without a login; nil with one

	mu       sync.Mutex
	sessions map[string]*session   // token -> session; protected by mu
	fails    map[string]*failState // client address -> failures; protected by mu
}

func newAuthenticator(o Options, m *consoleMetrics) *authenticator {
	a := &authenticator{check: o.Authenticate, admins: map[string]bool{}, ttl: o.SessionTTL, now: o.Now, log: o.Logger,
		lim: ratelog.New(0, o.Now), metrics: m, sessions: map[string]*session{}, fails: map[string]*failState{}}
	for _, u := range o.AdminUsers {
		a.admins[u] = true
	}
	if o.Authenticate == nil {
		a.open = &session{user: "anonymous", role: roleAdmin, csrf: randomToken()}
	}
	return a
}

func randomToken() string {
	var b [32]byte
	_, _ = rand.Read(b[:])
	return base64.RawURLEncoding.EncodeToString(b[:])
}

// clientAddr is the request's peer IP (the console does not trust
// forwarding headers: put a proxy's address limits in the proxy).
func clientAddr(r *http.Request) string {
	host, _, err := net.SplitHostPort(r.RemoteAddr)
	if err != nil {
		return r.RemoteAddr
	}
	return host
}

// session returns the request's session, or nil.
func (a *authenticator) session(r *http.Request) *session {
	if a.open != nil {
		return a.open
	}
	ck, err := r.Cookie(cookieName)
	if err != nil {
		return nil
	}
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	s := a.sessions[ck.Value]
	if s == nil {
		return nil
	}
	if now.After(s.expires) {
		delete(a.sessions, ck.Value)
		return nil
	}
	s.expires = now.Add(a.ttl)
	return s
}

// locked reports whether addr is locked out, and until when.
func (a *authenticator) locked(addr string) (bool, time.Time) {
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.fails[addr]
	if f == nil || !a.now().Before(f.lockedUntil) {
		return false, time.Time{}
	}
	return true, f.lockedUntil
}

// failed records a failed login from addr.
func (a *authenticator) failed(addr string) {
	now := a.now()
	a.mu.Lock()
	defer a.mu.Unlock()
	f := a.fails[addr]
	if f == nil {
		if len(a.fails) >= maxFailsKept {
			a.sweepFailsLocked(now)
		}
		f = &failState{first: now}
		a.fails[addr] = f
	}
	if now.Sub(f.first) > failWindow {
		f.first, f.fails = now, 0
	}
	f.fails++
	if f.fails >= failsToLock {
		lock := min(firstLockout<<min(f.lockouts, 10), maxLockout)
		f.lockedUntil, f.fails, f.first = now.Add(lock), 0, now
		f.lockouts++
	}
}

// sweepFailsLocked drops failure records that no longer count; if the
// table is still full, it is cleared (a flood of addresses).
func (a *authenticator) sweepFailsLocked(now time.Time) {
	for k, f := range a.fails {
		if now.Sub(f.first) > failWindow && !now.Before(f.lockedUntil) {
			delete(a.fails, k)
		}
	}
	if len(a.fails) >= maxFailsKept {
		clear(a.fails)
	}
}

func (a *authenticator) newSession(user string) *session {
	role := roleReadOnly
	if a.admins[user] {
		role = roleAdmin
	}
	now := a.now()
	s := &session{user: user, role: role, csrf: randomToken(), expires: now.Add(a.ttl)}
	token := randomToken()
	a.mu.Lock()
	defer a.mu.Unlock()
	if len(a.sessions) >= maxSessions {
		for k, old := range a.sessions {
			if now.After(old.expires) {
				delete(a.sessions, k)
			}
		}
		for k := range a.sessions {
			if len(a.sessions) < maxSessions {
				break
			}
			delete(a.sessions, k) // the oldest are likeliest to be idle; any will do
		}
	}
	a.sessions[token] = s
	s.token = token
	return s
}

type sessionInfo struct {
	User  string `json:"user"`
	Role  string `json:"role"`
	CSRF  string `json:"csrf"`
	Login bool   `json:"login"` // a login is required (false: open console)
}

func (a *authenticator) info(s *session) sessionInfo {
	return sessionInfo{User: s.user, Role: s.role, CSRF: s.csrf, Login: a.open == nil}
}

// handleLogin serves POST /api/login.
func (a *authenticator) handleLogin(w http.ResponseWriter, r *http.Request) {
	if a.open != nil {
		writeJSON(w, http.StatusOK, a.info(a.open))
		return
	}
	if !jsonRequest(w, r) || !sameOrigin(w, r) {
		return
	}
	addr := clientAddr(r)
	if locked, until := a.locked(addr); locked {
		a.metrics.logins.WithLabelValues("limited").Inc()
		a.lim.Log(a.log, slog.LevelWarn, "console login refused", "console: login refused: too many failures", "remote", addr)
		w.Header().Set("Retry-After", strconv.Itoa(int(time.Until(until).Seconds())+1))
		writeError(w, http.StatusTooManyRequests, "too many failed logins from your address; try again later")
		return
	}
	var req struct {
		User     string `json:"user"`
		Password string `json:"password"`
	}
	if err := json.NewDecoder(r.Body).Decode(&req); err != nil {
		writeError(w, http.StatusBadRequest, "body must be JSON {\"user\": ..., \"password\": ...}")
		return
	}
	if req.User == "" || !a.check(req.User, []byte(req.Password)) {
		a.failed(addr)
		a.metrics.logins.WithLabelValues("failed").Inc()
		a.lim.Log(a.log, slog.LevelWarn, "console login failed", "console: login failed", "user", req.User, "remote", addr)
		writeError(w, http.StatusUnauthorized, "wrong user name or password")
		return
	}
	a.mu.Lock()
	delete(a.fails, addr)
	a.mu.Unlock()
	s := a.newSession(req.User)
	a.metrics.logins.WithLabelValues("ok").Inc()
	a.log.Info("console: login", "user", req.User, "role", s.role, "remote", addr)
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: s.token, Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode,
		Secure: r.TLS != nil, MaxAge: int(a.ttl.Seconds())})
	writeJSON(w, http.StatusOK, a.info(s))
}

// handleLogout serves POST /api/logout (a session and its CSRF token
// needed, like any change).
func (a *authenticator) handleLogout(w http.ResponseWriter, r *http.Request, _ *session) {
	if ck, err := r.Cookie(cookieName); err == nil {
		a.mu.Lock()
		delete(a.sessions, ck.Value)
		a.mu.Unlock()
	}
	http.SetCookie(w, &http.Cookie{Name: cookieName, Value: "", Path: "/", HttpOnly: true, SameSite: http.SameSiteStrictMode, MaxAge: -1})
	writeJSON(w, http.StatusOK, map[string]bool{"loggedOut": true})
}

// allowedHost reports whether the request names the console by an IP
// address or localhost (checked for the open console only).
func allowedHost(r *http.Request) bool {
	host := r.Host
	if h, _, err := net.SplitHostPort(host); err == nil {
		host = h
	}
	host = strings.Trim(host, "[]")
	return host == "localhost" || net.ParseIP(host) != nil
}

// sameOrigin refuses a request whose Origin header names another site.
func sameOrigin(w http.ResponseWriter, r *http.Request) bool {
	o := r.Header.Get("Origin")
	if o == "" {
		return true
	}
	u, err := url.Parse(o)
	if err != nil || u.Host != r.Host {
		writeError(w, http.StatusForbidden, "cross-origin request refused")
		return false
	}
	return true
}

// jsonRequest refuses a body that is not declared JSON.
func jsonRequest(w http.ResponseWriter, r *http.Request) bool {
	ct := r.Header.Get("Content-Type")
	if i := strings.IndexByte(ct, ';'); i >= 0 {
		ct = ct[:i]
	}
	if strings.TrimSpace(strings.ToLower(ct)) != "application/json" {
		writeError(w, http.StatusUnsupportedMediaType, "the request body must be application/json")
		return false
	}
	return true
}

// guard wraps an API handler: a session is required; a change (any method
// but GET and HEAD) needs the CSRF token, a JSON body and a same-origin
// request; admin handlers need the admin role.
func (a *authenticator) guard(adminOnly bool, h func(http.ResponseWriter, *http.Request, *session)) http.HandlerFunc {
	return func(w http.ResponseWriter, r *http.Request) {
		if a.open != nil && !allowedHost(r) {
			writeError(w, http.StatusMisdirectedRequest, "the open console answers only to an IP address or localhost")
			return
		}
		s := a.session(r)
		if s == nil {
			writeError(w, http.StatusUnauthorized, "log in first")
			return
		}
		if r.Method != http.MethodGet && r.Method != http.MethodHead {
			if !sameOrigin(w, r) {
				return
			}
			got := r.Header.Get(csrfHeader)
			if got == "" || subtle.ConstantTimeCompare([]byte(got), []byte(s.csrf)) != 1 {
				a.lim.Log(a.log, slog.LevelWarn, "console csrf", "console: request with a missing or forged CSRF token refused",
					"user", s.user, "remote", clientAddr(r), "path", r.URL.Path)
				writeError(w, http.StatusForbidden, "missing or forged CSRF token")
				return
			}
			if r.ContentLength != 0 && !jsonRequest(w, r) {
				return
			}
		}
		if adminOnly && s.role != roleAdmin {
			writeError(w, http.StatusForbidden, "this needs the admin role; "+s.user+" is "+s.role)
			return
		}
		h(w, r, s)
	}
}
