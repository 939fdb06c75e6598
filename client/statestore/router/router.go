package router

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/client/internal/shardroute"
	"github.com/smartgo/smartgo/internal/gogroup"
	"github.com/smartgo/smartgo/internal/pace"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
)

// SystemTopic is the broker topic whose queues are the state store shards
// (broker.StateStoreTopic; repeated here because client may not import
// broker).
const SystemTopic = "%SYS_STATESTORE"

// Defaults of Options.
const (
	DefaultRouteRefresh   = 30 * time.Second
	DefaultShards         = 8 // the broker's default (broker.DefaultStateStoreShards)
	DefaultRequestTimeout = 10 * time.Second
)

// DefaultOptions returns the defaults of a router using registries.
func DefaultOptions(registries ...string) Options {
	return Options{Registries: registries, RouteRefresh: DefaultRouteRefresh, Shards: DefaultShards, RequestTimeout: DefaultRequestTimeout}
}

// Options configures a Router. Either Registries (routes are looked
// up for SystemTopic) or Brokers (a fixed broker name -> master address
// table, each broker hosting Shards shards) must be set.
type Options struct {
	Registries   []string
	RouteRefresh time.Duration // default 30 s

	Brokers map[string]string
	Shards  int // shards per broker with Brokers (default 8, the broker's default)

	// RequestTimeout bounds a request whose context has no deadline
	// (default 10 s).
	RequestTimeout time.Duration
	// Local maps the address of a broker running in this process (its
	// Broker.Addr(), the address it registers) to its state store: the
	// shards of that broker are served by a direct call instead of a
	// remoting round trip over loopback. `smartgo standalone` wires its
	// broker here; other brokers are reached over the network as usual.
	Local map[string]LocalBroker

	// OnNotify receives the notifications that brokers push (every
	// change's, whichever front end made it, and expiries'), each
	// shard's in its log order. It runs on a broker connection's reader
	// (or, for a Local broker, on the goroutine of whichever change
	// routes them, holding the shard's later notices back): it must not
	// block.
	OnNotify func([]protocol.StateStoreNotification)
	// OnMasterChange, when set, is told the name of a broker whose
	// master may have changed, so that what a front end registered there
	// (KEYNOTIFY watches live in the master's memory) can be registered
	// again: a route lookup named another address for it, or a
	// connection to its address closed (the master died, restarted, was
	// demoted, or closed an idle connection and dropped its watches). It
	// runs on the goroutine that noticed and must not block.
	OnMasterChange func(broker string)
	Logger         *slog.Logger
}

// Validate reports the first invalid field.
func (o *Options) Validate() error {
	if len(o.Registries) == 0 && len(o.Brokers) == 0 {
		return fmt.Errorf("%w: router needs Registries or Brokers", ErrBadOptions)
	}
	if o.Shards < 0 || o.RouteRefresh < 0 || o.RequestTimeout < 0 {
		return fmt.Errorf("%w: negative router option", ErrBadOptions)
	}
	return nil
}

// shardRef is one global shard: a queue of SystemTopic on a broker.
type shardRef struct {
	shardroute.Ref
	local LocalBroker // Options.Local[Addr]: served in process when set
}

// Router sends state store commands to the broker that owns the key's
// shard. The global shard list is every (broker name, queue) of
// SystemTopic sorted by broker name then queue id, and a key's shard is
// statestore.ShardOf(key, len(list)): the brokers' set and shard counts
// are FROZEN once keys exist (resharding is not supported).
type Router struct {
	opts Options
	log  *slog.Logger
	rc   *remoting.Client
	tab  *shardroute.Table

	routes atomic.Pointer[routeConv] // the last route converted
	// forced spaces the lookups refreshSoon starts.
	forced pace.Gate

	closeOnce sync.Once
	group     gogroup.Group // goroutines Close waits for
}

// NewRouter returns a router; it connects lazily.
func New(opts Options) (*Router, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	d := DefaultOptions()
	if opts.RouteRefresh == 0 {
		opts.RouteRefresh = d.RouteRefresh
	}
	if opts.Shards == 0 {
		opts.Shards = d.Shards
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = d.RequestTimeout
	}
	lg := opts.Logger
	if lg == nil {
		lg = slog.New(slog.DiscardHandler)
	}
	rc, err := remoting.NewClient(remoting.ClientOptions{Logger: lg, SerializeType: protocol.SerializeRocketMQ})
	if err != nil {
		return nil, fmt.Errorf("router: %w", err)
	}
	r := &Router{opts: opts, log: lg, rc: rc}
	// On the reader: a broker's pushes are delivered in the order it
	// wrote them (a shard's log order), and before the responses written
	// after them.
	rc.RegisterInline(protocol.StateStoreNotify, remoting.ProcessorFunc(r.onNotify))
	if opts.OnMasterChange != nil {
		rc.OnConnClose(r.connClosed)
	}
	if len(opts.Brokers) > 0 {
		r.tab = shardroute.Fixed(SystemTopic, opts.Brokers, opts.Shards)
	} else {
		r.tab = shardroute.New(rc, SystemTopic, opts.Registries, opts.RouteRefresh)
	}
	return r, nil
}

// Close closes the broker connections. It is idempotent.
func (r *Router) Close() error {
	var err error
	r.closeOnce.Do(func() {
		r.group.Close()
		err = r.rc.Close()
		r.group.Wait()
	})
	return err
}

func (r *Router) onNotify(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	resp, err := protocol.DecodeStateStoreResponse(req.Body)
	if err != nil {
		r.log.Warn("router: bad notify push", "err", err)
		return nil, nil
	}
	if r.opts.OnNotify != nil && len(resp.Notifications) > 0 {
		r.opts.OnNotify(resp.Notifications)
	}
	return nil, nil
}

// Shards returns the current number of global shards (loading the route
// if needed).
func (r *Router) Shards(ctx context.Context) (int, error) {
	s, err := r.route(ctx, false)
	return len(s), err
}

func (r *Router) route(ctx context.Context, force bool) ([]shardRef, error) {
	refs, err := r.tab.Get(ctx, force)
	if err != nil {
		return nil, fmt.Errorf("%w: %w", ErrNoRoute, err)
	}
	return r.convert(refs), nil
}

// convert returns the table's route with each shard's local broker
// looked up.
func (r *Router) convert(refs []shardroute.Ref) []shardRef {
	// The table returns the same slice until the route changes: reuse
	// its conversion rather than build one per request.
	if c := r.routes.Load(); c != nil && len(c.refs) == len(refs) && len(refs) > 0 && &c.refs[0] == &refs[0] {
		return c.out
	}
	out := make([]shardRef, len(refs))
	for i, ref := range refs {
		out[i] = shardRef{Ref: ref, local: r.opts.Local[ref.Addr]}
	}
	old := r.routes.Swap(&routeConv{refs: refs, out: out})
	if old == nil {
		return out
	}
	moved := movedMasters(old.refs, refs)
	if len(moved) > 0 {
		// Requests still waiting on a replaced master (one that hangs or
		// is cut off answers none) fail now and are tried again on the
		// new one while they have time, rather than wait out their
		// deadline.
		for _, ref := range old.refs {
			if ref.Addr != "" && r.opts.Local[ref.Addr] == nil && slices.Contains(moved, ref.Broker) {
				r.rc.CloseConn(ref.Addr)
			}
		}
	}
	if r.opts.OnMasterChange != nil {
		for _, b := range moved {
			r.opts.OnMasterChange(b)
		}
	}
	return out
}

// movedMasters returns the brokers of next whose master address differs
// from the one in prev (a broker new in next is not reported: nothing
// can have been registered on it).
func movedMasters(prev, next []shardroute.Ref) []string {
	was := make(map[string]string, 4)
	for _, ref := range prev {
		was[ref.Broker] = ref.Addr
	}
	var moved []string
	for _, ref := range next {
		if a, ok := was[ref.Broker]; ok && a != ref.Addr {
			moved = append(moved, ref.Broker)
			delete(was, ref.Broker)
		}
	}
	return moved
}

// connClosed reports the brokers whose master's connection closed to
// OnMasterChange. A connection matches a broker by its remote address;
// one that matches no broker of the route and no registry (a route named
// by host name) reports every broker.
func (r *Router) connClosed(c *remoting.Conn, _ error) {
	if r.group.Closed() {
		return
	}
	c0 := r.routes.Load()
	if c0 == nil {
		return
	}
	addr := c.RemoteAddr().String()
	for _, reg := range r.opts.Registries {
		if reg == addr {
			return
		}
	}
	var all, hit []string
	seen := map[string]bool{}
	for _, ref := range c0.refs {
		if seen[ref.Broker] {
			continue
		}
		seen[ref.Broker] = true
		all = append(all, ref.Broker)
		if ref.Addr == addr {
			hit = append(hit, ref.Broker)
		}
	}
	if len(hit) == 0 {
		hit = all
	}
	for _, b := range hit {
		r.opts.OnMasterChange(b)
	}
}

// routeConv is the table's route (refs) with each shard's local broker
// looked up (out); out is never modified once stored.
type routeConv struct {
	refs []shardroute.Ref
	out  []shardRef
}

// Invoke sends req (Shard is ignored: the shard is picked from key) to
// the owning broker and returns its response. On a routing failure the
// route is refreshed once and the request retried. A shard of a local
// broker (Options.Local) is served by a direct call.
func (r *Router) Invoke(ctx context.Context, key []byte, req *protocol.StateStoreRequest) (*protocol.StateStoreResponse, error) {
	return r.InvokeBefore(ctx, time.Time{}, key, req)
}

// InvokeBefore is Invoke bounded by deadline as well as by ctx (zero: no
// extra bound). A remote call gets a context with the deadline; a local
// call (Options.Local) gets none, which spares a timer per request:
// it is refused when the deadline has already passed, and otherwise the
// broker bounds its own waits.
func (r *Router) InvokeBefore(ctx context.Context, deadline time.Time, key []byte, req *protocol.StateStoreRequest) (*protocol.StateStoreResponse, error) {
	return r.invoke(ctx, deadline, key, nil, req)
}

// InvokeCommand is InvokeBefore for a request the caller has parsed: cmd
// is statestore.ParseCommand(req.Payload) (nil when that failed: the
// request goes to the shard of the empty key, whose engine answers the
// error). The shard is cmd's key's, and a local broker (Options.Local)
// gets cmd along, so the payload is parsed once on its way.
func (r *Router) InvokeCommand(ctx context.Context, deadline time.Time, cmd *statestore.Command, req *protocol.StateStoreRequest) (*protocol.StateStoreResponse, error) {
	var key []byte
	if cmd != nil {
		key = cmd.Key
	}
	return r.invoke(ctx, deadline, key, cmd, req)
}

// invoke serves InvokeBefore and InvokeCommand; cmd may be nil.
func (r *Router) invoke(ctx context.Context, deadline time.Time, key []byte, cmd *statestore.Command, req *protocol.StateStoreRequest) (*protocol.StateStoreResponse, error) {
	if r.group.Closed() {
		return nil, ErrClosed
	}
	return r.invokeFrom(ctx, deadline, 0, nil, key, cmd, req)
}

// invokeFrom is invoke from attempt first on (1: the second attempt, on a
// route looked up again, after lastErr).
func (r *Router) invokeFrom(ctx context.Context, deadline time.Time, first int, lastErr error, key []byte, cmd *statestore.Command, req *protocol.StateStoreRequest) (*protocol.StateStoreResponse, error) {
	hasDeadline := false
	if d, ok := ctx.Deadline(); ok && (deadline.IsZero() || !d.After(deadline)) {
		hasDeadline = true
	}
	for attempt := first; attempt < 2; attempt++ {
		shards, err := r.route(ctx, attempt > 0)
		if err != nil {
			return nil, err
		}
		ref := shards[statestore.ShardOf(key, len(shards))]
		if ref.Addr == "" {
			lastErr = fmt.Errorf("%w: no master for broker %s", ErrNoRoute, ref.Broker)
			continue
		}
		req.Shard = ref.Queue
		if lb := ref.local; lb != nil {
			// No timer for the direct call: the broker bounds its own
			// waits (append, slave acknowledgement).
			if !deadline.IsZero() && !time.Now().Before(deadline) {
				return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, ref.Addr, context.DeadlineExceeded)
			}
			resp, err := r.invokeLocal(ctx, lb, ref.Addr, req, cmd)
			if err != nil {
				lastErr = err
				if errors.Is(err, ErrUnavailable) && !errors.Is(err, ErrDiskFull) && ctx.Err() == nil {
					continue
				}
				return nil, err
			}
			return resp, nil
		}
		if !hasDeadline {
			if deadline.IsZero() {
				deadline = time.Now().Add(r.opts.RequestTimeout)
			}
			var cancel context.CancelFunc
			ctx, cancel = context.WithDeadline(ctx, deadline)
			defer cancel()
			hasDeadline = true
		}
		resp, err := r.rc.Invoke(ctx, ref.Addr, protocol.NewStateStoreRequest(req))
		out, again, err := remoteResult(ref.Addr, resp, err)
		if !again {
			return out, err
		}
		lastErr = err
		if ctx.Err() != nil {
			r.refreshSoon()
			break
		}
	}
	return nil, lastErr
}

// refreshSoon looks the route up again in the background (at most one
// lookup every pace.RouteAfterTimeout) after a request to a broker ran out of
// time: a master that hangs or is cut off closes no connection, and the
// requests after this one should reach the master the controller elects
// meanwhile, not wait for the next periodic refresh (RouteRefresh).
func (r *Router) refreshSoon() {
	if !r.forced.Allow(pace.RouteAfterTimeout) {
		return
	}
	r.group.Go(func() {
		ctx, cancel := context.WithTimeout(context.Background(), r.opts.RequestTimeout)
		defer cancel()
		if _, err := r.route(ctx, true); err != nil {
			r.log.Debug("router: route lookup after a timeout", "err", err)
		}
	})
}

// remoteResult reads a remote broker's answer (or the transport error):
// again reports that another attempt, on a route looked up again, may
// succeed (err is then the reason).
func remoteResult(addr string, resp *protocol.Command, err error) (out *protocol.StateStoreResponse, again bool, _ error) {
	if err != nil {
		return nil, true, fmt.Errorf("%w: %s: %w", ErrUnavailable, addr, err)
	}
	switch resp.Code {
	case protocol.Success:
		out, err := protocol.DecodeStateStoreResponse(resp.Body)
		if err != nil {
			return nil, false, fmt.Errorf("router: response from %s: %w", addr, err)
		}
		return out, false, nil
	case protocol.ServiceNotAvailable, protocol.RequestCodeNotSupported:
		if resp.Fields()[protocol.FieldRefusal] == protocol.RefusalDiskFull {
			// The master's disk is full: asking it again now is no use.
			return nil, false, fmt.Errorf("%w: %w: %s: %s", ErrUnavailable, ErrDiskFull, addr, resp.Remark)
		}
		return nil, true, fmt.Errorf("%w: %s: %s", ErrUnavailable, addr, resp.Remark)
	default:
		return nil, false, fmt.Errorf("%w: %s: code %d: %s", ErrFailed, addr, resp.Code, resp.Remark)
	}
}

// InvokeCommandAsync is InvokeCommand without waiting for the answer: cb
// receives what InvokeCommand would have returned, exactly once. A shard
// of a local broker (Options.Local) is served before it returns, on the
// calling goroutine; a remote broker's answer comes on its connection's
// reader (InvokeAsync), so no goroutine waits for it. What is rare runs
// on a goroutine of its own, as InvokeCommand: a route lookup (the first
// request, then one every RouteRefresh) and the second attempt after a
// refusal. The first request to a broker dials it.
func (r *Router) InvokeCommandAsync(ctx context.Context, deadline time.Time, cmd *statestore.Command, req *protocol.StateStoreRequest, cb func(*protocol.StateStoreResponse, error)) {
	var key []byte
	if cmd != nil {
		key = cmd.Key
	}
	if r.group.Closed() {
		cb(nil, ErrClosed)
		return
	}
	refs, ok := r.tab.Cached()
	if !ok {
		if !r.group.Go(func() { cb(r.invokeFrom(ctx, deadline, 0, nil, key, cmd, req)) }) {
			cb(nil, ErrClosed)
		}
		return
	}
	shards := r.convert(refs)
	ref := shards[statestore.ShardOf(key, len(shards))]
	switch {
	case ref.Addr == "":
		r.retryAsync(ctx, deadline, fmt.Errorf("%w: no master for broker %s", ErrNoRoute, ref.Broker), key, cmd, req, cb)
	case !deadline.IsZero() && !time.Now().Before(deadline):
		cb(nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, ref.Addr, context.DeadlineExceeded))
	case ref.local != nil:
		req.Shard = ref.Queue
		resp, err := r.invokeLocal(ctx, ref.local, ref.Addr, req, cmd)
		if err != nil && errors.Is(err, ErrUnavailable) {
			r.retryAsync(ctx, deadline, err, key, cmd, req, cb)
			return
		}
		cb(resp, err)
	default:
		req.Shard = ref.Queue
		timeout := r.opts.RequestTimeout
		if !deadline.IsZero() {
			timeout = time.Until(deadline)
		}
		if d, ok := ctx.Deadline(); ok {
			timeout = min(timeout, time.Until(d))
		}
		err := r.rc.InvokeAsync(ctx, ref.Addr, protocol.NewStateStoreRequest(req), max(timeout, time.Millisecond), func(resp *protocol.Command, err error) {
			out, again, err := remoteResult(ref.Addr, resp, err)
			if again {
				r.retryAsync(ctx, deadline, err, key, cmd, req, cb)
				return
			}
			cb(out, err)
		})
		if err != nil {
			r.retryAsync(ctx, deadline, fmt.Errorf("%w: %s: %w", ErrUnavailable, ref.Addr, err), key, cmd, req, cb)
		}
	}
}

// Shard is one global shard: a queue of SystemTopic on a broker, with
// the address of the broker's master ("" when it has none).
type Shard = shardroute.Ref

// Route returns the global shard list, looked up again when force is set
// (or when the last lookup is older than RouteRefresh).
func (r *Router) Route(ctx context.Context, force bool) ([]Shard, error) {
	s, err := r.route(ctx, force)
	if err != nil {
		return nil, err
	}
	out := make([]Shard, len(s))
	for i := range s {
		out[i] = s[i].Ref
	}
	return out, nil
}

// InvokeShard sends req to the shard at, one of Route's, whatever the key
// of cmd (cmd may be nil): one attempt, no route lookup. A front end uses
// it to register watches again on a shard whose master changed. Errors
// are Invoke's.
func (r *Router) InvokeShard(ctx context.Context, at Shard, cmd *statestore.Command, req *protocol.StateStoreRequest) (*protocol.StateStoreResponse, error) {
	if r.group.Closed() {
		return nil, ErrClosed
	}
	if at.Addr == "" {
		return nil, fmt.Errorf("%w: no master for broker %s", ErrNoRoute, at.Broker)
	}
	req.Shard = at.Queue
	if lb := r.opts.Local[at.Addr]; lb != nil {
		return r.invokeLocal(ctx, lb, at.Addr, req, cmd)
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.opts.RequestTimeout)
		defer cancel()
	}
	resp, err := r.rc.Invoke(ctx, at.Addr, protocol.NewStateStoreRequest(req))
	out, _, err := remoteResult(at.Addr, resp, err)
	return out, err
}

// DropClient tells every broker that clientID disconnected from this
// router's front end, so they drop its KEYNOTIFY registrations (a broker
// keeps them when the client's last request came through another front
// end: the client moved there).
func (r *Router) DropClient(ctx context.Context, clientID string) error {
	shards, err := r.route(ctx, false)
	if err != nil {
		return err
	}
	seen := map[string]bool{}
	var errs []error
	for _, s := range shards {
		if s.Addr == "" || seen[s.Addr] {
			continue
		}
		seen[s.Addr] = true
		if lb := s.local; lb != nil {
			lb.DropClient(clientID, r)
			continue
		}
		req := protocol.NewRequest(protocol.StateStoreDropClient, nil, nil)
		req.ExtFields = protocol.ExtFields{"clientId": clientID}
		if _, err := r.rc.Invoke(ctx, s.Addr, req); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// Wire types of the broker RPC (remoting/protocol), re-exported so front
// ends that may not import remoting/protocol (bridge) can use them.
type (
	// BrokerRequest is one state store command for a broker.
	BrokerRequest = protocol.StateStoreRequest
	// BrokerResponse is a broker's answer.
	BrokerResponse = protocol.StateStoreResponse
	// BrokerNotification is one notification a broker returned or pushed.
	BrokerNotification = protocol.StateStoreNotification
)

// InvokeAll sends req to every shard (a KEYNOTIFY ... PREFIX watch spans
// them all) and returns the responses in shard order. It stops at the
// first error.
func (r *Router) InvokeAll(ctx context.Context, req *protocol.StateStoreRequest) ([]*protocol.StateStoreResponse, error) {
	if r.group.Closed() {
		return nil, ErrClosed
	}
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = context.WithTimeout(ctx, r.opts.RequestTimeout)
		defer cancel()
	}
	shards, err := r.route(ctx, false)
	if err != nil {
		return nil, err
	}
	out := make([]*protocol.StateStoreResponse, 0, len(shards))
	for _, ref := range shards {
		if ref.Addr == "" {
			return nil, fmt.Errorf("%w: no master for broker %s", ErrNoRoute, ref.Broker)
		}
		one := *req
		one.Shard = ref.Queue
		if lb := ref.local; lb != nil {
			sr, err := r.invokeLocal(ctx, lb, ref.Addr, &one, nil)
			if err != nil {
				return nil, err
			}
			out = append(out, sr)
			continue
		}
		resp, err := r.rc.Invoke(ctx, ref.Addr, protocol.NewStateStoreRequest(&one))
		if err != nil {
			return nil, fmt.Errorf("%w: %s: %w", ErrUnavailable, ref.Addr, err)
		}
		if resp.Code != protocol.Success {
			return nil, fmt.Errorf("%w: %s: code %d: %s", ErrFailed, ref.Addr, resp.Code, resp.Remark)
		}
		sr, err := protocol.DecodeStateStoreResponse(resp.Body)
		if err != nil {
			return nil, fmt.Errorf("router: response from %s: %w", ref.Addr, err)
		}
		out = append(out, sr)
	}
	return out, nil
}

// retryAsync makes InvokeCommandAsync's second attempt, on a goroutine,
// after err; unless the request's time is up, then cb gets err.
func (r *Router) retryAsync(ctx context.Context, deadline time.Time, err error, key []byte, cmd *statestore.Command, req *protocol.StateStoreRequest, cb func(*protocol.StateStoreResponse, error)) {
	if ctx.Err() != nil || (!deadline.IsZero() && !time.Now().Before(deadline)) {
		r.refreshSoon()
		cb(nil, err)
		return
	}
	if !r.group.Go(func() { cb(r.invokeFrom(ctx, deadline, 1, err, key, cmd, req)) }) {
		cb(nil, err)
	}
}
