// Package sslocal adapts a broker's state store to the state store
// router's in-process path (router.LocalBroker and router.LocalDeferrer):
// the front of `smartgo standalone` calls the shards of the broker in its
// own process without a socket. The broker may not import the router
// (its errors are the router's contract) and the router may not import
// the broker, so the wiring that joins them lives here, shared by
// cmd/smartgo and the tests that run the same path.
package sslocal

import (
	"context"
	"errors"
	"fmt"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client/statestore/router"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
	"github.com/smartgo/smartgo/store"
)

// Broker is a broker's state store as a router.LocalBroker that also
// defers mutations (router.LocalDeferrer).
type Broker struct{ ss *broker.StateStore }

// New returns ss as a router.LocalBroker.
func New(ss *broker.StateStore) Broker { return Broker{ss} }

var (
	_ router.LocalBroker   = Broker{}
	_ router.LocalDeferrer = Broker{}
	_ router.Deferred      = pending{}
)

// InvokeLocal implements router.LocalBroker.
func (b Broker) InvokeLocal(ctx context.Context, req *protocol.StateStoreRequest, cmd *statestore.Command, sink protocol.StateStoreSink, resp *protocol.StateStoreResponse) error {
	return routerErr(b.ss.InvokeLocal(ctx, req, cmd, sink, resp))
}

// InvokeDeferred implements router.LocalDeferrer: the front on an MQTT
// poller applies and answers the round's mutations at the round's end.
func (b Broker) InvokeDeferred(ctx context.Context, now time.Time, req *protocol.StateStoreRequest, cmd *statestore.Command, sink protocol.StateStoreSink, resp *protocol.StateStoreResponse) (router.Deferred, error) {
	p, err := b.ss.InvokeDeferred(ctx, now, req, cmd, sink, resp)
	if p == nil {
		return nil, routerErr(err)
	}
	return pending{p}, nil
}

// DropClient implements router.LocalBroker.
func (b Broker) DropClient(clientID string, sink protocol.StateStoreSink) int {
	return b.ss.DropClientOf(clientID, sink)
}

// Waits implements router.LocalBroker.
func (b Broker) Waits(cmd *statestore.Command) bool { return b.ss.Waits(cmd) }

// pending is a broker.StateStorePending as a router.Deferred.
type pending struct{ p *broker.StateStorePending }

func (p pending) Complete(resp *protocol.StateStoreResponse) error {
	return routerErr(p.p.Complete(resp))
}

// routerErr shapes a local state store's error as the router's: a shard
// this broker does not serve (now) is router.ErrUnavailable (the router
// tries elsewhere or again), a write its full disk refused also
// router.ErrDiskFull, anything else router.ErrFailed.
func routerErr(err error) error {
	switch {
	case err == nil:
		return nil
	case errors.Is(err, store.ErrDiskFull):
		return fmt.Errorf("%w: %w: %w", router.ErrUnavailable, router.ErrDiskFull, err)
	case errors.Is(err, broker.ErrStateStoreNotOwner), errors.Is(err, broker.ErrStateStoreUnavailable):
		return fmt.Errorf("%w: %w", router.ErrUnavailable, err)
	default:
		return fmt.Errorf("%w: %w", router.ErrFailed, err)
	}
}
