package bridge

import (
	"context"
	"net"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testnet"
)

// startShareGroup is START_SHARE_GROUP's request code (the bridge may not
// import remoting/protocol).
const startShareGroup = 900

// A broker that predates START_SHARE_GROUP answers it "request code not
// supported": a new shared subscription then starts with the ordinary
// offset requests (admin.StartShareGroup's fallback), so its members get
// every message published after the SUBACK and none of the history. Its
// consumer used to never start: the members got nothing.
func TestBridgeSharedSubscriptionOnOldBroker(t *testing.T) {
	// The broker listens on 127.0.0.1:port and registers as
	// 127.0.0.2:port (its Addr); the proxy listens there and forwards to
	// 127.0.0.1:port.
	if ln, err := net.Listen("tcp", "127.0.0.2:0"); err != nil {
		t.Skipf("127.0.0.2 is not a loopback address here: %v", err)
	} else {
		ln.Close()
	}
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir(), AdvertiseIP: "127.0.0.2"})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	_, port, err := net.SplitHostPort(c.BrokerAddr(0))
	if err != nil {
		t.Fatal(err)
	}
	refused := testnet.RefusingProxy(t, net.JoinHostPort("127.0.0.2", port), net.JoinHostPort("127.0.0.1", port), startShareGroup)
	b := startBridge(t, c, nil)
	checkShareFromSuback(t, ctx, b, "old", "old")
	if refused.Load() == 0 {
		t.Fatal("the proxy refused no START_SHARE_GROUP: the test did not test the fallback")
	}
}
