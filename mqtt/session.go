package mqtt

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// maxInflightOut caps the QoS 1/2 messages in flight to one client,
// whatever receive maximum it announces.
const maxInflightOut = 1024

// session is the server-side state of one client identifier; it outlives
// its connections until it expires.
type session struct {
	srv    *Server
	id     string
	seq    uint64      // unique, orders match results
	online atomic.Bool // a connection is attached (shared subscription choice)
	// steps counts nextID's steps (protected by mu; see allocIDLocked).
	steps uint32

	mu             sync.Mutex
	conn           *conn                    // protected by mu; nil while offline
	username       string                   // protected by mu
	owner          string                   // protected by mu; OwnerTagger's tag at its latest connect
	subs           map[string]*Subscription // protected by mu
	expiry         time.Duration            // protected by mu
	disconnectedAt int64                    // protected by mu; Unix ns, 0: never (an int: the owner fits the budget)
	expiryTimer    timer                    // armed while offline

	// Outbound QoS 1/2 (protected by mu): inflight in send order, then
	// queued messages waiting for quota or a connection.
	nextID uint16
	dead   bool // protected by mu; removed from the server
	// overflow: the queue filled under DeliverLive, live QoS 1/2
	// messages are not held and the backend hands them over again with
	// Refill (overflow.go); room, when not nil, is closed once the queue
	// drained to half its limit (protected by mu).
	overflow      bool
	dropsUnlogged int32    // protected by mu, with lastDropLog below
	inflight      []outMsg // by value, its array kept while small: no allocation per message
	queue         []*queued
	// Inbound QoS 2: the packet ids received and not yet released, and
	// those a connection of the session is storing (protected by mu; nil:
	// none of either; qos2store.go).
	in2 *qos2In
	// Queue-full drops not yet logged (dropsUnlogged) and when the last
	// line was logged (nanotime), protected by mu: at most one line every
	// dropLogEvery.
	lastDropLog int64
	room        chan struct{} // see overflow

	will      *Message      // protected by mu
	willDelay time.Duration // protected by mu
	willTimer timer
}

// outMsg is a QoS 1/2 message sent and not yet completed.
type outMsg struct {
	msg    *Message
	id     uint16
	qos    byte
	retain bool
	step   uint32 // session.steps when id was handed out
	subIDs []uint32
	rel    bool // PUBREC received, PUBREL sent
	// restored: this entry, or one after it, came back from a saved
	// session with its id (not handed out by allocIDLocked).
	restored bool
	// rec is told when the session holds msg no more (SendToRecycled);
	// nil once msg was handed out in a SessionState, unless a Releaser.
	rec Recycler
}

type queued struct {
	msg    *Message
	qos    byte
	retain bool
	dup    bool // sent before the session was restored (SessionState)
	subIDs []uint32
	rec    Recycler
}

func (s *Server) newSession(id string) *session {
	ss := &session{srv: s, id: id, seq: s.sessionSeq.Add(1)}
	ss.expiryTimer.slot, ss.willTimer.slot = -1, -1
	return ss
}

// otherOwner reports whether owner (OwnerTagger's tag of a connect) and
// the owner of the connect that last attached ss are both known and
// differ: an earlier owner's session, which that connect must not resume.
func (ss *session) otherOwner(owner string) bool {
	if owner == "" {
		return false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.owner != "" && ss.owner != owner
}

// deliverResult is the outcome of session.deliverTo.
type deliverResult byte

const (
	deliverOK      deliverResult = iota // sent, queued, or dropped as allowed
	deliverFull                         // QoS 1/2 dropped: the queue is full
	deliverOffline                      // not delivered: the session is offline
)

// deliverTo is deliver for Server.SendTo at the message's own QoS and
// retain flag; with connectedOnly an offline session gets nothing.
func (ss *session) deliverTo(msg *Message, connectedOnly bool, rec Recycler, r *Round) deliverResult {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if connectedOnly && (ss.dead || ss.conn == nil) {
		return deliverOffline
	}
	if !ss.offerLocked(msg, msg.QoS, msg.Retain, nil, rec, r) {
		ss.dropLocked(msg)
		return deliverFull
	}
	return deliverOK
}

// deliver hands a message to the session at the given QoS: sent now when
// connected and within quota, queued (QoS 1/2) otherwise. It returns false
// when the message was dropped because the queue is full.
func (ss *session) deliver(msg *Message, qos byte, retain bool, subIDs []uint32) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.deliverLocked(msg, qos, retain, subIDs, nil)
}

// deliverLocked is deliver under the session's lock; rec, when not nil,
// is told once msg is held no more after its client acknowledged it (a
// message sent at QoS 0, refused or dropped is simply not held).
func (ss *session) deliverLocked(msg *Message, qos byte, retain bool, subIDs []uint32, rec Recycler) bool {
	if !ss.offerLocked(msg, qos, retain, subIDs, rec, nil) {
		ss.dropLocked(msg)
		return false
	}
	return true
}

// tryDeliver is deliver for a caller that keeps the message when the
// queue is full (false): nothing is counted as dropped. rec is as for
// deliverLocked.
func (ss *session) tryDeliver(msg *Message, qos byte, retain bool, subIDs []uint32, rec Recycler) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return ss.offerLocked(msg, qos, retain, subIDs, rec, nil)
}

// holds reports whether msg is queued or in flight in the session.
func (ss *session) holds(msg *Message) bool {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	for i := range ss.inflight {
		if ss.inflight[i].msg == msg {
			return true
		}
	}
	for _, q := range ss.queue {
		if q.msg == msg {
			return true
		}
	}
	return false
}

// dropLocked counts and logs (at most one line every dropLogEvery) a
// QoS 1/2 message dropped because the queue is full.
func (ss *session) dropLocked(msg *Message) {
	ss.srv.stats.Dropped.Add(1)
	ss.dropsUnlogged++
	if now := nanotime(); ss.lastDropLog == 0 || now-ss.lastDropLog >= int64(dropLogEvery) {
		ss.srv.log.Warn("mqtt: session queue full, messages dropped", "client", ss.id, "topic", msg.Topic, "dropped", ss.dropsUnlogged)
		ss.dropsUnlogged, ss.lastDropLog = 0, now
	}
}

// offerLocked is deliverLocked without the drop: false when the queue is
// full. now is the caller's clock reading for a message sent at once
// (Round.SendToRecycled), zero to read the clock if the message expires.
func (ss *session) offerLocked(msg *Message, qos byte, retain bool, subIDs []uint32, rec Recycler, r *Round) bool {
	if ss.dead {
		return true
	}
	if acl := ss.srv.acl; acl != nil && !acl.MayRead(ss.id, ss.username, msg.Topic) {
		return true // denied by name although a wider filter was granted
	}
	c := ss.conn
	if qos == 0 {
		if c != nil {
			c.sendPublishLocked(msg, 0, 0, retain, false, subIDs, r)
		}
		return true
	}
	if c != nil && len(ss.queue) == 0 && len(ss.inflight) < c.sendQuota {
		ss.sendNewLocked(c, msg, qos, retain, false, subIDs, rec, r)
		return true
	}
	if len(ss.queue) >= ss.srv.opts.MaxQueuedMessages {
		return false
	}
	ss.queue = append(ss.queue, &queued{msg: msg, qos: qos, retain: retain, subIDs: subIDs, rec: rec})
	if c != nil {
		// Waiting for the client's quota: its acknowledgements must not
		// wait for its next request (lowat_linux.go).
		c.lowatOff()
	}
	return true
}

// allocIDLocked hands out the next packet id not in flight. The ids
// repeat every 65535 steps of nextID (steps counts them), and the entries
// in flight are in the order their ids were handed out, so when the
// oldest one was handed out fewer than 65535 steps ago none of them can
// hold the next id: the entries (a cache line each, cold by the time the
// next message goes out; the Azure clients of the state store benchmark
// leave 1-20 unacknowledged) are looked through only when the oldest is
// older than that or an entry came back from a saved session (restored).
func (ss *session) allocIDLocked() uint16 {
	for {
		ss.nextID++
		ss.steps++
		if ss.nextID == 0 {
			ss.nextID = 1
		}
		if len(ss.inflight) == 0 {
			return ss.nextID
		}
		if o := &ss.inflight[0]; !o.restored && ss.steps-o.step < 65535 {
			return ss.nextID
		}
		if !ss.idInFlightLocked(ss.nextID) {
			return ss.nextID
		}
	}
}

func (ss *session) sendNewLocked(c *conn, msg *Message, qos byte, retain, dup bool, subIDs []uint32, rec Recycler, r *Round) {
	id := ss.allocIDLocked()
	if !c.sendPublishLocked(msg, qos, id, retain, dup, subIDs, r) {
		return // too large for the client or expired: as if delivered
	}
	ss.inflight = append(ss.inflight, outMsg{msg: msg, id: id, qos: qos, retain: retain, step: ss.steps, subIDs: subIDs, rec: rec})
}

// inflightKeep is the largest inflight array an idle session keeps (2
// KiB): a client that leaves bursts of up to that many unacknowledged
// (the state store benchmark's Azure clients leave 1-20) does not grow
// a new one (1, 2, 4, ... entries) after each burst.
const inflightKeep = 32

// removeInflightLocked removes inflight[i], keeping the order, and
// tells its Recycler (SendToRecycled) the message is held no more.
func (ss *session) removeInflightLocked(i int) {
	msg, rec, restored := ss.inflight[i].msg, ss.inflight[i].rec, ss.inflight[i].restored
	n := len(ss.inflight) - 1
	copy(ss.inflight[i:], ss.inflight[i+1:])
	if i == 0 && n > 0 && restored {
		ss.inflight[0].restored = true // an entry after it may be restored
	}
	ss.inflight[n] = outMsg{}
	ss.inflight = ss.inflight[:n]
	if n == 0 && cap(ss.inflight) > inflightKeep {
		ss.inflight = nil
	}
	if rec != nil {
		rec.Recycle(msg)
	}
}

// drainLocked moves queued messages into flight while the client's quota
// allows.
func (ss *session) drainLocked() {
	c := ss.conn
	if c == nil {
		return
	}
	var now time.Time // read once, and only if a message expires
	i := 0
	for ; i < len(ss.queue) && len(ss.inflight) < c.sendQuota; i++ {
		q := ss.queue[i]
		ss.queue[i] = nil
		if !q.msg.Expiry.IsZero() {
			if now.IsZero() {
				now = time.Now()
			}
			if q.msg.expired(now) {
				continue
			}
		}
		ss.sendNewLocked(c, q.msg, q.qos, q.retain, q.dup, q.subIDs, q.rec, nil)
	}
	ss.queue = ss.queue[i:]
	if len(ss.queue) == 0 {
		ss.queue = nil
	}
	if ss.room != nil && len(ss.queue) <= ss.srv.opts.MaxQueuedMessages/2 {
		ss.wakeRoomLocked()
	}
}

// resendLocked redelivers everything in flight, in order, on a resumed
// session: PUBLISH with DUP, or PUBREL for those already received. A
// message the connection cannot take (expired, over its Maximum Packet
// Size, not encodable) is dropped as a new one would be (sendNewLocked):
// left in flight, it would hold a receive-maximum slot for good.
func (ss *session) resendLocked(c *conn) {
	for i := 0; i < len(ss.inflight); {
		o := &ss.inflight[i]
		if o.rel {
			c.sendAckOf(packets.TypePubrel, o.id, 0, nil)
		} else if !c.sendPublishLocked(o.msg, o.qos, o.id, o.retain, true, o.subIDs, nil) {
			o.rec = nil // dropped: never recycled (SendToRecycled)
			ss.removeInflightLocked(i)
			continue
		}
		i++
	}
	ss.drainLocked()
}

// ackLocked completes an outbound message: PUBACK (qos1) or PUBCOMP.
func (ss *session) ackLocked(id uint16, comp bool) bool {
	for i := range ss.inflight {
		o := &ss.inflight[i]
		if o.id == id && (comp == (o.qos == 2)) && (!comp || o.rel) {
			if f := ss.srv.opts.OnAcked; f != nil {
				f(ss.id, o.msg)
			}
			ss.removeInflightLocked(i)
			ss.drainLocked()
			return true
		}
	}
	return false
}

// state snapshots the session for the backend. Its pending messages are
// the backend's to keep: none of them is recycled after (SendToRecycled),
// except by a Releaser, which does not reuse its messages.
func (ss *session) stateLocked() *SessionState {
	st := ss.subsStateLocked()
	for i := range ss.inflight {
		o := &ss.inflight[i]
		if o.rel {
			st.Released = append(st.Released, o.id)
			continue
		}
		st.Pending = append(st.Pending, Pending{Msg: o.msg, QoS: o.qos, Retain: o.retain, SubIDs: o.subIDs, Sent: true, PacketID: o.id})
		if _, ok := o.rec.(Releaser); !ok {
			o.rec = nil
		}
	}
	for _, q := range ss.queue {
		st.Pending = append(st.Pending, Pending{Msg: q.msg, QoS: q.qos, Retain: q.retain, SubIDs: q.subIDs, Sent: q.dup})
		if _, ok := q.rec.(Releaser); !ok {
			q.rec = nil
		}
	}
	st.Received = ss.receivedLocked()
	return st
}

// subsStateLocked is the session's state without its pending messages.
func (ss *session) subsStateLocked() *SessionState {
	st := &SessionState{ClientID: ss.id, Username: ss.username, Expiry: ss.expiry}
	if ss.disconnectedAt != 0 {
		st.DisconnectedAt = time.Unix(0, ss.disconnectedAt)
	}
	for _, sub := range ss.subs {
		st.Subscriptions = append(st.Subscriptions, *sub)
	}
	return st
}

// restore fills a fresh session from a backend state.
func (ss *session) restore(st *SessionState) {
	ss.username = st.Username
	ss.expiry = st.Expiry
	ss.overflow = st.Overflow != nil
	for i := range st.Subscriptions {
		sub := st.Subscriptions[i]
		if ss.subs == nil {
			ss.subs = map[string]*Subscription{}
		}
		ss.subs[sub.Filter] = &sub
		ss.srv.subs.add(ss, &sub)
	}
	for _, id := range st.Released {
		// Released before: only the PUBCOMP is missing (resendLocked
		// sends PUBREL again). The message itself is the client's now.
		if id != 0 && !ss.idInFlightLocked(id) {
			ss.addRestoredLocked(outMsg{id: id, qos: 2, rel: true})
		}
	}
	for _, id := range st.Received {
		ss.addReceivedLocked(id)
	}
	now := time.Now()
	for _, p := range st.Pending {
		qos := p.QoS
		if qos == 0 {
			qos = p.Msg.QoS
		}
		if p.Sent && p.PacketID != 0 && !p.Msg.expired(now) && !ss.idInFlightLocked(p.PacketID) {
			// Back in flight with its packet id: resent first, with DUP.
			ss.addRestoredLocked(outMsg{msg: p.Msg, id: p.PacketID, qos: qos, retain: p.Retain, subIDs: p.SubIDs})
			continue
		}
		ss.queue = append(ss.queue, &queued{msg: p.Msg, qos: qos, retain: p.Retain, dup: p.Sent, subIDs: p.SubIDs})
	}
}

// addRestoredLocked puts o, back from a saved session with its packet
// id, in flight, and marks the oldest entry (see allocIDLocked).
func (ss *session) addRestoredLocked(o outMsg) {
	o.restored = true
	ss.inflight = append(ss.inflight, o)
	ss.inflight[0].restored = true
}

// idInFlightLocked reports whether packet id is in flight.
func (ss *session) idInFlightLocked(id uint16) bool {
	for i := range ss.inflight {
		if ss.inflight[i].id == id {
			return true
		}
	}
	return false
}

// dropSubs removes every subscription of ss from the index.
func (ss *session) dropSubsLocked() {
	for f := range ss.subs {
		ss.srv.subs.remove(ss, f)
	}
	ss.subs = nil
}

// releaseLocked tells the Releasers of the messages the dead session ss
// still holds that it discards them. A QoS 2 message whose PUBREC came is
// the client's already: not released.
func (ss *session) releaseLocked() {
	for i := range ss.inflight {
		if r, ok := ss.inflight[i].rec.(Releaser); ok && !ss.inflight[i].rel {
			ss.inflight[i].rec = nil
			r.Released(ss.inflight[i].msg)
		}
	}
	for _, q := range ss.queue {
		if r, ok := q.rec.(Releaser); ok {
			q.rec = nil
			r.Released(q.msg)
		}
	}
}

// expire runs from the wheel when an offline session's expiry passes.
func (ss *session) expire() { ss.end() }

// EndOfflineSession ends clientID's session at once, as its expiry would,
// when this server holds it with no connection: its will, if one is
// still due, is published and the backend deletes the session. It
// reports whether it ended one. The IoT hub uses it for the session of a
// deleted identity whose id a new identity takes.
func (s *Server) EndOfflineSession(clientID string) bool {
	s.mu.Lock()
	ss := s.sessions[clientID]
	s.mu.Unlock()
	if ss == nil || !ss.end() {
		return false
	}
	s.wheel.disarm(&ss.expiryTimer)
	return true
}

// end ends the offline session ss (expire, EndOfflineSession); false
// when it is connected or already ended.
func (ss *session) end() bool {
	s := ss.srv
	s.mu.Lock()
	ss.mu.Lock()
	if ss.dead || ss.conn != nil || s.sessions[ss.id] != ss {
		ss.mu.Unlock()
		s.mu.Unlock()
		return false
	}
	ss.dead = true
	delete(s.sessions, ss.id)
	s.stats.Sessions.Store(int64(len(s.sessions)))
	ss.dropSubsLocked()
	ss.releaseLocked()
	will, expiry := ss.will, ss.expiry
	ss.will = nil
	s.wheel.disarm(&ss.willTimer)
	ticket := s.persist.take(ss.id)
	ss.mu.Unlock()
	s.mu.Unlock()
	var owed *retryWill
	if will != nil {
		// One that fails stays owed: the delete carries it (Will).
		_, owed = s.sendWillOrOwe(ss, will, expiry, true)
	}
	s.persist.wait(ticket)
	if err := s.backend.DeleteSession(s.ctx, ss.id); err != nil {
		s.log.Warn("mqtt: delete session", "client", ss.id, "err", err)
	}
	s.persist.finish(ticket)
	s.armWillRetry(owed)
	return true
}

// fireWill runs from the wheel when the will delay passes.
func (ss *session) fireWill() {
	ss.mu.Lock()
	will, expiry := ss.will, ss.expiry
	if ss.conn != nil {
		will = nil
	}
	ss.will = nil
	ss.mu.Unlock()
	if will == nil {
		return
	}
	if sent, _ := ss.srv.sendWillOrOwe(ss, will, expiry, false); sent {
		// Only a will that went out is settled: one whose publish failed
		// stays stored and owed (tried again; another node publishes it
		// if this one dies).
		ss.srv.willPublished(ss.id, will)
	}
}

// sendWill hands the will m to the backend where its client may publish
// (nil, with a log line, where it may not).
func (s *Server) sendWill(m *Message) error {
	if code, why := s.mayPublish(ClientInfo{ClientID: m.ClientID, Username: m.Username}, m.Topic); code != 0 {
		s.log.Info("mqtt: will not published", "client", m.ClientID, "topic", m.Topic, "detail", why)
		return nil
	}
	if err := s.backend.Publish(s.ctx, m); err != nil {
		return fmt.Errorf("mqtt: publish will of %q: %w", m.ClientID, err)
	}
	return nil
}

func cut(s string) (string, string, bool) { return strings.Cut(s, "/") }

// deliverRetained sends the retained messages matching filter to ss.
func (ss *session) deliverRetained(ctx context.Context, sub *Subscription) {
	s := ss.srv
	_, inner := splitFilter(sub.Filter)
	msgs, err := s.backend.Retained(ctx, inner)
	if err != nil {
		s.log.Warn("mqtt: retained lookup", "client", ss.id, "filter", inner, "err", err)
		return
	}
	msgs = append(msgs, s.sysRetained(inner)...)
	var ids []uint32
	if sub.Identifier != 0 {
		ids = []uint32{sub.Identifier}
	}
	for _, m := range msgs {
		if !s.res.visible(inner, m.Topic) {
			continue // a reserved topic the filter reaches only by a wildcard
		}
		ss.deliver(m, min(m.QoS, sub.QoS), true, ids)
	}
}
