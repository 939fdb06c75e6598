package bridge

import (
	"context"
	"slices"
	"time"

	"github.com/smartgo/smartgo/mqtt"
)

// Records of connected sessions. A session that outlives its connection
// has an "online" record while it is connected (the claim written when it
// resumed, then one per subscription change and per checkpoint): if this
// node dies, the session resumes elsewhere from that record. Each one
// keeps what the client has not acknowledged (the session's pending
// messages as of the record, from mqtt.Server.Snapshot) and resume points
// taken at the same moment, so a crash replays at least what the client
// has not confirmed, and little more than one checkpoint interval of what
// it has.

// writeOnline writes the online record of clientID's connected session:
// its subscriptions and pending messages as the server has them now, and
// resume points of the same moment. When the server cannot give that
// (no cluster server, the session is gone) or the pending messages do not
// fit a record, the subscriptions of st go with the resume points of this
// node's last record of the session, which miss nothing either.
func (b *Backend) writeOnline(ctx context.Context, clientID string, st *mqtt.SessionState) error {
	rec, inst := b.snapshotRecord(clientID, nil)
	if rec == nil {
		b.mu.Lock()
		own := b.own[clientID]
		b.mu.Unlock()
		var from []resumePoint
		if own != nil {
			from = own.Resume
		}
		rec = b.onlineRecord(clientID, st.Username, subRecords(st.Subscriptions), st.Expiry.Milliseconds(), from)
		if own != nil {
			rec.Pending, rec.Released, rec.Received = own.Pending, own.Released, own.Received
		}
		inst = b.instance(clientID)
	}
	rec.vouch, rec.inst = true, inst
	return b.writeSession(ctx, rec)
}

// snapshotRecord is the online record of clientID's connected session as
// of now, and the server's session instance; nil when the server has no
// such session or its pending messages do not fit a record. where is as
// for recordAt.
func (b *Backend) snapshotRecord(clientID string, where map[*mqtt.Message]ringPos) (*sessionRecord, uint64) {
	srv, ok := b.server().(snapshotter)
	if !ok {
		return nil, 0
	}
	// Every delivery that ended before at is in the snapshot taken after.
	// Numbered before the snapshot: a record whose state the server took
	// later (the offline save) has a higher number.
	taken := b.taken.Add(1)
	at := time.Now()
	st, inst := srv.Snapshot(clientID)
	if st == nil || st.Expiry == 0 {
		return nil, 0
	}
	rec, dropped := b.recordAt(st, at, where)
	if dropped > 0 {
		return nil, 0
	}
	rec.Online, rec.DisconnectedAt, rec.taken, rec.snap = true, 0, taken, true
	rec.Will = b.willOf(clientID)
	return rec, inst
}

// snapshotter is the part of *mqtt.Server a checkpoint needs.
type snapshotter interface {
	Snapshot(clientID string) (*mqtt.SessionState, uint64)
}

// checkpointLoop moves the records of connected persistent sessions on,
// every Options.CheckpointInterval.
func (b *Backend) checkpointLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.opts.CheckpointInterval)
	defer t.Stop()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		b.checkpointAll()
		b.sweepOverflows()
	}
}

// checkpointAll writes a new online record for every local session that
// outlives its connection and whose record would change (it received
// messages since, or acknowledged some), or whose record, the client's
// current one, is Options.RefreshAge old: a connected session's record
// stays inside the brokers' retention as an offline one's copies do
// (compact.go).
func (b *Backend) checkpointAll() {
	b.mu.Lock()
	ids := make([]string, 0, len(b.vouches))
	for id := range b.vouches {
		ids = append(ids, id)
	}
	// One index of the recent deliveries for the whole round: a message
	// delivered later is not in it and is kept whole (or the session
	// waits for the next round).
	where := b.ringIndexLocked()
	b.mu.Unlock()
	for _, id := range ids {
		if b.ctx.Err() != nil {
			return
		}
		rec, inst := b.snapshotRecord(id, where)
		if rec == nil {
			continue
		}
		b.mu.Lock()
		own := b.own[id]
		aged := b.ownAgedLocked(id, own, time.Now())
		b.mu.Unlock()
		if own != nil && own.Online && len(own.Pending) == 0 && len(rec.Pending) == 0 && samePoints(own.Resume, rec.Resume) &&
			slices.Equal(own.Released, rec.Released) && slices.Equal(own.Received, rec.Received) && !aged {
			continue
		}
		rec.vouch, rec.inst = true, inst
		if err := b.writeSession(b.ctx, rec); err != nil && b.ctx.Err() == nil {
			b.log.Warn("bridge: session checkpoint", "client", id, "err", err)
		}
	}
}

// ownAgedLocked reports whether own, this node's last record of id, is
// the client's current record and was stored RefreshAge ago or more.
func (b *Backend) ownAgedLocked(id string, own *sessionRecord, now time.Time) bool {
	cur := b.sessions[id]
	at, ok := b.copies.at[id]
	return ok && own != nil && cur != nil && cur.q == own.q && cur.off == own.off && now.Sub(time.UnixMilli(at)) >= b.opts.RefreshAge
}

func samePoints(a, c []resumePoint) bool {
	if len(a) != len(c) {
		return false
	}
	for i := range a {
		x, y := a[i], c[i]
		if x.mq() != y.mq() || x.From != y.From || x.Live != y.Live || len(x.Pending) != 0 || len(y.Pending) != 0 {
			return false
		}
	}
	return true
}

// RecordQoS2 implements mqtt.QoS2Backend: it writes an online record of
// clientID's connected session (a checkpoint, with its received and
// released QoS 2 packet ids), then calls done. Calls for one client while
// a record is being written are answered by one more record; a client's
// records are written one at a time, in order (Backend.qos2). When the
// session has no record to write (gone, offline, or its unacknowledged
// messages do not fit a record) or the write fails, done is called all
// the same: the exchange is then as safe as the last checkpoint (logged).
func (b *Backend) RecordQoS2(clientID string, done func()) {
	if !b.qos2.add(clientID, done) {
		return
	}
	if !b.goOwned(func() { b.qos2.drain(clientID, func(fns []func()) { b.recordQoS2(clientID, fns) }) }) {
		b.qos2.drain(clientID, callAll)
	}
}

// recordQoS2 writes one record of clientID's session for the calls fns,
// then answers them.
func (b *Backend) recordQoS2(clientID string, fns []func()) {
	if b.ctx.Err() == nil {
		if rec, inst := b.snapshotRecord(clientID, nil); rec != nil {
			rec.vouch, rec.inst = true, inst
			if err := b.writeSession(b.ctx, rec); err != nil && b.ctx.Err() == nil {
				b.log.Warn("bridge: QoS 2 state not recorded", "client", clientID, "err", err)
			}
		}
	}
	callAll(fns)
}

func callAll(fns []func()) {
	for _, fn := range fns {
		fn()
	}
}
