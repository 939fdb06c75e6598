package broker

import (
	"sync"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
)

// Notifications in log order.
//
// A mutation is applied under its shard's mutex, in log order, but its
// notifications are routed after the mutex is released (a sync master
// first waits for its slave). Routed as they came, a later change's notice
// could overtake an earlier one's: the expiry of a key set with PX pushed
// before the SET's notice of it, and a watcher left believing the key
// exists. So every mutation that notifies anyone queues its notifications
// under the shard's mutex (ssOutbox, in log order), and whoever routes
// them first routes every one queued before them: a change's notices are
// never pushed before those of the shard's earlier changes.
//
// Every queued notice is pushed, to the front end of its client, the
// requester's own included: none goes back in the response, since the
// front end would deliver it after the call returned, and a later change's
// push to that same front end (an expiry, another front end's write) could
// reach it first (the usual case in standalone, where every client is on
// one front end). A front end thus gets a shard's notices in log order
// through one channel: its sink's calls, made under the outbox's mutex,
// or its connection's write queue, appended to under it. A KEYNOTIFY ...
// SINCE's backlog is queued the same way, under the shard's mutex with its
// registration: it reaches the watcher before the notices of any change
// made after the registration, and before the response. Only an in-process
// caller of Do without a front end (keepAll) gets them in the response.

// ssOutbox is a shard's notifications applied and not routed yet, oldest
// first.
type ssOutbox struct {
	mu   sync.Mutex
	seq  uint64     // of the last queued; protected by the shard's mutex
	list []*ssNotes // protected by mu
}

// ssNotes is the notifications of one applied change.
type ssNotes struct {
	seq     uint64
	notes   []statestore.Notification
	keepAll bool                              // returned to the caller (Do without a front end), none pushed
	mine    []protocol.StateStoreNotification // what route returned with keepAll; protected by ssOutbox.mu
	routed  bool                              // protected by ssOutbox.mu
}

// queueNotes queues a change's notifications behind the shard's earlier
// ones; nil when there are none. Called with sh.mu held, right after the
// change is applied.
func (s *StateStore) queueNotes(sh *ssShard, notes []statestore.Notification, keepAll bool) *ssNotes {
	if len(notes) == 0 {
		return nil
	}
	o := &sh.outbox
	o.seq++
	n := &ssNotes{seq: o.seq, notes: notes, keepAll: keepAll}
	o.mu.Lock()
	o.list = append(o.list, n)
	o.mu.Unlock()
	return n
}

// routeQueued routes the shard's queued notifications up to and including
// n's, in order, each to its client's front end, and returns n's when it
// was queued with keepAll (none is pushed then). n nil routes nothing.
func (s *StateStore) routeQueued(sh *ssShard, n *ssNotes) []protocol.StateStoreNotification {
	if n == nil {
		return nil
	}
	o := &sh.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	i := 0
	for ; i < len(o.list) && o.list[i].seq <= n.seq; i++ {
		e := o.list[i]
		o.list[i] = nil
		// Routed under mu: two goroutines routing keep the shard's order.
		e.mine = s.route(e.notes, nil, e.keepAll)
		e.routed = true
	}
	o.list = o.list[i:]
	return n.mine
}

// unqueue takes n's notifications out of the queue unrouted and reports
// whether it did; false when a later change's route already routed them
// (that change is on the sync state set, so this one is too).
func (s *StateStore) unqueue(sh *ssShard, n *ssNotes) bool {
	if n == nil {
		return false
	}
	o := &sh.outbox
	o.mu.Lock()
	defer o.mu.Unlock()
	if n.routed {
		return false
	}
	for i, e := range o.list {
		if e == n {
			o.list = append(o.list[:i:i], o.list[i+1:]...)
			break
		}
	}
	return true
}
