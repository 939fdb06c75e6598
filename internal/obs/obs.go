// Package obs serves what production monitoring scrapes from a SmartGo
// process: Prometheus metrics at /metrics, liveness at /healthz and
// readiness at /readyz, on one HTTP listener per process. The components
// of the process (registry, broker, bridge, console) hand it their
// collectors and readiness checks; cmd/smartgo wires them.
//
// /healthz answers 200 "ok" while the process serves HTTP at all.
// /readyz runs every check and answers 200 when all pass, else 503; the
// body has one line per check, "ok <name>" or "fail <name>: <reason>", so
// an operator reading it (curl) sees what is missing. A process with no
// check yet (still starting) is not ready. /readyz/<name> runs one check
// (404 for a name the process has not): a probe that routes traffic to one
// part of a process (the registry of a registry that also runs a
// controller replica, the MQTT bridge of a standalone) asks only it.
//
// With the Profiling option (`[metrics] pprof = true`) the listener also
// serves the Go runtime's profiles under /debug/pprof/ (CPU, heap,
// goroutines, mutex and block contention, execution traces), the
// endpoints of net/http/pprof, for an operator who needs to see where a
// running process spends its time; make pgo collects the build's
// profile-guided optimisation profile through it. It is off by default:
// a profile shows a process's internals and costs CPU while it runs, so
// the listener should then be reachable only by operators.
package obs

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"net/http/pprof"
	"strings"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"
	"github.com/prometheus/client_golang/prometheus/collectors"
	"github.com/prometheus/client_golang/prometheus/promhttp"
)

// NewRegistry returns a metrics registry holding the Go runtime and
// process collectors (go_*, process_*), to which the components add
// their own.
func NewRegistry() *prometheus.Registry {
	reg := prometheus.NewRegistry()
	reg.MustRegister(collectors.NewGoCollector(), collectors.NewProcessCollector(collectors.ProcessCollectorOpts{}))
	return reg
}

// Check is one readiness condition: Fn returns nil when it is met, else
// the reason it is not. A nil Fn is a component expected but not up yet.
type Check struct {
	Name string
	Fn   func() error
}

// Health holds the readiness checks of a process. The zero value is ready
// to use; checks are added as components start.
type Health struct {
	mu     sync.Mutex
	checks []Check // protected by mu
}

// Expect names the components a process is going to add, in order,
// before it starts them: until Add gives one its check, /readyz fails it
// as starting. A process that starts its parts one after the other (the
// standalone's registry, broker, bridge and console) is then not ready
// while a later part is still starting (a broker recovering its store).
func (h *Health) Expect(names ...string) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for _, name := range names {
		if h.indexLocked(name) < 0 {
			h.checks = append(h.checks, Check{Name: name})
		}
	}
}

// Add adds a readiness check, or gives an expected component its check.
func (h *Health) Add(name string, fn func() error) {
	h.mu.Lock()
	defer h.mu.Unlock()
	if i := h.indexLocked(name); i >= 0 && h.checks[i].Fn == nil {
		h.checks[i].Fn = fn
		return
	}
	h.checks = append(h.checks, Check{Name: name, Fn: fn})
}

// indexLocked returns the index of the check named name, or -1.
func (h *Health) indexLocked(name string) int {
	for i, c := range h.checks {
		if c.Name == name {
			return i
		}
	}
	return -1
}

var (
	// errStarting is the reason of a process with no check yet.
	errStarting = errors.New("obs: starting: no component is up yet")
	// errNotUp is the reason of a component expected but not added yet.
	errNotUp = errors.New("starting: not up yet")
)

// Ready runs every check and returns one line per check and whether all
// passed.
func (h *Health) Ready() (lines []string, ok bool) {
	h.mu.Lock()
	checks := append([]Check(nil), h.checks...)
	h.mu.Unlock()
	if len(checks) == 0 {
		return []string{"fail process: " + errStarting.Error()}, false
	}
	ok = true
	for _, c := range checks {
		fn := c.Fn
		if fn == nil {
			fn = func() error { return errNotUp }
		}
		if err := fn(); err != nil {
			ok = false
			lines = append(lines, fmt.Sprintf("fail %s: %v", c.Name, err))
		} else {
			lines = append(lines, "ok "+c.Name)
		}
	}
	return lines, ok
}

// ReadyOne runs the check named name and returns its line (as Ready's)
// and whether it passed; found is false when there is no such check.
func (h *Health) ReadyOne(name string) (line string, ok, found bool) {
	h.mu.Lock()
	i := h.indexLocked(name)
	var c Check
	if i >= 0 {
		c = h.checks[i]
	}
	h.mu.Unlock()
	if i < 0 {
		return "", false, false
	}
	fn := c.Fn
	if fn == nil {
		fn = func() error { return errNotUp }
	}
	if err := fn(); err != nil {
		return fmt.Sprintf("fail %s: %v", name, err), false, true
	}
	return "ok " + name, true, true
}

// names returns the names of the checks, in order.
func (h *Health) names() []string {
	h.mu.Lock()
	defer h.mu.Unlock()
	out := make([]string, len(h.checks))
	for i, c := range h.checks {
		out[i] = c.Name
	}
	return out
}

// Handler serves /metrics from g and /healthz, /readyz and
// /readyz/{name} from h. /healthz/ and /readyz/ (a probe configured with
// a trailing slash) answer as /healthz and /readyz.
func Handler(g prometheus.Gatherer, h *Health) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("GET /metrics", promhttp.HandlerFor(g, promhttp.HandlerOpts{}))
	healthz := func(w http.ResponseWriter, _ *http.Request) {
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		_, _ = w.Write([]byte("ok\n"))
	}
	readyz := func(w http.ResponseWriter, _ *http.Request) {
		lines, ok := h.Ready()
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		if !ok {
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(strings.Join(lines, "\n") + "\n"))
	}
	mux.HandleFunc("GET /healthz", healthz)
	mux.HandleFunc("GET /healthz/{$}", healthz)
	mux.HandleFunc("GET /readyz", readyz)
	mux.HandleFunc("GET /readyz/{$}", readyz)
	mux.HandleFunc("GET /readyz/{name}", func(w http.ResponseWriter, r *http.Request) {
		line, ok, found := h.ReadyOne(r.PathValue("name"))
		w.Header().Set("Content-Type", "text/plain; charset=utf-8")
		switch {
		case !found:
			w.WriteHeader(http.StatusNotFound)
			line = fmt.Sprintf("no check %q; this process has: %s", r.PathValue("name"), strings.Join(h.names(), ", "))
		case !ok:
			w.WriteHeader(http.StatusServiceUnavailable)
		}
		_, _ = w.Write([]byte(line + "\n"))
	})
	return mux
}

// Server is the HTTP listener of /metrics, /healthz and /readyz.
type Server struct {
	srv  *http.Server
	ln   net.Listener
	done chan struct{}
	once sync.Once
	err  error
}

// Option changes what Serve serves.
type Option func(*serveConfig)

type serveConfig struct {
	profiling bool
}

// Profiling makes Serve also serve the runtime's profiles under
// /debug/pprof/ (the package doc says what and why it is off by default).
func Profiling(on bool) Option {
	return func(c *serveConfig) { c.profiling = on }
}

// profilingHandler adds net/http/pprof's endpoints to next.
func profilingHandler(next http.Handler) http.Handler {
	mux := http.NewServeMux()
	mux.Handle("/", next)
	mux.HandleFunc("GET /debug/pprof/", pprof.Index)
	mux.HandleFunc("GET /debug/pprof/cmdline", pprof.Cmdline)
	mux.HandleFunc("GET /debug/pprof/profile", pprof.Profile)
	mux.HandleFunc("GET /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("POST /debug/pprof/symbol", pprof.Symbol)
	mux.HandleFunc("GET /debug/pprof/trace", pprof.Trace)
	return mux
}

// Serve listens on addr and serves Handler(g, h) until Close.
func Serve(addr string, g prometheus.Gatherer, h *Health, log *slog.Logger, opts ...Option) (*Server, error) {
	if log == nil {
		log = slog.New(slog.DiscardHandler)
	}
	var cfg serveConfig
	for _, o := range opts {
		o(&cfg)
	}
	handler, paths := Handler(g, h), "/metrics /healthz /readyz"
	if cfg.profiling {
		handler, paths = profilingHandler(handler), paths+" /debug/pprof/"
	}
	ln, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, fmt.Errorf("obs: metrics listen %s: %w", addr, err)
	}
	s := &Server{
		srv:  &http.Server{Handler: handler, ReadHeaderTimeout: 10 * time.Second, ErrorLog: slog.NewLogLogger(log.Handler(), slog.LevelDebug)},
		ln:   ln,
		done: make(chan struct{}),
	}
	go func() {
		defer close(s.done)
		if err := s.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			log.Error("metrics server stopped", "err", err)
		}
	}()
	log.Info("metrics listening", "addr", ln.Addr().String(), "paths", paths)
	return s, nil
}

// Addr returns the bound address.
func (s *Server) Addr() string { return s.ln.Addr().String() }

// Close stops serving, waiting up to 2 s for requests in progress. It is
// idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		if err := s.srv.Shutdown(ctx); err != nil {
			s.err = errors.Join(err, s.srv.Close())
		}
		<-s.done
	})
	return s.err
}
