package iothub

import (
	"cmp"
	"context"
	"crypto/rand"
	"crypto/tls"
	"crypto/x509"
	"encoding/hex"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"net/http"
	"os"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/client"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/internal/ratelog"
	"github.com/smartgo/smartgo/mqtt"
)

// Hub is the IoT Hub surface of one bridge node: the device side over
// its MQTT server (authentication, twins, direct methods, telemetry and
// cloud-to-device topics) and the back end's HTTPS API. Build it with
// New, put its hooks into the node's options with Configure, build and
// start the bridge, then Start the hub on it; Close before the bridge.
type Hub struct {
	opts     Options
	log      *slog.Logger // rate-limited: devices and API callers drive it
	twins    *twincli.Client
	policies map[string]*Policy
	caPool   *x509.CertPool

	br      *bridge.Bridge
	srv     *mqtt.Server
	nodeID  string
	prod    *client.Producer
	rpc     *client.PullConsumer
	unreg   []func()
	https   []*http.Server
	lnAddrs []net.Addr
	amqp    amqpServer

	started atomic.Bool
	closing atomic.Bool
	ctx     context.Context
	cancel  context.CancelFunc
	wg      sync.WaitGroup

	lc  lifecycle
	m   methods
	mu  sync.Mutex
	dev map[string]*deviceConn // clientID -> its connection on this node; protected by mu
	// expiries are the token expiries of authenticated connects, by
	// client id, until the connection is announced (protected by mu).
	expiries map[string]time.Time
	// sessionExpiry is the MQTT server's session expiry cap (Configure).
	sessionExpiry time.Duration
	// models maps a client id to the modelConn of its connection here
	// when that announced an IoT Plug and Play model id: read for every
	// telemetry message, so without a lock.
	models sync.Map
	// owners maps the client id of a device to the ownerNote of the
	// identity its latest connect here was for (owner.go), pruned every
	// ownerPrune once no session of the id is held here and the note is
	// older than ownerGrace; ownerReuse spares a read (constants of
	// owner.go; tests shorten them).
	owners                             sync.Map
	ownerPrune, ownerGrace, ownerReuse time.Duration

	stats Stats
}

// deviceConn is a device connected to this node.
type deviceConn struct {
	id     Identity
	connID uint64
	expiry *time.Timer // closes the connection when its token expires
	bucket tokenBucket // twin request rate; protected by Hub.mu
	// watching is closed once the connection's desired changes are
	// watched at the twin's broker (or the attempt failed): a twin GET
	// waits for it, so a change made after the GET's answer is never
	// missed by a device that follows the reconnect flow.
	watching chan struct{}
	// cid and model are the registry's name of the connection and the
	// device's model id (setUp records them).
	cid, model string
	// redo is set while a step of setUp failed (the store refused the
	// registration, the connection state or the watch): the device's
	// next twin request runs it again first.
	redo atomic.Bool
	// revoked is set when the connection is closed because its identity
	// was deleted or disabled (revoke): once it ended, its session ends
	// too if the identity is gone (endRevoked).
	revoked atomic.Bool
}

// Stats are the hub's counters.
type Stats struct {
	AuthFailures     atomic.Int64 // devices refused at CONNECT
	TwinRequests     atomic.Int64 // twin GET and PATCH requests served
	TwinErrors       atomic.Int64 // of which answered with an error status
	Throttled        atomic.Int64 // twin requests answered 429
	MethodCalls      atomic.Int64 // direct method invocations started here
	UnknownResponses atomic.Int64 // method responses for no pending $rid
	C2DSent          atomic.Int64 // cloud-to-device messages stored
	DesiredPushed    atomic.Int64 // desired-change notifications handed to sessions
	OwnerReads       atomic.Int64 // registry reads for the owner of a client with a device's id and no user name
}

// New checks opts and connects the registry client (lazily).
func New(opts Options) (*Hub, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill()
	h := &Hub{opts: opts, log: ratelog.Wrap(opts.Logger, 0).With("component", "iothub"),
		policies: map[string]*Policy{}, dev: map[string]*deviceConn{}, expiries: map[string]time.Time{},
		ownerPrune: ownerPruneEvery, ownerGrace: ownerGrace, ownerReuse: ownerReuse}
	for i := range opts.Policies {
		h.policies[opts.Policies[i].Name] = &opts.Policies[i]
	}
	if opts.X509CAFile != "" {
		pem, err := os.ReadFile(opts.X509CAFile)
		if err != nil {
			return nil, fmt.Errorf("%w: x509 CA file: %w", ErrInvalidOptions, err)
		}
		h.caPool = x509.NewCertPool()
		if !h.caPool.AppendCertsFromPEM(pem) {
			return nil, fmt.Errorf("%w: x509 CA file %s holds no PEM certificate", ErrInvalidOptions, opts.X509CAFile)
		}
	}
	h.ctx, h.cancel = context.WithCancel(context.Background())
	h.m.init()
	h.lc.start(h.ctx)
	return h, nil
}

// Configure puts the hub's hooks into a bridge node's options before the
// bridge is built: device authentication and topic rules, connection
// tracking, the telemetry route and its property decoding, and (when the
// TLS listener has no tls.Config of its own) a TLS configuration that
// asks devices for client certificates.
func (h *Hub) Configure(mo *mqtt.Options, bo *bridge.Options) error {
	mo.Authenticate = h.authenticate
	// A device's persistent session (MQTT 3.1.1, clean session 0) lasts
	// this long offline; a session prepared for a device that has not
	// connected yet lasts as long.
	h.sessionExpiry = mo.SessionExpiryMax
	if h.sessionExpiry <= 0 {
		h.sessionExpiry = mqtt.DefaultSessionExpiryMax
	}
	// An owner noted at authentication outlasts the session load that
	// follows (owner.go).
	h.ownerGrace = max(h.ownerGrace, 2*cmp.Or(mo.SessionLoadTimeout, mqtt.DefaultSessionLoadTimeout))
	mo.Authorize = h.authorize
	prev := mo.Reserved
	mo.Reserved = func(c mqtt.ClientInfo, t string, sub bool) bool {
		return prev != nil && prev(c, t, sub) || h.reservedAllowed(c, t, sub)
	}
	filters := mo.ReservedFilters
	if filters == nil {
		filters = mqtt.DefaultReservedFilters
	}
	mo.ReservedFilters = append(slices.Clone(filters), reservedHubFilter, reservedDevFilter)
	mo.OnConnect, mo.OnDisconnect = h.onConnect, h.onDisconnect
	if prev := mo.OnAcked; prev != nil {
		mo.OnAcked = func(id string, m *mqtt.Message) { prev(id, m); h.onAcked(id, m) }
	} else {
		mo.OnAcked = h.onAcked
	}
	bo.IngressProps = h.ingressProps
	bo.PrepareC2D = h.prepareC2D // smartgo admin device send
	bo.Routes = append([]bridge.Route{
		{Filter: eventsDeviceFilter, Topic: h.opts.EventsTopic, IngressOnly: true},
		{Filter: eventsModuleFilter, Topic: h.opts.EventsTopic, IngressOnly: true},
	}, bo.Routes...)
	if len(mo.TLSListen) > 0 && mo.TLSConfig == nil {
		cert, err := tls.LoadX509KeyPair(mo.TLSCertFile, mo.TLSKeyFile)
		if err != nil {
			return fmt.Errorf("iothub: MQTT TLS key pair: %w", err)
		}
		// Device certificates are checked by the hub (a registered
		// thumbprint, or a chain to X509CAFile), not by the handshake.
		mo.TLSConfig = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12,
			ClientAuth: tls.RequestClientCert}
	}
	return nil
}

// Start attaches the hub to a started bridge node: the device request
// handlers, the direct-method topic, the registry client and the HTTPS
// API. Devices are refused (server unavailable) until it returns. It
// waits for the registries and brokers at most Options.StartTimeout
// (and while ctx lasts), then fails with ErrStartTimeout.
func (h *Hub) Start(ctx context.Context, b *bridge.Bridge) error {
	if h.closing.Load() {
		return ErrClosed
	}
	sctx, cancel := context.WithTimeout(ctx, h.opts.StartTimeout)
	defer cancel()
	if err := h.start(sctx, b); err != nil {
		if sctx.Err() != nil && ctx.Err() == nil {
			return fmt.Errorf("%w (%s, iothub.start_timeout): %w", ErrStartTimeout, h.opts.StartTimeout, err)
		}
		return err
	}
	return nil
}

func (h *Hub) start(ctx context.Context, b *bridge.Bridge) error {
	h.br, h.srv, h.nodeID = b, b.Server(), b.Backend().NodeID()
	b.Backend().SetOwnerTag(h.ownerTag)
	to := h.opts.Twins
	to.OnDesired = h.pushDesired
	if to.PrepareC2D == nil {
		// Every device created through this node (PUT /devices/{id}, the
		// bulk import) gets its session before the answer.
		to.PrepareC2D = h.prepareC2D
	}
	if to.Logger == nil {
		to.Logger = h.opts.Logger
	}
	tc, err := twincli.New(to)
	if err != nil {
		return fmt.Errorf("iothub: twin client: %w", err)
	}
	h.twins = tc
	if err := h.startMethods(ctx); err != nil {
		return err
	}
	if err := b.Backend().EnsureTopic(ctx, h.opts.FeedbackTopic); err != nil {
		return fmt.Errorf("iothub: %w", err)
	}
	h.unreg = append(h.unreg,
		h.srv.Handle(twinGetFilter, h.twinHandler(h.serveTwinGet)),
		h.srv.Handle(twinPatchFilter, h.twinHandler(h.serveTwinPatch)),
		h.srv.Handle(methodResFilter, h.handleMethodResponse))
	cfg, err := h.apiTLS()
	if err != nil {
		return err
	}
	if err := h.startHTTPS(cfg); err != nil {
		return err
	}
	if err := h.startAMQP(cfg); err != nil {
		return err
	}
	h.wg.Add(2)
	go h.sweepLoop()
	go h.staleLoop()
	h.started.Store(true)
	h.log.Info("iothub started", "host", h.opts.HostName, "device_auth", h.opts.DeviceAuth, "https", h.HTTPSAddrs(), "amqps", h.AMQPSAddrs(),
		"events_topic", h.opts.EventsTopic, "node", h.nodeID)
	return nil
}

// Close stops the API, drops the handlers and gives the connection
// bookkeeping still queued (connection states) a few seconds. Close the
// bridge's MQTT server first so that its devices' disconnects are
// recorded. It is idempotent.
func (h *Hub) Close() error {
	if !h.closing.CompareAndSwap(false, true) {
		return nil
	}
	h.started.Store(false)
	var errs []error
	for _, s := range h.https {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		if err := s.Shutdown(ctx); err != nil {
			errs = append(errs, s.Close())
		}
		cancel()
	}
	h.closeAMQP()
	for _, u := range h.unreg {
		u()
	}
	h.lc.drain(5 * time.Second)
	h.cancel()
	h.m.failAll()
	if h.rpc != nil {
		errs = append(errs, h.rpc.Close())
	}
	h.wg.Wait()
	if h.prod != nil {
		errs = append(errs, h.prod.Close())
	}
	if h.twins != nil {
		errs = append(errs, h.twins.Close())
	}
	h.mu.Lock()
	for _, d := range h.dev {
		if d.expiry != nil {
			d.expiry.Stop()
		}
	}
	h.mu.Unlock()
	return errors.Join(errs...)
}

// Stats returns the hub's counters.
func (h *Hub) Stats() *Stats { return &h.stats }

// Twins returns the registry client the hub uses.
func (h *Hub) Twins() *twincli.Client { return h.twins }

// HTTPSAddrs returns the HTTPS API's listen addresses.
func (h *Hub) HTTPSAddrs() []net.Addr { return slices.Clone(h.lnAddrs) }

// sweepLoop drops direct-method calls past their deadline and, every
// ownerPrune, the owners (owner.go) and token expiries no longer needed.
func (h *Hub) sweepLoop() {
	defer h.wg.Done()
	t := time.NewTicker(min(time.Second, h.ownerPrune))
	defer t.Stop()
	var pruned time.Time
	for {
		select {
		case <-h.ctx.Done():
			return
		case now := <-t.C:
			h.m.sweep(now)
			if now.Sub(pruned) >= h.ownerPrune {
				pruned = now
				h.pruneOwners(now)
				h.pruneExpiries(now)
			}
		}
	}
}

// pruneExpiries drops the token expiries of authenticated connects that
// never became connections (refused after authentication, or closed
// before their announcement) ownerGrace after the token expired.
func (h *Hub) pruneExpiries(now time.Time) {
	h.mu.Lock()
	defer h.mu.Unlock()
	for k, exp := range h.expiries {
		if now.Sub(exp) > h.ownerGrace {
			delete(h.expiries, k)
		}
	}
}

// requestCtx bounds a registry call.
func (h *Hub) requestCtx(ctx context.Context) (context.Context, context.CancelFunc) {
	return context.WithTimeout(ctx, h.opts.RequestTimeout)
}

// randomHex returns n random bytes in hex.
func randomHex(n int) string {
	b := make([]byte, n)
	_, _ = rand.Read(b)
	return hex.EncodeToString(b)
}
