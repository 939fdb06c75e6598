// Package statestore drives SmartGo's state store through its MQTT 5
// front: brokers hosting the shards, an mqtt.Server with the
// bridge.StateStoreFront, and clients (SmartGo's Go client, raw paho, the
// Azure IoT Operations SDK).
package statestore

import (
	"context"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/broker"
	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/client/statestore/router"
	"github.com/smartgo/smartgo/internal/sslocal"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/store"
)

const testShards = 4

type env struct {
	b     *broker.Broker
	ss    *broker.StateStore
	srv   *mqtt.Server
	front *bridge.StateStoreFront
	addr  string // MQTT address
}

// startEnv starts one broker with the state store, an MQTT server with the
// state store front reaching the broker over loopback remoting (the path
// of a bridge in its own process), all on 127.0.0.1 free ports.
func startEnv(t testing.TB, syncFlush bool) *env {
	t.Helper()
	return startEnvWith(t, syncFlush, false)
}

// startEnvWith is startEnv; with local the front calls the broker's state
// store in process (RouterOptions.Local), as `smartgo standalone` does.
func startEnvWith(t testing.TB, syncFlush, local bool) *env {
	t.Helper()
	return startEnvStore(t, syncFlush, local, nil)
}

// startEnvStore is startEnvWith with tune, when not nil, changing the
// broker's store options (e.g. a faulty file system).
func startEnvStore(t testing.TB, syncFlush, local bool, tune func(*store.Options)) *env {
	t.Helper()
	return startEnvBroker(t, syncFlush, local, func(o *broker.Options, _ *broker.StateStoreOptions) {
		if tune != nil {
			tune(&o.Store)
		}
	})
}

// startEnvBroker is startEnvWith with tune changing the broker's options
// (its store options are the environment's already) and its state
// store's.
func startEnvBroker(t testing.TB, syncFlush, local bool, tune func(*broker.Options, *broker.StateStoreOptions)) *env {
	t.Helper()
	so := store.DefaultOptions(t.TempDir())
	so.SegmentSize = 8 << 20
	so.CQEntriesPerFile = 10000
	so.IndexSlots = 1000
	so.IndexEntries = 4000
	so.WarmSegments = false
	if syncFlush {
		so.FlushMode = store.FlushSync
	}
	bo := broker.Options{BrokerName: "broker-ss", ClusterName: "SS", ListenAddr: "127.0.0.1:0", Store: so}
	sso := broker.StateStoreOptions{Shards: testShards}
	if tune != nil {
		tune(&bo, &sso)
	}
	b, err := broker.New(bo)
	if err != nil {
		t.Fatal(err)
	}
	ss, err := broker.OpenStateStore(b, sso)
	if err != nil {
		_ = b.Close()
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = ss.Close()
		_ = b.Close()
	})
	e := &env{b: b, ss: ss}
	e.srv, e.front, e.addr = e.startFront(t, local)
	return e
}

// startFront starts an MQTT server with a state store front on e's broker
// (local: called in process) and returns it with its address; cleanup
// closes it before the broker.
func (e *env) startFront(t testing.TB, local bool) (*mqtt.Server, *bridge.StateStoreFront, string) {
	t.Helper()
	return e.startFrontOn(t, local, mqtt.NewMemoryBackend())
}

// startFrontOn is startFront with the MQTT server's sessions in backend.
func (e *env) startFrontOn(t testing.TB, local bool, backend mqtt.Backend) (*mqtt.Server, *bridge.StateStoreFront, string) {
	t.Helper()
	mo := mqtt.DefaultOptions()
	mo.Listen = []string{"127.0.0.1:0"}
	hook := bridge.NewStateStoreSessionHook(backend)
	srv, err := mqtt.NewServer(mo, hook)
	if err != nil {
		t.Fatal(err)
	}
	ro := router.Options{Brokers: map[string]string{"broker-ss": e.b.Addr()}, Shards: testShards}
	if local {
		ro.Local = map[string]router.LocalBroker{e.b.Addr(): sslocal.New(e.ss)}
	}
	front, err := bridge.NewStateStoreFront(srv, bridge.StateStoreFrontOptions{Router: ro, Hook: hook})
	if err != nil {
		t.Fatal(err)
	}
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() {
		_ = srv.Close()
		_ = front.Close()
	})
	return srv, front, srv.Addrs()[0].String()
}

func (e *env) dial(t testing.TB, id string) *sscli.Client {
	t.Helper()
	return dialAt(t, e.addr, id)
}

// dialAt connects SmartGo's Go client to the MQTT server at addr.
func dialAt(t testing.TB, addr, id string) *sscli.Client {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	c, err := sscli.Dial(ctx, sscli.Options{Addr: addr, ClientID: id})
	if err != nil {
		t.Fatalf("dial %s: %v", id, err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func ctx10(t testing.TB) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	t.Cleanup(cancel)
	return ctx
}
