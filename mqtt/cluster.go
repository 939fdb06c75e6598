package mqtt

import (
	"bytes"
	"context"
	"slices"
	"strings"
	"sync"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// Cluster support: what a Backend spanning several server nodes (the
// broker bridge) needs beyond Backend and Deliverer. A session lives on one
// node at a time; the backend moves it (Evict on the node losing it,
// LoadSession on the node gaining it). Shared subscriptions can be balanced
// by the backend across nodes: it delivers plain subscriptions with
// DeliverUnshared and each shared subscription's messages with
// DeliverShared.

// SubscriptionBackend is an optional extension of Backend: the server
// calls SaveSubscriptions (through Server.SaveSubscriptions) when a
// SUBSCRIBE or UNSUBSCRIBE changed the subscriptions of a connected
// session, before the SUBACK/UNSUBACK is sent, so that an acknowledged
// subscription of a session that outlives its connection (Expiry > 0)
// survives a node crash. The state has no Pending messages.
type SubscriptionBackend interface {
	Backend
	SaveSubscriptions(ctx context.Context, st *SessionState) error
}

// SharePreparer is an optional extension of Backend: the server calls
// PrepareShares with the shared filters of a SUBSCRIBE that it grants
// before any of them joins the subscription index, so
// that what the backend decides about a shared subscription it does not
// run yet (where its group starts) is decided before anything can see the
// subscription (SharedSubscriptions). It may take as long as a SUBACK may
// wait; it reports nothing: a backend that cannot decide falls back to
// its default when it starts the group.
type SharePreparer interface {
	Backend
	PrepareShares(ctx context.Context, clientID string, filters []string)
}

// QoS2Backend is an optional extension of Backend that makes the QoS 2
// exchanges of a session that outlives its connection (Expiry > 0)
// survive a node crash. The server changes the session's state, then
// calls RecordQoS2 before each acknowledgement that moves an exchange on:
// the PUBREC of a stored message (the id joins Received), the PUBREL
// answering a PUBREC (the id joins Released) and the PUBCOMP answering a
// PUBREL (the id leaves Received). It sends that acknowledgement when the
// backend calls done, which it must call once, from any goroutine, when
// the state as of the call (Server.Snapshot) is stored, or failed to be.
//
// Holding the acknowledgement until then is what makes the exchange
// exactly once across a crash: a client that got a PUBREC, PUBREL or
// PUBCOMP finds the server's session in the matching state after it
// resumed, and one that did not sends again what the server has not
// recorded (MQTT 4.4), which the state recorded before recognises.
type QoS2Backend interface {
	Backend
	RecordQoS2(clientID string, done func())
}

// recordQoS2 calls send once the backend recorded ss's QoS 2 state
// (QoS2Backend), when ss outlives its connection; at once otherwise.
func (s *Server) recordQoS2(ss *session, send func()) {
	if s.qos2 == nil {
		send()
		return
	}
	ss.mu.Lock()
	id, keep := ss.id, ss.expiry > 0
	ss.mu.Unlock()
	if !keep {
		send()
		return
	}
	s.qos2.RecordQoS2(id, send)
}

// receivedLocked lists the received QoS 2 ids in packet id order
// (SessionState.Received).
func (ss *session) receivedLocked() []uint16 {
	if ss.receivedLenLocked() == 0 {
		return nil
	}
	ids := make([]uint16, 0, len(ss.in2.received))
	for id := range ss.in2.received {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// SaveSubscriptions hands the subscriptions of clientID's connected
// session to the backend when it implements SubscriptionBackend;
// otherwise, or when the session is missing or offline, it does nothing.
// The server calls it after a SUBSCRIBE or UNSUBSCRIBE changed the
// session, before acknowledging.
func (s *Server) SaveSubscriptions(clientID string) error {
	sb, ok := s.backend.(SubscriptionBackend)
	if !ok {
		return nil
	}
	s.mu.Lock()
	ss := s.sessions[clientID]
	s.mu.Unlock()
	if ss == nil {
		return nil
	}
	ss.mu.Lock()
	if ss.dead || ss.conn == nil {
		ss.mu.Unlock()
		return nil
	}
	st := ss.subsStateLocked()
	ss.mu.Unlock()
	return sb.SaveSubscriptions(s.ctx, st)
}

// Snapshot returns the state of clientID's connected session as it is
// now, its pending messages (sent and not acknowledged, or queued)
// included, and the session's instance (SessionInstance); nil when the
// server has no connected session of clientID. Unlike Evict it changes
// nothing: a backend that keeps where a session resumes uses it to move
// that point on while the client stays connected, without skipping what
// the client has not acknowledged yet. The backend may keep the state:
// messages given with SendToRecycled are copied.
func (s *Server) Snapshot(clientID string) (*SessionState, uint64) {
	s.mu.Lock()
	ss := s.sessions[clientID]
	s.mu.Unlock()
	if ss == nil {
		return nil, 0
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.dead || ss.conn == nil {
		return nil, 0
	}
	st := ss.subsStateLocked()
	keep := func(m *Message, rec Recycler) *Message {
		if rec == nil {
			return m
		}
		cp := *m
		cp.Topic, cp.Payload, cp.CorrelationData = strings.Clone(m.Topic), bytes.Clone(m.Payload), bytes.Clone(m.CorrelationData)
		cp.User = slices.Clone(m.User)
		return &cp
	}
	for i := range ss.inflight {
		if o := &ss.inflight[i]; o.rel {
			st.Released = append(st.Released, o.id)
		} else {
			st.Pending = append(st.Pending, Pending{Msg: keep(o.msg, o.rec), QoS: o.qos, Retain: o.retain, SubIDs: o.subIDs, Sent: true,
				PacketID: o.id})
		}
	}
	for _, q := range ss.queue {
		st.Pending = append(st.Pending, Pending{Msg: keep(q.msg, q.rec), QoS: q.qos, Retain: q.retain, SubIDs: q.subIDs, Sent: q.dup})
	}
	st.Received = ss.receivedLocked()
	return st, ss.seq
}

// SessionInstance identifies the server's current session of clientID:
// a new value when a session is created (a clean start, a session loaded
// from the backend), the same while it lives (also across connections
// resumed from memory), 0 when the server has none.
func (s *Server) SessionInstance(clientID string) uint64 {
	s.mu.Lock()
	defer s.mu.Unlock()
	if ss := s.sessions[clientID]; ss != nil {
		return ss.seq
	}
	return 0
}

// SessionExpiry returns the session expiry interval of clientID's
// session on this server (its CONNECT's, or its DISCONNECT's when that
// changed it); false when the server has none.
func (s *Server) SessionExpiry(clientID string) (time.Duration, bool) {
	s.mu.Lock()
	ss := s.sessions[clientID]
	s.mu.Unlock()
	if ss == nil {
		return 0, false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.dead {
		return 0, false
	}
	return ss.expiry, true
}

// Connected reports whether clientID has a connection on this server.
func (s *Server) Connected(clientID string) bool {
	s.mu.Lock()
	ss := s.sessions[clientID]
	s.mu.Unlock()
	if ss == nil {
		return false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	return !ss.dead && ss.conn != nil
}

// Eviction says what becomes of a session that Evict removes.
type Eviction uint8

const (
	// EvictMoved: the session goes on on another node with the state
	// Evict returns, which the caller hands on (the bridge's handoff).
	// A session with expiry 0 ends with its connection: it has no state
	// to hand on, and ends as with EvictSuperseded.
	EvictMoved Eviction = iota
	// EvictSuperseded: the session goes on on another node from an
	// earlier state; the state Evict returns goes nowhere.
	EvictSuperseded
	// EvictEnded: the session ends (the new connection started clean).
	EvictEnded
)

// Evict removes clientID's session instance inst (as SessionInstance
// reported it) from this server because another node took it over,
// without telling the backend (no SaveSession or DeleteSession): a
// connection gets DISCONNECT 0x8E (v5) or is closed (3.1.1). The will is
// published when how is EvictEnded or when it has no delay; a delayed will
// of a session that goes on elsewhere is dropped. The Releasers of the
// messages it held unacknowledged are told (Releaser), unless how is
// EvictMoved and the session has an expiry: their messages go on with
// the returned state. Evict returns the session's state at that moment
// (DisconnectedAt set to now) and false when the server had no session
// instance inst of that id: a session created since the caller looked is
// newer than what the caller judged, and stays.
func (s *Server) Evict(clientID string, inst uint64, how Eviction) (*SessionState, bool) {
	st, held, done := s.EvictOrdered(clientID, inst, how)
	done()
	return st, held
}

// EvictOrdered is Evict in the order of clientID's SaveSession and
// DeleteSession calls (persistorder.go), for a caller that hands the
// returned state on (the bridge's handoff record). It returns once every
// such call the server decided before it is done, so a save of an ended
// connection still on its way is stored before what the caller writes,
// never after it (the save's state is older: the state returned is taken
// later). Calls decided after it wait until the caller calls done, once it
// has written what it hands on; done must be called once, whether or not
// the session was held (the order holds for a handoff from elsewhere too).
func (s *Server) EvictOrdered(clientID string, inst uint64, how Eviction) (st *SessionState, held bool, done func()) {
	// The QoS 2 PUBLISHes the session is storing end first, so the state
	// handed on has their ids (qos2store.go); none starts once ss.conn
	// is nil below, in the same hold of ss.mu as the last look.
	deadline := time.Now().Add(evictStoreWait)
	var ss *session
	for {
		s.mu.Lock()
		ss = s.sessions[clientID]
		if ss == nil || ss.seq != inst {
			break
		}
		ss.mu.Lock()
		idle := ss.storesIdleLocked()
		if idle == nil || !time.Now().Before(deadline) {
			break
		}
		ss.mu.Unlock()
		s.mu.Unlock()
		wait := time.NewTimer(time.Until(deadline))
		select {
		case <-idle:
		case <-wait.C:
			s.log.Warn("mqtt: eviction went on with QoS 2 stores of the session under way", "client", clientID, "waited", evictStoreWait)
		}
		wait.Stop()
	}
	ticket := s.persist.take(clientID)
	done = sync.OnceFunc(func() { s.persist.finish(ticket) })
	if ss == nil || ss.seq != inst {
		s.mu.Unlock()
		s.persist.wait(ticket)
		return nil, false, done
	}
	old := ss.conn
	ss.conn = nil
	ss.online.Store(false)
	ss.disconnectedAt = time.Now().UnixNano()
	st = ss.stateLocked()
	ss.dead = true
	delete(s.sessions, clientID)
	s.stats.Sessions.Store(int64(len(s.sessions)))
	ss.dropSubsLocked()
	if how != EvictMoved || ss.expiry == 0 {
		// Nobody goes on with these messages: a shared subscription's
		// go to another member (MQTT 5 4.8.2).
		ss.releaseLocked()
	}
	s.wheel.disarm(&ss.expiryTimer)
	s.wheel.disarm(&ss.willTimer)
	will, expiry := ss.will, ss.expiry
	if will != nil && how != EvictEnded && ss.willDelay > 0 {
		will = nil
	}
	ss.will = nil
	ss.mu.Unlock()
	s.mu.Unlock()
	if old != nil {
		old.closeWith(packets.ReasonSessionTakenOver, "session taken over on another node", closeTakeover)
	}
	if will != nil {
		s.sendWillOrOwe(ss, will, expiry, false)
	}
	s.persist.wait(ticket)
	return st, true, done
}

// DeliverUnshared is Deliver for the plain (not shared) subscriptions
// only; the backend delivers shared subscriptions with DeliverShared.
func (s *Server) DeliverUnshared(msg *Message) {
	if msg.expired(time.Now()) {
		return
	}
	for _, t := range s.subs.matchPlain(msg.Topic, msg.ClientID) {
		retain := msg.Retain && t.rap
		t.s.deliver(msg, min(msg.QoS, t.qos), retain, t.subIDs)
	}
}

// DeliverShared hands msg to one local member of the shared subscription
// share ("$share/<group>/<filter>"), round robin, preferring connected
// members, if the filter matches msg's topic. It reports whether a member
// got it. A member whose queue is full passes it on to the next; when
// every member's is, it is dropped (counted in Stats.Dropped): see
// TryDeliverShared.
func (s *Server) DeliverShared(share string, msg *Message) bool {
	ok, full := s.TryDeliverShared(share, msg)
	if full {
		s.stats.Dropped.Add(1)
	}
	return ok
}

// TryDeliverShared is DeliverShared that passes over members whose queue
// is full (the next in turn takes the message); full reports that every
// member's was, and none took it: the caller keeps the message and tries
// again once members drained (Server.Refill's overflow does not apply to
// shared subscriptions).
func (s *Server) TryDeliverShared(share string, msg *Message) (ok, full bool) {
	taker, full := s.TryDeliverSharedAcked(share, msg, nil)
	return taker != "", full
}

// TryDeliverSharedAcked is TryDeliverShared that names the member that
// took msg ("" when none did) and, when rec is not nil, tells rec once
// that member's client acknowledged it (as SendToRecycled does). A member
// may also stop holding msg without an acknowledgement (sent at QoS 0,
// dropped, expired, saved with its session's state, discarded with it):
// Holds tells.
func (s *Server) TryDeliverSharedAcked(share string, msg *Message, rec Recycler) (taker string, full bool) {
	group, inner, valid := packets.ParseShared(share)
	if !valid || !packets.Match(inner, msg.Topic) || !s.res.visible(inner, msg.Topic) || msg.expired(time.Now()) {
		return "", false
	}
	x := &s.subs
	x.mu.RLock()
	n := &x.root
	for lvl := range strings.SplitSeq(inner, "/") {
		if n = n.children[lvl]; n == nil {
			break
		}
	}
	var t target
	var g *shareGroup
	if n != nil {
		if g = n.shared[group]; g != nil && len(g.members) > 0 {
			t = pickShared(g)
		} else {
			g = nil
		}
	}
	x.mu.RUnlock()
	if g == nil {
		return "", false
	}
	if t.s.tryDeliver(msg, min(msg.QoS, t.qos), msg.Retain && t.rap, t.subIDs, rec) {
		return t.s.id, false
	}
	// The picked member is full: the others in turn (connected first),
	// from a copy of the members taken under the index's lock.
	x.mu.RLock()
	others := make([]target, 0, len(g.members))
	for _, online := range []bool{true, false} {
		for _, m := range g.members {
			if m.s != t.s && m.s.online.Load() == online {
				o := target{s: m.s, qos: m.sub.QoS, rap: m.sub.RetainAsPublished}
				if m.sub.Identifier != 0 {
					o.subIDs = []uint32{m.sub.Identifier}
				}
				others = append(others, o)
			}
		}
	}
	x.mu.RUnlock()
	for _, o := range others {
		if o.s.tryDeliver(msg, min(msg.QoS, o.qos), msg.Retain && o.rap, o.subIDs, rec) {
			return o.s.id, false
		}
	}
	return "", true
}

// Holds reports whether clientID's session (connected or not) still holds
// msg: queued, or sent and not acknowledged.
func (s *Server) Holds(clientID string, msg *Message) bool {
	s.mu.Lock()
	ss := s.sessions[clientID]
	s.mu.Unlock()
	return ss != nil && ss.holds(msg)
}

// SharedSubscriptions returns the shared subscriptions
// ("$share/<group>/<filter>") that have members on this server, sorted. It
// walks the whole subscription tree (no allocation per node).
func (s *Server) SharedSubscriptions() []string {
	x := &s.subs
	var out []string
	path := make([]string, 0, 16)
	var walk func(n *node)
	walk = func(n *node) {
		for g, sg := range n.shared {
			if len(sg.members) > 0 {
				out = append(out, "$share/"+g+"/"+strings.Join(path, "/"))
			}
		}
		for lvl, c := range n.children {
			path = append(path, lvl)
			walk(c)
			path = path[:len(path)-1]
		}
	}
	x.mu.RLock()
	walk(&x.root)
	x.mu.RUnlock()
	slices.Sort(out)
	return out
}

// pickShared chooses the member of g for the next message (caller holds
// the index lock).
func pickShared(g *shareGroup) target {
	start := int(g.next.Add(1)-1) % len(g.members)
	pick := start
	for i := 0; i < len(g.members); i++ {
		if j := (start + i) % len(g.members); g.members[j].s.online.Load() {
			pick = j
			break
		}
	}
	m := g.members[pick]
	t := target{s: m.s, qos: m.sub.QoS, rap: m.sub.RetainAsPublished}
	if m.sub.Identifier != 0 {
		t.subIDs = []uint32{m.sub.Identifier}
	}
	return t
}

// matchPlain is match without shared subscriptions.
func (x *subIndex) matchPlain(topic, publisher string) []target {
	return x.matchWith(topic, publisher, false)
}

// sessionCurrent asks the backend (SessionConfirmer) whether the session
// of clientID held offline here is still the latest; true without one.
func (s *Server) sessionCurrent(clientID string) (bool, error) {
	sc, ok := s.backend.(SessionConfirmer)
	if !ok {
		return true, nil
	}
	ctx, cancel := context.WithTimeout(s.ctx, s.opts.SessionLoadTimeout)
	defer cancel()
	return sc.SessionCurrent(ctx, clientID)
}
