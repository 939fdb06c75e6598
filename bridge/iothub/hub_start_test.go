package iothub

import (
	"context"
	"errors"
	"testing"
	"time"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/mqtt"
)

// TestHubStartTimeout: a hub started while no broker answers (its RPC
// topic can be neither created nor routed) gives up after StartTimeout
// with ErrStartTimeout, even when the caller's context has no deadline.
// Before, Start waited as long as that context, for ever.
func TestHubStartTimeout(t *testing.T) {
	c := startTestCluster(t, 1)
	n := startBridgeOf(t, c, func(_ *mqtt.Options, _ *bridge.Options, o *Options) {
		o.RPCTopic, o.StartTimeout = "IOTHUB_RPC_NOBROKER", 1500*time.Millisecond
	})
	if err := c.StopBroker(0); err != nil {
		t.Fatal(err)
	}
	done := make(chan error, 1)
	start := time.Now()
	go func() { done <- n.hub.Start(context.Background(), n.br) }()
	var err error
	select {
	case err = <-done:
	case <-time.After(60 * time.Second):
		t.Fatal("Start still waiting after a minute, StartTimeout 1.5 s")
	}
	took := time.Since(start)
	if !errors.Is(err, ErrStartTimeout) {
		t.Fatalf("start without a broker: %v, want ErrStartTimeout", err)
	}
	if took < time.Second || took > 30*time.Second {
		t.Fatalf("gave up after %v, want about StartTimeout's 1.5 s", took)
	}
}
