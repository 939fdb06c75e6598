package main

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"maps"
	"slices"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/bridge/iothub"
	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client/statestore/router"
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/internal/sslocal"
	"github.com/smartgo/smartgo/mqtt"
)

// brokerNode is a broker with the state store and twin shards it hosts.
type brokerNode struct {
	*broker.Broker
	ss *broker.StateStore
	tw *broker.Twins
}

// startBrokerNode starts a broker from the configuration and opens the
// state store and twin shards in it. When their consume queues cannot be
// rebuilt yet (a restart on a disk that stays full) the broker serves
// anyway and the shards open by themselves once the disk has room; until
// then their readiness checks fail with the reason.
//
// The errors of the state store and the twins name them already
// ("broker: state store ...", "broker: twin ..."): they are returned as
// they are.
//
// ctx (the process's signal context) ends the start-up waits: a signal
// during them stops the broker within moments (broker.NewContext).
func startBrokerNode(ctx context.Context, f conf.File, log *slog.Logger) (*brokerNode, error) {
	opts, err := brokerOptions(f, log)
	if err != nil {
		return nil, err
	}
	b, err := broker.NewContext(ctx, opts)
	if err != nil {
		return nil, err
	}
	ss, err := broker.OpenStateStore(b, stateStoreOptions(f.StateStore))
	if err != nil {
		_ = b.Close()
		return nil, err
	}
	tw, err := broker.OpenTwins(b, twinOptions(f.Twin))
	if err != nil {
		_ = ss.Close()
		_ = b.Close()
		return nil, err
	}
	return &brokerNode{Broker: b, ss: ss, tw: tw}, nil
}

// localStateStores returns the broker's state store keyed by the address
// the broker registers, for the router of a bridge in the same process
// (`smartgo standalone`): its shards are called directly instead of over
// loopback remoting.
func (n *brokerNode) localStateStores() map[string]router.LocalBroker {
	return map[string]router.LocalBroker{n.Addr(): sslocal.New(n.ss)}
}

// localTwins returns the broker's twin shards keyed by the address the
// broker registers, for the IoT hub of a bridge in the same process.
func (n *brokerNode) localTwins() map[string]twincli.LocalBroker {
	return map[string]twincli.LocalBroker{n.Addr(): localTwin{n.tw}}
}

// brokerParts are the readiness checks a broker node adds, in order.
var brokerParts = []string{"broker", "statestore", "twin"}

// monitor adds the broker's and its state store's metrics and readiness
// to the process's monitor.
func (n *brokerNode) monitor(m *monitor) {
	m.add("broker", n.Collectors(), n.Ready)
	m.add("statestore", n.ss.Collectors(), n.ss.Err)
	m.add("twin", n.tw.Collectors(), n.tw.Err)
}

// Close closes the twins and the state store, then the broker.
func (n *brokerNode) Close() error {
	return errors.Join(n.tw.Close(), n.ss.Close(), n.Broker.Close())
}

// bridgeNode is an MQTT bridge with the state store's MQTT front and,
// when [iothub] enables it, the IoT Hub surface.
type bridgeNode struct {
	*bridge.Bridge
	front *bridge.StateStoreFront
	hub   *iothub.Hub // nil unless iothub.enabled
	amqp  *amqpNode   // nil when amqp.listen is ""
}

// startBridge builds and starts a bridge node from [bridge], with the state
// store front on its MQTT server and the IoT Hub surface ([iothub]). local
// is the broker of this process (standalone; nil for a bridge of its own),
// whose state store and twin shards the front and the hub call directly.
func startBridge(ctx context.Context, f conf.File, localBroker *brokerNode, log *slog.Logger) (*bridgeNode, error) {
	c, sc := f.Bridge, f.StateStore
	var local map[string]router.LocalBroker
	var localTw map[string]twincli.LocalBroker
	if localBroker != nil {
		local, localTw = localBroker.localStateStores(), localBroker.localTwins()
	}
	mo, bo := bridgeOptions(c, log)
	if localBroker != nil {
		bo.RefreshAge = localRefreshAge(bo.RefreshAge, f.Store.FileReservedTime.D(), log)
	}
	hub, err := newHub(f, &mo, &bo, localTw, log)
	if err != nil {
		return nil, err
	}
	var hook *bridge.StateStoreSessionHook
	bo.WrapBackend = func(be mqtt.Backend) mqtt.Backend {
		hook = bridge.NewStateStoreSessionHook(be)
		return hook
	}
	b, err := bridge.New(mo, bo)
	if err != nil {
		closeHub(hub)
		return nil, fmt.Errorf("bridge options: %w", err)
	}
	if err := b.Start(ctx); err != nil {
		closeHub(hub)
		return nil, err
	}
	fo := frontOptions(c, sc)
	fo.Router.Local, fo.Hook, fo.Logger = local, hook, log
	front, err := bridge.NewStateStoreFront(b.Server(), fo)
	if err != nil {
		closeHub(hub)
		_ = b.Close()
		return nil, fmt.Errorf("state store front: %w", err)
	}
	if hub != nil {
		if err := hub.Start(ctx, b); err != nil {
			_ = b.Server().Close()
			closeHub(hub)
			_ = front.Close()
			_ = b.Close()
			return nil, fmt.Errorf("iothub: %w", err)
		}
	}
	// `smartgo admin amqp ...` and the console reach the server once it serves.
	an, err := startAMQP(f, localBroker != nil, log, b.SetAMQP)
	if err != nil {
		_ = b.Server().Close()
		closeHub(hub)
		_ = front.Close()
		_ = b.Close()
		return nil, err
	}
	addrs := make([]string, 0, 2)
	for _, a := range b.Addrs() {
		addrs = append(addrs, a.String())
	}
	log.Info("bridge started", "listen", addrs, "registries", c.Registries, "node", b.Backend().NodeID(),
		"statestore_local_brokers", slices.Sorted(maps.Keys(local)))
	return &bridgeNode{Bridge: b, front: front, hub: hub, amqp: an}, nil
}

// monitor adds the bridge's metrics (and its IoT hub's) and readiness to
// the process's monitor.
func (n *bridgeNode) monitor(m *monitor) {
	cs := n.Collectors()
	if n.hub != nil {
		cs = append(cs, n.hub.Collectors()...)
	}
	m.add("bridge", cs, n.Ready)
	n.amqp.monitor(m)
}

// Close closes the AMQP server and its backend, the MQTT server (its
// devices' disconnects reach the hub), the hub, the state store front,
// then the bridge.
func (n *bridgeNode) Close() error {
	n.SetAMQP(nil)
	aerr := n.amqp.Close()
	if n.hub == nil {
		return errors.Join(aerr, n.front.Close(), n.Bridge.Close())
	}
	return errors.Join(aerr, n.Server().Close(), n.hub.Close(), n.front.Close(), n.Bridge.Close())
}

// localRefreshAge is the bridge's refresh age next to a broker of the same
// process: a copy made only once a record is older than the broker's own
// retention would come too late, so an age above half of
// store.file_reserved_time is lowered to that half (and said so).
func localRefreshAge(age, retention time.Duration, log *slog.Logger) time.Duration {
	if half := retention / 2; age > half {
		log.Info("bridge.refresh_age lowered to half of store.file_reserved_time, so that live retained messages and sessions are copied before retention removes them",
			"refresh_age", age, "file_reserved_time", retention, "used", half)
		return half
	}
	return age
}
