package broker

import (
	"sync"
	"time"

	"github.com/smartgo/smartgo/statestore"
)

// Notifications of entries that are not on the sync state set yet.
//
// In controller mode a master appends and applies a mutation, then waits
// for the sync state set to have it; when it does not in time (a slave
// left, the set is below min_insync_replicas right after an election),
// the write is answered as unavailable, yet its entry is applied and
// stays unless a failover cuts it. Its notifications were lost with the
// answer: a retry gets the cached reply, and watchers never heard of a
// change that took effect. They are held instead, in the shard's order,
// and routed once the entry is on the set: before the next mutation of
// the shard that is (or a retry's cached reply), so they come before its
// own, or by the expiry loop, which looks every heldLook while any are
// held. A master that becomes a slave drops them: should the entry
// survive, the new master's change history has it, and the front ends
// replay it when they register their watches there (KEYNOTIFY ... SINCE).

// heldLook is how often the expiry loop looks at held notifications.
const heldLook = 100 * time.Millisecond

// maxHeldNotes bounds what a shard holds; beyond it the oldest are
// dropped (logged), so that a master cut off from its slaves for long does
// not grow without bound.
const maxHeldNotes = 10_000

// ssHeldNotes is a shard's held notifications, oldest first.
type ssHeldNotes struct {
	mu    sync.Mutex
	list  []ssHeld // protected by mu
	count int      // notifications in list; protected by mu
}

// ssHeld is the notifications of the entry ending at end.
type ssHeld struct {
	end   int64
	notes []statestore.Notification
}

// waiting reports whether any are held.
func (h *ssHeldNotes) waiting() bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return len(h.list) > 0
}

// drop forgets every held notification.
func (h *ssHeldNotes) drop() {
	h.mu.Lock()
	defer h.mu.Unlock()
	h.list, h.count = nil, 0
}

// hold keeps the notifications of sh's entry ending at end until it is on
// the sync state set.
func (s *StateStore) hold(sh *ssShard, end int64, notes []statestore.Notification) {
	if len(notes) == 0 {
		return
	}
	h := &sh.held
	h.mu.Lock()
	h.list = append(h.list, ssHeld{end: end, notes: notes})
	h.count += len(notes)
	dropped := 0
	for h.count > maxHeldNotes && len(h.list) > 1 {
		dropped += len(h.list[0].notes)
		h.count -= len(h.list[0].notes)
		h.list[0] = ssHeld{}
		h.list = h.list[1:]
	}
	h.mu.Unlock()
	if dropped > 0 {
		s.log.Warn("state store: notifications of changes not on the sync state set dropped", "shard", sh.id, "dropped", dropped)
	}
	s.nudge() // the expiry loop looks at them
}

// releaseHeld routes sh's held notifications whose entries are on the
// sync state set: those ending at or before confirmed (an end the caller
// knows is on the set; 0 for none) or before the store's dispatch limit,
// which in controller mode is the end every member of the set has.
func (s *StateStore) releaseHeld(sh *ssShard, confirmed int64) {
	h := &sh.held
	h.mu.Lock()
	if len(h.list) == 0 {
		h.mu.Unlock()
		return
	}
	if ok, _ := s.b.writable(); !ok || s.host.slave.Load() {
		h.mu.Unlock()
		return
	}
	limit := max(confirmed, s.b.store.DispatchedPhysicalOffset())
	n := 0
	for n < len(h.list) && h.list[n].end <= limit {
		n++
	}
	out := h.list[:n:n]
	h.list = h.list[n:]
	for _, e := range out {
		h.count -= len(e.notes)
	}
	// Routed under mu: two releases keep the shard's order.
	for _, e := range out {
		s.route(e.notes, nil, false)
	}
	h.mu.Unlock()
}
