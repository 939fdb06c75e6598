package bridge

import (
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeCleanStartHandedOverAtOnce: a client connects to node A with
// Clean Start and a session expiry, and the moment it has the CONNACK
// connects to node B with Clean Start false (five clients, one after the
// other). B resumes the session the clean start made (session present,
// its expiry), which A hands over (A's connection gets DISCONNECT 0x8E).
// Before, A's clean-start announcement ended the client's record on every
// node, so B found no session and said session present 0.
func TestBridgeCleanStartHandedOverAtOnce(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	for i := range 5 {
		id := fmt.Sprintf("fresh-%d", i)
		onA, ack := persistent(t, addrOf(a), id, true)
		if ack.SessionPresent {
			t.Fatalf("round %d: CONNACK of a clean start says session present", i)
		}
		onB, ack := persistent(t, addrOf(b), id, false)
		if !ack.SessionPresent {
			t.Fatalf("round %d: the session of the clean start on the other node is not present", i)
		}
		expectTakenOver(t, onA)
		if exp, ok := b.Server().SessionExpiry(id); !ok || exp != time.Hour {
			t.Fatalf("round %d: resumed session's expiry %v (held %v), want 1h", i, exp, ok)
		}
		onB.nothing(50 * time.Millisecond)
		onB.nc.Close()
	}
}

// TestBridgeCleanStartEndedLeavesNoRecord: a clean start with a session
// expiry whose session ends with its connection (DISCONNECT sets the
// expiry to 0) before any other record of it is written leaves no record
// on the other node, so a connect there with Clean Start false finds no
// session at once instead of waiting for a handoff from a node that holds
// nothing (HandoffTimeout 30 s here, longer than the client waits).
func TestBridgeCleanStartEndedLeavesNoRecord(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, func(_ *mqtt.Options, o *Options) { o.HandoffTimeout = 30 * time.Second })

	onA, _ := persistent(t, addrOf(a), "brief", true)
	testutil.WaitFor(t, 10*time.Second, "node B to apply the clean-start announcement", func() bool {
		b.Backend().mu.Lock()
		defer b.Backend().mu.Unlock()
		r := b.Backend().sessions["brief"]
		return r != nil && r.Connect && r.Deleted
	})
	d := &packets.Disconnect{}
	d.Properties.Present.Add(packets.PropSessionExpiry)
	onA.send(d)
	onA.nc.Close()
	testutil.WaitFor(t, 10*time.Second, "node B to drop the record of the ended session", func() bool {
		b.Backend().mu.Lock()
		defer b.Backend().mu.Unlock()
		return b.Backend().sessions["brief"] == nil
	})
	onB, ack := persistent(t, addrOf(b), "brief", false)
	if ack.SessionPresent {
		t.Fatal("the ended session is present on the other node")
	}
	onB.nc.Close()
}
