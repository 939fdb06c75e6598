package mqtt

import (
	"fmt"
	"slices"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// Sessions whose queue overflows while their messages can be read again.
//
// A backend that keeps every stored message in a log (the bridge) hands
// live messages to the server with DeliverLive instead of Deliver. A
// session whose queue holds Options.MaxQueuedMessages then does not drop
// the next QoS 1/2 message: it enters overflow, from which on it holds
// no live QoS 1/2 message at all (QoS 0 still goes out as before), and
// DeliverLive reports each message it did not take to the backend. The
// backend reads those messages again from its log, in its order, and
// hands them over with Refill as the session's queue drains; the Refill
// that catches up with live delivery (last) ends the overflow. The queue
// limit thus stays a memory bound without being a point of loss. Without
// DeliverLive (Deliver, DeliverUnshared: the engine on its own, the
// memory backend) a full queue drops the message, counted in
// Stats.Dropped and logged.

// deliverLive is deliver for a message the backend can read again: it
// returns false, holding nothing, when the session is in overflow or
// enters it now (its queue is full).
func (ss *session) deliverLive(msg *Message, qos byte, retain bool, subIDs []uint32) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if qos > 0 && !ss.dead {
		if ss.overflow {
			return false
		}
		if len(ss.queue) >= ss.srv.opts.MaxQueuedMessages {
			if acl := ss.srv.acl; acl != nil && !acl.MayRead(ss.id, ss.username, msg.Topic) {
				return true
			}
			ss.overflow = true
			ss.srv.stats.Overflows.Add(1)
			if now := nanotime(); ss.lastDropLog == 0 || now-ss.lastDropLog >= int64(dropLogEvery) {
				ss.srv.log.Info("mqtt: session queue full, further messages are read again from the log as it drains",
					"client", ss.id, "topic", msg.Topic, "queued", len(ss.queue))
				ss.lastDropLog = now
			}
			return false
		}
	}
	ss.deliverLocked(msg, qos, retain, subIDs, nil)
	return true
}

// DeliverLive is DeliverUnshared for a backend that can read msg again
// later: a session whose queue is full (or that is in overflow already)
// does not hold it, and overflow is called, after the session's lock is
// released, with its client id and session instance (SessionInstance).
// The backend then owes that session this message and every later one
// it delivers, through Refill. overflow runs on the caller's goroutine.
func (s *Server) DeliverLive(msg *Message, overflow func(clientID string, inst uint64)) {
	if msg.expired(time.Now()) {
		return
	}
	for _, t := range s.subs.matchPlain(msg.Topic, msg.ClientID) {
		if !t.s.deliverLive(msg, min(msg.QoS, t.qos), msg.Retain && t.rap, t.subIDs) {
			overflow(t.s.id, t.s.seq)
		}
	}
}

// Refill hands the session inst of clientID, which is in overflow,
// messages read again from the log, in delivery order. Each is matched
// against the session's current plain subscriptions as live delivery
// would (QoS 0 deliveries and messages that no longer match or have
// expired are skipped: live delivery sent or dropped those), and the
// session takes them while its queue has room. taken counts the messages
// of msgs it went through. When last is set (msgs reach the backend's
// live position, and live delivery is held back meanwhile) and the
// session took them all, the overflow ends and live delivery to the
// session resumes. Otherwise room is closed once the session's queue has
// drained to half its limit (or stays open until the session is gone:
// wait on it with a timeout). The error wraps ErrNoSession when the
// session is gone, was replaced or is not in overflow.
func (s *Server) Refill(clientID string, inst uint64, msgs []*Message, last bool) (taken int, room <-chan struct{}, err error) {
	ss, err := s.sessionOf(clientID)
	if err != nil {
		return 0, nil, err
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.seq != inst || ss.dead || !ss.overflow {
		return 0, nil, fmt.Errorf("%w: %q is not in overflow", ErrNoSession, clientID)
	}
	limit := s.opts.MaxQueuedMessages
	now := time.Now()
	for taken < len(msgs) && len(ss.queue) < limit {
		m := msgs[taken]
		taken++
		if m.expired(now) {
			continue
		}
		if qos, retain, ids := ss.matchLocked(m); qos > 0 {
			ss.deliverLocked(m, qos, retain, ids, nil)
		}
	}
	if last && taken == len(msgs) {
		ss.overflow = false
		ss.wakeRoomLocked()
		return taken, nil, nil
	}
	if ss.room == nil {
		ss.room = make(chan struct{})
	}
	return taken, ss.room, nil
}

// matchLocked is how live delivery hands m to this session through its
// plain subscriptions: the highest QoS of the matching ones (each capped
// by m's; 0 when none matches), the retain flag under Retain As
// Published, and their identifiers.
func (ss *session) matchLocked(m *Message) (qos byte, retain bool, ids []uint32) {
	for _, sub := range ss.subs {
		if packets.IsShared(sub.Filter) || sub.NoLocal && m.ClientID == ss.id ||
			!packets.Match(sub.Filter, m.Topic) || !ss.srv.res.visible(sub.Filter, m.Topic) {
			continue
		}
		qos = max(qos, min(m.QoS, sub.QoS))
		retain = retain || m.Retain && sub.RetainAsPublished
		ids = AddSubID(ids, sub.Identifier)
	}
	slices.Sort(ids)
	return qos, retain, ids
}

// wakeRoomLocked tells a backend waiting to Refill that it may go on.
func (ss *session) wakeRoomLocked() {
	if ss.room != nil {
		close(ss.room)
		ss.room = nil
	}
}
