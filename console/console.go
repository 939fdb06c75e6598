package console

import (
	"context"
	"embed"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"sync"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/smartgo/smartgo/client/admin"
	twc "github.com/smartgo/smartgo/client/twin"
)

//go:embed assets
var assets embed.FS

// Defaults of Options.
const (
	DefaultSampleInterval = 5 * time.Second
	DefaultHistory        = time.Hour
	DefaultSessionTTL     = 12 * time.Hour
	DefaultRequestTimeout = 10 * time.Second
)

// ErrBadOptions is wrapped by Options.Validate errors.
var ErrBadOptions = errors.New("console: bad options")

// Options configure a Console.
type Options struct {
	// Listen is the HTTP listen address (required), e.g. "127.0.0.1:8080".
	Listen string
	// Registries are the registry addresses the admin calls go through
	// (required).
	Registries []string
	// Authenticate checks a user name and password (cmd wires the MQTT
	// credentials file format in). Nil runs without a login: whoever
	// reaches the port is an admin, which is allowed only when Listen is
	// a loopback address.
	Authenticate func(user string, password []byte) bool
	// AdminUsers have the admin role (they may change the cluster);
	// every other user who logs in is read-only.
	AdminUsers []string
	// SampleInterval is how often the console samples the cluster's rates
	// for its charts (default 5 s); History is how long it keeps them
	// (default 1 h).
	SampleInterval time.Duration
	History        time.Duration
	// SessionTTL ends a login session unused for this long (default 12 h).
	SessionTTL time.Duration
	// RequestTimeout bounds one API call's admin requests (default 10 s);
	// each request to one broker or registry gets a third of it, so that
	// one that does not answer (hung, cut off) leaves the call time to
	// answer with what the others returned.
	RequestTimeout time.Duration
	Logger         *slog.Logger
	Now            func() time.Time
}

func (o *Options) fill() {
	if o.SampleInterval == 0 {
		o.SampleInterval = DefaultSampleInterval
	}
	if o.History == 0 {
		o.History = DefaultHistory
	}
	if o.SessionTTL == 0 {
		o.SessionTTL = DefaultSessionTTL
	}
	if o.RequestTimeout == 0 {
		o.RequestTimeout = DefaultRequestTimeout
	}
	if o.Logger == nil {
		o.Logger = slog.New(slog.DiscardHandler)
	}
	if o.Now == nil {
		o.Now = time.Now
	}
}

// Validate reports the first invalid setting.
func (o *Options) Validate() error {
	host, _, err := net.SplitHostPort(o.Listen)
	if err != nil {
		return fmt.Errorf("%w: Listen %q: %v", ErrBadOptions, o.Listen, err)
	}
	if len(o.Registries) == 0 {
		return fmt.Errorf("%w: no registry address", ErrBadOptions)
	}
	if o.Authenticate == nil && !loopbackHost(host) {
		return fmt.Errorf("%w: without a credentials file the console may listen on a loopback address only, not %q", ErrBadOptions, o.Listen)
	}
	if o.SampleInterval < 0 || o.History < 0 || o.SessionTTL < 0 || o.RequestTimeout < 0 {
		return fmt.Errorf("%w: negative interval", ErrBadOptions)
	}
	if o.SampleInterval > 0 && o.History > 0 && o.History < o.SampleInterval {
		return fmt.Errorf("%w: History %v shorter than SampleInterval %v", ErrBadOptions, o.History, o.SampleInterval)
	}
	return nil
}

// loopbackHost reports whether a listen host is a loopback address or
// "localhost".
func loopbackHost(host string) bool {
	if host == "localhost" {
		return true
	}
	ip := net.ParseIP(host)
	return ip != nil && ip.IsLoopback()
}

// Console is the web console: its JSON API (api*.go), the embedded pages,
// logins (auth.go) and the rate sampler behind the charts (sampler.go).
type Console struct {
	opts    Options
	log     *slog.Logger
	adm     *admin.Admin
	twins   *twc.Client
	auth    *authenticator
	sampler *sampler
	handler http.Handler
	metrics *consoleMetrics

	srv    *http.Server
	ln     net.Listener
	cancel context.CancelFunc
	wg     sync.WaitGroup
	once   sync.Once
	err    error
}

// New checks the options and builds a console; nothing listens before
// Start.
func New(opts Options) (*Console, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill()
	adm, err := admin.New(admin.Options{Registries: opts.Registries, RequestTimeout: opts.RequestTimeout / 3, Logger: opts.Logger})
	if err != nil {
		return nil, fmt.Errorf("console: %w", err)
	}
	twins, err := twc.New(twc.Options{Registries: opts.Registries, RequestTimeout: opts.RequestTimeout, Logger: opts.Logger,
		ReplicaReads: true}) // a master down: its devices are read (stale) from a slave
	if err != nil {
		_ = adm.Close()
		return nil, fmt.Errorf("console: %w", err)
	}
	c := &Console{opts: opts, log: opts.Logger, adm: adm, twins: twins, metrics: newConsoleMetrics()}
	c.auth = newAuthenticator(opts, c.metrics)
	c.sampler = newSampler(adm, opts.SampleInterval, opts.History, opts.Now, opts.Logger)
	c.handler = c.routes()
	return c, nil
}

// Start listens on Options.Listen, serves, and starts sampling.
func (c *Console) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", c.opts.Listen)
	if err != nil {
		return fmt.Errorf("console: listen %s: %w", c.opts.Listen, err)
	}
	c.ln = ln
	c.srv = &http.Server{Handler: c.handler, ReadHeaderTimeout: 10 * time.Second, ReadTimeout: 30 * time.Second,
		WriteTimeout: 60 * time.Second, IdleTimeout: 2 * time.Minute, MaxHeaderBytes: 64 << 10,
		ErrorLog: slog.NewLogLogger(c.log.Handler(), slog.LevelDebug)}
	sctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	c.cancel = cancel
	c.wg.Add(2)
	go func() {
		defer c.wg.Done()
		c.sampler.run(sctx)
	}()
	go func() {
		defer c.wg.Done()
		if err := c.srv.Serve(ln); err != nil && !errors.Is(err, http.ErrServerClosed) {
			c.log.Error("console: server stopped", "err", err)
		}
	}()
	mode := "login"
	if c.opts.Authenticate == nil {
		mode = "open (no credentials file): anyone reaching the port is admin"
	}
	c.log.Info("console listening", "url", "http://"+ln.Addr().String()+"/", "access", mode)
	return nil
}

// Addr returns the bound address (nil before Start).
func (c *Console) Addr() net.Addr {
	if c.ln == nil {
		return nil
	}
	return c.ln.Addr()
}

// Handler returns the console's HTTP handler (pages and API).
func (c *Console) Handler() http.Handler { return c.handler }

// Collectors returns the console's metric collectors (logins, API
// requests).
func (c *Console) Collectors() []prometheus.Collector { return c.metrics.collectors() }

// Ready reports whether the console serves: nil once it listens.
func (c *Console) Ready() error {
	if c.ln == nil {
		return errors.New("console: not listening")
	}
	return nil
}

// Close stops serving and sampling; idempotent.
func (c *Console) Close() error {
	c.once.Do(func() {
		var errs []error
		if c.srv != nil {
			ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
			if err := c.srv.Shutdown(ctx); err != nil {
				errs = append(errs, c.srv.Close())
			}
			cancel()
		}
		if c.cancel != nil {
			c.cancel()
		}
		c.wg.Wait()
		errs = append(errs, c.adm.Close(), c.twins.Close())
		c.err = errors.Join(errs...)
	})
	return c.err
}

// consoleMetrics count logins and API calls.
type consoleMetrics struct {
	logins   *prometheus.CounterVec
	requests *prometheus.CounterVec
}

func newConsoleMetrics() *consoleMetrics {
	return &consoleMetrics{
		logins: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "smartgo_console_logins_total",
			Help: "Console logins by result (ok, failed, limited)."}, []string{"result"}),
		requests: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "smartgo_console_api_requests_total",
			Help: "Console API requests by HTTP status class."}, []string{"status"}),
	}
}

func (m *consoleMetrics) collectors() []prometheus.Collector {
	return []prometheus.Collector{m.logins, m.requests}
}
