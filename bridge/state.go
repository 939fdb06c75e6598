package bridge

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// retainedEntry is the latest retained record of one MQTT topic; msg is
// nil after a delete (kept so that an older record does not resurrect it).
// origin is the offset of the record that set the state (a refresh copy,
// compact.go, names it in PropRefreshOf); off and stored are where and
// when (broker store time, unix ms) its newest copy went; due: a refresh
// of an older state was stored after this one, so this state is written
// again (also a delete) to come after it.
type retainedEntry struct {
	msg    *mqtt.Message
	q      client.MessageQueue
	off    int64
	origin int64
	stored int64
	due    bool
}

// applyRetained records a retained message (latest per topic by queue
// offset; an empty payload deletes). origin is the offset of the record
// whose state it carries: off for a record of a publish, the original's
// for a refresh copy (compact.go). A copy of an older state than the
// entry's does not change it; one stored after the entry's state was set
// marks that state due for a refresh of its own.
func (b *Backend) applyRetained(m *mqtt.Message, q client.MessageQueue, off, origin, stored int64) {
	b.mu.Lock()
	defer b.mu.Unlock()
	if e := b.retained[m.Topic]; e != nil && e.q == q {
		switch {
		case e.off >= off:
			return
		case e.origin > origin:
			if e.origin < off {
				e.due = true // a stale copy after this state: write it again
			}
			return
		case e.origin == origin:
			e.off, e.stored, e.due = off, stored, false
			return
		}
	}
	e := &retainedEntry{q: q, off: off, origin: origin, stored: stored}
	if len(m.Payload) > 0 {
		rm := *m
		rm.Retain = true
		e.msg = &rm
	}
	b.retained[m.Topic] = e
}

// Retained implements mqtt.Backend from the node's copy of the retained
// topic.
func (b *Backend) Retained(_ context.Context, filter string) ([]*mqtt.Message, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	var out []*mqtt.Message
	for topic, e := range b.retained {
		if e.msg == nil {
			continue
		}
		if !e.msg.Expiry.IsZero() && !now.Before(e.msg.Expiry) {
			e.msg = nil
			continue
		}
		if packets.Match(filter, topic) {
			out = append(out, e.msg)
		}
	}
	return out, nil
}

// RetainedCount implements mqtt.RetainedCounter: the retained messages
// of the node's copy (deletions and expired ones not counted).
func (b *Backend) RetainedCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	n := 0
	for _, e := range b.retained {
		if e.msg != nil && (e.msg.Expiry.IsZero() || now.Before(e.msg.Expiry)) {
			n++
		}
	}
	return n
}

// tailSys applies every record of the session and retained topics, from
// the start of the log, for the node's lifetime.
func (b *Backend) tailSys(c *client.PullConsumer) {
	defer b.wg.Done()
	for {
		msgs, err := c.Poll(b.ctx)
		if err != nil {
			if b.ctx.Err() != nil || errors.Is(err, client.ErrClosed) {
				return
			}
			b.log.Warn("bridge: poll system topics", "err", err)
			continue
		}
		for _, x := range msgs {
			b.applySys(x)
		}
	}
}

func (b *Backend) applySys(x *client.MessageExt) {
	switch x.Topic {
	case b.opts.RetainedTopic:
		b.applyRetained(fromBroker(x), x.Queue, x.QueueOffset, refreshOrigin(x), x.StoreTimestamp)
	case b.opts.SessionTopic:
		rec, err := decodeSessionRecord(x.Body)
		if err == nil && b.testBeforeApply != nil {
			b.testBeforeApply(rec)
		}
		switch {
		case err != nil:
			b.log.Warn("bridge: skipping session record", "queue", x.Queue, "offset", x.QueueOffset, "err", err)
		case rec.WillDone != "":
			// Settles a stored will; no session state (will.go).
			b.mu.Lock()
			w, revoke := b.applyWillDoneLocked(rec)
			b.mu.Unlock()
			if w != nil {
				b.publishOrphan(rec.ClientID, w)
			}
			if revoke != "" {
				b.revokeClaim(rec.ClientID, rec.WillDone, revoke)
			}
		default:
			rec.q, rec.off, rec.stored = x.Queue, x.QueueOffset, x.StoreTimestamp
			b.mu.Lock()
			if rec.RefreshOf != nil && b.applySessionCopyLocked(rec) {
				// A copy of the state the node holds, or of an older one.
				b.sysNext[x.Queue] = max(b.sysNext[x.Queue], x.QueueOffset+1)
				b.mu.Unlock()
				break
			}
			if own := b.own[rec.ClientID]; own != nil && own.q == rec.q && own.off == rec.off {
				rec = own // this node's record: one copy, not two
			}
			if len(b.waits[rec.ClientID]) > 0 {
				if rec.Node == b.opts.NodeID && rec.Connect && !rec.Deleted {
					// This node's connect request: Backend.connect
					// wants the record before it.
					b.connectPrev[sysPos{rec.q, rec.off}] = b.sessions[rec.ClientID]
				}
				b.noteWaitsLocked(rec)
			}
			prev := b.sessions[rec.ClientID]
			b.applySessionLocked(rec, true)
			b.copies.noteLocked(prev, b.sessions[rec.ClientID], rec, x.StoreTimestamp)
			b.applyWillsLocked(rec)
			// Together with the apply: writeSession keeps no tombstone
			// of a delete the tail has passed.
			b.sysNext[x.Queue] = max(b.sysNext[x.Queue], x.QueueOffset+1)
			b.mu.Unlock()
			b.onSessionRecord(rec)
		}
	}
	b.mu.Lock()
	b.sysNext[x.Queue] = max(b.sysNext[x.Queue], x.QueueOffset+1)
	b.mu.Unlock()
	b.applied.Notify()
}

// catchUpSys waits until the node applied every record stored so far in
// topics (the session and/or retained topic).
func (b *Backend) catchUpSys(ctx context.Context, topics ...string) error {
	target := map[client.MessageQueue]int64{}
	for _, t := range topics {
		stats, err := b.adm.TopicStats(ctx, t)
		if err != nil {
			return err
		}
		for _, s := range stats {
			if s.MaxOffset > s.MinOffset {
				target[s.Queue] = s.MaxOffset
			}
		}
	}
	for {
		ch := b.applied.Wait()
		done := true
		b.mu.Lock()
		for q, off := range target {
			if b.sysNext[q] < off {
				done = false
				break
			}
		}
		b.mu.Unlock()
		if done {
			return nil
		}
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-ch:
		}
	}
}

// sessionRecord is one change of a session, stored as JSON in the session
// topic (format in doc.go).
type sessionRecord struct {
	ClientID string `json:"clientId"`
	Node     string `json:"node"`
	Deleted  bool   `json:"deleted,omitempty"`
	Online   bool   `json:"online,omitempty"`
	Connect  bool   `json:"connect,omitempty"`
	// vouch: once stored, the record stands for the local session inst
	// (takeover.go); tailOnly: the writer does not apply the record
	// itself, its tail does (a connect request, see Backend.connect).
	// Neither is part of the JSON; next to the other flags, they keep
	// the struct small.
	vouch    bool
	tailOnly bool
	Gen      int64 `json:"gen,omitempty"`
	// Since: on a node's offline save of its local session, 1 + the
	// offset where that session last went live on the node (its connect
	// request, clean-start announcement or first claim): a record of
	// another node stored after that offset, and before the save, is
	// newer than the save (applySessionLocked). 0: unknown.
	Since          int64           `json:"since,omitempty"`
	Username       string          `json:"username,omitempty"`
	Subscriptions  []subRecord     `json:"subscriptions,omitempty"`
	ExpiryMs       int64           `json:"expiryMs"`
	DisconnectedAt int64           `json:"disconnectedAtMs,omitempty"`
	Resume         []resumePoint   `json:"resume,omitempty"`
	Pending        []pendingRecord `json:"pending,omitempty"`
	// Released: packet ids awaiting PUBCOMP (mqtt.SessionState.Released).
	Released []uint16 `json:"released,omitempty"`
	// Received: inbound QoS 2 packet ids awaiting PUBREL
	// (mqtt.SessionState.Received).
	Received []uint16 `json:"received,omitempty"`
	// Will: the will of the connection a record of a connected session
	// stands for (will.go).
	Will *willRecord `json:"will,omitempty"`
	// WillDone: a will-done marker, no session state (will.go). With
	// Claim (the writing process's id) it is a claim to publish the
	// will, taking over the claim ClaimPrev ("node/process"; none: "").
	WillDone  string `json:"willDone,omitempty"`
	Claim     string `json:"claim,omitempty"`
	ClaimPrev string `json:"claimPrev,omitempty"`
	// Revoke: with WillDone, the will's own node, alive and holding the
	// will, voids the claim Revoke ("node/process") on it (will.go).
	Revoke string `json:"revoke,omitempty"`
	// Owe: with WillDone and Will, the node owes that will (its publish
	// failed; the node tries it again): no later record of the node
	// settles it, only its will-done marker (will.go).
	Owe bool `json:"owe,omitempty"`
	// Prepared: the record PrepareSessionReplacing wrote for a client
	// that had not connected, naming who it was prepared for
	// (Replacer.Tag; the IoT hub: the identity's generation id). Absent
	// on the records of connections, on untagged prepared records and on
	// those of earlier versions (never replaced by a tag then).
	Prepared string `json:"prepared,omitempty"`
	// Owner: on the records of a connection, the owner of the client id
	// the connection was for (Backend.SetOwnerTag; the IoT hub: the
	// generation id of the device identity it authenticated as). Absent
	// when unknown, on prepared records and on those of earlier
	// versions (judged by when they ended then).
	Owner string `json:"owner,omitempty"`
	// RefreshOf: a copy written by compaction (compact.go) of the
	// record at that offset of the same queue, whose state it carries.
	RefreshOf *int64 `json:"refreshOf,omitempty"`

	q    client.MessageQueue
	off  int64
	inst uint64 // with vouch
	// taken orders the client's records by when their state was taken
	// (writeSession); snap: an online snapshot, dropped unwritten when a
	// record of later state was written first.
	taken uint64
	snap  bool
	// ended: the offline save of a connection that ended (SaveSession),
	// not written when a newer connection of the client holds the
	// session on this node by the time it would be.
	ended bool
	// stored is the broker's store time of a record read by the tail
	// (unix ms; 0 for this node's own records applied ahead of it).
	stored int64
}

// applySessionLocked makes rec the current record of its client unless a
// later one of the same queue is already applied. The tail (fromTail)
// applies records in queue order; this node applies its own records as
// soon as they are stored (writeSession), ahead of its tail. A delete
// applied by the tail removes the client's entry: b.sessions holds live
// records only, so a node keeps no state for clients that merely passed
// through the log. A delete this node applied itself stays as a tombstone
// until the tail reaches it, so that the older records the tail applies
// meanwhile do not resurrect the session.
//
// A handoff (Gen > 0) carries the session as its node had it when it
// answered the connect request at offset Gen-1. Another node's record of
// the session's state stored after that request (not a connect request
// or announcement: the state of a connection that resumed or started
// there, say, one that did not wait for the handoff) is newer than the
// handoff even when the handoff is stored after it, and stays the
// client's current record.
func (b *Backend) applySessionLocked(rec *sessionRecord, fromTail bool) {
	cur := b.sessions[rec.ClientID]
	if cur != nil && cur.q == rec.q && cur.off > rec.off && !cur.lateSaveAfter(rec) {
		// Older, unless cur is a late save of rec's session (applied by
		// its own node ahead of the tail that brings rec).
		return
	}
	if rec.Gen > 0 && cur != nil && cur.q == rec.q && cur.off >= rec.Gen && cur.Node != rec.Node && !cur.Connect {
		return
	}
	if cur != nil && rec.lateSaveAfter(cur) {
		return
	}
	switch {
	case fromTail && cur != nil && cur.q == rec.q && cur.off == rec.off && !cur.Deleted:
		// The tail reached the record this node applied itself: keep it.
	case rec.Deleted && !rec.keptAnnouncement() && (fromTail || b.sysNext[rec.q] > rec.off):
		// Applied by the tail, or this node's delete that its tail has
		// passed already (the tail can be quicker than the send's
		// response): no tombstone.
		delete(b.sessions, rec.ClientID)
	default:
		b.sessions[rec.ClientID] = rec
	}
}

// lateSaveAfter reports whether r is a late save with respect to other:
// r carries the state of a session that went live on its node at
// Since-1, and other, a record of another node stored after that but
// before r (a clean start, a resume, a claim there), says the session
// went on elsewhere while r was on its way, so r is the older state. The
// handoff that answered the session's own connect request (its Gen is
// Since) is where the session came from, not where it went.
func (r *sessionRecord) lateSaveAfter(other *sessionRecord) bool {
	return r.Since > 0 && other.q == r.q && other.Node != r.Node && other.off >= r.Since && other.off < r.off && other.Gen != r.Since
}

// keptAnnouncement reports whether rec is the clean-start announcement
// of a session with an expiry: unlike other deletes, nodes keep it as the
// client's latest record while nothing newer comes, since the session it
// announces may be connected or handed on (a connect of another node
// waits for the handoff, as after an online claim). Its own node ends it
// with a delete when the session ends before writing any other record.
func (r *sessionRecord) keptAnnouncement() bool { return r.Connect && r.Deleted && r.ExpiryMs > 0 }

type subRecord struct {
	Filter            string `json:"filter"`
	QoS               byte   `json:"qos"`
	NoLocal           bool   `json:"noLocal,omitempty"`
	RetainAsPublished bool   `json:"rap,omitempty"`
	RetainHandling    byte   `json:"rh,omitempty"`
	Identifier        uint32 `json:"id,omitempty"`
}

// resumePoint is where the replay of one queue starts (From) and from where
// any message matching the subscriptions is replayed (Live); between the
// two only the listed pending offsets are.
type resumePoint struct {
	Topic   string  `json:"topic"`
	Broker  string  `json:"broker"`
	Queue   int32   `json:"queue"`
	From    int64   `json:"from"`
	Live    int64   `json:"live"`
	Pending []int64 `json:"pending,omitempty"`
	// Sent are those of Pending that went out to the client before
	// (redelivered with DUP), SentIDs their packet ids, in the same order
	// (0: unknown).
	Sent    []int64  `json:"sent,omitempty"`
	SentIDs []uint16 `json:"sentIds,omitempty"`
	// Prev is the message at From-1 as the node delivered it, when it
	// knew it: a resume tells from it whether the queue gave offsets
	// below From again (sessions_reused.go).
	Prev *prevRecord `json:"prev,omitempty"`
}

func (r resumePoint) mq() client.MessageQueue {
	return client.MessageQueue{Topic: r.Topic, BrokerName: r.Broker, QueueID: r.Queue}
}

// pendingRecord is a pending message that did not come from the log
// (retained deliveries, SendTo): stored whole, with what its delivery to
// the session carries (QoS is the QoS it is delivered at).
type pendingRecord struct {
	Topic           string              `json:"topic"`
	Payload         []byte              `json:"payload,omitempty"`
	QoS             byte                `json:"qos"`
	Retain          bool                `json:"retain,omitempty"`
	SubIDs          []uint32            `json:"subIds,omitempty"`
	Sent            bool                `json:"sent,omitempty"`
	ID              uint16              `json:"id,omitempty"` // packet id, with Sent
	HasFormat       bool                `json:"hasFormat,omitempty"`
	Format          byte                `json:"format,omitempty"`
	ContentType     string              `json:"contentType,omitempty"`
	ResponseTopic   string              `json:"responseTopic,omitempty"`
	CorrelationData []byte              `json:"correlationData,omitempty"`
	User            []mqtt.UserProperty `json:"user,omitempty"`
	ExpiryAt        int64               `json:"expiryAtMs,omitempty"`
	ClientID        string              `json:"clientId,omitempty"`
}

func decodeSessionRecord(b []byte) (*sessionRecord, error) {
	var r sessionRecord
	if err := json.Unmarshal(b, &r); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrBadRecord, err)
	}
	if r.ClientID == "" {
		return nil, fmt.Errorf("%w: no client id", ErrBadRecord)
	}
	return &r, nil
}

func pendingOf(pm mqtt.Pending) pendingRecord {
	m := pm.Msg
	qos := pm.QoS
	if qos == 0 {
		qos = m.QoS
	}
	p := pendingRecord{Topic: m.Topic, Payload: m.Payload, QoS: qos, Retain: pm.Retain, SubIDs: pm.SubIDs, Sent: pm.Sent, ID: pm.PacketID,
		HasFormat: m.HasPayloadFormat, Format: m.PayloadFormat, ContentType: m.ContentType, ResponseTopic: m.ResponseTopic,
		CorrelationData: m.CorrelationData, User: m.User, ClientID: m.ClientID}
	if !m.Expiry.IsZero() {
		p.ExpiryAt = m.Expiry.UnixMilli()
	}
	return p
}

func (p *pendingRecord) pending() mqtt.Pending {
	m := &mqtt.Message{Topic: p.Topic, Payload: p.Payload, QoS: p.QoS, HasPayloadFormat: p.HasFormat, PayloadFormat: p.Format,
		ContentType: p.ContentType, ResponseTopic: p.ResponseTopic, CorrelationData: p.CorrelationData, User: p.User, ClientID: p.ClientID}
	if p.ExpiryAt > 0 {
		m.Expiry = time.UnixMilli(p.ExpiryAt)
	}
	// A record is input from a shared topic: keep the QoS a valid one.
	return mqtt.Pending{Msg: m, QoS: min(max(p.QoS, 1), 2), Retain: p.Retain, SubIDs: p.SubIDs, Sent: p.Sent, PacketID: p.ID}
}
