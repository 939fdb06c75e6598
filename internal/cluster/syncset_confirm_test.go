package cluster

import (
	"context"
	"errors"
	"fmt"
	"net"
	"strconv"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/controller"
	"github.com/smartgo/smartgo/internal/testnet"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestClusterControlledAckNeedsConfirmedSyncSet: a sync master with
// min_insync_replicas 2 must not acknowledge a write while the set the
// controller holds names the master alone, even when a slave has caught
// up and has the write: if the master died then, the controller could
// elect nobody. The brokers reach the controller through a proxy that
// refuses every sync state set change, so the slave stays a candidate;
// its writes time out (FLUSH_SLAVE_TIMEOUT) instead of being answered OK.
func TestClusterControlledAckNeedsConfirmedSyncSet(t *testing.T) {
	proxy := net.JoinHostPort("127.0.0.1", strconv.Itoa(testnet.FreePorts(t, 1)[0]))
	var ctlAddr string
	var refused *atomic.Int64
	c := startControlled(t, CtlOptions{GroupSize: 2, Sync: true, MinInSync: 2,
		Controller: func(_ int, o *controller.Options) { ctlAddr = o.Advertise },
		Broker: func(_ int, o *broker.Options) {
			if refused == nil {
				refused = testnet.RefusingProxy(t, proxy, ctlAddr, int32(protocol.ControllerAlterSyncStateSet))
			}
			o.Controllers = []string{proxy}
			o.SlaveAckTimeout = time.Second
		}})
	// The slave caught up and the master proposed it: the controller
	// (through the proxy) said no.
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := refused.Load(); n == 0 {
			return errors.New("no sync state set change proposed yet")
		}
		return nil
	})
	j, ok := c.Master()
	if !ok {
		t.Fatal("no master")
	}
	if _, _, _, set := c.Broker(j).ControllerState(); len(set) != 1 {
		t.Fatalf("the controller's sync state set is %v, want the master alone", set)
	}
	p := ctlProducer(t, c, 10*time.Second)
	for i := range 3 {
		r, err := p.Send(context.Background(), &client.Message{Topic: "Confirm", Body: []byte(fmt.Sprint("m", i))})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		if r.Status == client.SendOK {
			t.Fatalf("send %d acknowledged with the controller's sync state set below min_insync_replicas", i)
		}
		// Waiting for the controller: FLUSH_SLAVE_TIMEOUT; on a loaded
		// machine the slave may also fall out of the candidates (behind
		// for sync_lag_max), then too few members: SLAVE_NOT_AVAILABLE.
		if r.Status != client.SendFlushSlaveTimeout && r.Status != client.SendSlaveNotAvailable {
			t.Fatalf("send %d: status %v, want FLUSH_SLAVE_TIMEOUT", i, r.Status)
		}
	}
}
