package bridge

import (
	"context"
	"errors"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/internal/ratelog"
	"github.com/smartgo/smartgo/mqtt"
)

// Bridge is an MQTT server whose back end is the SmartGo cluster: a bridge
// node. Other parts (the state store RPC front) extend it through Server
// (Server.Handle, Server.SendTo) before or after Start.
type Bridge struct {
	server  *mqtt.Server
	backend *Backend

	started        time.Time
	lastRegistered atomic.Int64                // Unix nanoseconds of the last heartbeat a registry accepted (admin.go)
	amqp           atomic.Pointer[amqp.Server] // the node's AMQP server for the admin calls (admin_amqp.go); nil: none
	cancel         context.CancelFunc
	wg             sync.WaitGroup
	closeOnce      sync.Once
	closeErr       error
}

// New builds a bridge node from the MQTT server options and the bridge
// options; nothing listens before Start.
func New(mo mqtt.Options, bo Options) (*Bridge, error) {
	be, err := NewBackend(bo)
	if err != nil {
		return nil, err
	}
	if mo.Logger == nil {
		mo.Logger = bo.Logger
	}
	// The MQTT server logs what its clients do: each reason at most once
	// per interval, with the count of lines suppressed.
	mo.Logger = ratelog.Wrap(mo.Logger, 0)
	if mo.MaxClientIDLen == 0 || mo.MaxClientIDLen > MaxClientIDLen {
		mo.MaxClientIDLen = MaxClientIDLen
	}
	if mo.MaxIdentityLen == 0 || mo.MaxIdentityLen > MaxIdentityLen {
		mo.MaxIdentityLen = MaxIdentityLen
	}
	var sb mqtt.Backend = be
	if bo.WrapBackend != nil {
		sb = bo.WrapBackend(be)
		_, subs := sb.(mqtt.SubscriptionBackend)
		_, qos2 := sb.(mqtt.QoS2Backend)
		_, wills := sb.(mqtt.WillBackend)
		_, owes := sb.(mqtt.WillOwer)
		_, shares := sb.(mqtt.SharePreparer)
		_, confirms := sb.(mqtt.SessionConfirmer)
		_, tags := sb.(mqtt.OwnerTagger)
		if !subs || !qos2 || !wills || !owes || !shares || !confirms || !tags {
			// The wrapper does not forward subscription saves, QoS 2
			// records, stored or owed wills, share preparation,
			// session confirmation or owner tags: the server reaches
			// the backend's directly.
			sb = &subscriptionForward{Backend: sb, be: be}
		}
	}
	srv, err := mqtt.NewServer(mo, sb)
	if err != nil {
		be.Close()
		return nil, err
	}
	b := &Bridge{server: srv, backend: be}
	be.adm.ServeBridge(adminHandler{b})
	return b, nil
}

// Server returns the MQTT server (for Handle, SendTo, Stats).
func (b *Bridge) Server() *mqtt.Server { return b.server }

// Backend returns the broker back end.
func (b *Bridge) Backend() *Backend { return b.backend }

// Start starts the back end (topics, replay of sessions and retained
// messages, live consumption) and the listeners, then heartbeats to the
// registries.
func (b *Bridge) Start(ctx context.Context) error {
	b.started = time.Now()
	if err := b.server.Start(ctx); err != nil {
		b.backend.Close()
		return err
	}
	hctx, cancel := context.WithCancel(context.WithoutCancel(ctx))
	b.cancel = cancel
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		b.heartbeat(hctx)
	}()
	return nil
}

// Addrs returns the listen addresses.
func (b *Bridge) Addrs() []net.Addr { return b.server.Addrs() }

// Close leaves the registries, disconnects the clients, saves their
// persistent sessions to the cluster, then closes the back end. It is
// idempotent.
func (b *Bridge) Close() error {
	b.closeOnce.Do(func() {
		if b.cancel != nil {
			b.cancel()
			b.wg.Wait()
			ctx, cancel := context.WithTimeout(context.Background(), time.Second)
			if err := b.backend.adm.UnregisterBridge(ctx, b.backend.NodeID()); err != nil {
				b.backend.log.Debug("bridge: unregister from registries", "err", err)
			}
			cancel()
		}
		b.closeErr = errors.Join(b.server.Close(), b.backend.Close())
	})
	return b.closeErr
}

// subscriptionForward adds Backend.SaveSubscriptions (and the QoS 2
// records, stored wills, share preparation, session confirmation and
// owner tags) to a wrapped backend that lacks them; every other call goes
// through the wrapper.
type subscriptionForward struct {
	mqtt.Backend
	be *Backend
}

// SaveSubscriptions implements mqtt.SubscriptionBackend.
func (f *subscriptionForward) SaveSubscriptions(ctx context.Context, st *mqtt.SessionState) error {
	return f.be.SaveSubscriptions(ctx, st)
}

// RecordQoS2 implements mqtt.QoS2Backend.
func (f *subscriptionForward) RecordQoS2(clientID string, done func()) {
	f.be.RecordQoS2(clientID, done)
}

// ConnectedWill implements mqtt.WillBackend.
func (f *subscriptionForward) ConnectedWill(ctx context.Context, clientID string, cleanStart bool) {
	f.be.ConnectedWill(ctx, clientID, cleanStart)
}

// WillPublished implements mqtt.WillBackend.
func (f *subscriptionForward) WillPublished(ctx context.Context, clientID string, m *mqtt.Message) {
	f.be.WillPublished(ctx, clientID, m)
}

// WillOwed implements mqtt.WillOwer.
func (f *subscriptionForward) WillOwed(ctx context.Context, clientID string, w mqtt.Will) {
	f.be.WillOwed(ctx, clientID, w)
}

// PrepareShares implements mqtt.SharePreparer.
func (f *subscriptionForward) PrepareShares(ctx context.Context, clientID string, filters []string) {
	f.be.PrepareShares(ctx, clientID, filters)
}

// PublishAsync implements mqtt.AsyncBackend with the wrapper's
// PublishAsync, or its Publish when it has none.
func (f *subscriptionForward) PublishAsync(ctx context.Context, m *mqtt.Message, done func(error)) {
	if ab, ok := f.Backend.(mqtt.AsyncBackend); ok {
		ab.PublishAsync(ctx, m, done)
		return
	}
	done(f.Backend.Publish(ctx, m))
}

// RetainedCount implements mqtt.RetainedCounter from the broker back end
// ($SYS/broker/retained messages/count).
func (f *subscriptionForward) RetainedCount() int { return f.be.RetainedCount() }

// OwnerTag implements mqtt.OwnerTagger (the IoT hub's device identities:
// without it, a node that holds a session in memory would resume it for
// a new identity of the same device id).
func (f *subscriptionForward) OwnerTag(clientID string) string { return f.be.OwnerTag(clientID) }

// SessionCurrent implements mqtt.SessionConfirmer.
func (f *subscriptionForward) SessionCurrent(ctx context.Context, clientID string) (bool, error) {
	return f.be.SessionCurrent(ctx, clientID)
}
