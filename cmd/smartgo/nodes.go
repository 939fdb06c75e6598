package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"

	"github.com/smartgo/smartgo/broker"
	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/bridge"
)

// brokerNode is a broker with the state store shards it hosts.
type brokerNode struct {
	*broker.Broker
	ss *broker.StateStore
}

// startBrokerNode starts a broker from the configuration and opens the
// state store shards in it.
func startBrokerNode(f conf.File, log *slog.Logger) (*brokerNode, error) {
	opts, err := brokerOptions(f, log)
	if err != nil {
		return nil, err
	}
	b, err := broker.New(opts)
	if err != nil {
		return nil, err
	}
	ss, err := broker.OpenStateStore(b, broker.StateStoreOptions{})
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("state store: %w", err)
	}
	return &brokerNode{Broker: b, ss: ss}, nil
}

// Close closes the state store, then the broker.
func (n *brokerNode) Close() error {
	return errors.Join(n.ss.Close(), n.Broker.Close())
}

// bridgeNode is an MQTT bridge with the state store's MQTT front.
type bridgeNode struct {
	*bridge.Bridge
	front *bridge.StateStoreFront
}

// startBridge builds and starts a bridge node from [bridge], with the state
// store front on its MQTT server.
func startBridge(ctx context.Context, c conf.Bridge, log *slog.Logger) (*bridgeNode, error) {
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
	front, err := bridge.NewStateStoreFront(b.Server(), bridge.StateStoreFrontOptions{
		Router: sscli.RouterOptions{Registries: c.Registries}, Hook: hook, Logger: log.With("component", "statestore-front"),
	})
	if err != nil {
		_ = b.Close()
		return nil, fmt.Errorf("state store front: %w", err)
	}
	addrs := make([]string, 0, 2)
	for _, a := range b.Addrs() {
		addrs = append(addrs, a.String())
	}
	log.Info("bridge started", "listen", addrs, "registries", c.Registries, "node", b.Backend().NodeID())
	return &bridgeNode{Bridge: b, front: front}, nil
}

// Close closes the state store front, then the bridge.
func (n *bridgeNode) Close() error {
	return errors.Join(n.front.Close(), n.Bridge.Close())
}
