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

// shareSweep is how often messages held by members are checked.
const shareSweep = time.Second

// shareAcks tracks one share consumer's messages held by members.
type shareAcks struct {
	c     *client.PullConsumer
	srv   clusterServer
	share string
	wake  chan struct{} // capacity 1: a message was released
	mu    sync.Mutex
	q     map[client.MessageQueue]*shareQueue // protected by mu
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
	if point >= 0 {
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

// hold records a message about to be handed to a member.
func (a *shareAcks) hold(mq client.MessageQueue, off int64, msg *mqtt.Message) *shareHeld {
	h := &shareHeld{a: a, mq: mq, off: off, msg: msg}
	a.mu.Lock()
	defer a.mu.Unlock()
	sq := a.queueLocked(mq)
	sq.held[off] = h
	sq.next = max(sq.next, off+1)
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
