package ha

import (
	"math"
	"slices"
)

// Sync state set (controlled mode). The broker tells the server which
// brokers' acknowledgements a write needs: the members of the group's sync
// state set (during a change, the union of the old and the new set and
// the candidates) and the fewest members for a write to be acknowledged
// at all. A write is acknowledged once every member other than this
// master reported an end at or past it, and the set the controller holds
// (the confirmed members) has at least the fewest members: a slave that
// caught up counts only once the controller has it in the set, because
// only then can the controller elect it when this master dies. The
// confirm offset, the end every member has, is the store's dispatch
// limit, so consumers only see what a failover keeps.

// SetSyncStateSet sets the members (broker ids, this master's included or
// not) whose acknowledgements a write needs and the fewest members for a
// write to be acknowledged (minInSync, counting this master); every
// member counts as held by the controller. Waiters are re-evaluated at
// once.
func (h *Server) SetSyncStateSet(members []int64, minInSync int) {
	h.SetSyncStateSetChanging(members, members, minInSync)
}

// SetSyncStateSetChanging is SetSyncStateSet during a change: members are
// those whose acknowledgements a write needs, confirmed those of the set
// the controller holds. A write is acknowledged only when confirmed (with
// this master) has at least minInSync members; until then it waits (and
// times out like a slow slave), unless members are too few as well, which
// fails it at once.
func (h *Server) SetSyncStateSetChanging(members, confirmed []int64, minInSync int) {
	others := h.othersOf(members)
	held := len(h.othersOf(confirmed)) + 1
	h.syncMu.Lock()
	h.syncSet, h.confirmed, h.minInSync = others, held, minInSync
	h.updateLimitLocked()
	h.syncMu.Unlock()
	h.acks.Notify()
}

// othersOf is ids without this master's, sorted, without repeats.
func (h *Server) othersOf(ids []int64) []int64 {
	others := slices.DeleteFunc(slices.Clone(ids), func(id int64) bool { return id == h.opts.BrokerID })
	slices.Sort(others)
	return slices.Compact(others)
}

// SyncStateSet returns the members set by SetSyncStateSet other than this
// master, and minInSync.
func (h *Server) SyncStateSet() ([]int64, int) {
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	return slices.Clone(h.syncSet), h.minInSync
}

// ConfirmOffset returns the commitlog end every member of the sync state
// set reported (this master's own end when it is the only member).
func (h *Server) ConfirmOffset() int64 {
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	return h.confirmLocked()
}

func (h *Server) confirmLocked() int64 {
	c := h.s.MaxPhysicalOffset()
	for _, id := range h.syncSet {
		c = min(c, h.acked[id])
	}
	return c
}

// updateLimitLocked moves the store's dispatch limit to the confirm offset
// (no limit while this master is the only member).
func (h *Server) updateLimitLocked() {
	limit := int64(math.MaxInt64)
	if len(h.syncSet) > 0 {
		limit = h.confirmLocked()
	}
	if limit != h.limit {
		h.limit = limit
		h.s.SetDispatchLimit(limit)
	}
}

// AckedBy returns the highest end broker id reported to this master.
func (h *Server) AckedBy(id int64) int64 {
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	return h.acked[id]
}

// syncSetSnap is ackSnap in controlled mode: the member of the sync
// state set (other than this master) with the lowest reported end.
func (h *Server) syncSetSnap() ackSnap {
	h.syncMu.Lock()
	defer h.syncMu.Unlock()
	snap := ackSnap{controlled: true, ack: h.s.MaxPhysicalOffset(), lowest: -1,
		members: len(h.syncSet) + 1, confirmed: h.confirmed, minInSync: h.minInSync}
	snap.ok = snap.members >= snap.minInSync
	for _, id := range h.syncSet {
		if a := h.acked[id]; snap.lowest < 0 || a < snap.ack {
			snap.ack, snap.lowest = a, id
		}
	}
	return snap
}
