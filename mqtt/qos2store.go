package mqtt

import (
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// A client whose connection drops after it sent a QoS 2 PUBLISH, before
// the PUBREC, sends the PUBLISH again with DUP on its next connection
// (MQTT 4.4). If that comes while the first connection's store of the
// message is still under way, the new connection must not store it
// again (exactly once): it answers PUBREC once that store ended, with
// its outcome. And a session handed to another node must carry the id
// in its received ones, so an eviction waits for the stores to end
// before it takes the session's state, and so does the save of a
// session whose connection ended with stores under way: another node
// the client connects to meanwhile finds the session online in the
// connection's last record and waits for the handoff the eviction
// writes, instead of resuming from a save without those ids.

// evictStoreWait bounds how long an eviction waits for the session's
// QoS 2 stores under way (a backend completes each within its own
// send timeout; past this bound the eviction goes on without them).
const evictStoreWait = 10 * time.Second

// qos2In is a session's inbound QoS 2 state: the packet ids received
// (stored, awaiting their PUBREL), and those being stored, each with the
// connection storing it, and what waits for their end. It goes when all
// of it is empty (an idle session holds none).
type qos2In struct {
	received map[uint16]struct{}
	by       map[uint16]*conn
	waiters  map[uint16][]func(code packets.ReasonCode, detail string) // nil until one waits
	idle     chan struct{}                                             // closed when by empties; nil: nobody waits
}

// in2Locked returns ss.in2, made if nil (ss.mu held).
func (ss *session) in2Locked() *qos2In {
	if ss.in2 == nil {
		ss.in2 = &qos2In{}
	}
	return ss.in2
}

// dropIn2IfEmptyLocked lets ss.in2 go once it holds nothing (ss.mu held).
func (ss *session) dropIn2IfEmptyLocked() {
	if in := ss.in2; in != nil && len(in.received) == 0 && len(in.by) == 0 && len(in.waiters) == 0 && in.idle == nil {
		ss.in2 = nil
	}
}

// addReceivedLocked records the incoming QoS 2 id as received (ss.mu held).
func (ss *session) addReceivedLocked(id uint16) {
	in := ss.in2Locked()
	if in.received == nil {
		in.received = map[uint16]struct{}{}
	}
	in.received[id] = struct{}{}
}

// hasReceivedLocked reports whether id is received (ss.mu held).
func (ss *session) hasReceivedLocked(id uint16) bool {
	if ss.in2 == nil {
		return false
	}
	_, ok := ss.in2.received[id]
	return ok
}

// receivedLenLocked is the number of received ids (ss.mu held).
func (ss *session) receivedLenLocked() int {
	if ss.in2 == nil {
		return 0
	}
	return len(ss.in2.received)
}

// releaseReceivedLocked removes id from the received ones, reporting
// whether it was there (ss.mu held).
func (ss *session) releaseReceivedLocked(id uint16) bool {
	if ss.in2 == nil {
		return false
	}
	_, ok := ss.in2.received[id]
	delete(ss.in2.received, id)
	ss.dropIn2IfEmptyLocked()
	return ok
}

// beginStoreLocked records that c stores the QoS 2 PUBLISH id, unless
// another connection does (ss.mu held).
func (ss *session) beginStoreLocked(c *conn, id uint16) {
	in := ss.in2Locked()
	if in.by == nil {
		in.by = map[uint16]*conn{}
	}
	if _, ok := in.by[id]; !ok {
		in.by[id] = c
	}
}

// storingElsewhereLocked reports whether another connection than c
// stores the QoS 2 PUBLISH id (ss.mu held).
func (ss *session) storingElsewhereLocked(c *conn, id uint16) bool {
	if ss.in2 == nil {
		return false
	}
	by, ok := ss.in2.by[id]
	return ok && by != c
}

// awaitStoreLocked has done called with the outcome of the store of id
// under way when it ends (ss.mu held).
func (ss *session) awaitStoreLocked(id uint16, done func(packets.ReasonCode, string)) {
	in := ss.in2
	if in.waiters == nil {
		in.waiters = map[uint16][]func(packets.ReasonCode, string){}
	}
	in.waiters[id] = append(in.waiters[id], done)
}

// endStore records that c's store of id ended with code, its PUBREC
// written (or dropped with the connection), and answers what waited for
// it.
func (ss *session) endStore(c *conn, id uint16, code packets.ReasonCode, detail string) {
	ss.mu.Lock()
	in := ss.in2
	if in == nil || in.by[id] != c {
		ss.mu.Unlock()
		return
	}
	delete(in.by, id)
	waiters := in.waiters[id]
	delete(in.waiters, id)
	if len(in.by) == 0 && in.idle != nil {
		close(in.idle)
		in.idle = nil
	}
	ss.dropIn2IfEmptyLocked()
	ss.mu.Unlock()
	for _, w := range waiters {
		w(code, detail)
	}
}

// storesIdleLocked returns a channel closed once the session stores no
// QoS 2 PUBLISH, or nil when it stores none now (ss.mu held).
func (ss *session) storesIdleLocked() chan struct{} {
	if ss.in2 == nil || len(ss.in2.by) == 0 {
		return nil
	}
	if ss.in2.idle == nil {
		ss.in2.idle = make(chan struct{})
	}
	return ss.in2.idle
}

// storingByLocked reports whether c stores a QoS 2 PUBLISH of the
// session (ss.mu held).
func (ss *session) storingByLocked(c *conn) bool {
	if ss.in2 == nil {
		return false
	}
	for _, by := range ss.in2.by {
		if by == c {
			return true
		}
	}
	return false
}

// saveWhenStored is the save of a session whose connection ended while
// it stored QoS 2 PUBLISHes: once they are stored (at most
// evictStoreWait), the session's state, with their ids, is saved in the
// order of ticket, unless the session went on meanwhile (resumed here,
// evicted, ended), whose own records then stand.
func (s *Server) saveWhenStored(ss *session, ticket *persistTicket) {
	defer s.persist.finish(ticket)
	s.waitIdle(ss)
	var save *SessionState
	s.mu.Lock()
	ss.mu.Lock()
	if !ss.dead && ss.conn == nil && ss.expiry > 0 {
		save = ss.stateLocked()
	}
	ss.mu.Unlock()
	s.mu.Unlock()
	s.persist.wait(ticket)
	if save != nil {
		if err := s.backend.SaveSession(s.ctx, save); err != nil {
			s.log.Warn("mqtt: save session", "client", ss.id, "err", err)
		}
	}
}

// waitIdle waits until ss stores no QoS 2 PUBLISH, at most
// evictStoreWait.
func (s *Server) waitIdle(ss *session) {
	deadline := time.NewTimer(evictStoreWait)
	defer deadline.Stop()
	for {
		ss.mu.Lock()
		idle := ss.storesIdleLocked()
		ss.mu.Unlock()
		if idle == nil {
			return
		}
		select {
		case <-idle:
		case <-deadline.C:
			s.log.Warn("mqtt: QoS 2 stores of the session not done", "client", ss.id, "waited", evictStoreWait)
			return
		}
	}
}

// callQoS2 calls the Handler h with the QoS 2 PUBLISH id on a pipelined
// server. The id counts as being stored by c while h runs, as a
// backend's store does (addAckIf), so a DUP the client sends on its next
// connection meanwhile gets its PUBREC with h's outcome instead of
// calling h a second time; the acknowledgement queues behind c's earlier
// ones. A session that went on without c (evicted, resumed elsewhere)
// does not call h: the client sends the PUBLISH again where it is.
func (c *conn) callQoS2(h Handler, id uint16, info ClientInfo, msg *Message) {
	a, ok := c.addAckIf(2, id, true)
	if !ok {
		return
	}
	a.inCall.Store(true) // completed here, by the worker: part of its unit
	c.flushHeld()        // the handler may block: do not hold earlier output behind it
	c.asyncDone(a, msg.Topic)(h(c.srv.ctx, info, msg))
}
