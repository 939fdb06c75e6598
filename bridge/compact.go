package bridge

import (
	"context"
	"hash/fnv"
	"slices"
	"strconv"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
)

// Compaction by re-appending. The retained and session topics are
// ordinary topics under the brokers' retention (store.file_reserved_time):
// a record older than that goes with its segment. A live record (the
// retained message of a topic, the latest record of an offline session
// with expiry left) whose newest copy is older than Options.RefreshAge is
// written again, unchanged in meaning, with the offset of the record
// whose state it carries (its origin: PropRefreshOf on a retained record,
// "refreshOf" on a session record). Readers order states by origin, so a
// copy never takes back a newer state: one stored after a newer record of
// its key (a race between the copy's write and a publish or connect)
// changes nothing, and makes the newer state due for a copy of its own,
// written after the stale one (also a delete), so that a replay that lost
// the newer original to retention still ends at the newer state.

// PropRefreshOf marks a retained record written again by compaction: the
// queue offset of the record whose state it carries (decimal).
const PropRefreshOf = "MQTT_REFRESH_OF"

// refreshPerSecond bounds the copies one node writes per second, so that
// a million retained topics do not flood the brokers at once.
const refreshPerSecond = 1000

// refreshOrigin is the origin of a retained record: PropRefreshOf for a
// copy, else its own offset.
func refreshOrigin(x *client.MessageExt) int64 {
	if v, ok := x.Properties[PropRefreshOf]; ok {
		if o, err := strconv.ParseInt(v, 10, 64); err == nil && o >= 0 && o < x.QueueOffset {
			return o
		}
	}
	return x.QueueOffset
}

// refreshScan is how often a node looks for records due for a copy.
func (o *Options) refreshScan() time.Duration {
	return min(max(o.RefreshAge/8, 100*time.Millisecond), 5*time.Minute)
}

// refreshPlan decides which node copies which key: the owner of a key is
// picked by the key's FNV-1a hash among the bridge nodes the registries
// list (sorted, this node included); the owner copies a record once its
// newest copy is RefreshAge old, every other node once it is half as old
// again (its owner died, or the lists disagree: copies are idempotent).
type refreshPlan struct {
	self  string
	nodes []string
	age   time.Duration
	now   time.Time
}

func newRefreshPlan(self string, listed []string, age time.Duration, now time.Time) refreshPlan {
	nodes := append([]string{self}, listed...)
	slices.Sort(nodes)
	return refreshPlan{self: self, nodes: slices.Compact(nodes), age: age, now: now}
}

func (p refreshPlan) owner(key string) string {
	h := fnv.New64a()
	h.Write([]byte(key))
	return p.nodes[h.Sum64()%uint64(len(p.nodes))]
}

// due reports whether this node copies key's record, stored at stored
// (unix ms) now.
func (p refreshPlan) due(key string, stored int64) bool {
	age := p.now.Sub(time.UnixMilli(stored))
	if p.owner(key) == p.self {
		return age >= p.age
	}
	return age >= p.age+p.age/2
}

// pacer spaces writes to at most n per second.
type pacer struct {
	n     int
	start time.Time
	done  int
}

// wait blocks until one more write fits (false when ctx ended).
func (p *pacer) wait(ctx context.Context) bool {
	now := time.Now()
	if p.start.IsZero() || now.Sub(p.start) >= time.Second {
		p.start, p.done = now, 0
	}
	if p.done >= p.n {
		t := time.NewTimer(time.Second - now.Sub(p.start))
		defer t.Stop()
		select {
		case <-ctx.Done():
			return false
		case <-t.C:
		}
		p.start, p.done = time.Now(), 0
	}
	p.done++
	return true
}

// refreshLoop copies the records due for it every refreshScan, for the
// node's lifetime.
func (b *Backend) refreshLoop() {
	defer b.wg.Done()
	t := time.NewTicker(b.opts.refreshScan())
	defer t.Stop()
	pace := &pacer{n: refreshPerSecond}
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
		ctx, cancel := context.WithTimeout(b.ctx, b.opts.SendTimeout)
		listed, err := b.BridgeNodes(ctx)
		cancel()
		if err != nil {
			b.log.Debug("bridge: bridge nodes for compaction", "err", err)
		}
		if b.testNodesHook != nil {
			listed = b.testNodesHook(listed)
		}
		plan := newRefreshPlan(b.opts.NodeID, listed, b.opts.RefreshAge, time.Now())
		b.refreshRetained(plan, pace)
		b.refreshSessions(plan, pace)
	}
}

// retainedCopy is a retained topic's state due for a copy.
type retainedCopy struct {
	topic  string
	msg    *mqtt.Message // nil: a delete
	origin int64
}

// refreshRetained writes a copy of every retained state due for one.
func (b *Backend) refreshRetained(plan refreshPlan, pace *pacer) {
	var todo []retainedCopy
	b.mu.Lock()
	for topic, e := range b.retained {
		if e.msg != nil && !e.msg.Expiry.IsZero() && !plan.now.Before(e.msg.Expiry) {
			continue // expired: it dies
		}
		if e.due || e.msg != nil && plan.due(topic, e.stored) {
			todo = append(todo, retainedCopy{topic, e.msg, e.origin})
		}
	}
	b.mu.Unlock()
	for _, c := range todo {
		if !pace.wait(b.ctx) {
			return
		}
		b.mu.Lock()
		e := b.retained[c.topic]
		current := e != nil && e.origin == c.origin
		b.mu.Unlock()
		if !current {
			continue // a newer state came meanwhile
		}
		m := c.msg
		if m == nil {
			m = &mqtt.Message{Topic: c.topic, Retain: true}
		}
		cm, err := toBroker(m, b.opts.RetainedTopic)
		if err != nil {
			continue // stored once, so encodable; never happens
		}
		cm.Properties[PropRefreshOf] = strconv.FormatInt(c.origin, 10)
		ctx, cancel := context.WithTimeout(b.ctx, b.opts.SendTimeout)
		res, err := b.prod.SendOrderly(ctx, cm, c.topic, client.HashSelector)
		cancel()
		if err != nil {
			if b.ctx.Err() == nil {
				b.log.Warn("bridge: retained message copy; the next scan tries again", "topic", c.topic, "err", err)
			}
			return // the brokers are away: not one timeout per key
		}
		b.applyRetained(m, res.Queue, res.QueueOffset, c.origin, time.Now().UnixMilli())
	}
}

// goneKeep is how long a node remembers a session's delete (its tail
// applied it) to tell a copy of an older state stored after it, which
// races with the delete by at most a send.
const goneKeep = 10 * time.Minute

// sessionCopies is the compaction state of the session topic: when the
// newest copy of each client's current record was stored, which states
// are due for a copy because a stale one was stored after them, and the
// recent deletes.
type sessionCopies struct {
	at   map[string]int64 // client id -> store time of its record's newest copy (unix ms)
	due  map[string]bool
	gone map[string]goneMark
}

// goneMark is a delete of a session: its queue and origin, its node, when
// the tail applied it, and whether a stale copy came after it.
type goneMark struct {
	q    client.MessageQueue
	off  int64
	node string
	seen time.Time
	due  bool
}

func newSessionCopies() sessionCopies {
	return sessionCopies{at: map[string]int64{}, due: map[string]bool{}, gone: map[string]goneMark{}}
}

// origin is the offset of the record whose state r carries.
func (r *sessionRecord) origin() int64 {
	if r.RefreshOf != nil {
		return *r.RefreshOf
	}
	return r.off
}

// noteLocked follows the tail's apply of rec: prev and cur are the
// client's record before and after it (cur nil: the session ended),
// stored rec's store time. The end of a session that had a record is
// remembered for goneKeep (a clean session's leaves nothing).
func (c *sessionCopies) noteLocked(prev, cur, rec *sessionRecord, stored int64) {
	id := rec.ClientID
	if cur == nil {
		delete(c.at, id)
		delete(c.due, id)
		if rec.Deleted && prev != nil {
			c.gone[id] = goneMark{q: rec.q, off: rec.origin(), node: rec.Node, seen: time.Now()}
		}
		return
	}
	if cur.q != rec.q || cur.off != rec.off {
		return
	}
	delete(c.gone, id)
	delete(c.due, id)
	c.at[id] = stored
}

// applySessionCopyLocked takes a copy (rec.RefreshOf set) the tail read:
// true when it changes no state (a copy of the client's current state,
// which only moves its copy's time on, or of an older one, which marks
// the newer state due for a copy when stored after it); false when it
// carries a state newer than the node knows (its original was deleted by
// retention), which the node then applies as a record.
func (b *Backend) applySessionCopyLocked(rec *sessionRecord) bool {
	id, o := rec.ClientID, *rec.RefreshOf
	if o < 0 || o >= rec.off {
		return true // not a copy of an earlier record: ignored
	}
	if cur := b.sessions[id]; cur != nil && cur.q == rec.q {
		switch co := cur.origin(); {
		case co == o:
			b.copies.at[id] = rec.stored
			delete(b.copies.due, id)
			return true
		case co > o:
			if co < rec.off {
				b.copies.due[id] = true
			}
			return true
		}
		return false
	}
	if g, ok := b.copies.gone[id]; ok && g.q == rec.q && g.off > o {
		if g.off < rec.off {
			g.due = true
			b.copies.gone[id] = g
		}
		return true
	}
	return false
}

// copyable reports whether r is a record compaction copies: the latest
// record of an offline session (an offline save, a handoff, a prepared
// session) whose expiry has not passed. Records of connected sessions
// and expired sessions are not copied.
func copyable(r *sessionRecord, now time.Time) bool {
	return !r.Deleted && !r.Online && !r.Connect && r.ExpiryMs > 0 && !expiredAt(r, now)
}

// sessionCopy is a session record copy to write.
type sessionCopy struct {
	id     string
	q      client.MessageQueue
	origin int64
	msg    *client.Message
}

// refreshSessions writes a copy of every session record due for one,
// and of the deletes a stale copy came after.
func (b *Backend) refreshSessions(plan refreshPlan, pace *pacer) {
	var todo []sessionCopy
	add := func(rec *sessionRecord, q client.MessageQueue, origin int64) {
		rec.RefreshOf = &origin
		m, err := b.sessionMessage(rec)
		if err != nil {
			return // decoded from JSON, so encodable; never happens
		}
		todo = append(todo, sessionCopy{rec.ClientID, q, origin, m})
	}
	b.mu.Lock()
	for id, at := range b.copies.at {
		cur := b.sessions[id]
		if cur == nil {
			delete(b.copies.at, id)
			delete(b.copies.due, id)
			continue
		}
		if copyable(cur, plan.now) && (b.copies.due[id] || plan.due(id, at)) {
			c := *cur
			c.Will = nil // a will still owed is not carried (doc.go)
			add(&c, cur.q, cur.origin())
		}
	}
	for id, g := range b.copies.gone {
		switch {
		case g.due:
			add(&sessionRecord{ClientID: id, Node: g.node, Deleted: true}, g.q, g.off)
		case plan.now.Sub(g.seen) > goneKeep:
			delete(b.copies.gone, id)
		}
	}
	b.mu.Unlock()
	for _, c := range todo {
		if !pace.wait(b.ctx) {
			return
		}
		b.mu.Lock()
		cur, g := b.sessions[c.id], b.copies.gone[c.id]
		current := cur != nil && cur.q == c.q && cur.origin() == c.origin || cur == nil && g.due && g.off == c.origin
		b.mu.Unlock()
		if !current {
			continue // a newer state came meanwhile
		}
		ctx, cancel := context.WithTimeout(b.ctx, b.opts.SendTimeout)
		_, err := b.prod.SendOrderly(ctx, c.msg, c.id, client.HashSelector)
		cancel()
		if err != nil {
			if b.ctx.Err() == nil {
				b.log.Warn("bridge: session record copy; the next scan tries again", "client", c.id, "err", err)
			}
			return // the brokers are away: not one timeout per key
		}
		b.mu.Lock()
		if cur := b.sessions[c.id]; cur != nil && cur.origin() == c.origin {
			b.copies.at[c.id] = time.Now().UnixMilli()
			delete(b.copies.due, c.id)
		} else if g, ok := b.copies.gone[c.id]; ok && g.off == c.origin {
			g.due, g.seen = false, time.Now()
			b.copies.gone[c.id] = g
		}
		b.mu.Unlock()
	}
}
