package controller

import (
	"slices"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestControllerAlterSyncStateSetLeavesOutSilentJoiners: a change that
// adds a broker the controller does not hear from applies without it
// (before, the whole change was refused, so the other joiner never got
// in either); asked again, nothing changes and the epoch stays.
func TestControllerAlterSyncStateSetLeavesOutSilentJoiners(t *testing.T) {
	rs := startReplicas(t, 1, nil)
	addrs := rs.addrs()
	live, alsoLive, silent := newFakeBroker(t, addrs, "g", "a"), newFakeBroker(t, addrs, "g", "b"), newFakeBroker(t, addrs, "g", "c")
	for _, b := range []*fakeBroker{live, alsoLive, silent} {
		b.register()
	}
	live.startHeartbeats()
	alsoLive.startHeartbeats()
	g := groupOn(t, live, "a master, the silent broker timed out", func(g protocol.ControllerGroup) bool {
		if g.MasterID != live.ID() {
			return false
		}
		for _, m := range g.Brokers {
			if m.ID == silent.ID() && m.Alive {
				return false
			}
		}
		return true
	})
	resp, err := alterSSS(live, g, live.ID(), alsoLive.ID(), silent.ID())
	if err != nil || resp.Code != protocol.Success {
		t.Fatalf("change with a silent joiner: %v %+v", err, resp)
	}
	var got protocol.ControllerGroup
	if err := protocol.DecodeControllerBody(resp.Body, &got); err != nil {
		t.Fatal(err)
	}
	want := []int64{live.ID(), alsoLive.ID()}
	slices.Sort(want)
	if !slices.Equal(got.SyncStateSet, want) || got.SyncStateSetEpoch != g.SyncStateSetEpoch+1 {
		t.Fatalf("set %v epoch %d, want %v at %d", got.SyncStateSet, got.SyncStateSetEpoch, want, g.SyncStateSetEpoch+1)
	}
	// The master proposes the silent one again: answered, unchanged.
	resp, err = alterSSS(live, got, live.ID(), alsoLive.ID(), silent.ID())
	if err != nil || resp.Code != protocol.Success {
		t.Fatalf("repeated change: %v %+v", err, resp)
	}
	var again protocol.ControllerGroup
	if err := protocol.DecodeControllerBody(resp.Body, &again); err != nil {
		t.Fatal(err)
	}
	if !slices.Equal(again.SyncStateSet, want) || again.SyncStateSetEpoch != got.SyncStateSetEpoch {
		t.Fatalf("repeated: set %v epoch %d, want %v at %d", again.SyncStateSet, again.SyncStateSetEpoch, want, got.SyncStateSetEpoch)
	}
	// Once it heartbeats it joins.
	silent.startHeartbeats()
	groupOn(t, live, "the silent broker alive", func(protocol.ControllerGroup) bool {
		r, err := alterSSS(live, again, live.ID(), alsoLive.ID(), silent.ID())
		return err == nil && r.Code == protocol.Success && protocol.DecodeControllerBody(r.Body, &again) == nil && len(again.SyncStateSet) == 3
	})
}
