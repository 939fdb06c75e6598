package controller

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestControllerBehindElectsActingMaster: the controller names broker 1
// master at epoch 1, while (as after a lost election: its log tail cut)
// broker 2 acts as master at epoch 3 and broker 1, still acting at its
// old epoch, would keep its lease. Broker 1's heartbeats are refused
// (another live broker reports a newer epoch), and the controller elects
// broker 2 again at epoch 4, above every epoch reported: no epoch goes
// back, and broker 1 is not confirmed master meanwhile.
func TestControllerBehindElectsActingMaster(t *testing.T) {
	var logs testutil.LogBuffer
	rs := startReplicas(t, 1, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	addrs := rs.addrs()
	bs, g := firstMaster(t, addrs, 3)
	bs[0].set(100, 1, true)
	bs[1].set(120, 3, true)
	bs[2].set(110, 3, false)
	bs[1].startHeartbeats()
	bs[2].startHeartbeats()

	// The stale master is refused once the newer epoch was heard.
	testutil.Eventually(t, 10*time.Second, func() error {
		resp, hb, err := bs[0].heartbeat(addrs[0])
		if err != nil {
			return err
		}
		if resp.Code != protocol.ControllerFencedMasterEpoch {
			return fmt.Errorf("broker 1 at epoch 1 still confirmed master (group at epoch %d, master %d)", hb.Group.MasterEpoch, hb.Group.MasterID)
		}
		return nil
	})
	g = groupOn(t, bs[0], "the acting master elected again", func(g protocol.ControllerGroup) bool { return g.MasterEpoch > 1 })
	if g.MasterID != bs[1].ID() || g.MasterEpoch != 4 || len(g.SyncStateSet) != 1 || g.SyncStateSet[0] != bs[1].ID() {
		t.Fatalf("after the repair %+v, want master %d at epoch 4", g, bs[1].ID())
	}
	if !strings.Contains(logs.String(), "the controller's state is behind") {
		t.Fatalf("no repair logged:\n%s", logs.String())
	}
	// Broker 2 at epoch 4 now: broker 1's claim at epoch 1 stays refused.
	bs[1].set(120, 4, true)
	resp, _, err := bs[0].heartbeat(addrs[0])
	if err != nil || resp.Code != protocol.ControllerFencedMasterEpoch {
		t.Fatalf("deposed master's heartbeat: %v %v", resp, err)
	}
	// Broker 2's heartbeats at epoch 4 are the controller's master's.
	resp, _, err = bs[1].heartbeat(addrs[0])
	if err != nil || resp.Code != protocol.Success {
		t.Fatalf("repaired master's heartbeat: %v %v", resp, err)
	}
}

// TestControllerBehindMasterGoneToo: as above, but the broker acting at
// the newer epoch is gone too: the controller's master (alive, but a
// slave at epoch 3 now) was deposed, so the live member of the set is
// elected, above the epoch the brokers report, instead of nobody ever.
func TestControllerBehindMasterGoneToo(t *testing.T) {
	rs := startReplicas(t, 1, nil)
	addrs := rs.addrs()
	bs, g := firstMaster(t, addrs, 2)
	bs[0].set(100, 1, true)
	bs[1].set(100, 1, false)
	bs[1].startHeartbeats()
	if resp, err := alterSSS(bs[0], g, bs[0].ID(), bs[1].ID()); err != nil || resp.Code != protocol.Success {
		t.Fatalf("expand: %v %v", resp, err)
	}
	// Both now follow a master at epoch 3 the controller does not know,
	// which died.
	bs[0].set(150, 3, false)
	bs[1].set(150, 3, false)
	g = groupOn(t, bs[0], "a new master", func(g protocol.ControllerGroup) bool { return g.MasterEpoch > 1 })
	if g.MasterID != bs[1].ID() || g.MasterEpoch != 4 {
		t.Fatalf("after the repair %+v, want master %d at epoch 4", g, bs[1].ID())
	}
}

// firstMaster registers n fake brokers of group "g" and heartbeats from
// the first only, which the controller then elects at epoch 1.
func firstMaster(t *testing.T, addrs []string, n int) ([]*fakeBroker, protocol.ControllerGroup) {
	t.Helper()
	var bs []*fakeBroker
	for i := range n {
		b := newFakeBroker(t, addrs, "g", fmt.Sprintf("t%d", i+1))
		b.register()
		bs = append(bs, b)
	}
	bs[0].startHeartbeats()
	g := groupOn(t, bs[0], "a master", func(g protocol.ControllerGroup) bool { return g.MasterID != 0 })
	if g.MasterID != bs[0].ID() || g.MasterEpoch != 1 {
		t.Fatalf("first election %+v", g)
	}
	return bs, g
}

// TestControllerBehindSetLacksFollowers: the controller's state is behind
// (it names broker 1 master at epoch 1 with the set [1], as after a lost
// election and lost set changes) while the master at epoch 3 that the
// controller does not know died. Broker 1 (deposed) and broker 3 follow
// epoch 3; broker 3 never was in the controller's set and has the
// longest log, broker 2 is dead. Picking from the controller's set
// without its master left nobody, for good; the live follower of epoch 3
// with the longest log is elected, above that epoch.
func TestControllerBehindSetLacksFollowers(t *testing.T) {
	var logs testutil.LogBuffer
	rs := startReplicas(t, 1, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	addrs := rs.addrs()
	bs, g := firstMaster(t, addrs, 3)
	if len(g.SyncStateSet) != 1 || g.SyncStateSet[0] != bs[0].ID() {
		t.Fatalf("first set %v, want [%d]", g.SyncStateSet, bs[0].ID())
	}
	bs[2].set(160, 3, false)
	bs[2].startHeartbeats()
	bs[0].set(150, 3, false)
	g = groupOn(t, bs[0], "a new master", func(g protocol.ControllerGroup) bool { return g.MasterEpoch > 1 })
	if g.MasterID != bs[2].ID() || g.MasterEpoch != 4 {
		t.Fatalf("after the repair %+v, want master %d at epoch 4", g, bs[2].ID())
	}
	if strings.Contains(logs.String(), "no broker may become master") {
		t.Fatalf("an election was refused first:\n%s", logs.String())
	}
}

// TestControllerBehindSkipsOlderEpoch: as above, but the broker outside
// the controller's set reports an epoch below the one live brokers
// report (it never followed the dead master): the deposed master, the
// only follower of epoch 3, is elected again, though its log is shorter.
func TestControllerBehindSkipsOlderEpoch(t *testing.T) {
	rs := startReplicas(t, 1, nil)
	addrs := rs.addrs()
	bs, _ := firstMaster(t, addrs, 3)
	bs[0].set(150, 3, false)
	bs[2].set(500, 1, false)
	bs[2].startHeartbeats()
	g := groupOn(t, bs[0], "a new master", func(g protocol.ControllerGroup) bool { return g.MasterEpoch > 1 })
	if g.MasterID != bs[0].ID() || g.MasterEpoch != 4 {
		t.Fatalf("after the repair %+v, want master %d at epoch 4", g, bs[0].ID())
	}
}
