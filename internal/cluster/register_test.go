package cluster

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
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

	so := store.DefaultOptions(t.TempDir())
	so.SegmentSize = 4 << 20
	so.MaxMessageSize = 1 << 20
	b, err := broker.New(broker.Options{ListenAddr: "127.0.0.1:0", Registries: []string{regAddr}, AutoCreateTopic: true, Store: so})
	if err != nil {
		t.Fatal(err)
	}
	defer b.Close()

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
	testutil.Eventually(t, 10*time.Second, func() error {
		ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
		defer cancel()
		resp, err := rc.Invoke(ctx, regAddr, protocol.NewRequest(protocol.GetRouteInfoByTopic, &protocol.GetRouteInfoRequestHeader{Topic: broker.AutoCreateTopicKey}, nil))
		if err != nil {
			return err
		}
		if resp.Code != protocol.Success {
			return &routeErr{resp.Remark}
		}
		return nil
	})
	t.Logf("registered %v after the registry started", time.Since(start))
}

type routeErr struct{ s string }

func (e *routeErr) Error() string { return "no route yet: " + e.s }
