package amqp

import (
	"encoding/binary"
	"strconv"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// priority is md's priority level in q: its priority property capped at
// x-max-priority; 0 when the queue has no priorities.
func (q *queue) priority(md *msgData) uint8 {
	if q.qa.maxPrio == 0 || propFlags(md.props)&wire.FlagPriority == 0 {
		return 0
	}
	p, err := wire.DecodeProperties(md.props)
	if err != nil {
		return 0
	}
	return min(p.Priority, q.qa.maxPrio)
}

func propFlags(raw []byte) uint16 {
	if len(raw) < 2 {
		return 0
	}
	return binary.BigEndian.Uint16(raw)
}

func (ch *channel) startPublish(m *wire.BasicPublish) *amqpError {
	if m.Immediate {
		return connErr(wire.NotImplemented, m, "immediate=true")
	}
	ch.pub = m
	ch.header = false
	return nil
}

// publish routes a complete message (basic.publish with its content).
func (ch *channel) publish(pub *wire.BasicPublish, props, body []byte) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	vh := ch.c.vh
	x := vh.exchanges[pub.Exchange]
	if x == nil {
		return chErr(wire.NotFound, pub, "no exchange '%s' in vhost '%s'", pub.Exchange, vh.name)
	}
	if x.internal {
		return chErr(wire.AccessRefused, pub, "cannot publish to internal exchange '%s' in vhost '%s'", pub.Exchange, vh.name)
	}
	md := &msgData{exchange: pub.Exchange, key: pub.RoutingKey, props: props, body: body}
	if ch.tx {
		ch.txPubs = append(ch.txPubs, txPublish{x: x, mandatory: pub.Mandatory, m: md})
		return nil
	}
	s.publishTo(ch, x, pub.Mandatory, md, false, nil)
	return nil
}

// publishTo routes md from x into its queues; a mandatory message no
// queue takes is returned (312 NO_ROUTE). Under confirms the channel gets
// the next sequence number's ack or nack when every queue has it.
// Server.mu held.
// A tx.commit passes its own conf, which counts this publish's stores.
func (s *Server) publishTo(ch *channel, x *exchange, mandatory bool, md *msgData, async bool, conf *pubConfirm) {
	if conf != nil {
		conf.remaining++
	} else if ch.confirm && ch.confirms != nil {
		conf = ch.confirms.next(ch)
	}
	s.stats.Published++
	rc := routeCtx{key: md.key, md: md}
	x.route(&rc)
	if len(rc.queues) == 0 {
		if ae := x.alternate(); ae != nil {
			ae.route(&rc)
		}
	}
	if len(rc.queues) == 0 {
		if mandatory {
			b := wire.AppendMethodFrame(nil, ch.id, &wire.BasicReturn{ReplyCode: wire.NoRoute, ReplyText: "NO_ROUTE",
				Exchange: md.exchange, RoutingKey: md.key})
			ch.c.out.push(appendContent(b, ch.id, ch.c.frameMax, md))
			s.stats.Returned++
		}
	}
	ttl := md.ttl()
	for _, q := range rc.queues {
		s.enqueue(ch, q, md, conf, ttl)
	}
	if conf != nil {
		s.confirmStep(conf, false, async)
	}
}

// alternate is the exchange's alternate-exchange argument, if it exists.
func (x *exchange) alternate() *exchange {
	name, ok := stringArg(x.args["alternate-exchange"])
	if !ok {
		return nil
	}
	return x.vh.exchanges[name]
}

// ttl is the message's expiration property in milliseconds, -1 when it
// has none or it is not a non-negative integer.
func (m *msgData) ttl() int64 {
	if propFlags(m.props)&wire.FlagExpiration == 0 {
		return -1
	}
	p, err := wire.DecodeProperties(m.props)
	if err != nil {
		return -1
	}
	n, err := strconv.ParseInt(p.Expiration, 10, 64)
	if err != nil || n < 0 {
		return -1
	}
	return n
}

// enqueue adds md, published on ch (nil when dead-lettered), to q,
// applying the queue's length limits; a durable queue also stores it.
// Server.mu held.
func (s *Server) enqueue(ch *channel, q *queue, md *msgData, conf *pubConfirm, msgTTL int64) {
	if q.deleted {
		return
	}
	overflow := q.qa.overflow != overflowDropHead &&
		(q.qa.maxLen >= 0 && int64(q.count()) >= q.qa.maxLen ||
			q.qa.maxBytes >= 0 && q.readyBytes+md.size() > q.qa.maxBytes)
	if overflow || q.readyBytes+md.size() > s.opts.MaxQueueBytes {
		s.stats.Dropped++
		if conf != nil {
			conf.nack = true
		}
		if overflow && q.qa.overflow == overflowRejectPublishDLX {
			s.deadLetter(q, &qmsg{m: md}, "maxlen")
		}
		return
	}
	qm := &qmsg{m: md, prio: q.priority(md)}
	q.counts.published++
	if msgTTL >= 0 || q.qa.ttl >= 0 {
		qm.expireAt = q.expiry(time.Now(), msgTTL)
		if msgTTL >= 0 {
			s.addTimedLocked(q)
		}
	}
	if q.dur != nil {
		// Deliverable at once, as in RabbitMQ; the confirm waits for the
		// log.
		if conf != nil {
			conf.remaining++
		}
		s.durable.append(ch, q, qm, conf)
	}
	s.addReady(q, qm)
}

// addReady makes qm deliverable: drop-head overflow applies, then
// consumers get it. Server.mu held.
func (s *Server) addReady(q *queue, qm *qmsg) {
	q.nextSeq++
	qm.seq = q.nextSeq
	q.pushReady(qm)
	if q.qa.overflow == overflowDropHead {
		for q.readyLen() > 0 && (q.qa.maxLen >= 0 && int64(q.count()) > q.qa.maxLen ||
			q.qa.maxBytes >= 0 && q.readyBytes > q.qa.maxBytes) {
			s.deadLetter(q, q.pop(), "maxlen")
		}
	}
	s.dispatchFresh(q, qm)
}

// deadLetter takes m out of q for reason ("rejected", "expired",
// "maxlen"): with x-dead-letter-exchange it is republished there with an
// x-death header; otherwise it is dropped. Server.mu held.
func (s *Server) deadLetter(q *queue, m *qmsg, reason string) {
	s.messageGone(q, m)
	if !q.qa.hasDLX {
		if reason != "rejected" {
			s.stats.Dropped++
		}
		return
	}
	x := q.vh.exchanges[q.qa.dlx]
	if x == nil {
		s.stats.Dropped++
		return
	}
	key := m.m.key
	if q.qa.hasDLRK {
		key = q.qa.dlrk
	}
	props, deaths, err := withDeath(m.m, q, reason)
	if err != nil {
		s.stats.Dropped++
		return
	}
	if n := wire.ContentHeaderFrameSize(props); n > int(s.opts.FrameMax) {
		// With its x-death header the message no longer fits a frame
		// of any connection: dropped rather than made undeliverable.
		s.stats.Dropped++
		s.logLimited("amqp: a dead-lettered message is dropped: with its x-death header its content header exceeds frame_max",
			"queue", q.name, "reason", reason, "dead_letter_exchange", x.name, "header_bytes", n, "frame_max", s.opts.FrameMax)
		return
	}
	md := &msgData{exchange: x.name, key: key, props: props, body: m.m.body}
	rc := routeCtx{key: key, md: md}
	x.route(&rc)
	ttl := md.ttl()
	for _, t := range rc.queues {
		if reason != "rejected" && deaths[t.name] {
			continue // a cycle without rejection: RabbitMQ drops it too
		}
		s.enqueue(nil, t, md, nil, ttl)
	}
}

// withDeath returns m's properties with the x-death entry for (q,
// reason) added or counted, and the queues the message died in before.
func withDeath(m *msgData, q *queue, reason string) ([]byte, map[string]bool, error) {
	p, err := wire.DecodeProperties(m.props)
	if err != nil {
		return nil, nil, err
	}
	h := wire.Table{}
	for k, v := range p.Headers {
		h[k] = v
	}
	var deaths []any
	if old, ok := h["x-death"].([]any); ok {
		deaths = old
	}
	seen := map[string]bool{}
	var rest []any
	var mine wire.Table
	for _, d := range deaths {
		t, ok := d.(wire.Table)
		if !ok {
			continue
		}
		qn, _ := stringArg(t["queue"])
		seen[qn] = true
		if r, _ := stringArg(t["reason"]); qn == q.name && r == reason && mine == nil {
			mine = t
			continue
		}
		rest = append(rest, t)
	}
	if mine == nil {
		mine = wire.Table{"count": int64(0), "reason": reason, "queue": q.name, "exchange": m.exchange,
			"routing-keys": []any{m.key}}
	} else {
		n, _ := wire.AsInt64(mine["count"])
		nt := wire.Table{}
		for k, v := range mine {
			nt[k] = v
		}
		nt["count"] = n
		mine = nt
	}
	n, _ := wire.AsInt64(mine["count"])
	mine["count"] = n + 1
	mine["time"] = time.Now().Truncate(time.Second)
	h["x-death"] = append([]any{mine}, rest...)
	if _, ok := h["x-first-death-reason"]; !ok {
		h["x-first-death-reason"], h["x-first-death-queue"], h["x-first-death-exchange"] = reason, q.name, m.exchange
	}
	h["x-last-death-reason"], h["x-last-death-queue"], h["x-last-death-exchange"] = reason, q.name, m.exchange
	p.Headers = h
	p.Flags |= wire.FlagHeaders
	// The expiration that made the message die must not kill it again.
	if reason == "expired" {
		p.Expiration = ""
		p.Flags &^= wire.FlagExpiration
	}
	raw, err := wire.AppendProperties(nil, p)
	return raw, seen, err
}
