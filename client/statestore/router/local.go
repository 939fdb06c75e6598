package router

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
)

// Brokers in the router's process (Options.Local): the interfaces a
// local broker implements, and the paths that serve a request on the
// caller's goroutine without the network (InvokeCommandNow,
// InvokeCommandDeferred; the other Invoke paths call invokeLocal for a
// local shard).

// LocalBroker is a broker's state store in the router's process (see
// Options.Local); cmd/smartgo adapts broker.StateStore to it.
type LocalBroker interface {
	// InvokeLocal serves req (req.Shard set) like a StateStoreInvoke
	// request, with sink standing for the connection: notifications for
	// clients whose last request came through sink are pushed to sink,
	// whoever caused them (this request too, a KEYNOTIFY ... SINCE's
	// backlog too), in their shard's log order, and the response carries
	// none. cmd is the front end's
	// statestore.ParseCommand(req.Payload), so the broker does not parse
	// the payload again, or nil (the broker parses it). Errors wrap
	// ErrUnavailable (not owned here, or nothing changed: another attempt
	// may succeed) or ErrFailed (the shard stopped). The response goes
	// into resp, the caller's, set only when the error is nil.
	InvokeLocal(ctx context.Context, req *protocol.StateStoreRequest, cmd *statestore.Command, sink protocol.StateStoreSink, resp *protocol.StateStoreResponse) error
	// DropClient drops the client's KEYNOTIFY registrations on every
	// shard the broker owns and returns how many there were, unless the
	// client's last request reached the broker through another front end
	// than sink (it moved there and keeps its watches).
	DropClient(clientID string, sink protocol.StateStoreSink) int
	// Waits reports whether InvokeLocal of cmd (nil: a payload that did
	// not parse) may wait: for a disk flush, a slave or a failover's
	// fencing. A request that waits for none of these is served by
	// InvokeCommandNow.
	Waits(cmd *statestore.Command) bool
}

// LocalDeferrer is a LocalBroker that can serve a mutation in two steps,
// for a caller that serves requests in batches (the MQTT front's poller
// round): InvokeDeferred puts it in its shard's log, and the returned
// Deferred's Complete, at the batch's end, applies and answers it, so
// the batch's records are written together.
type LocalDeferrer interface {
	// InvokeDeferred is InvokeLocal for a mutation that waits for
	// nothing; a nil Deferred with a nil error means answered in resp.
	InvokeDeferred(ctx context.Context, now time.Time, req *protocol.StateStoreRequest, cmd *statestore.Command, sink protocol.StateStoreSink, resp *protocol.StateStoreResponse) (Deferred, error)
}

// Deferred is a mutation a LocalDeferrer put in its shard's log and has
// not answered yet.
type Deferred interface {
	// Complete applies the mutation once its record is in the page cache
	// (after every mutation of its shard put before it) and sets resp to
	// its response; errors are InvokeLocal's. Called exactly once.
	Complete(resp *protocol.StateStoreResponse) error
}

// cachedRoute returns the route InvokeCommandNow and InvokeCommandDeferred
// serve on, when the table's is fresh as of now (zero: the clock is read
// if the table's age matters): one atomic load for the table's route and
// one for its conversion, no lock.
func (r *Router) cachedRoute(now time.Time) ([]shardRef, bool) {
	refs, ok := r.tab.CachedAt(now)
	if !ok {
		return nil, false
	}
	return r.convert(refs), true
}

// expired reports whether deadline (zero: none) has passed as of now
// (zero: the clock is read).
func expired(now, deadline time.Time) bool {
	if deadline.IsZero() {
		return false
	}
	if now.IsZero() {
		now = time.Now()
	}
	return !now.Before(deadline)
}

// PushStateStoreNotifications implements protocol.StateStoreSink: a local
// broker's notifications go to OnNotify, like those pushed over remoting.
func (r *Router) PushStateStoreNotifications(ns []protocol.StateStoreNotification) {
	if r.opts.OnNotify != nil && len(ns) > 0 {
		r.opts.OnNotify(ns)
	}
}

// invokeLocal calls a local broker, shaping its errors like the remote
// path's.
func (r *Router) invokeLocal(ctx context.Context, lb LocalBroker, addr string, req *protocol.StateStoreRequest, cmd *statestore.Command) (*protocol.StateStoreResponse, error) {
	resp := new(protocol.StateStoreResponse)
	if err := r.invokeLocalTo(ctx, lb, addr, req, cmd, resp); err != nil {
		return nil, err
	}
	return resp, nil
}

// invokeLocalTo is invokeLocal into the caller's resp.
func (r *Router) invokeLocalTo(ctx context.Context, lb LocalBroker, addr string, req *protocol.StateStoreRequest, cmd *statestore.Command, resp *protocol.StateStoreResponse) error {
	err := lb.InvokeLocal(ctx, req, cmd, r, resp)
	switch {
	case err == nil:
		return nil
	case errors.Is(err, ErrFailed), errors.Is(err, ErrUnavailable):
		return fmt.Errorf("router: local broker %s: %w", addr, err)
	default:
		return fmt.Errorf("%w: local broker %s: %w", ErrFailed, addr, err)
	}
}

// InvokeCommandNow serves the request at once when that waits for
// nothing: the route is known and the key's shard is a local broker's
// (Options.Local) that answers it without waiting (LocalBroker.Waits).
// ok is false when it did not serve it (a remote shard, a route to look
// up, a local request that would wait, or the local broker refused it,
// changing nothing): then call InvokeCommandAsync, which waits for the
// network on no goroutine, but serves a local broker on the caller's.
// The response goes into resp, the caller's (a front end reuses one per
// request), set when ok and err is nil. now is the caller's reading of
// the clock (a poller round's), by which the route's age and the deadline
// are judged; zero reads the clock.
func (r *Router) InvokeCommandNow(ctx context.Context, now, deadline time.Time, cmd *statestore.Command, req *protocol.StateStoreRequest, resp *protocol.StateStoreResponse) (ok bool, err error) {
	if r.group.Closed() {
		return true, ErrClosed
	}
	shards, ok := r.cachedRoute(now)
	if !ok {
		return false, nil
	}
	var key []byte
	if cmd != nil {
		key = cmd.Key
	}
	ref := &shards[statestore.ShardOf(key, len(shards))]
	if ref.local == nil || ref.Addr == "" || ref.local.Waits(cmd) {
		return false, nil
	}
	if expired(now, deadline) {
		return true, fmt.Errorf("%w: %s: %w", ErrUnavailable, ref.Addr, context.DeadlineExceeded)
	}
	req.Shard = ref.Queue
	err = r.invokeLocalTo(ctx, ref.local, ref.Addr, req, cmd, resp)
	if err != nil && errors.Is(err, ErrUnavailable) {
		return false, nil
	}
	return true, err
}

// InvokeCommandDeferred is InvokeCommandNow for a mutation whose apply
// and answer may wait for the caller's batch end: when the key's shard is
// a local broker's that defers it (LocalDeferrer), d is its Deferred, on
// which the caller calls Complete once; a nil d with ok means answered
// (resp set when err is nil). ok is false as for InvokeCommandNow, and
// also when the broker does not defer.
func (r *Router) InvokeCommandDeferred(ctx context.Context, now, deadline time.Time, cmd *statestore.Command, req *protocol.StateStoreRequest, resp *protocol.StateStoreResponse) (d Deferred, ok bool, err error) {
	if cmd == nil || r.group.Closed() {
		return nil, false, nil
	}
	shards, ok := r.cachedRoute(now)
	if !ok {
		return nil, false, nil
	}
	ref := &shards[statestore.ShardOf(cmd.Key, len(shards))]
	ld, defers := ref.local.(LocalDeferrer)
	if !defers || ref.Addr == "" || ref.local.Waits(cmd) || expired(now, deadline) {
		return nil, false, nil
	}
	req.Shard = ref.Queue
	d, err = ld.InvokeDeferred(ctx, now, req, cmd, r, resp)
	switch {
	case err == nil:
		return d, true, nil
	case errors.Is(err, ErrUnavailable):
		return nil, false, nil
	case errors.Is(err, ErrFailed):
		return nil, true, fmt.Errorf("router: local broker %s: %w", ref.Addr, err)
	default:
		return nil, true, fmt.Errorf("%w: local broker %s: %w", ErrFailed, ref.Addr, err)
	}
}
