package bridge

import (
	"context"
	"sync"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
)

// Offsets of a shared subscription's consumer. The consumer polls with
// client.PullConsumerOptions.ManualOffsets: a queue's offset to commit is
// the first message a member is not done with, so a crash of the node
// (kill -9) between a poll and the members' acknowledgements leaves those
// messages to the group's next consumer of the queue (at least once). A
// member is done with a message when its client acknowledged it (QoS 1
// PUBACK, QoS 2 PUBCOMP: mqtt.Recycler), or when its session holds it no
// more otherwise (sent at QoS 0, dropped, expired, saved with the
// session's state, discarded with a clean session), which shareSweep
// checks every second. A message no member took (none matches) is done
// at once. A message its member's session discarded unacknowledged (the
// session ended: mqtt.Releaser) is not done: the sweep offers it to the
// group's members again (MQTT 5 4.8.2), and it is done once one takes and
// finishes it, or no member is left.
//
// The node keeps these records per share across its consumers of the
// share (attach): a consumer that stops and starts again (its share loop
// found the group without members, from a walk just before a member
// subscribed) reads the queues again from the committed offset, which is
// at the first message a member still holds, and a queue that leaves the
// node and comes back is read again from there too. A message read again
// that a local member holds (or that waits to be offered again) is not
// handed out again: the member would get it a second time as a new
// message, with a new packet id and no DUP, while its first copy is in
// flight (TestBridgeSharedConsumerRestartKeepsInFlight).

// shareSweep is how often messages held by members are checked.
const shareSweep = time.Second

// shareAcks tracks one share consumer's messages held by members.
type shareAcks struct {
	srv   clusterServer
	share string
	wake  chan struct{} // capacity 1: a message was released
	mu    sync.Mutex
	c     *client.PullConsumer                // the share's consumer now (attach); protected by mu
	q     map[client.MessageQueue]*shareQueue // protected by mu
}

func newShareAcks(srv clusterServer, share string) *shareAcks {
	return &shareAcks{srv: srv, share: share, wake: make(chan struct{}, 1), q: map[client.MessageQueue]*shareQueue{}}
}

// attach makes c, a new consumer of the share, the one whose offsets a
// progresses. What members hold stays held; the rest is c's to read
// again: a message handed over whose handover never returned (the last
// consumer stopped while every member's queue was full) is dropped, so
// that c hands it over again.
func (a *shareAcks) attach(c *client.PullConsumer) {
	a.mu.Lock()
	defer a.mu.Unlock()
	a.c = c
	for mq, sq := range a.q {
		sq.next = -1
		for off, h := range sq.held {
			if h.taker == "" {
				delete(sq.held, off)
			}
		}
		if len(sq.held) == 0 {
			delete(a.q, mq)
		}
	}
}

// settle, while the share has no consumer on this node, forgets the
// messages no member holds any more (acknowledged, released, or gone
// with its session otherwise): the group's committed offsets leave the
// unacknowledged ones to its next consumer. It reports whether nothing
// is left.
func (a *shareAcks) settle() bool {
	var taken []*shareHeld
	a.mu.Lock()
	for mq, sq := range a.q {
		for off, h := range sq.held {
			if h.released || h.taker == "" {
				delete(sq.held, off)
			} else {
				taken = append(taken, h)
			}
		}
		if len(sq.held) == 0 {
			delete(a.q, mq)
		}
	}
	a.mu.Unlock()
	for _, h := range taken {
		if !a.srv.Holds(h.taker, h.msg) {
			a.drop(h)
		}
	}
	a.mu.Lock()
	defer a.mu.Unlock()
	return len(a.q) == 0
}

// drop forgets h and, when its queue has nothing held, the queue.
func (a *shareAcks) drop(h *shareHeld) {
	a.mu.Lock()
	defer a.mu.Unlock()
	if sq := a.q[h.mq]; sq != nil && sq.held[h.off] == h {
		delete(sq.held, h.off)
		if len(sq.held) == 0 {
			delete(a.q, h.mq)
		}
	}
}

// shareQueue is one queue's progress.
type shareQueue struct {
	next int64                // offset after the last message handed over or skipped
	held map[int64]*shareHeld // handed to a member, not done
}

// shareHeld is a message handed to a member; its Recycle is the
// member's acknowledgement.
type shareHeld struct {
	a     *shareAcks
	mq    client.MessageQueue
	off   int64
	msg   *mqtt.Message
	taker string // protected by a.mu; "" until the handover returned
	// released: the taker's session discarded it unacknowledged; the
	// sweep offers it again (protected by a.mu).
	released bool
}

// Recycle implements mqtt.Recycler: the member acknowledged the message.
// It runs under the member session's lock and only takes a.mu.
func (h *shareHeld) Recycle(*mqtt.Message) { h.a.done(h) }

// Released implements mqtt.Releaser: the member's session ended without
// acknowledging the message. Like Recycle it only takes a.mu.
func (h *shareHeld) Released(*mqtt.Message) {
	a := h.a
	a.mu.Lock()
	if sq := a.q[h.mq]; sq != nil && sq.held[h.off] == h {
		h.released = true
	}
	a.mu.Unlock()
	select {
	case a.wake <- struct{}{}:
	default:
	}
}

func (a *shareAcks) queueLocked(mq client.MessageQueue) *shareQueue {
	sq := a.q[mq]
	if sq == nil {
		sq = &shareQueue{next: -1, held: map[int64]*shareHeld{}}
		a.q[mq] = sq
	}
	return sq
}

// markLocked commits (at the next commit) mq's first offset not done.
func (a *shareAcks) markLocked(mq client.MessageQueue, sq *shareQueue) {
	point := sq.next
	for off := range sq.held {
		point = min(point, off)
	}
	if point >= 0 && a.c != nil {
		a.c.MarkConsumed(mq, point)
	}
}

// skip records a message of mq that goes to no member.
func (a *shareAcks) skip(mq client.MessageQueue, off int64) {
	a.mu.Lock()
	defer a.mu.Unlock()
	sq := a.queueLocked(mq)
	sq.next = max(sq.next, off+1)
	a.markLocked(mq, sq)
}

// hold records a message about to be handed to a member; nil when it
// was read again while a member holds it (or it waits to be offered
// again): it is not handed out again.
func (a *shareAcks) hold(mq client.MessageQueue, off int64, msg *mqtt.Message) *shareHeld {
	a.mu.Lock()
	defer a.mu.Unlock()
	sq := a.queueLocked(mq)
	sq.next = max(sq.next, off+1)
	if sq.held[off] != nil {
		return nil
	}
	h := &shareHeld{a: a, mq: mq, off: off, msg: msg}
	sq.held[off] = h
	return h
}

// taken records who took h (TryDeliverSharedAcked): done at once when no
// member did or the member does not hold it (QoS 0, refused).
func (a *shareAcks) taken(h *shareHeld, taker string) {
	a.mu.Lock()
	h.taker = taker
	a.mu.Unlock()
	if taker == "" || !a.srv.Holds(taker, h.msg) {
		a.doneUnlessReleased(h)
	}
}

// doneUnlessReleased is done, unless h's member released it meanwhile
// (its session ended: Holds is false for that reason then, since Released
// ran under the lock that removed the session).
func (a *shareAcks) doneUnlessReleased(h *shareHeld) {
	a.mu.Lock()
	released := h.released
	a.mu.Unlock()
	if !released {
		a.done(h)
	}
}

// reoffer hands the released h to a local member of the group again:
// done once it expired, else held for the next sweep while every local
// member's queue is full or none is left.
func (a *shareAcks) reoffer(h *shareHeld) {
	a.mu.Lock()
	if sq := a.q[h.mq]; sq == nil || sq.held[h.off] != h || !h.released || h.taker == "" {
		a.mu.Unlock()
		return
	}
	prev := h.taker
	h.released, h.taker = false, ""
	a.mu.Unlock()
	taker, full := a.srv.TryDeliverSharedAcked(a.share, h.msg, h)
	if full || taker == "" && (h.msg.Expiry.IsZero() || time.Now().Before(h.msg.Expiry)) {
		// No local member has room, or none is left: the message stays
		// uncommitted, for a member that comes or, once this node's
		// consumer leaves the group, for the node that takes its queue.
		a.mu.Lock()
		h.released, h.taker = true, prev
		a.mu.Unlock()
		return
	}
	a.taken(h, taker)
}

// done records that the member is done with h (idempotent).
func (a *shareAcks) done(h *shareHeld) {
	a.mu.Lock()
	defer a.mu.Unlock()
	sq := a.q[h.mq]
	if sq == nil || sq.held[h.off] != h {
		return
	}
	delete(sq.held, h.off)
	a.markLocked(h.mq, sq)
}

// sweepLoop finds, every shareSweep until ctx ends, the messages their
// members stopped holding without an acknowledgement.
func (a *shareAcks) sweepLoop(ctx context.Context) {
	t := time.NewTicker(shareSweep)
	defer t.Stop()
	var taken, released []*shareHeld
	for {
		tick := false
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			tick = true
		case <-a.wake:
		}
		taken, released = taken[:0], released[:0]
		a.mu.Lock()
		for _, sq := range a.q {
			for _, h := range sq.held {
				switch {
				case h.released && h.taker != "":
					// Its handover returned (taken): only then is
					// it offered again, so that taken and reoffer
					// never run for it at once.
					released = append(released, h)
				case tick && h.taker != "":
					taken = append(taken, h)
				}
			}
		}
		a.mu.Unlock()
		for _, h := range released {
			a.reoffer(h)
		}
		for _, h := range taken {
			if !a.srv.Holds(h.taker, h.msg) {
				a.doneUnlessReleased(h)
			}
		}
	}
}
