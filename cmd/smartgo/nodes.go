package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"sync"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client/statestore/router"
	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// localStateStores are the state stores of the brokers running in this
// process, by the address each broker registers: a bridge started in the
// same process (`smartgo standalone`) calls their shards directly instead
// of over loopback remoting. Brokers elsewhere are reached over the
// network as usual.
var localStateStores = struct {
	mu sync.Mutex
	m  map[string]router.LocalBroker // protected by mu
}{m: map[string]router.LocalBroker{}}

// localStateStore adapts broker.StateStore to router.LocalBroker.
type localStateStore struct{ ss *broker.StateStore }

func (l localStateStore) InvokeLocal(ctx context.Context, req *protocol.StateStoreRequest, sink protocol.StateStoreSink) (*protocol.StateStoreResponse, error) {
	resp, err := l.ss.InvokeLocal(ctx, req, sink)
	switch {
	case err == nil:
		return resp, nil
	case errors.Is(err, broker.ErrStateStoreNotOwner), errors.Is(err, broker.ErrStateStoreUnavailable):
		return nil, fmt.Errorf("%w: %w", router.ErrUnavailable, err)
	default:
		return nil, fmt.Errorf("%w: %w", router.ErrFailed, err)
	}
}

func (l localStateStore) DropClient(clientID string) int { return l.ss.DropClient(clientID) }

// brokerNode is a broker with the state store and twin shards it hosts.
type brokerNode struct {
	*broker.Broker
	ss *broker.StateStore
	tw *broker.Twins
}

// startBrokerNode starts a broker from the configuration and opens the
// state store and twin shards in it.
func startBrokerNode(f conf.File, log *slog.Logger) (*brokerNode, error) {
	opts, err := brokerOptions(f, log)
	if err != nil {
		return nil, err
	}
	b, err := broker.New(opts)
	if err != nil {
		return nil, err
	}
	ss, err := broker.OpenStateStore(b, stateStoreOptions(f.StateStore))
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("state store: %w", err)
	}
	tw, err := broker.OpenTwins(b, twinOptions(f.Twin))
	if err != nil {
		_ = ss.Close()
		_ = b.Close()
		return nil, fmt.Errorf("twins: %w", err)
	}
	localStateStores.mu.Lock()
	localStateStores.m[b.Addr()] = localStateStore{ss}
	localStateStores.mu.Unlock()
	return &brokerNode{Broker: b, ss: ss, tw: tw}, nil
}

// monitor adds the broker's and its state store's metrics and readiness
// to the process's monitor.
func (n *brokerNode) monitor(m *monitor) {
	m.add("broker", n.Collectors(), n.Ready)
	m.add("statestore", n.ss.Collectors(), n.ss.Err)
	m.add("twin", nil, n.tw.Err)
}

// Close closes the twins and the state store, then the broker.
func (n *brokerNode) Close() error {
	localStateStores.mu.Lock()
	if l, ok := localStateStores.m[n.Addr()].(localStateStore); ok && l.ss == n.ss {
		delete(localStateStores.m, n.Addr())
	}
	localStateStores.mu.Unlock()
	return errors.Join(n.tw.Close(), n.ss.Close(), n.Broker.Close())
}

// bridgeNode is an MQTT bridge with the state store's MQTT front.
type bridgeNode struct {
	*bridge.Bridge
	front *bridge.StateStoreFront
}

// startBridge builds and starts a bridge node from [bridge], with the state
// store front on its MQTT server.
func startBridge(ctx context.Context, c conf.Bridge, sc conf.StateStore, log *slog.Logger) (*bridgeNode, error) {
	mo, bo := bridgeOptions(c, log)
	var hook *bridge.StateStoreSessionHook
	bo.WrapBackend = func(be mqtt.Backend) mqtt.Backend {
		hook = bridge.NewStateStoreSessionHook(be)
		return hook
	}
	b, err := bridge.New(mo, bo)
	if err != nil {
		return nil, fmt.Errorf("bridge options: %w", err)
	}
	if err := b.Start(ctx); err != nil {
		return nil, err
	}
	// Shards of a broker in this process (standalone) are called directly.
	localStateStores.mu.Lock()
	local := maps.Clone(localStateStores.m)
	localStateStores.mu.Unlock()
	fo := frontOptions(c, sc)
	fo.Router.Local, fo.Hook, fo.Logger = local, hook, log
	front, err := bridge.NewStateStoreFront(b.Server(), fo)
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("state store front: %w", err)
	}
	addrs := make([]string, 0, 2)
	for _, a := range b.Addrs() {
		addrs = append(addrs, a.String())
	}
	log.Info("bridge started", "listen", addrs, "registries", c.Registries, "node", b.Backend().NodeID(),
		"statestore_local_brokers", slices.Sorted(maps.Keys(local)))
	return &bridgeNode{Bridge: b, front: front}, nil
}

// monitor adds the bridge's metrics and readiness to the process's
// monitor.
func (n *bridgeNode) monitor(m *monitor) { m.add("bridge", n.Collectors(), n.Ready) }

// Close closes the state store front, then the bridge.
func (n *bridgeNode) Close() error {
	return errors.Join(n.front.Close(), n.Bridge.Close())
}
