package bridge

import (
	"context"
	"encoding/json"
	"fmt"
	"slices"
	"sort"
	"sync"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// maxExpiry is the v5 session expiry 0xFFFFFFFF: never expires.
const maxExpiry = time.Duration(0xFFFFFFFF) * time.Second

// maxPendingBytes bounds the payload bytes of pending messages stored
// whole in one session record; the rest are dropped with a log line.
const maxPendingBytes = 1 << 20

// gateHold is how long live delivery stays paused after a resumed
// session's replay, for the server to install the session.
const gateHold = 50 * time.Millisecond

// clientWriter is one client's session writes: one at a time (mu), and
// the latest state taken among those written (last).
type clientWriter struct {
	mu   sync.Mutex
	refs int // protected by Backend.writersMu
	last uint64
}

// lockWriter waits until no other session write of clientID is in
// flight; unlockWriter ends the write.
func (b *Backend) lockWriter(clientID string) *clientWriter {
	b.writersMu.Lock()
	w := b.writers[clientID]
	if w == nil {
		if b.writers == nil {
			b.writers = map[string]*clientWriter{}
		}
		w = &clientWriter{}
		b.writers[clientID] = w
	}
	w.refs++
	b.writersMu.Unlock()
	w.mu.Lock()
	return w
}

func (b *Backend) unlockWriter(clientID string, w *clientWriter) {
	w.mu.Unlock()
	b.writersMu.Lock()
	if w.refs--; w.refs == 0 {
		delete(b.writers, clientID)
	}
	b.writersMu.Unlock()
}

// writeSession appends rec to the session topic and makes it the node's
// current record of its client. A client's writes go one at a time, so
// its records reach the topic in the order their state was taken: an
// online snapshot (checkpoint, QoS 2 record) whose state is older than a
// record written while it waited (the offline save at disconnect) is
// dropped, never written after it (a restart restores the last record).
func (b *Backend) writeSession(ctx context.Context, rec *sessionRecord) error {
	if rec.taken == 0 {
		rec.taken = b.taken.Add(1)
	}
	w := b.lockWriter(rec.ClientID)
	defer b.unlockWriter(rec.ClientID, w)
	if rec.snap && rec.taken < w.last {
		return nil
	}
	if rec.ended {
		// The client reconnected to this node before the save of its
		// ended connection got here (the server took that state first):
		// written now, the old state came after the new connection's
		// records, and a crash resumed the session without them.
		if srv := b.server(); srv != nil && srv.Connected(rec.ClientID) {
			return nil
		}
	}
	w.last = max(w.last, rec.taken)
	if rec.vouch && !rec.liveRecord() && !rec.Deleted {
		// An offline save of the local session: where that session went
		// live, so that a record of another node stored before the save
		// but after that stays the latest (applySessionLocked).
		b.mu.Lock()
		if v, ok := b.vouches[rec.ClientID]; ok && v.live >= 0 && (v.inst == 0 || rec.inst == 0 || v.inst == rec.inst) {
			rec.Since = v.live + 1
		}
		b.mu.Unlock()
	}
	if b.testBeforeWrite != nil {
		b.testBeforeWrite(rec)
	}
	// The server saves sessions while it shuts down, after cancelling its
	// context: the record must still be written.
	ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.opts.SendTimeout)
	defer cancel()
	body, err := json.Marshal(rec)
	if err != nil {
		return fmt.Errorf("bridge: encode session: %w", err)
	}
	m := &client.Message{Topic: b.opts.SessionTopic, Body: body}
	if encodable(rec.ClientID) {
		m.Properties = map[string]string{PropClientID: rec.ClientID}
	}
	// Other nodes' records of the client that the tail applies while this
	// write is in flight wait for it (takeover.go).
	b.mu.Lock()
	b.writing[rec.ClientID]++
	b.mu.Unlock()
	res, err := b.prod.SendOrderly(ctx, m, rec.ClientID, client.HashSelector)
	b.mu.Lock()
	if err == nil {
		rec.q, rec.off = res.Queue, res.QueueOffset
		if !rec.tailOnly {
			b.applySessionLocked(rec, false)
		}
		if rec.Deleted {
			// A delete, or a clean-start announcement: nothing a
			// handoff or a stale delete needs (the vouch stands for
			// the clean session).
			delete(b.own, rec.ClientID)
		} else {
			b.own[rec.ClientID] = rec
		}
		if rec.Will == nil && !rec.tailOnly {
			// The record settles this node's stored will of the client.
			delete(b.wills.ids, rec.ClientID)
		}
	}
	if err == nil {
		b.setVouchLocked(rec)
	}
	if b.writing[rec.ClientID]--; b.writing[rec.ClientID] == 0 {
		delete(b.writing, rec.ClientID)
		b.judgeDeferredLocked(rec.ClientID)
	}
	b.mu.Unlock()
	if err != nil {
		return fmt.Errorf("bridge: store session %q: %w", rec.ClientID, err)
	}
	if rec.vouch && rec.inst != 0 {
		// The session may have been evicted while the record was on its
		// way: then its vouch stands for nothing.
		if srv := b.server(); srv != nil {
			b.dropStaleVouch(srv, rec.ClientID, rec.inst, true)
		}
	}
	return nil
}

func subRecords(subs []mqtt.Subscription) []subRecord {
	out := make([]subRecord, len(subs))
	for i, s := range subs {
		out[i] = subRecord{Filter: s.Filter, QoS: s.QoS, NoLocal: s.NoLocal, RetainAsPublished: s.RetainAsPublished,
			RetainHandling: s.RetainHandling, Identifier: s.Identifier}
	}
	sort.Slice(out, func(i, j int) bool { return out[i].Filter < out[j].Filter })
	return out
}

// resumePointsLocked computes, per live queue, where a session that went
// offline at disc resumes: the first message whose delivery ended after
// disc (earlier ones reached the session before its state was taken).
func (b *Backend) resumePointsLocked(clientID string, disc time.Time) map[client.MessageQueue]*resumePoint {
	out := make(map[client.MessageQueue]*resumePoint, len(b.queues))
	for q, qs := range b.queues {
		live := qs.next
		if !disc.IsZero() {
			// The ring is in delivery order, so its end times never
			// decrease: a binary search (checkpoints take every connected
			// session's points at once).
			if i := sort.Search(len(qs.ring), func(i int) bool { return qs.ring[i].end.After(disc) }); i < len(qs.ring) {
				live = qs.ring[i].offset
				if i == 0 && qs.trimmed {
					b.log.Warn("bridge: session resume point older than the delivery history; messages may be missed",
						"client", clientID, "queue", q)
				}
			}
		}
		out[q] = &resumePoint{Topic: q.Topic, Broker: q.BrokerName, Queue: q.QueueID, From: live, Live: live}
	}
	return out
}

// ringPos is where in the log a recent delivery is.
type ringPos struct {
	q   client.MessageQueue
	off int64
}

// ringIndexLocked maps the messages of the recent deliveries to their
// log positions.
func (b *Backend) ringIndexLocked() map[*mqtt.Message]ringPos {
	n := 0
	for _, qs := range b.queues {
		n += len(qs.ring)
	}
	where := make(map[*mqtt.Message]ringPos, n)
	for q, qs := range b.queues {
		for _, d := range qs.ring {
			if d.msg != nil { // nil: seeded at start (recheck.go)
				where[d.msg] = ringPos{q, d.offset}
			}
		}
	}
	return where
}

func sortedPoints(m map[client.MessageQueue]*resumePoint) []resumePoint {
	out := make([]resumePoint, 0, len(m))
	for _, r := range m {
		slices.Sort(r.Pending)
		out = append(out, *r)
	}
	sort.Slice(out, func(i, j int) bool {
		a, c := out[i], out[j]
		if a.Topic != c.Topic {
			return a.Topic < c.Topic
		}
		if a.Broker != c.Broker {
			return a.Broker < c.Broker
		}
		return a.Queue < c.Queue
	})
	return out
}

// SaveSession implements mqtt.Backend: one record in the session topic
// with the subscriptions, the expiry, and where in the log the session's
// messages resume (see doc.go).
func (b *Backend) SaveSession(ctx context.Context, st *mqtt.SessionState) error {
	if b.isClosed() {
		return ErrClosed
	}
	if b.testBeforeSave != nil {
		defer b.testBeforeSave(st.ClientID)()
	}
	taken := b.taken.Add(1)
	rec := b.offlineRecord(st)
	rec.vouch, rec.inst, rec.taken, rec.ended = true, b.instance(st.ClientID), taken, true
	rec.Will = b.offlineWill(st.ClientID)
	if err := b.writeSession(ctx, rec); err != nil {
		return err
	}
	b.reassertWill(ctx, st.ClientID)
	return nil
}

// offlineRecord is the record of a session that went offline (or moves
// to another node) with state st.
func (b *Backend) offlineRecord(st *mqtt.SessionState) *sessionRecord {
	rec, dropped := b.recordAt(st, st.DisconnectedAt, nil)
	if dropped > 0 {
		b.log.Warn("bridge: pending messages over the session record limit dropped", "client", st.ClientID, "dropped", dropped)
	}
	return rec
}

// recordAt is the record of a session with state st taken at time at
// (zero: now): its resume points are the first messages whose delivery
// ended after at, its pending messages those of st (log offsets where the
// node still knows them, else whole). dropped counts the pending messages
// left out over the record's size limit. where, when not nil, is the log
// position of recent deliveries (ringIndexLocked), else it is built.
func (b *Backend) recordAt(st *mqtt.SessionState, at time.Time, where map[*mqtt.Message]ringPos) (rec *sessionRecord, dropped int) {
	rec = &sessionRecord{ClientID: st.ClientID, Node: b.opts.NodeID, Username: st.Username,
		Subscriptions: subRecords(st.Subscriptions), ExpiryMs: st.Expiry.Milliseconds(), Released: st.Released,
		Received: st.Received, Owner: b.ownerOf(st.ClientID)}
	if !st.DisconnectedAt.IsZero() {
		rec.DisconnectedAt = st.DisconnectedAt.UnixMilli()
	}
	b.mu.Lock()
	points := b.resumePointsLocked(st.ClientID, at)
	if where == nil && len(st.Pending) > 0 {
		where = b.ringIndexLocked()
	}
	held := b.overflowPointsLocked(st.ClientID, points, len(st.Pending) > 0)
	cur, curPos := b.delivering, b.deliveringPos
	b.mu.Unlock()
	bytes := 0
	for _, pm := range st.Pending {
		m := pm.Msg
		p, ok := where[m]
		if !ok {
			p, ok = held[m]
		}
		if !ok && m == cur {
			// Being delivered: the session has it, its queue's resume
			// point is at or before it (next not moved on yet). Kept
			// whole, the resumed session got it twice: once pending
			// and once read from the log.
			p, ok = curPos, true
		}
		if ok {
			if rp := points[p.q]; rp != nil {
				rp.Pending = append(rp.Pending, p.off)
				if pm.Sent {
					rp.Sent = append(rp.Sent, p.off)
					rp.SentIDs = append(rp.SentIDs, pm.PacketID)
				}
				rp.From = min(rp.From, p.off)
				continue
			}
		}
		if bytes+len(m.Payload) > maxPendingBytes {
			dropped++
			continue
		}
		bytes += len(m.Payload)
		rec.Pending = append(rec.Pending, pendingOf(pm))
	}
	b.mu.Lock()
	b.notePrevLocked(points)
	b.mu.Unlock()
	rec.Resume = sortedPoints(points)
	return rec, dropped
}

// PrepareSession stores an offline persistent session for a client the
// cluster holds no session of (as this node's copy of the session topic
// shows it): subs, expiring expiry after now, resuming at this node's live
// positions, so that what is stored for it from now on waits in the log
// for its first connect, as for a session that went offline now. It
// writes nothing and returns false when a live (unexpired) record of the
// client exists, or this node holds the client or is connecting it. The
// IoT hub uses it for devices that have not connected yet.
func (b *Backend) PrepareSession(ctx context.Context, clientID string, subs []mqtt.Subscription, expiry time.Duration) (bool, error) {
	return b.prepareSession(ctx, clientID, subs, expiry, nil)
}

// A Replacer tells PrepareSessionReplacing which offline sessions of a
// client belong to an earlier owner of its id (the IoT hub: a deleted
// device identity whose id a new one took).
type Replacer struct {
	// Tag names the client id's current owner ("": unknown). The
	// prepared record keeps it, and a record prepared, or left by a
	// connection, with another (non-empty) tag is an earlier owner's. Called at most once per
	// PrepareSessionReplacing, only when it is needed.
	Tag func() string
	// Left reports whether the offline session a connection left at
	// leftAt (its node's clock) is an earlier owner's; asked only of a
	// record that names no owner (SetOwnerTag).
	Left func(leftAt time.Time) bool
}

// PrepareSessionReplacing is PrepareSession that may also replace an
// offline session of an earlier owner of the client id (r says which),
// and reports true then: one a client left when it disconnected, when its
// record names an owner (SetOwnerTag) other than r.Tag's, or, naming
// none (an earlier version's), when it names the connection's user name
// and r.Left says so of when it ended (a prepared record of an earlier
// version names no user); and one prepared with a tag other than
// r.Tag's. The record it writes keeps r.Tag's tag. The IoT hub
// uses it for a device identity created where a deleted one of the same
// id had a session (stale: the identity has never connected and the
// session ended before it was created; or prepared for another
// generation of the identity), so that the new device does not resume
// the old one's session and receive what was queued for it. A session a
// node holds connected, is connecting or is writing is never replaced;
// one this node last saw connected elsewhere for another owner is
// judged once this node has read every record stored so far.
func (b *Backend) PrepareSessionReplacing(ctx context.Context, clientID string, subs []mqtt.Subscription, expiry time.Duration,
	r Replacer) (bool, error) {
	return b.prepareSession(ctx, clientID, subs, expiry, &r)
}

// EndSession ends clientID's offline session at once, on every node, and
// so drops what was queued for it: this node's, as its expiry would
// (mqtt.Server.EndOfflineSession: its will is published and the delete
// stored), any other's with the record a clean start elsewhere announces
// itself with, on which the node holding the session drops it (and
// closes a connection it still has). A session connected on this node
// is left alone (false): the caller closes its connection first. It
// reports whether it ended or announced the end of a session, judged
// once this node has read every session record stored so far: a client
// whose latest record is a delete, or that has none, has no session. The IoT hub ends a deleted
// device identity's session with it.
func (b *Backend) EndSession(ctx context.Context, clientID string) (bool, error) {
	if b.isClosed() {
		return false, ErrClosed
	}
	// Judged on every record stored so far: one the client's connection
	// wrote on another node just before may not have been read yet.
	if err := b.catchUpSys(ctx, b.opts.SessionTopic); err != nil {
		return false, fmt.Errorf("bridge: end session of %q: read the session records: %w", clientID, err)
	}
	if srv := b.server(); srv != nil && srv.SessionInstance(clientID) != 0 {
		if srv.Connected(clientID) {
			return false, nil
		}
		if srv.EndOfflineSession(clientID) {
			return true, nil
		}
	}
	b.mu.Lock()
	rec := b.sessions[clientID]
	b.mu.Unlock()
	if rec == nil || rec.Deleted {
		return false, nil
	}
	if err := b.writeSession(ctx, &sessionRecord{ClientID: clientID, Node: b.opts.NodeID, Connect: true, Deleted: true}); err != nil {
		return false, err
	}
	return true, nil
}

// earlierOwner reports whether rec, a client's latest record, is one a
// connection left that belongs to an earlier owner of the client id than
// r's. A record that names its owner (Backend.SetOwnerTag) is judged by
// it: an earlier owner's when r.Tag names another (non-empty) one. One
// that names none (written by an earlier version, or without a tag) is
// judged by when it ended (r.Left), and only when it names a user: an
// earlier version's prepared record looks the same otherwise. tagOf is
// r.Tag, called at most once.
func earlierOwner(rec *sessionRecord, r *Replacer, tagOf func() string) bool {
	if rec == nil || rec.Deleted || rec.Online || rec.Connect || rec.Prepared != "" || rec.DisconnectedAt == 0 {
		return false
	}
	if rec.Owner != "" {
		t := tagOf()
		return t != "" && t != rec.Owner
	}
	left := leftAt(rec)
	return !left.IsZero() && r.Left != nil && r.Left(left)
}

// otherOwnerOnline reports whether rec, a client's latest record, is an
// online claim of a node other than node by a connection of an owner
// other than tagOf's (called only then).
func otherOwnerOnline(rec *sessionRecord, node string, tagOf func() string) bool {
	if rec == nil || !rec.Online || rec.Deleted || rec.Node == node || rec.Owner == "" {
		return false
	}
	t := tagOf()
	return t != "" && t != rec.Owner
}

// ownerOfRecord is the owner of the client id that rec was written for:
// its connection's (Backend.SetOwnerTag), else the tag it was prepared
// with (Replacer.Tag); "" when it names neither.
func ownerOfRecord(rec *sessionRecord) string {
	if rec.Owner != "" {
		return rec.Owner
	}
	return rec.Prepared
}

// leftAt is when clientID's connection left the session of rec, an
// offline record it wrote that names its user; zero when rec is none.
func leftAt(rec *sessionRecord) time.Time {
	if rec == nil || rec.Deleted || rec.Online || rec.Connect || rec.Username == "" || rec.Prepared != "" || rec.DisconnectedAt == 0 {
		return time.Time{}
	}
	return time.UnixMilli(rec.DisconnectedAt)
}

func (b *Backend) prepareSession(ctx context.Context, clientID string, subs []mqtt.Subscription, expiry time.Duration,
	r *Replacer) (bool, error) {
	if b.isClosed() {
		return false, ErrClosed
	}
	tag, tagged := "", false
	tagOf := func() string {
		if !tagged && r != nil && r.Tag != nil {
			tag = r.Tag()
		}
		tagged = true
		return tag
	}
	ended := false // this node ended the client's offline session
	if srv := b.server(); srv != nil && srv.SessionInstance(clientID) != 0 {
		// Held here: connected, or offline in memory (its latest record
		// is then the one it left here).
		b.mu.Lock()
		rec := b.sessions[clientID]
		b.mu.Unlock()
		if r == nil || srv.Connected(clientID) || !earlierOwner(rec, r, tagOf) || !srv.EndOfflineSession(clientID) {
			return false, nil
		}
		ended = true
	}
	now := time.Now()
	b.mu.Lock()
	rec := b.sessions[clientID]
	b.mu.Unlock()
	if r != nil && !ended && otherOwnerOnline(rec, b.opts.NodeID, tagOf) {
		// Another owner's connection on another node, as this node's copy
		// of the session topic shows it: the record it wrote when it left
		// (stored before its end was recorded anywhere else) may not have
		// been read yet. Judged on every record stored so far, so that the
		// session it left is replaced (it was not: the new owner's connect
		// to that node then started a session without the prepared
		// subscription, and got nothing).
		if err := b.catchUpSys(ctx, b.opts.SessionTopic); err != nil {
			return false, fmt.Errorf("bridge: prepare session of %q: read the session records: %w", clientID, err)
		}
		now = time.Now()
	}
	b.mu.Lock()
	rec = b.sessions[clientID]
	live := rec != nil && !rec.Deleted && !expiredAt(rec, now)
	prepared := "" // the tag of a prepared record
	if live && !rec.Online && !rec.Connect {
		prepared = rec.Prepared
	}
	busy := b.writing[clientID] > 0 || len(b.waits[clientID]) > 0
	b.mu.Unlock()
	replacing := ended
	switch {
	case busy, !live, ended:
	case prepared != "":
		// Prepared for an owner: replaced when the owner changed.
		if t := tagOf(); t == "" || t == prepared {
			busy = true
		} else {
			replacing = true
		}
	case r == nil || !earlierOwner(rec, r, tagOf):
		busy = true
	default:
		replacing = true
	}
	if replacing && !ended {
		// The check took a while: the client may have come back meanwhile.
		b.mu.Lock()
		busy = b.sessions[clientID] != rec || b.writing[clientID] > 0 || len(b.waits[clientID]) > 0
		b.mu.Unlock()
		busy = busy || b.instance(clientID) != 0
	}
	if busy {
		return false, nil
	}
	if replacing && !ended {
		// A node may still hold the session in memory: the one that
		// wrote the record, or, when the record is this node's own
		// prepared one, the node whose record it followed (written where
		// this node's copy of the topic had not read it yet). A clean
		// start's announcement (DeleteSession) makes any node drop it,
		// as when the client connects anew elsewhere.
		if err := b.writeSession(ctx, &sessionRecord{ClientID: clientID, Node: b.opts.NodeID, Connect: true, Deleted: true}); err != nil {
			return false, err
		}
	}
	if replacing || rec != nil && rec.Deleted {
		// The new record resumes where the live consumer is: first let it
		// pass what is stored already, which the replaced (or just
		// ended: EndSession) session was owed, so that none of it is read
		// back into the new one.
		b.mu.Lock()
		pts := sortedPoints(b.resumePointsLocked(clientID, time.Time{}))
		b.mu.Unlock()
		b.waitLive(ctx, pts)
		now = time.Now()
	}
	st := &mqtt.SessionState{ClientID: clientID, Subscriptions: subs, Expiry: expiry, DisconnectedAt: now}
	prep := b.offlineRecord(st)
	prep.Prepared, prep.Owner = tagOf(), "" // no connection's
	if err := b.writeSession(ctx, prep); err != nil {
		return false, err
	}
	return true, nil
}

// DeleteSession implements mqtt.Backend. A delete that looks like the
// expiry of this node's stale offline copy (the current record is another
// node's, and this node's own last record has expired by now) is ignored:
// the client resumed elsewhere.
func (b *Backend) DeleteSession(ctx context.Context, clientID string) error {
	b.wakeShares()
	b.noteHeld(clientID, nil) // a new session (clean start) holds nothing yet
	if srv := b.server(); srv != nil {
		// A clean-start connect on this node: announced, so that a node
		// holding the client id drops it. The instance is read first: a
		// session evicted between the two looks is not announced.
		if inst := srv.SessionInstance(clientID); inst != 0 && srv.Connected(clientID) {
			ann := &sessionRecord{ClientID: clientID, Node: b.opts.NodeID, Connect: true, Deleted: true,
				vouch: true, inst: inst, Will: b.willOf(clientID)}
			if exp, ok := srv.SessionExpiry(clientID); ok && exp > 0 {
				// The new session outlives its connection: the nodes keep
				// the announcement, and a connect elsewhere waits for this
				// node's handoff of it (keptAnnouncement).
				ann.ExpiryMs = exp.Milliseconds()
			}
			return b.writeSession(ctx, ann)
		}
	}
	b.mu.Lock()
	rec, own := b.sessions[clientID], b.own[clientID]
	v, hasV := b.vouches[clientID]
	b.mu.Unlock()
	if rec == nil || rec.Deleted && !(rec.keptAnnouncement() && rec.Node == b.opts.NodeID) {
		// Nothing stored to delete (a clean session ended): forget the
		// vouch of the local session, which stands for nothing now
		// (kept, it leaked one client's worth per connect).
		if hasV && b.endedLocal(clientID, v, own) {
			b.forgetLocal(clientID, &v, own)
		}
		b.settleWill(ctx, clientID)
		return nil
	}
	if rec.Node != b.opts.NodeID && own != nil && expiredAt(own, time.Now()) {
		b.log.Debug("bridge: stale session delete ignored", "client", clientID, "owner", rec.Node)
		b.settleWill(ctx, clientID)
		return nil
	}
	// A will the server still owes (its publish failed) stays stored.
	if err := b.writeSession(ctx, &sessionRecord{ClientID: clientID, Node: b.opts.NodeID, Deleted: true,
		Will: b.offlineWill(clientID)}); err != nil {
		return err
	}
	b.reassertWill(ctx, clientID)
	return nil
}

// endedLocal reports whether the vouch v of clientID stood for a local
// session that has ended (DeleteSession found nothing stored): it was
// bound to another session instance than the server's current one, or,
// written by a connect request that loaded nothing (a session that ends
// with its connection), it is still this node's last record and no
// connect or write of the client is in progress.
func (b *Backend) endedLocal(clientID string, v vouch, own *sessionRecord) bool {
	inst := b.instance(clientID)
	if v.inst != 0 {
		return v.inst != inst
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	return inst == 0 && own != nil && own.Connect && own.q == *v.q && own.off == v.off && b.own[clientID] == own &&
		len(b.waits[clientID]) == 0 && b.writing[clientID] == 0
}

func expiredAt(r *sessionRecord, now time.Time) bool {
	exp := time.Duration(r.ExpiryMs) * time.Millisecond
	if r.Online || r.DisconnectedAt == 0 || exp >= maxExpiry {
		return false
	}
	return !now.Before(time.UnixMilli(r.DisconnectedAt).Add(exp))
}

// LoadSession implements mqtt.Backend: the latest session record of the
// cluster, with its pending messages and those the log holds for its
// subscriptions since it went offline. The node then claims the session
// (an online record).
func (b *Backend) LoadSession(ctx context.Context, clientID string) (*mqtt.SessionState, bool, error) {
	if b.isClosed() {
		return nil, false, ErrClosed
	}
	// The connect is a record of the client's queue: once the node's
	// tail has applied it, the record before it is the client's latest
	// state (takeover.go).
	rec, err := b.connect(ctx, clientID)
	if err != nil {
		b.noteHeld(clientID, nil)
		return nil, false, err
	}
	if rec == nil || rec.Deleted || rec.Connect || expiredAt(rec, time.Now()) {
		b.noteHeld(clientID, nil)
		return nil, false, nil
	}
	if was, now := ownerOfRecord(rec), b.ownerOf(clientID); was != "" && now != "" && was != now {
		// An earlier owner's session (the IoT hub: a deleted identity's
		// of the same id, which a message was queued in while a node
		// still saw its connection online): not resumed; the connection
		// starts a new session, whose records supersede it.
		b.log.Info("bridge: session of an earlier owner of the client id not resumed", "client", clientID,
			"node", rec.Node)
		b.noteHeld(clientID, nil)
		return nil, false, nil
	}
	st := &mqtt.SessionState{ClientID: clientID, Username: rec.Username, Expiry: time.Duration(rec.ExpiryMs) * time.Millisecond}
	if rec.DisconnectedAt > 0 {
		st.DisconnectedAt = time.UnixMilli(rec.DisconnectedAt)
	}
	var shared []string
	for _, s := range rec.Subscriptions {
		st.Subscriptions = append(st.Subscriptions, mqtt.Subscription{Filter: s.Filter, QoS: s.QoS, NoLocal: s.NoLocal,
			RetainAsPublished: s.RetainAsPublished, RetainHandling: s.RetainHandling, Identifier: s.Identifier})
		if packets.IsShared(s.Filter) {
			shared = append(shared, s.Filter)
		}
	}
	// The session holds its shares from before this connect: a SUBSCRIBE
	// to one of them again does not start its group anew (PrepareShares).
	b.noteHeld(clientID, shared)
	if shared != nil {
		// Usually before the server installed the session: the next
		// periodic walk finds it otherwise.
		defer b.wakeShares()
	}
	st.Released, st.Received = rec.Released, rec.Received
	for i := range rec.Pending {
		st.Pending = append(st.Pending, rec.Pending[i].pending())
	}
	if back, moved := b.reusedBack(ctx, rec); moved {
		// Resumed (and claimed) from the offsets given again.
		cp := *rec
		cp.Resume = back
		rec = &cp
	}
	rs, ends, err := b.replay(ctx, rec)
	if err != nil {
		b.log.Warn("bridge: offline messages not all replayed, the rest is read back as the session drains",
			"client", clientID, "err", err)
	}
	if keep := max(b.opts.MaxOfflineMessages-len(st.Pending), 0); len(rs) > keep || err != nil && ends != nil {
		// The rest stays in the log: the session starts in overflow and
		// reads it back as its queue drains, from the first message not
		// handed over now in each queue (one queue's messages keep their
		// order in rs).
		if len(rs) > keep {
			for _, r := range rs[keep:] {
				if off, ok := ends[r.q]; !ok || r.off < off {
					ends[r.q] = r.off
				}
			}
			b.log.Info("bridge: resumed session's backlog over max_offline_messages, the rest is read back as it drains",
				"client", clientID, "backlog", len(rs), "now", keep)
			rs = rs[:keep]
		}
		st.Overflow = b.resumeOverflow(clientID, ends)
	}
	st.Pending = append(st.Pending, msgsOf(rs)...)
	if n := len(st.Pending) - b.opts.MaxOfflineMessages; n > 0 {
		b.log.Warn("bridge: offline messages over the session limit dropped", "client", clientID, "dropped", n)
		st.Pending = st.Pending[:b.opts.MaxOfflineMessages]
	}
	// Claim: resumes elsewhere start from here if this node disappears.
	// Until the client has the messages just loaded (a checkpoint moves
	// the claim on), that is where the session stood.
	claim := b.onlineRecord(clientID, rec.Username, rec.Subscriptions, rec.ExpiryMs, rec.Resume)
	claim.Pending, claim.Released, claim.Received = rec.Pending, rec.Released, rec.Received
	claim.vouch = true
	if err := b.writeSession(ctx, claim); err != nil {
		b.log.Warn("bridge: session claim", "client", clientID, "err", err)
	}
	return st, true, nil
}

// onlineRecord is the record of a session connected to this node: its
// subscriptions, and as resume points (where a resume elsewhere starts if
// this node disappears) those of from where it has one for the queue,
// else this node's live positions.
func (b *Backend) onlineRecord(clientID, username string, subs []subRecord, expiryMs int64, from []resumePoint) *sessionRecord {
	b.mu.Lock()
	points := b.resumePointsLocked(clientID, time.Time{})
	b.notePrevLocked(points)
	b.mu.Unlock()
	for _, rp := range from {
		if _, ok := points[rp.mq()]; ok {
			cp := rp
			cp.Pending, cp.Sent, cp.SentIDs = slices.Clone(rp.Pending), slices.Clone(rp.Sent), slices.Clone(rp.SentIDs)
			points[rp.mq()] = &cp
		}
	}
	return &sessionRecord{ClientID: clientID, Node: b.opts.NodeID, Online: true, Username: username,
		Subscriptions: subs, ExpiryMs: expiryMs, Resume: sortedPoints(points), Will: b.willOf(clientID),
		Owner: b.ownerOf(clientID)}
}

// SaveSubscriptions implements mqtt.SubscriptionBackend: the server calls
// it when a SUBSCRIBE or UNSUBSCRIBE changed a connected persistent
// session, before acknowledging; it writes an online record with the
// subscriptions, so a crash of this node loses no acknowledged
// subscription.
func (b *Backend) SaveSubscriptions(ctx context.Context, st *mqtt.SessionState) error {
	if b.isClosed() {
		return ErrClosed
	}
	b.noteSubscribed(st.ClientID, st.Subscriptions)
	b.wakeShares()
	if st.Expiry == 0 {
		return nil // the session ends with its connection
	}
	return b.writeOnline(ctx, st.ClientID, st)
}
