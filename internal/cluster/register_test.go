package cluster

import (
	"context"
	"fmt"
	"net"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/registry"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
)

// A broker whose registry comes up after it keeps retrying and registers
// within seconds, not only at the next 30 s registration.
func TestClusterBrokerRegistersWhenRegistryStartsLate(t *testing.T) {
	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	regAddr := ln.Addr().String()
	_ = ln.Close()

	newRegisteringBroker(t, regAddr)

	time.Sleep(2 * time.Second) // the first registration and a retry fail
	reg, err := registry.New(registry.Options{Addr: regAddr})
	if err != nil {
		t.Fatal(err)
	}
	if err := reg.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	defer reg.Close()

	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	start := time.Now()
	testutil.Eventually(t, 10*time.Second, func() error { return registryRoute(rc, regAddr, broker.AutoCreateTopicKey) })
	t.Logf("registered %v after the registry started", time.Since(start))
}

// newRegisteringBroker starts a broker (topic auto-creation on) that
// registers with the registry at regAddr; the test's end closes it.
func newRegisteringBroker(t *testing.T, regAddr string) *broker.Broker {
	t.Helper()
	so := store.DefaultOptions(t.TempDir())
	so.SegmentSize = 4 << 20
	so.MaxMessageSize = 1 << 20
	b, err := broker.New(broker.Options{ListenAddr: "127.0.0.1:0", Registries: []string{regAddr}, AutoCreateTopic: true, Store: so})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	return b
}

// registryRoute asks the registry at regAddr for topic's route.
func registryRoute(rc *remoting.Client, regAddr, topic string) error {
	ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
	defer cancel()
	resp, err := rc.Invoke(ctx, regAddr, protocol.NewRequest(protocol.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: topic}, nil))
	if err != nil {
		return err
	}
	if resp.Code != protocol.Success {
		return &routeErr{topic + ": " + resp.Remark}
	}
	return nil
}

type routeErr struct{ s string }

func (e *routeErr) Error() string { return "no route yet: " + e.s }

// Topics created side by side (two bridge nodes starting on one broker)
// all have their route within seconds of their creations' answers: each
// creation registers before its answer, and a registration carrying an
// older topic table must not reach the registry after a newer one (the
// registry drops the topics a master's registration lacks until the next
// periodic one, 30 s later).
func TestClusterConcurrentTopicCreatesAllRouted(t *testing.T) {
	regAddr := loopbackRegistry(t)
	b := newRegisteringBroker(t, regAddr)
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	route := func(topic string) error { return registryRoute(rc, regAddr, topic) }
	testutil.Eventually(t, 10*time.Second, func() error { return route(broker.AutoCreateTopicKey) })

	// A round's creations queue at the broker's admin workers (2), each
	// holding its worker for its registration, which waits for its turn
	// at the registry and for the registry's answer at most
	// syncRegisterTimeout (3 s), the table growing to 288 topics: the
	// last of a round is answered after the 23 before it, 11 s on a
	// machine busy with -race and four CPU burners, and up to 12 x 3 s by
	// the broker's own bound. The creations' deadline covers that; what
	// is asserted is the routes after the answers.
	for round := range 12 {
		const n = 24
		errs := make(chan error, n)
		for i := range n {
			go func() {
				h := protocol.CreateTopicRequestHeader{Topic: fmt.Sprintf("CONCURRENT_%d_%d", round, i), ReadQueueNums: 4,
					WriteQueueNums: 4, Perm: broker.PermRW}
				cctx, ccancel := context.WithTimeout(context.Background(), time.Minute)
				defer ccancel()
				resp, err := rc.Invoke(cctx, b.Addr(), protocol.NewRequest(protocol.UpdateAndCreateTopic, &h, nil))
				if err == nil && resp.Code != protocol.Success {
					err = fmt.Errorf("create %s: %d %s", h.Topic, resp.Code, resp.Remark)
				}
				errs <- err
			}()
		}
		for range n {
			if err := <-errs; err != nil {
				t.Fatal(err)
			}
		}
		// Every creation was answered, so registered (or, when that took
		// over 3 s on a busy machine, about to be again as soon as the
		// registration in flight is answered).
		// A route an older table dropped came back only with the next
		// periodic registration, 30 s after the broker's start.
		testutil.Eventually(t, 10*time.Second, func() error {
			for i := range n {
				if err := route(fmt.Sprintf("CONCURRENT_%d_%d", round, i)); err != nil {
					return fmt.Errorf("round %d: %w", round, err)
				}
			}
			return nil
		})
	}
}

// TestClusterHungRegistryHoldsNoRoute: a broker registered with two
// registries, one of which hangs (accepts, never answers), still
// publishes a new topic's route to the other before the creation is
// answered. Registrations took one turn for all registries: the one in
// flight to the hung registry (6 s) held it, so the topic's registration
// gave up (3 s) without telling the healthy registry either, and the
// route a client then asked for was missing there.
func TestClusterHungRegistryHoldsNoRoute(t *testing.T) {
	regAddr := loopbackRegistry(t)
	hung := testnet.Silent(t)

	so := store.DefaultOptions(t.TempDir())
	so.SegmentSize = 4 << 20
	so.MaxMessageSize = 1 << 20
	b, err := broker.New(broker.Options{ListenAddr: "127.0.0.1:0", Registries: []string{hung, regAddr}, AutoCreateTopic: true, Store: so})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	rc, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		t.Fatal(err)
	}
	defer rc.Close()
	// The start's registration: the healthy registry answered it, the
	// hung one holds it (6 s).
	testutil.Eventually(t, 10*time.Second, func() error { return registryRoute(rc, regAddr, broker.AutoCreateTopicKey) })

	const topic = "HUNG_REGISTRY_TOPIC"
	h := protocol.CreateTopicRequestHeader{Topic: topic, ReadQueueNums: 4, WriteQueueNums: 4, Perm: broker.PermRW}
	cctx, ccancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer ccancel()
	resp, err := rc.Invoke(cctx, b.Addr(), protocol.NewRequest(protocol.UpdateAndCreateTopic, &h, nil))
	if err != nil || resp.Code != protocol.Success {
		t.Fatalf("create %s: %v %+v", topic, err, resp)
	}
	if err := registryRoute(rc, regAddr, topic); err != nil {
		t.Fatalf("creation answered, but the healthy registry has no route: %v", err)
	}
}

// loopbackRegistry starts a registry on a loopback port; the test's end
// closes it.
func loopbackRegistry(t *testing.T) string {
	t.Helper()
	ctx, cancel := context.WithCancel(context.Background())
	t.Cleanup(cancel)
	reg, err := startRegistry(ctx, "127.0.0.1:0", nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = reg.Close() })
	return reg.Addr().String()
}
