package broker

import (
	"context"
	"maps"
	"slices"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/ha"
)

// The master's side of the sync state set (controller mode).
//
// Every writes acknowledged so far must be on every member of the set the
// controller holds, or an election could pick a member that lacks one.
// So the master changes the set in steps:
//
//   - a slave that disconnected, or has not had everything the master had
//     for SyncLagMax, is proposed for removal; until the controller agrees,
//     writes still wait for it (they time out, so the set shrinks quickly);
//   - a connected slave that keeps up (caught up within SyncLagMax/2) and
//     has reached the current epoch becomes a candidate: from then on
//     writes also wait for it (and consumers see only what it has). Once it
//     reports the log end the master had when it became a candidate, every
//     write acknowledged before holds too, and it is proposed for the set.
//
// While a change is pending the master waits for the union of the old set,
// the proposal and the candidates; only the controller's answer narrows it.
// Towards MinInSyncReplicas only the members the controller holds count
// (pushSyncSet): a candidate the controller has not taken could not be
// elected if this master died.

// isrInterval is the period of the sync state set check.
func (b *Broker) isrInterval() time.Duration {
	return min(max(b.opts.SyncLagMax/20, 20*time.Millisecond), 200*time.Millisecond)
}

// isrLoop keeps the sync state set up to date while the broker is master.
func (b *Broker) isrLoop(ctx context.Context) {
	t := time.NewTicker(b.isrInterval())
	defer t.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
		b.maintainSyncSet(ctx)
	}
}

func (b *Broker) clearPendingLocked() {
	b.pendingSet = nil
	clear(b.candidates)
}

func (b *Broker) maintainSyncSet(ctx context.Context) {
	srv := b.haSrv.Load()
	st := b.ctl
	if srv == nil || !b.acting.Load() {
		st.mu.Lock()
		b.clearPendingLocked()
		st.mu.Unlock()
		return
	}
	last, _ := b.store.LastEpoch()
	now, lag := time.Now(), b.opts.SyncLagMax
	slaves := map[int64]ha.Slave{}
	for _, s := range srv.Slaves() {
		if s.BrokerID > 0 {
			slaves[s.BrokerID] = s
		}
	}
	keeps := func(s ha.Slave, within time.Duration) bool {
		return !s.CaughtUp.IsZero() && now.Sub(s.CaughtUp) <= within
	}

	st.mu.Lock()
	if b.candidates == nil {
		b.candidates = map[int64]int64{}
	}
	set, sepoch, epoch, id := slices.Clone(st.syncSet), st.syncEpoch, st.epoch, st.id
	changedCandidates := false
	for cid := range b.candidates {
		if s, ok := slaves[cid]; !ok || !keeps(s, lag) || slices.Contains(set, cid) {
			delete(b.candidates, cid)
			changedCandidates = true
		}
	}
	for sid, s := range slaves {
		if sid == id || slices.Contains(set, sid) {
			continue
		}
		if _, ok := b.candidates[sid]; !ok && keeps(s, lag/2) && s.AckOffset >= last.StartOffset {
			b.candidates[sid] = b.store.MaxPhysicalOffset()
			changedCandidates = true
		}
	}
	next := []int64{id}
	for _, m := range set {
		if s, ok := slaves[m]; m != id && ok && keeps(s, lag) {
			next = append(next, m)
		}
	}
	for cid, e0 := range b.candidates {
		if slaves[cid].AckOffset >= e0 {
			next = append(next, cid)
		}
	}
	slices.Sort(next)
	cur := append(slices.Clone(set), id)
	slices.Sort(cur)
	cur = slices.Compact(cur)
	propose := !slices.Equal(next, cur)
	if propose {
		b.pendingSet = next
	} else {
		b.pendingSet = nil
	}
	behind := st.behind
	if behind {
		// The controller holds an older set (applyView): any change, or
		// the master's own set again, goes on the controller's epoch.
		sepoch = st.behindEpoch
	}
	st.mu.Unlock()
	if changedCandidates || propose {
		b.pushSyncSet(srv)
	}
	if !propose && !behind {
		return
	}
	if behind {
		b.plog.Warn("the controller holds an older sync state set than this master; proposing the master's set again",
			"set", next, "controllerEpoch", sepoch)
	}
	resp, err := b.ctrlCall(ctx, protocol.ControllerAlterSyncStateSet, protocol.ControllerAlterSyncState{
		BrokerName: b.opts.BrokerName, MasterEpoch: epoch, MasterID: id, SyncStateSet: next, SyncStateSetEpoch: sepoch})
	if err != nil {
		b.plog.Warn("sync state set change not sent; writes wait for the larger set meanwhile", "from", cur, "to", next, "err", err)
		return
	}
	var g protocol.ControllerGroup
	hasView := len(resp.Body) > 0 && protocol.DecodeControllerBody(resp.Body, &g) == nil
	switch resp.Code {
	case protocol.Success:
		if !hasView {
			return
		}
		st.mu.Lock()
		// After a re-proposal the controller's epoch may stay below the
		// master's (it lost several changes): the same set at its epoch
		// is taken, so that later changes go on the controller's epoch.
		caughtUp := behind && slices.Equal(g.SyncStateSet, next)
		if st.epoch == g.MasterEpoch && (g.SyncStateSetEpoch >= st.syncEpoch || caughtUp) {
			st.behind = false
			st.syncSet, st.syncEpoch = slices.Clone(g.SyncStateSet), g.SyncStateSetEpoch
			b.pendingSet = nil
			for _, m := range g.SyncStateSet {
				delete(b.candidates, m)
			}
		}
		st.mu.Unlock()
		b.pushSyncSet(srv)
		if !slices.Equal(slices.Sorted(slices.Values(g.SyncStateSet)), cur) {
			// Not when the controller left every joiner out (they send it
			// no heartbeats): the master proposes them again each round.
			b.log.Info("sync state set changed", "from", cur, "to", g.SyncStateSet, "epoch", g.SyncStateSetEpoch,
				"candidates", slices.Sorted(maps.Keys(b.candidatesCopy())))
		}
	case protocol.ControllerFencedMasterEpoch, protocol.ControllerInvalidMaster:
		b.log.Warn("the controller refused a sync state set change from this master", "code", resp.Code, "remark", resp.Remark)
		if hasView {
			b.submitView(g)
		}
	default:
		b.plog.Warn("sync state set change refused; retrying", "code", resp.Code, "remark", resp.Remark)
		if hasView {
			b.submitView(g)
		}
	}
}

func (b *Broker) candidatesCopy() map[int64]int64 {
	b.ctl.mu.Lock()
	defer b.ctl.mu.Unlock()
	return maps.Clone(b.candidates)
}
