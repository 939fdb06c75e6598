package bridge

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"encoding/json"
	"fmt"
	"slices"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
)

// Wills that outlive their node (doc.go, "Wills"). The records a node
// writes while a client is connected to it (the online claim, checkpoints,
// subscription and QoS 2 records, the clean-start announcement, and one
// written after the CONNACK when none of those carries the connection's
// will) carry the will. Every node's tail keeps, per client, the wills
// that a node stored and has not settled yet (owed); a node settles its
// own by a later record of the client (an offline save, a delete, a
// handoff, a record with another will) or, when it writes none, by a
// will-done marker. A will whose node is gone is published by one live
// node: the one that wrote the first will-done marker for it (the session
// topic's order decides between nodes that both try).

// willRecord is a connected client's will as a session record carries it
// ("will" in doc.go): the message (the fields of a pending message), who
// published it, its Will Delay Interval and the session's expiry, and an
// id that stays the same for every record of one connection's will.
type willRecord struct {
	ID string `json:"wid"`
	pendingRecord
	Username  string `json:"username,omitempty"`
	DelayMs   int64  `json:"delayMs,omitempty"`
	SessionMs int64  `json:"sessionMs,omitempty"`
	// DueAtMs: when the will goes out (Unix ms), in the offline record of
	// a session whose connection ended and whose will delay runs.
	DueAtMs int64 `json:"dueAtMs,omitempty"`
	// Retry: the will's publish failed and its node tries it again: only
	// its will-done marker settles it (applyWillsLocked).
	Retry bool `json:"retry,omitempty"`
}

// message is the will to publish.
func (w *willRecord) message() *mqtt.Message {
	m := w.pending().Msg
	m.QoS, m.Retain, m.Username = min(w.QoS, 2), w.Retain, w.Username
	return m
}

// wait is how long after its connection ended the will is published:
// the will delay, or the session's expiry when that is shorter.
func (w *willRecord) wait() time.Duration {
	return time.Duration(max(min(w.DelayMs, w.SessionMs), 0)) * time.Millisecond
}

// owedWill is a will a node stored and has not settled.
type owedWill struct {
	node string
	w    *willRecord
	// claim is "node/process" of the claim to publish the will that
	// holds ("": none): that process publishes it, then settles it.
	claim string
}

// firing is this process's claim to publish a will, from when it writes
// the claim until a marker settles the will.
type firing struct {
	prev       string // the claim it takes over ("": none)
	publishing bool   // the claim holds: publish, then settle
	waiting    bool   // publishing waits for the will's node to revoke the claim
	published  bool   // published: settling is what is left
	settling   bool   // a settling marker is on its way
}

// willRef is the id this node gave the will message msg of a client.
type willRef struct {
	msg *mqtt.Message
	id  string
}

// willState is the wills part of a Backend.
type willState struct {
	inc     string // this process: the prefix of the ids it gives
	seq     atomic.Uint64
	started time.Time // when this process's backend started (Start)
	// Protected by Backend.mu.
	owed   map[string][]owedWill // by client, as the tail applied the records
	owners map[string]int        // nodes with owed wills: how many
	ids    map[string]willRef    // this node's stored will per client
	owing  map[string][]willRef  // wills this node owes (publish failed), per client
	fire   map[string]*firing    // by will id: this process's claims to publish
	heard  map[string]time.Time  // nodes that revoked a claim: when (alive then)
}

// willServer is the part of *mqtt.Server the wills need.
type willServer interface {
	Will(clientID string) (mqtt.Will, bool)
	PublishWill(m *mqtt.Message) error
}

func (b *Backend) willServer() willServer {
	ws, _ := b.server().(willServer)
	return ws
}

func newWillState() willState {
	var r [8]byte
	_, _ = rand.Read(r[:])
	return willState{inc: hex.EncodeToString(r[:]), owed: map[string][]owedWill{}, owners: map[string]int{},
		ids: map[string]willRef{}, owing: map[string][]willRef{}, fire: map[string]*firing{}, heard: map[string]time.Time{}}
}

// willOf is the will record of clientID's connection on this node (nil:
// none, or too big to store).
func (b *Backend) willOf(clientID string) *willRecord {
	ws := b.willServer()
	if ws == nil {
		return nil
	}
	w, ok := ws.Will(clientID)
	if !ok {
		return nil
	}
	if len(w.Msg.Payload) > maxPendingBytes {
		b.log.Warn("bridge: will too big to store; a crash of this node loses it", "client", clientID, "bytes", len(w.Msg.Payload))
		return nil
	}
	b.mu.Lock()
	i := slices.IndexFunc(b.wills.owing[clientID], func(r willRef) bool { return r.msg == w.Msg })
	var ref willRef
	if i >= 0 {
		ref = b.wills.owing[clientID][i] // owed: its id stays
	} else {
		ref = b.refLocked(clientID, w.Msg)
	}
	b.wills.ids[clientID] = ref
	b.mu.Unlock()
	return willRecordOf(ref.id, w)
}

// refLocked is this node's stored will of clientID when it is msg, else
// a new one for msg.
func (b *Backend) refLocked(clientID string, msg *mqtt.Message) willRef {
	if ref, ok := b.wills.ids[clientID]; ok && ref.msg == msg {
		return ref
	}
	return willRef{msg: msg, id: b.wills.inc + "-" + strconv.FormatUint(b.wills.seq.Add(1), 36)}
}

// willRecordOf is the record of the will w with the id id.
func willRecordOf(id string, w mqtt.Will) *willRecord {
	m := w.Msg
	rec := &willRecord{ID: id, pendingRecord: pendingOf(mqtt.Pending{Msg: m, QoS: m.QoS, Retain: m.Retain}),
		Username: m.Username, DelayMs: w.Delay.Milliseconds(), SessionMs: w.Expiry.Milliseconds(), Retry: w.Owed}
	rec.QoS = m.QoS
	if !w.Due.IsZero() {
		rec.DueAtMs = w.Due.UnixMilli()
	}
	return rec
}

// WillOwed implements mqtt.WillOwer: the server owes clientID's will w
// (its publish failed; it tries it again). A will-owed marker keeps it
// owed on every node's tail whatever this node's later records of the
// client carry (a new connection's will, a handoff, a delete), until
// WillPublished settles it; if this node dies first, another publishes
// it.
func (b *Backend) WillOwed(ctx context.Context, clientID string, w mqtt.Will) {
	if w.Msg == nil || len(w.Msg.Payload) > maxPendingBytes || b.isClosed() {
		return
	}
	b.mu.Lock()
	if slices.ContainsFunc(b.wills.owing[clientID], func(r willRef) bool { return r.msg == w.Msg }) {
		b.mu.Unlock()
		return
	}
	ref := b.refLocked(clientID, w.Msg)
	b.wills.owing[clientID] = append(b.wills.owing[clientID], ref)
	b.mu.Unlock()
	w.Owed = true
	rec := &sessionRecord{ClientID: clientID, Node: b.opts.NodeID, WillDone: ref.id, Owe: true, Will: willRecordOf(ref.id, w)}
	if err := b.writeMarker(ctx, rec); err != nil {
		b.log.Warn("bridge: will owed not stored; trying again (until then, a new connection of the client and a crash of this node lose it)",
			"client", clientID, "err", err)
		b.retryOweMarker(rec)
	}
}

// ConnectedWill implements mqtt.WillBackend: after the CONNACK of a
// connection that did not start clean (a clean start's announcement
// carries the will), it writes an online record with the connection's
// will, or without one when this node's last stored will of the client
// is not this connection's.
func (b *Backend) ConnectedWill(ctx context.Context, clientID string, cleanStart bool) {
	if cleanStart || b.isClosed() {
		return
	}
	b.mu.Lock()
	prev, had := b.wills.ids[clientID]
	b.mu.Unlock()
	w := b.willOf(clientID)
	if w == nil && !had || w != nil && had && prev.id == w.ID {
		return
	}
	b.storeWill(ctx, clientID)
}

// reassertWill follows a record of clientID without a will that this
// node wrote for a session that ended (an offline save, a delete): when a
// new connection of the client is on the node already (it reconnected at
// once, and its records went first), that record settled the new
// connection's will too, so an online record stores it again.
func (b *Backend) reassertWill(ctx context.Context, clientID string) {
	if w := b.willOf(clientID); w != nil && w.DueAtMs == 0 {
		b.storeWill(ctx, clientID)
	}
}

// offlineWill is the will of clientID's session whose connection ended
// and whose will delay runs (nil: none), for its offline record.
func (b *Backend) offlineWill(clientID string) *willRecord {
	if w := b.willOf(clientID); w != nil && w.DueAtMs > 0 {
		return w
	}
	return nil
}

// WillPublished implements mqtt.WillBackend: the server published the
// will m of clientID that a record stored and none settled (a delayed
// will of an offline session, or one published after a failed try); a
// will-done marker settles it.
func (b *Backend) WillPublished(ctx context.Context, clientID string, m *mqtt.Message) {
	b.settleRef(ctx, clientID, m)
}

// storeWill writes an online record of clientID's connected session,
// with its will (or none).
func (b *Backend) storeWill(ctx context.Context, clientID string) {
	srv, ok := b.server().(snapshotter)
	if !ok {
		return
	}
	st, _ := srv.Snapshot(clientID)
	if st == nil {
		return // gone already: its end settles the will
	}
	if err := b.writeOnline(ctx, clientID, st); err != nil {
		b.log.Warn("bridge: will not stored; a crash of this node loses it", "client", clientID, "err", err)
	}
}

// settleWill writes a will-done marker for this node's stored will of
// clientID when the server holds no session of the client any more and
// the node wrote no record that settles it (a clean session that ended,
// a session taken over by a clean start), unless the server still owes
// the will (its publish failed: it tries again, and WillPublished
// settles it once it went out).
func (b *Backend) settleWill(ctx context.Context, clientID string) {
	if b.instance(clientID) != 0 {
		return
	}
	if ws := b.willServer(); ws != nil {
		b.mu.Lock()
		ref := b.wills.ids[clientID]
		b.mu.Unlock()
		if w, owed := ws.Will(clientID); owed && w.Msg == ref.msg {
			return
		}
	}
	b.settleRef(ctx, clientID, nil)
}

// settleRef writes a will-done marker for this node's stored will of
// clientID (when m is not nil: if it is m, or the owed will m) and
// forgets it. With m nil, a will this node owes is not settled: its
// publish settles it.
func (b *Backend) settleRef(ctx context.Context, clientID string, m *mqtt.Message) {
	b.mu.Lock()
	ref, ok := b.wills.ids[clientID]
	owing := b.wills.owing[clientID]
	want := m
	if want == nil && ok {
		want = ref.msg
	}
	i := -1
	if want != nil {
		i = slices.IndexFunc(owing, func(r willRef) bool { return r.msg == want })
	}
	switch {
	case i >= 0 && m == nil:
		ok = false // owed: not settled by the session's end
	case i >= 0:
		ref, ok = owing[i], true
		if len(owing) == 1 {
			delete(b.wills.owing, clientID)
		} else {
			b.wills.owing[clientID] = slices.Delete(owing, i, i+1)
		}
		if cur, has := b.wills.ids[clientID]; has && cur.msg == m {
			delete(b.wills.ids, clientID)
		}
	default:
		ok = ok && (m == nil || ref.msg == m)
		if ok {
			delete(b.wills.ids, clientID)
		}
	}
	b.mu.Unlock()
	if !ok {
		return
	}
	if err := b.writeMarker(ctx, &sessionRecord{ClientID: clientID, Node: b.opts.NodeID, WillDone: ref.id}); err != nil {
		b.log.Warn("bridge: settle stored will", "client", clientID, "err", err)
	}
}

// claimWill appends a claim to publish the will id of clientID, taking
// over the claim prev ("": none); this process publishes the will when
// the tail finds the claim holds (applyWillDoneLocked).
func (b *Backend) claimWill(ctx context.Context, clientID, id, prev string) error {
	b.mu.Lock()
	if b.wills.fire[id] != nil {
		b.mu.Unlock()
		return nil // a claim is on its way
	}
	b.wills.fire[id] = &firing{prev: prev}
	b.mu.Unlock()
	err := b.writeMarker(ctx, &sessionRecord{ClientID: clientID, Node: b.opts.NodeID, WillDone: id,
		Claim: b.wills.inc, ClaimPrev: prev})
	if err != nil {
		b.mu.Lock()
		delete(b.wills.fire, id)
		b.mu.Unlock()
	}
	return err
}

// settleFired appends the will-done marker of the will id of clientID
// that this process published; on failure the will loop tries again.
func (b *Backend) settleFired(ctx context.Context, clientID, id string) {
	b.mu.Lock()
	f := b.wills.fire[id]
	if f == nil || f.settling {
		b.mu.Unlock()
		return
	}
	f.settling = true
	b.mu.Unlock()
	if err := b.writeMarker(ctx, &sessionRecord{ClientID: clientID, Node: b.opts.NodeID, WillDone: id}); err != nil {
		b.mu.Lock()
		f.settling = false
		b.mu.Unlock()
		if ctx.Err() == nil {
			b.log.Warn("bridge: settle a published will", "client", clientID, "err", err)
		}
	}
}

// writeMarker appends a will-done marker or claim, rec, to the queue of
// its client's records.
func (b *Backend) writeMarker(ctx context.Context, rec *sessionRecord) error {
	m, err := b.sessionMessage(rec)
	if err != nil {
		return fmt.Errorf("bridge: encode will-done: %w", err)
	}
	send := func() error {
		ctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.opts.SendTimeout)
		defer cancel()
		_, err := b.prod.SendOrderly(ctx, m, rec.ClientID, client.HashSelector)
		return err
	}
	if b.testMarkerHook != nil {
		err = b.testMarkerHook(rec, send)
	} else {
		err = send()
	}
	if err != nil {
		return fmt.Errorf("bridge: store will-done of %q: %w", rec.ClientID, err)
	}
	return nil
}

// sessionMessage is the broker message of a session record written as
// is (a marker, a compaction copy).
func (b *Backend) sessionMessage(rec *sessionRecord) (*client.Message, error) {
	body, err := json.Marshal(rec)
	if err != nil {
		return nil, err
	}
	m := &client.Message{Topic: b.opts.SessionTopic, Body: body}
	if encodable(rec.ClientID) {
		m.Properties = map[string]string{PropClientID: rec.ClientID}
	}
	return m, nil
}

// applyWillsLocked updates the owed wills with rec, a session record the
// tail applies (in the order of the client's queue):
//   - a connect request of another node resumes the session: a delayed
//     will of an earlier connection is cancelled (a will without delay
//     is not: its connection ended with its node);
//   - rec speaks for its node's connection of the client: that node's
//     owed wills other than rec's are settled, and rec's is owed.
func (b *Backend) applyWillsLocked(rec *sessionRecord) {
	list := b.wills.owed[rec.ClientID]
	if len(list) == 0 && rec.Will == nil {
		return
	}
	keep := list[:0]
	found := false
	for _, e := range list {
		switch {
		case e.node != rec.Node:
			if rec.Connect && !rec.Deleted && e.w.wait() > 0 {
				b.dropOwnerLocked(e.node)
				continue
			}
		case e.w.Retry && (rec.Will == nil || e.w.ID != rec.Will.ID):
			// Owed after a failed publish: only its marker settles it.
		case rec.Will == nil || e.w.ID != rec.Will.ID:
			b.dropOwnerLocked(e.node)
			continue
		default:
			found = true
			retry := e.w.Retry
			e.w = rec.Will // the latest: an offline record adds when it is due
			if retry && !e.w.Retry {
				w := *e.w
				w.Retry = true
				e.w = &w
			}
		}
		keep = append(keep, e)
	}
	if rec.Will != nil && !found {
		keep = append(keep, owedWill{node: rec.Node, w: rec.Will})
		b.wills.owners[rec.Node]++
	}
	if len(keep) == 0 {
		delete(b.wills.owed, rec.ClientID)
	} else {
		b.wills.owed[rec.ClientID] = keep
	}
}

func (b *Backend) dropOwnerLocked(node string) {
	if b.wills.owners[node]--; b.wills.owners[node] <= 0 {
		delete(b.wills.owners, node)
	}
}

// applyWillDoneLocked applies a will-done marker, a claim or a revoke. A
// marker settles its will. A claim holds when it takes over the claim
// the will has (none, or one of a process that is gone); it returns the
// will when the claim is this process's and holds: this process
// publishes it. When the claim is on a will this process stored and
// still holds (its client is connected, its delay runs, or its publish
// is tried again), it returns the claim to revoke: this node is alive,
// though another took it for gone. A revoke of the will's node voids the
// claim it names, if that is still the will's.
func (b *Backend) applyWillDoneLocked(rec *sessionRecord) (w *willRecord, revoke string) {
	id := rec.WillDone
	mine := rec.Claim != "" && rec.Node == b.opts.NodeID && rec.Claim == b.wills.inc
	f := b.wills.fire[id]
	list := b.wills.owed[rec.ClientID]
	i := slices.IndexFunc(list, func(e owedWill) bool { return e.w.ID == id })
	if rec.Owe {
		if rec.Will == nil || rec.Will.ID != id {
			return nil, ""
		}
		w := *rec.Will
		w.Retry = true
		if i >= 0 {
			list[i].w = &w
		} else {
			b.wills.owed[rec.ClientID] = append(list, owedWill{node: rec.Node, w: &w})
			b.wills.owners[rec.Node]++
		}
		return nil, ""
	}
	if rec.Revoke != "" {
		if i >= 0 && list[i].node == rec.Node && list[i].claim == rec.Revoke {
			list[i].claim = ""
			b.wills.heard[rec.Node] = time.Now()
			if rec.Revoke == b.opts.NodeID+"/"+b.wills.inc && f != nil && (f.waiting || !f.publishing) {
				delete(b.wills.fire, id) // not published: it is not
			}
		}
		return nil, ""
	}
	if rec.Claim == "" {
		delete(b.wills.fire, id)
		if i < 0 {
			return nil, ""
		}
		b.dropOwnerLocked(list[i].node)
		if len(list) == 1 {
			delete(b.wills.owed, rec.ClientID)
		} else {
			b.wills.owed[rec.ClientID] = append(list[:i:i], list[i+1:]...)
		}
		return nil, ""
	}
	if i < 0 || list[i].claim != rec.ClaimPrev {
		// Settled already, or another claim came first.
		if !mine {
			return nil, ""
		}
		if i >= 0 && list[i].claim == rec.Node+"/"+rec.Claim {
			// The claim that came first is this process's own: a write
			// reported failed was stored, and this is its retry (or a
			// duplicate). The first holds: its firing stays, and this
			// process publishes the will unless it does already.
			if f == nil || f.publishing {
				return nil, ""
			}
			return b.startFiringLocked(f, list[i]), ""
		}
		delete(b.wills.fire, id)
		return nil, ""
	}
	list[i].claim = rec.Node + "/" + rec.Claim
	if list[i].node == b.opts.NodeID && b.holdsLocked(rec.ClientID, id) {
		return nil, list[i].claim
	}
	if !mine || f == nil || f.publishing {
		return nil, ""
	}
	return b.startFiringLocked(f, list[i]), ""
}

// holdsLocked reports whether this process holds the will id of
// clientID: its connection's (or running delay's) or one it owes.
func (b *Backend) holdsLocked(clientID, id string) bool {
	return b.wills.ids[clientID].id == id ||
		slices.ContainsFunc(b.wills.owing[clientID], func(r willRef) bool { return r.id == id })
}

// startFiringLocked marks f, this process's claim on the owed will e
// that holds, publishing, and returns the will to publish. A will of
// another node waits for that node to revoke the claim first
// (claimGrace).
func (b *Backend) startFiringLocked(f *firing, e owedWill) *willRecord {
	f.publishing = true
	f.waiting = e.node != b.opts.NodeID
	return e.w
}
