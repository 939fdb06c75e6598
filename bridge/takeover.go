package bridge

import (
	"context"
	"fmt"
	"slices"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
)

// Session takeover across nodes (format and rules in doc.go, "Takeover").
// Every connect is a record of the client's queue in the session topic,
// so the queue offset orders connects and every other record of that
// client; every node follows the topic. A node that holds a client id
// (connected or offline in memory) and sees a newer connect or claim of
// another node drops it (mqtt.Server.EvictOrdered: DISCONNECT 0x8E); asked by a
// connect request, it first writes the session's state as a handoff
// record, which the connecting node waits for before its CONNACK.
//
// # Bookkeeping
//
// Per client, a node keeps (all under Backend.mu; a client that left
// leaves no entry in any of them):
//
//   - writing: writeSession calls in flight; each adds one and takes it
//     back in the same call.
//   - deferred: other nodes' records judged while a record of this node
//     was in flight or before its session had one; judged again when the
//     write completes (judgeDeferredLocked) or, by the goroutine each
//     deferral starts, after SendTimeout.
//   - waits and connectPrev: one entry per Backend.connect in progress,
//     removed by that call on return.
//   - own: the node's last record of the client while it matters: set
//     by each record written, removed by a delete or clean-start
//     announcement, and by forgetLocal when it was a connect request of
//     a session that is gone.
//   - vouches: the record standing for the local session. A vouch is
//     bound to a session instance of the server (mqtt.Server
//     SessionInstance), or to none (0) while LoadSession writes the
//     records of the session the server installs next: judge binds it
//     to that session. It goes when the session ends: a deleted record
//     replaces it; DeleteSession of a clean session that ended forgets
//     it (endedLocal); judge forgets it when it evicts the session.
//
// The server ends sessions on its own while the node writes and judges,
// so two rules keep a vouch from outliving its session:
//
//   - judge evicts only the session instance it judged (mqtt.Server.EvictOrdered
//     takes the instance): a session installed after judge looked comes
//     after rec in the client's queue (its connect request or clean-start
//     announcement is written after it is installed, or is still being
//     written: then judge defers), so it is newer than rec and stays.
//     Without this, an announcement judged against no session evicted
//     the session installed meanwhile, whose own announcement then
//     bound a vouch to no session, for good.
//   - whoever binds a vouch to an instance (writeSession, judge) checks
//     afterwards that the server still holds it, and judge drops any
//     vouch bound to the instance it evicted (dropStaleVouch). The map
//     changes under Backend.mu and the server is read outside it, so
//     whichever of the binder and the evicter acts last sees the other's
//     work.
//
// A vouch bound to no instance whose session the server never installs
// (the CONNECT failed after LoadSession) goes with the client's next
// record from another node.

// clusterServer is the part of *mqtt.Server a multi-node backend uses
// (mqtt/cluster.go). Without it (another Deliverer) the node neither
// takes sessions away from other nodes nor balances shared subscriptions
// across nodes.
type clusterServer interface {
	EvictOrdered(clientID string, inst uint64, how mqtt.Eviction) (*mqtt.SessionState, bool, func())
	Connected(clientID string) bool
	SessionInstance(clientID string) uint64
	SessionExpiry(clientID string) (time.Duration, bool)
	DeliverUnshared(msg *mqtt.Message)
	DeliverLive(msg *mqtt.Message, overflow func(clientID string, inst uint64))
	Refill(clientID string, inst uint64, msgs []*mqtt.Message, last bool) (int, <-chan struct{}, error)
	TryDeliverSharedAcked(share string, msg *mqtt.Message, rec mqtt.Recycler) (taker string, full bool)
	Holds(clientID string, msg *mqtt.Message) bool
	SharedSubscriptions() []string
	EndOfflineSession(clientID string) bool
}

// instance is the server's session instance of clientID (0: none, or no
// cluster server).
func (b *Backend) instance(clientID string) uint64 {
	if srv := b.server(); srv != nil {
		return srv.SessionInstance(clientID)
	}
	return 0
}

func (b *Backend) server() clusterServer {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.srv
}

// connect writes a connect request of clientID, waits until the node's
// system tail has applied it, and returns the record before it: the
// client's latest state (nil: none). When that record says another node
// may hold the session on a connection (its connect or claim), it waits
// (bounded by HandoffTimeout) for a later record of another node,
// normally that node's handoff, and returns it; past the bound it returns
// the earlier record.
func (b *Backend) connect(ctx context.Context, clientID string) (*sessionRecord, error) {
	req := &sessionRecord{ClientID: clientID, Node: b.opts.NodeID, Connect: true, vouch: true, tailOnly: true}
	w := &handoffWait{}
	b.mu.Lock()
	b.waits[clientID] = append(b.waits[clientID], w)
	b.mu.Unlock()
	err := b.writeSession(ctx, req)
	key := sysPos{req.q, req.off}
	defer func() {
		b.mu.Lock()
		delete(b.connectPrev, key)
		ws := slices.DeleteFunc(b.waits[clientID], func(x *handoffWait) bool { return x == w })
		if len(ws) == 0 {
			delete(b.waits, clientID)
		} else {
			b.waits[clientID] = ws
		}
		b.mu.Unlock()
	}()
	if err != nil {
		return nil, err
	}
	tctx, cancel := context.WithTimeout(ctx, b.opts.SendTimeout)
	defer cancel()
	var rec *sessionRecord
	for {
		ch := b.applied.Wait()
		b.mu.Lock()
		done := b.sysNext[req.q] > req.off
		rec = b.connectPrev[key]
		b.mu.Unlock()
		if done {
			break
		}
		select {
		case <-tctx.Done():
			return nil, fmt.Errorf("bridge: session topic behind at a connect of %q: %w", clientID, tctx.Err())
		case <-ch:
		}
	}
	if rec == nil || rec.Node == b.opts.NodeID || !rec.Connect && !rec.Online {
		return rec, nil
	}
	hctx, cancel := context.WithTimeout(ctx, b.opts.HandoffTimeout)
	defer cancel()
	var later *sessionRecord // another node's latest record after req that is not its answer
	for {
		ch := b.applied.Wait()
		b.mu.Lock()
		cur := w.other
		b.mu.Unlock()
		if cur != nil && cur.q == req.q && cur.off > req.off {
			if cur.Gen == req.off+1 {
				b.log.Debug("bridge: session handed over", "client", clientID, "from", cur.Node, "gen", cur.Gen)
				return cur, nil
			}
			// Not the answer to req (a save of an ended connection
			// stored after req, say): the holder's handoff, ordered
			// after that save, is still to come. Resumed from the save,
			// this node's next records would be stored before the
			// handoff, which would then be the client's latest record
			// and take them back.
			later = cur
		}
		select {
		case <-hctx.Done():
			if later != nil {
				b.log.Warn("bridge: no session handoff from the node holding it; resuming from its latest record",
					"client", clientID, "node", later.Node, "timeout", b.opts.HandoffTimeout)
				return later, nil
			}
			b.log.Warn("bridge: no session handoff from the node holding it; resuming from its last record",
				"client", clientID, "node", rec.Node, "timeout", b.opts.HandoffTimeout)
			return rec, nil
		case <-ch:
		}
	}
}

// handoffWait is one connect of this node in progress: the tail keeps in
// it the latest record of another node of the client (a handoff, which
// may be a delete: b.sessions keeps no deletes), so that the connect
// finds the handoff without every node keeping every client's records.
type handoffWait struct {
	other *sessionRecord // protected by Backend.mu
}

// noteWaitsLocked hands rec, applied by the tail, to the connects of its
// client in progress on this node.
func (b *Backend) noteWaitsLocked(rec *sessionRecord) {
	if rec.Node == b.opts.NodeID {
		return
	}
	for _, w := range b.waits[rec.ClientID] {
		w.other = rec
	}
}

// sysPos is a record's position in a system topic.
type sysPos struct {
	q   client.MessageQueue
	off int64
}

// vouch is the record of this node that stands for its local session of
// a client: a record of another node newer than it takes the session
// away. inst is the server's session instance it was written for (0:
// written by LoadSession, bound to the session the server installs next).
// One per local session, kept by value with the queue interned (40 bytes).
//
// live and quiet tell whether a connect request of another node waits for
// this node's handoff although a record of this node came after it (see
// answers). The local session's records come in runs: records that say
// it is connected here or may be (a connect request, a kept clean-start
// announcement, online records: claims, checkpoints) and records that do
// not (offline saves). live is the offset of the first record of the
// latest run of the first kind, quiet that of the first record after
// that run; -1: none.
type vouch struct {
	inst        uint64
	q           *client.MessageQueue // interned: compare pointers
	off         int64
	live, quiet int64
}

// liveRecord reports whether rec tells the other nodes that its node may
// hold the session on a connection: a connect of another node after it
// waits for that node's handoff (Backend.connect).
func (r *sessionRecord) liveRecord() bool {
	return r.Online || r.Connect && (!r.Deleted || r.keptAnnouncement())
}

// answers reports whether this node owes a handoff to the connect request
// at offset off of the vouch's queue: it falls in the local session's
// latest run of records saying the session is connected here, so the
// connecting node waits for this node's handoff, although a later record
// of the session (a checkpoint, or the offline save of a connection that
// ended meanwhile), stored after the request but before this node's tail
// applied it, makes the request look older than the session. The session
// is the one the request takes over: it did not start (or come back
// online) after the request.
func (v *vouch) answers(off int64) bool {
	return v.live >= 0 && v.live < off && (v.quiet < 0 || v.quiet > off)
}

// internQueueLocked returns the one shared copy of q.
func (b *Backend) internQueueLocked(q client.MessageQueue) *client.MessageQueue {
	p := b.sysQueues[q]
	if p == nil {
		p = &q
		b.sysQueues[q] = p
	}
	return p
}

// setVouchLocked makes rec (just stored) the client's vouch when rec.vouch
// is set, else drops the vouch.
func (b *Backend) setVouchLocked(rec *sessionRecord) {
	if rec.vouch {
		v := vouch{inst: rec.inst, q: b.internQueueLocked(rec.q), off: rec.off, live: -1, quiet: -1}
		if cur, ok := b.vouches[rec.ClientID]; ok && cur.q == v.q && !rec.Connect {
			// The same local session's next record (a connect or
			// announcement starts another).
			v.live, v.quiet = cur.live, cur.quiet
		}
		switch live := rec.liveRecord(); {
		case live && (v.live < 0 || v.quiet >= 0):
			v.live, v.quiet = rec.off, -1 // a run of live records starts
		case !live && v.live >= 0 && v.quiet < 0:
			v.quiet = rec.off
		}
		b.vouches[rec.ClientID] = v
	} else {
		delete(b.vouches, rec.ClientID)
	}
}

// onSessionRecord runs on the system tail for every applied session
// record: a connect or claim of another node that is newer than this
// node's session of the client takes the client id away from this node;
// a connect request is answered with a handoff record.
func (b *Backend) onSessionRecord(rec *sessionRecord) { b.judge(rec, false) }

// judge decides whether rec takes the client away from this node. A local
// session that has no record yet (a clean start announces itself once the
// server installed it, before its CONNACK is written), or while a record
// of the client is being written,
// is judged once that record is stored (deferred), or after SendTimeout
// as older (late). Only the session instance judged is evicted: one the
// server created after judge looked is newer than rec (its record comes
// after rec in the client's queue).
func (b *Backend) judge(rec *sessionRecord, late bool) {
	if rec.Node == b.opts.NodeID || !rec.Connect && !rec.Online {
		return
	}
	srv := b.server()
	if srv == nil {
		return
	}
	id := rec.ClientID
	inst := srv.SessionInstance(id)
	b.mu.Lock()
	var v *vouch
	bound := false // v was bound to inst here
	if cur, ok := b.vouches[id]; ok {
		if cur.inst == 0 && inst != 0 {
			cur.inst = inst
			b.vouches[id] = cur
			bound = true
		}
		v = &cur
	}
	own := b.own[id]
	var older bool // rec is older than what this node holds
	switch {
	case b.writing[id] > 0 && !late:
		b.deferLocked(rec)
		b.mu.Unlock()
		b.dropStaleVouch(srv, id, inst, bound)
		return
	case inst == 0:
		older = own != nil && own.q == rec.q && own.off > rec.off
	case v != nil && v.inst == inst:
		// A connect request that came while the session's records
		// said it was connected here is answered although a record of
		// the session stored after it (a checkpoint, an offline save)
		// was stored before this node applied it: its node waits for
		// the handoff, and the session is the one it takes over.
		older = *v.q == rec.q && v.off > rec.off && !(rec.Connect && !rec.Deleted && v.answers(rec.off))
	case !late:
		b.deferLocked(rec)
		b.mu.Unlock()
		b.dropStaleVouch(srv, id, inst, bound)
		return
	}
	b.mu.Unlock()
	if older {
		b.dropStaleVouch(srv, id, inst, bound)
		return
	}
	// A connect request stored more than three quarters of
	// HandoffTimeout ago gets no handoff (below).
	tooLate := rec.Connect && !rec.Deleted && rec.stored > 0 && time.Since(time.UnixMilli(rec.stored)) > b.opts.HandoffTimeout*3/4
	how := mqtt.EvictSuperseded // a claim: the session went on from a record
	switch {
	case rec.Connect && rec.Deleted:
		how = mqtt.EvictEnded
	case rec.Connect && !tooLate:
		how = mqtt.EvictMoved // with the handoff below
	}
	// In the order of the server's saves and deletes of the client: one
	// decided before (an ended connection's save on its way) is stored
	// before the handoff below, one decided after once it is written.
	st, held, evicted := srv.EvictOrdered(id, inst, how)
	defer evicted()
	if held {
		b.log.Info("bridge: session taken over by another node", "client", id, "node", rec.Node)
		b.wakeShares()
	}
	// This node holds no session of the client any more: its vouch and
	// connect records stand for nothing (a handoff below is the node's
	// last word).
	b.forgetLocal(id, v, own)
	b.dropStaleVouch(srv, id, inst, true)
	if !rec.Connect || rec.Deleted {
		b.settleWill(b.ctx, id)
		return
	}
	if tooLate {
		// This node was away (hung, or cut off) for longer than the
		// connecting node waits for a handoff: that node has resumed from
		// the record before its request by now, and may have written
		// newer state (a claim, subscriptions) since. A handoff stored
		// after those would become the client's latest record and take
		// them back. Only a node that had a handoff to give says so: a
		// node starting up replays every old connect request of others.
		if held || own != nil && (own.Online || own.Connect) {
			b.log.Warn("bridge: connect request answered too late for a handoff; none written",
				"client", id, "node", rec.Node, "age", time.Since(time.UnixMilli(rec.stored)).Round(time.Millisecond))
		}
		b.settleWill(b.ctx, id)
		return
	}
	var h *sessionRecord
	switch {
	case held && st.Expiry > 0:
		h = b.offlineRecord(st)
	case held:
		h = &sessionRecord{ClientID: id, Node: b.opts.NodeID, Deleted: true}
	case own != nil && own.Online:
		// Not held (any more), but this node's last word was that it
		// was: answer with that record's state, offline.
		cp := *own
		h = &cp
		h.Online = false
		// Its connection's will was handled when the session ended
		// here (published, settled, or owed by a will-owed marker):
		// carried again, the handoff would owe it once more.
		h.Will = nil
		if h.DisconnectedAt == 0 {
			h.DisconnectedAt = time.Now().UnixMilli()
		}
	case own != nil && own.Connect:
		// A connect of this node that left no session here.
		h = &sessionRecord{ClientID: id, Node: b.opts.NodeID, Deleted: true}
	default:
		b.settleWill(b.ctx, id)
		return
	}
	h.Gen = rec.off + 1
	if err := b.writeSession(b.ctx, h); err != nil {
		b.log.Warn("bridge: session handoff", "client", id, "err", err)
	}
}

// forgetLocal drops the vouch v and the own record own of clientID (the
// local session they stood for is gone) unless newer ones replaced them.
// An own record with session state (an online or offline record) stays:
// DeleteSession tells by it the expiry of a stale offline copy.
func (b *Backend) forgetLocal(clientID string, v *vouch, own *sessionRecord) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.vouches[clientID]; ok && v != nil && cur.q == v.q && cur.off == v.off {
		delete(b.vouches, clientID)
	}
	if own != nil && own.Connect && b.own[clientID] == own {
		delete(b.own, clientID)
	}
}

// dropStaleVouch drops clientID's vouch when it is bound to the session
// instance inst (non-zero, check set) and the server no longer holds that
// instance. Whoever binds a vouch to an instance calls it after binding,
// and judge after evicting one: whichever of the two comes last sees the
// other's work, so no vouch outlives its instance (see "Bookkeeping").
func (b *Backend) dropStaleVouch(srv clusterServer, clientID string, inst uint64, check bool) {
	if !check || inst == 0 || srv.SessionInstance(clientID) == inst {
		return
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if cur, ok := b.vouches[clientID]; ok && cur.inst == inst {
		delete(b.vouches, clientID)
	}
}

// deferLocked keeps rec until this node's next record of its client is
// stored (writeSession judges it then), at most SendTimeout.
func (b *Backend) deferLocked(rec *sessionRecord) {
	if b.closed {
		return
	}
	b.deferred[rec.ClientID] = append(b.deferred[rec.ClientID], rec)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		select {
		case <-b.ctx.Done():
			return
		case <-time.After(b.opts.SendTimeout):
		}
		b.mu.Lock()
		list := b.deferred[rec.ClientID]
		i := slices.Index(list, rec)
		if i >= 0 {
			b.deferred[rec.ClientID] = slices.Delete(list, i, i+1)
			if len(b.deferred[rec.ClientID]) == 0 {
				delete(b.deferred, rec.ClientID)
			}
		}
		b.mu.Unlock()
		if i >= 0 {
			b.judge(rec, true)
		}
	}()
}

// judgeDeferredLocked hands the records deferred for clientID to judge,
// on a goroutine (writeSession calls it once its record is stored).
func (b *Backend) judgeDeferredLocked(clientID string) {
	list := b.deferred[clientID]
	if len(list) == 0 || b.closed {
		return
	}
	delete(b.deferred, clientID)
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		for _, r := range list {
			b.judge(r, false)
		}
	}()
}

// SessionCurrent implements mqtt.SessionConfirmer for a session the server
// holds offline in memory: the node's tail catches up with the session
// topic as the brokers hold it now (one round trip for the ends of its
// queues, catchUpSys), and the session is current when the client's latest
// record is this node's. A record of another node (a clean start there,
// a resume, a handoff), or none (deleted there), means the session went
// on elsewhere: the server ends its copy and loads the session
// (LoadSession), as a node that does not hold it does. Without this, a
// client that started clean on another node and at once resumed here got
// the old session until the tail applied the other node's record.
func (b *Backend) SessionCurrent(ctx context.Context, clientID string) (bool, error) {
	if b.isClosed() {
		return false, ErrClosed
	}
	if b.testBeforeConfirm != nil {
		b.testBeforeConfirm(clientID)
	}
	if err := b.catchUpSys(ctx, b.opts.SessionTopic); err != nil {
		return false, fmt.Errorf("bridge: session topic not caught up to confirm the session of %q: %w", clientID, err)
	}
	b.mu.Lock()
	rec := b.sessions[clientID]
	b.mu.Unlock()
	return rec != nil && rec.Node == b.opts.NodeID, nil
}
