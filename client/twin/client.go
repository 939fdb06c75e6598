package twin

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/client/internal/shardroute"
	"github.com/smartgo/smartgo/internal/pace"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	tw "github.com/smartgo/smartgo/twin"
)

// SystemTopic is the broker topic whose queues are the twin shards
// (broker.TwinTopic; repeated because client may not import broker).
const SystemTopic = "%SYS_TWIN"

// Defaults for Options.
const (
	DefaultRouteRefresh   = 30 * time.Second
	DefaultRequestTimeout = 10 * time.Second
	DefaultWatchCheck     = 2 * time.Second
	DefaultShards         = 8 // the broker's default (broker.DefaultTwinShards)
)

// Options configures a Client. Either Registries (the route of
// SystemTopic is looked up there) or Brokers (a fixed broker name ->
// master address table, each broker hosting Shards shards) must be set.
type Options struct {
	Registries []string
	// RouteRefresh is how long a route is used before it is looked up
	// again (default 30 s); a request the owner refuses refreshes it at
	// once.
	RouteRefresh time.Duration

	Brokers map[string]string
	Shards  int // shards per broker with Brokers (default 8)

	// RequestTimeout bounds a request whose context has no deadline
	// (default 10 s).
	RequestTimeout time.Duration

	// ReplicaReads: a read (GetTwin, GetDevice, ListDevices, a query, ...)
	// whose shard's master is unavailable (dead, no master in the route,
	// or hung: no answer within a third of the read's time) is sent to
	// the broker's slaves, which answer from their replica. The
	// result then comes with an error wrapping ErrStale that says so
	// (use the result when errors.Is(err, ErrStale)). Writes are never
	// sent to a slave. A console reading devices during a failover wants
	// this; a front end checking device keys does not.
	ReplicaReads bool

	// Local maps the address of a broker running in this process (the
	// address it registers) to its twins: their shards are served by a
	// direct call instead of a loopback round trip (`smartgo standalone`).
	Local map[string]LocalBroker

	// OnDesired receives the desired changes of the twins this client
	// watches (Watch). It is called from the connection's reader: it must
	// not block long; hand the changes to the device sessions and return.
	OnDesired func([]DesiredChange)
	// WatchCheck is how often the brokers of watched twins are asked
	// whether they restarted (or a slave took over), so the watches are
	// registered again (default 2 s).
	WatchCheck time.Duration

	// PrepareC2D, when set, runs after PutDevice (CreateDevice) created a
	// device identity (a create, or an upsert of a device that did not
	// exist). It gives the device a session holding its cloud-to-device
	// subscription, so messages stored for it before its first connect
	// wait for it. Unset, the client asks an IoT hub node for that through
	// the registries (the relay of `smartgo admin`; nothing without
	// Registries or without a hub node); an IoT hub node sets its own.
	// A failure is logged and does not fail the create.
	PrepareC2D func(ctx context.Context, deviceID string) error
	// NoPrepareC2D turns the preparation off.
	NoPrepareC2D bool

	Logger *slog.Logger
}

// LocalBroker is a broker's twins in the client's process (see
// Options.Local); cmd/smartgo adapts broker.Twins to it.
type LocalBroker interface {
	// InvokeLocal serves req on shard like a TwinInvoke request. Errors
	// wrap ErrUnavailable (not owned here, nothing changed) or ErrFailed.
	InvokeLocal(ctx context.Context, shard int32, req *tw.Request) (tw.Reply, error)
	// WatchLocal is TwinWatch with sink standing for the connection; it
	// returns the broker's epoch.
	WatchLocal(action tw.WatchAction, keys []string, sink tw.Sink) uint64
}

// Validate reports the first invalid field.
func (o *Options) Validate() error {
	if len(o.Registries) == 0 && len(o.Brokers) == 0 {
		return fmt.Errorf("%w: twin client needs Registries or Brokers", ErrBadOptions)
	}
	if o.Shards < 0 || o.RouteRefresh < 0 || o.RequestTimeout < 0 || o.WatchCheck < 0 {
		return fmt.Errorf("%w: negative option", ErrBadOptions)
	}
	return nil
}

// shardRef is one global shard: a queue of SystemTopic on a broker, and
// the broker's twins when it runs in this process.
type shardRef struct {
	shardroute.Ref
	local LocalBroker
}

// Client is SmartGo's Go API for device identities and twins: the back
// end's operations (identities, twins, queries), a device's (reported
// patches and reads, connection state) as a front end such as an MQTT
// bridge performs them for its devices, and the desired-change
// notifications of the twins a front end watches. It finds the broker
// owning a device's shard through the route of SystemTopic. Its methods
// are safe for concurrent use.
type Client struct {
	opts Options
	log  *slog.Logger
	rc   *remoting.Client
	tab  *shardroute.Table

	w watches

	adminMu sync.Mutex
	adm     *admin.Admin // protected by adminMu; the default PrepareC2D's, made at first use

	// last is the route route() returned last (to see masters move);
	// forced spaces the lookups refreshSoon starts.
	last   atomic.Pointer[[]shardroute.Ref]
	forced pace.Gate
	// hung: master address -> when a read last found it hanging
	// (doMaster); reads its slaves can serve skip it for a while.
	hung sync.Map

	closed    atomic.Bool
	closeOnce sync.Once
	ctx       context.Context // ends at Close
	cancel    context.CancelFunc
	wg        sync.WaitGroup
}

// New returns a client; it connects lazily.
func New(opts Options) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if opts.RouteRefresh == 0 {
		opts.RouteRefresh = DefaultRouteRefresh
	}
	if opts.Shards == 0 {
		opts.Shards = DefaultShards
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultRequestTimeout
	}
	if opts.WatchCheck == 0 {
		opts.WatchCheck = DefaultWatchCheck
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	rc, err := remoting.NewClient(remoting.ClientOptions{Logger: lg, SerializeType: protocol.SerializeRocketMQ})
	if err != nil {
		return nil, fmt.Errorf("twin: %w", err)
	}
	c := &Client{opts: opts, log: lg, rc: rc}
	c.w.init()
	rc.RegisterFunc(protocol.TwinNotify, c.onNotify)
	rc.OnConnClose(func(conn *remoting.Conn, _ error) { c.w.connLost() })
	if len(opts.Brokers) > 0 {
		c.tab = shardroute.Fixed(SystemTopic, opts.Brokers, opts.Shards)
	} else {
		c.tab = shardroute.New(rc, SystemTopic, opts.Registries, opts.RouteRefresh)
	}
	ctx, cancel := context.WithCancel(context.Background())
	c.ctx, c.cancel = ctx, cancel
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.watchLoop(ctx)
	}()
	return c, nil
}

// Close stops the watch loop and closes the broker connections. It is
// idempotent.
func (c *Client) Close() error {
	var err error
	c.closeOnce.Do(func() {
		c.closed.Store(true)
		c.cancel()
		c.wg.Wait()
		err = c.rc.Close()
		c.adminMu.Lock()
		if c.adm != nil {
			err = errors.Join(err, c.adm.Close())
		}
		c.adminMu.Unlock()
	})
	return err
}

// Shards returns the number of global shards (loading the route if
// needed).
func (c *Client) Shards(ctx context.Context) (int, error) {
	s, err := c.route(ctx, false)
	return len(s), err
}

// route returns the global shard list.
func (c *Client) route(ctx context.Context, force bool) ([]shardRef, error) {
	refs, err := c.tab.Get(ctx, force)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoRoute, err)
	}
	if prev := c.last.Swap(&refs); prev != nil && len(*prev) > 0 && len(refs) > 0 && &(*prev)[0] != &refs[0] {
		c.closeMoved(*prev, refs)
	}
	out := make([]shardRef, len(refs))
	for i, r := range refs {
		out[i] = shardRef{Ref: r, local: c.opts.Local[r.Addr]}
	}
	return out, nil
}

// withTimeout gives ctx the client's request timeout when it has no
// deadline.
func (c *Client) withTimeout(ctx context.Context) (context.Context, context.CancelFunc) {
	if _, ok := ctx.Deadline(); ok {
		return ctx, func() {}
	}
	return context.WithTimeout(ctx, c.opts.RequestTimeout)
}

// Do sends one request to the broker owning its device's shard and
// returns the reply. An operation that fails (404, 412, ...) returns the
// reply and its *Error (errors.Is with ErrNotFound, ErrPrecondition, ...);
// a transport failure returns ErrUnavailable, ErrFailed, ErrNoRoute or
// ErrClosed. When the owner refuses (a slave, a route that moved) the
// route is looked up again and the request sent once more: a write the
// owner refused changed nothing.
func (c *Client) Do(ctx context.Context, req *Request) (*Reply, error) {
	ctx, cancel := c.withTimeout(ctx)
	defer cancel()
	var lastErr error
	var ref shardRef
	for attempt := 0; attempt < 2; attempt++ {
		shards, err := c.route(ctx, attempt > 0)
		if err != nil {
			return nil, err
		}
		ref = shards[tw.ShardOf(req.DeviceID, len(shards))]
		rep, hung, err := c.doMaster(ctx, ref, req)
		if err == nil {
			if rep.Err != nil {
				return rep, rep.Err
			}
			return rep, nil
		}
		lastErr = err
		if ctx.Err() != nil || hung {
			c.refreshSoon()
			break
		}
		if !errors.Is(err, ErrUnavailable) {
			break
		}
	}
	return c.fromReplica(ctx, ref, req, lastErr)
}

// fromReplica reads req from a slave of ref's broker after its master
// failed with cause (Options.ReplicaReads; a read; the master
// unavailable): the reply, with its operation's error or else an error
// wrapping ErrStale. It returns cause when that does not apply or no
// slave answers.
func (c *Client) fromReplica(ctx context.Context, ref shardRef, req *Request, cause error) (*Reply, error) {
	if !c.opts.ReplicaReads || req.Op.Logged() || !errors.Is(cause, ErrUnavailable) || ctx.Err() != nil || c.closed.Load() {
		return nil, cause
	}
	body := req.AppendBinary(nil)
	for _, addr := range ref.Slaves {
		cmd := protocol.NewTwinRequest(ref.Queue, body)
		protocol.MarkTwinReplicaRead(cmd)
		resp, err := c.rc.Invoke(ctx, addr, cmd)
		if err != nil || resp.Code != protocol.Success {
			continue
		}
		rep, err := tw.DecodeReply(resp.Body)
		if err != nil {
			continue
		}
		if rep.Err != nil {
			return rep, rep.Err
		}
		return rep, fmt.Errorf("%w: broker %s shard %d read from slave %s; master: %v", ErrStale, ref.Broker, ref.Queue, addr, cause)
	}
	return nil, cause
}

// doMaster is doShard to ref's master, bounded, for a read its slaves
// could serve instead (Options.ReplicaReads), by a third of what is left
// of ctx: a master that hangs (its connection up, answering nothing)
// would otherwise take the whole deadline and leave none for the slaves.
// A master found hanging is skipped by such reads for RequestTimeout
// (the pages of a listing, the next reads) unless the route moved it.
// hung: the bound ran out, or the master was skipped (the error wraps
// ErrUnavailable).
func (c *Client) doMaster(ctx context.Context, ref shardRef, req *Request) (rep *Reply, hung bool, err error) {
	dl, ok := ctx.Deadline()
	if !c.opts.ReplicaReads || req.Op.Logged() || len(ref.Slaves) == 0 || !ok {
		rep, err = c.doShard(ctx, ref, req)
		return rep, false, err
	}
	if at, ok := c.hung.Load(ref.Addr); ok && time.Since(at.(time.Time)) < c.opts.RequestTimeout {
		return nil, true, fmt.Errorf("%w: master %s of broker %s hung moments ago", ErrUnavailable, ref.Addr, ref.Broker)
	}
	mctx, cancel := context.WithTimeout(ctx, time.Until(dl)/3)
	defer cancel()
	rep, err = c.doShard(mctx, ref, req)
	if err != nil && mctx.Err() != nil && ctx.Err() == nil {
		c.hung.Store(ref.Addr, time.Now())
		return nil, true, err
	}
	if err == nil {
		c.hung.Delete(ref.Addr)
	}
	return rep, false, err
}

// usable reports whether a read's result may be used: no error, or
// ErrStale (read from a slave's replica).
func usable(err error) bool { return err == nil || errors.Is(err, ErrStale) }

// closeMoved closes the connections to the masters of prev that next
// replaced: requests still waiting on one (a master that hangs or is cut
// off answers none) fail now rather than at their deadline.
func (c *Client) closeMoved(prev, next []shardroute.Ref) {
	now := make(map[string]string, 4)
	for _, r := range next {
		now[r.Broker] = r.Addr
	}
	done := map[string]bool{}
	for _, r := range prev {
		if a, ok := now[r.Broker]; ok && a != r.Addr && r.Addr != "" && c.opts.Local[r.Addr] == nil && !done[r.Addr] {
			done[r.Addr] = true
			c.rc.CloseConn(r.Addr)
		}
	}
}

// refreshSoon looks the route up again in the background (at most once
// every pace.RouteAfterTimeout) after a request ran out of time: the requests after
// it should reach the master elected in place of one that hangs, not
// wait for the next periodic refresh (RouteRefresh).
func (c *Client) refreshSoon() {
	if c.closed.Load() || !c.forced.Allow(pace.RouteAfterTimeout) {
		return
	}
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		ctx, cancel := context.WithTimeout(c.ctx, c.opts.RequestTimeout)
		defer cancel()
		if _, err := c.route(ctx, true); err != nil {
			c.log.Debug("twin: route lookup after a timeout", "err", err)
		}
	}()
}

// doShard sends req to one shard.
func (c *Client) doShard(ctx context.Context, ref shardRef, req *Request) (*Reply, error) {
	if c.closed.Load() {
		return nil, ErrClosed
	}
	if ref.Addr == "" {
		return nil, fmt.Errorf("%w: no master for broker %s", ErrUnavailable, ref.Broker)
	}
	if lb := ref.local; lb != nil {
		rep, err := lb.InvokeLocal(ctx, ref.Queue, req)
		switch {
		case err == nil:
			return &rep, nil
		case errors.Is(err, ErrFailed), errors.Is(err, ErrUnavailable):
			return nil, fmt.Errorf("twin: local broker %s: %w", ref.Addr, err)
		default:
			return nil, fmt.Errorf("%w: local broker %s: %w", ErrFailed, ref.Addr, err)
		}
	}
	resp, err := c.rc.Invoke(ctx, ref.Addr, protocol.NewTwinRequest(ref.Queue, req.AppendBinary(nil)))
	if err != nil {
		return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, ref.Addr, err)
	}
	switch resp.Code {
	case protocol.Success:
		rep, err := tw.DecodeReply(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("%w: reply from %s: %w", ErrFailed, ref.Addr, err)
		}
		return rep, nil
	case protocol.ServiceNotAvailable, protocol.RequestCodeNotSupported:
		return nil, fmt.Errorf("%w: %s: %s", ErrUnavailable, ref.Addr, resp.Remark)
	default:
		return nil, fmt.Errorf("%w: %s: code %d: %s", ErrFailed, ref.Addr, resp.Code, resp.Remark)
	}
}

func (c *Client) onNotify(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	list, err := tw.DecodeDesiredChanges(req.Body)
	if err != nil {
		c.log.Warn("twin: bad notification push", "err", err)
		return nil, nil
	}
	c.PushDesired(list)
	return nil, nil
}

// PushDesired implements twin.Sink: a local broker's desired changes go
// to OnDesired like those pushed over remoting.
func (c *Client) PushDesired(list []DesiredChange) {
	if c.opts.OnDesired != nil && len(list) > 0 {
		c.opts.OnDesired(list)
	}
}

// prepareC2D runs the PrepareC2D of Options for a device PutDevice
// created.
func (c *Client) prepareC2D(ctx context.Context, deviceID string) {
	if c.opts.NoPrepareC2D {
		return
	}
	prep := c.opts.PrepareC2D
	if prep == nil {
		if len(c.opts.Registries) == 0 {
			return
		}
		prep = c.prepareThroughRegistries
	}
	if err := prep(ctx, deviceID); err != nil {
		c.log.Warn("twin: no session prepared for a new device's cloud-to-device messages", "device", deviceID, "err", err)
	}
}

// prepareThroughRegistries is the default PrepareC2D: an IoT hub node,
// reached through the registries' relay, prepares the session.
func (c *Client) prepareThroughRegistries(ctx context.Context, deviceID string) error {
	c.adminMu.Lock()
	if c.adm == nil && !c.closed.Load() {
		a, err := admin.New(admin.Options{Registries: c.opts.Registries, RequestTimeout: c.opts.RequestTimeout, Logger: c.log})
		if err != nil {
			c.adminMu.Unlock()
			return err
		}
		c.adm = a
	}
	a := c.adm
	c.adminMu.Unlock()
	if a == nil {
		return ErrClosed
	}
	_, err := a.PrepareC2D(ctx, deviceID)
	return err
}
