package mqtt

import (
	"errors"
	"log/slog"
	"slices"
	"strconv"
	"strings"
	"time"
	"unicode/utf8"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// messageFrom builds a Message from a PUBLISH's (or will's) fields.
func messageFrom(topic string, payload []byte, qos byte, retain bool, pr *packets.Properties) *Message {
	m := new(Message)
	fillMessage(m, topic, payload, qos, retain, pr, nil)
	return m
}

// fillMessage sets m (zero) from a PUBLISH's (or will's) fields. The clock
// is read only for a message that expires, once per poller round r (nil:
// not on a poller).
func fillMessage(m *Message, topic string, payload []byte, qos byte, retain bool, pr *packets.Properties, r *Round) {
	m.Topic, m.Payload, m.QoS, m.Retain = topic, payload, qos, retain
	if pr.Present.Has(packets.PropPayloadFormat) {
		m.HasPayloadFormat, m.PayloadFormat = true, pr.PayloadFormat
	}
	if pr.Present.Has(packets.PropMessageExpiry) {
		m.Expiry = r.wallNow().Add(time.Duration(pr.MessageExpiry) * time.Second)
	}
	if pr.Present.Has(packets.PropContentType) {
		m.ContentType = pr.ContentType
	}
	if pr.Present.Has(packets.PropResponseTopic) {
		m.ResponseTopic = pr.ResponseTopic
	}
	if pr.Present.Has(packets.PropCorrelationData) {
		m.CorrelationData = pr.CorrelationData
	}
	m.User = pr.User
}

// ownPublish copies what an aliased PUBLISH (NextScratchAlias) holds into
// memory of its own, its user property list included.
func ownPublish(p *packets.Publish) {
	packets.Detach(p)
	p.Properties.User = slices.Clone(p.Properties.User)
}

// errReason maps a backend or handler error to a PUBACK/PUBREC reason.
func errReason(err error) packets.ReasonCode {
	switch {
	case errors.Is(err, ErrNotAuthorized):
		return packets.ReasonNotAuthorized
	case errors.Is(err, ErrQueueFull), errors.Is(err, ErrQuotaExceeded):
		return packets.ReasonQuotaExceeded
	case errors.Is(err, ErrUnstorable):
		// Valid MQTT the store can never hold (a topic and properties
		// over a record's room): no retry helps, unlike 0x80's failures.
		return packets.ReasonImplementationSpecificError
	}
	return packets.ReasonUnspecifiedError
}

func (c *conn) ackProps(code packets.ReasonCode, detail string) packets.Properties {
	if code == 0 || !c.problemInfo {
		return packets.Properties{}
	}
	return reasonProps(detail)
}

// handlePublish serves a PUBLISH. aliased: p points into the connection's
// input (workInline), valid only until handlePublish returns; only an
// inline handler sees it so, anything else gets a copy.
func (c *conn) handlePublish(p *packets.Publish, aliased bool) {
	s := c.srv
	v5 := c.version == packets.Version5
	if r := c.roundOf(); r != nil {
		r.st.dirty = true
		r.st.received++
		r.st.receivedQoS[min(p.QoS, 2)]++
	} else {
		s.stats.Received.Add(1)
		s.stats.ReceivedQoS[min(p.QoS, 2)].Add(1)
	}
	if v5 && len(p.Properties.SubscriptionIdentifiers) > 0 {
		// MQTT-3.3.4-6: only a server puts subscription identifiers in a
		// PUBLISH.
		c.closeWith(packets.ReasonProtocolError, "a client's PUBLISH carries a subscription identifier", closeServer)
		return
	}
	if aliased && (p.QoS == 2 || p.Properties.Present.Has(packets.PropTopicAlias)) {
		ownPublish(p) // not an inline request after all (publishInline)
		aliased = false
	}
	if v5 && p.Properties.Present.Has(packets.PropTopicAlias) {
		a := p.Properties.TopicAlias
		if int(a) > s.opts.TopicAliasMaximum {
			c.closeWith(packets.ReasonTopicAliasInvalid, "topic alias "+strconv.Itoa(int(a))+" over the maximum", closeServer)
			return
		}
		if p.Topic == "" {
			t, ok := c.aliasIn[a]
			if !ok {
				c.closeWith(packets.ReasonProtocolError, "unknown topic alias "+strconv.Itoa(int(a)), closeServer)
				return
			}
			p.Topic = t
		} else {
			if c.aliasIn == nil {
				c.aliasIn = map[uint16]string{}
			}
			c.aliasIn[a] = p.Topic
		}
	}
	if p.QoS == 2 {
		inStore, dup, over := c.qos2State(p.PacketID)
		if inStore {
			return // a duplicate of a PUBLISH being stored: its PUBREC follows
		}
		if dup {
			c.ack(2, p.PacketID, 0, "")
			return
		}
		if over {
			c.closeWith(packets.ReasonReceiveMaximumExceeded, "more QoS 2 messages in flight than the receive maximum", closeServer)
			return
		}
	}
	info := c.info()
	var code packets.ReasonCode
	detail := ""
	h, ah, inline := s.handlerFor(p.Topic)
	if aliased && !inline {
		ownPublish(p) // the handler changed since publishInline
		aliased = false
	}
	if h == nil && ah == nil {
		code, detail = s.mayPublish(info, p.Topic)
	}
	if code == 0 && p.Properties.Present.Has(packets.PropPayloadFormat) && p.Properties.PayloadFormat == 1 && !utf8.Valid(p.Payload) {
		code, detail = packets.ReasonPayloadFormatInvalid, "payload is not UTF-8"
	}
	if code == 0 && aliased {
		// An inline handler: the Message is the call's own (no
		// allocation), as are the bytes it points to.
		if later, err := c.callAsync(ah, p, info, nil); later {
			return // the acknowledgement is sent from done
		} else if err != nil {
			code, detail = errReason(err), err.Error()
		}
	} else if code == 0 {
		msg := messageFrom(p.Topic, p.Payload, p.QoS, p.Retain, &p.Properties)
		msg.ClientID, msg.Username = info.ClientID, info.Username
		if h == nil && ah == nil && s.async != nil {
			c.publishAsync(p, msg)
			return
		}
		var err error
		if ah != nil {
			// Never blocks: nothing held needs flushing first.
			var later bool
			if later, err = c.callAsync(ah, p, info, msg); later {
				return // the acknowledgement is sent from done
			}
		} else if h != nil {
			if p.QoS == 2 && s.pipelined() {
				c.callQoS2(h, p.PacketID, info, msg)
				return
			}
			c.flushHeld() // the handler may block: do not hold earlier output behind it
			err = h(s.ctx, info, msg)
		} else {
			c.flushHeld() // a synchronous backend may block too
			err = s.backend.Publish(c.workCtx(), msg)
		}
		if err != nil {
			code, detail = errReason(err), err.Error()
			if !v5 && code != packets.ReasonNotAuthorized {
				c.closeWith(code, "publish failed: "+detail, closeServer)
				return
			}
		}
	}
	if code != 0 {
		c.logRefusal(slog.LevelInfo, "mqtt: publish refused", "topic", p.Topic, "reason", code.String(), "code", byte(code), "detail", detail)
		if !v5 {
			code = 0 // 3.1.1 has no negative acknowledgement: drop silently
		}
	}
	c.ack(p.QoS, p.PacketID, code, detail)
}

func (c *conn) handlePubrel(p *packets.Pubrel) {
	ss := c.session
	ss.mu.Lock()
	ok := ss.releaseReceivedLocked(p.PacketID)
	ss.mu.Unlock()
	if !ok {
		c.sendAckOf(packets.TypePubcomp, p.PacketID, packets.ReasonPacketIdentifierNotFound, nil)
		return
	}
	id := p.PacketID
	c.srv.recordQoS2(ss, func() { c.sendAckOf(packets.TypePubcomp, id, 0, nil) })
}

func (c *conn) handlePubrec(p *packets.Pubrec) {
	ss := c.session
	id := p.PacketID
	switch ss.pubrec(c, id, p.ReasonCode) {
	case pubrecReleased:
		// The PUBREL waits until the release is recorded (QoS2Backend).
		c.srv.recordQoS2(ss, func() { c.sendAckOf(packets.TypePubrel, id, 0, nil) })
	case pubrecUnknown:
		c.sendAckOf(packets.TypePubrel, id, packets.ReasonPacketIdentifierNotFound, nil)
	}
}

const (
	pubrecIgnored = iota
	pubrecReleased
	pubrecUnknown
)

// pubrec applies a PUBREC of c to its session's in-flight messages: a
// refused message is done, an accepted one released.
func (ss *session) pubrec(c *conn, id uint16, code packets.ReasonCode) int {
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.conn != c {
		return pubrecIgnored
	}
	for i := range ss.inflight {
		o := &ss.inflight[i]
		if o.id != id || o.qos != 2 {
			continue
		}
		if code >= 0x80 {
			ss.removeInflightLocked(i)
			ss.drainLocked()
			return pubrecIgnored
		}
		o.rel = true
		return pubrecReleased
	}
	return pubrecUnknown
}

func (c *conn) handleSubscribe(p *packets.Subscribe) {
	s := c.srv
	ss := c.session
	info := c.info()
	var subID uint32
	if len(p.Properties.SubscriptionIdentifiers) > 0 {
		subID = p.Properties.SubscriptionIdentifiers[0]
	}
	// Each filter is judged once; the shared ones granted are prepared
	// before any of them joins the index (SharePreparer).
	codes := make([]packets.ReasonCode, len(p.Subscriptions))
	var shared []string
	for i, req := range p.Subscriptions {
		code, detail := s.maySubscribe(info, req.Filter)
		if code != 0 {
			codes[i] = code
			c.logRefusal(slog.LevelDebug, "mqtt: subscribe refused", "filter", req.Filter,
				"reason", code.String(), "code", byte(code), "detail", detail)
		} else if packets.IsShared(req.Filter) {
			shared = append(shared, req.Filter)
		}
	}
	if sp, ok := s.backend.(SharePreparer); ok && shared != nil {
		sp.PrepareShares(s.ctx, ss.id, shared)
	}
	// granted are this packet's new subscriptions, with what each
	// replaced, to undo them if the backend cannot record them.
	type granted struct {
		i     int
		sub   *Subscription
		prev  *Subscription
		isNew bool
	}
	var done []granted
	for i, req := range p.Subscriptions {
		if codes[i] != 0 {
			continue
		}
		sub := &Subscription{Filter: req.Filter, QoS: req.QoS, NoLocal: req.NoLocal,
			RetainAsPublished: req.RetainAsPublished, RetainHandling: req.RetainHandling, Identifier: subID}
		g := granted{i: i, sub: sub}
		ss.mu.Lock()
		if !ss.dead {
			if ss.subs == nil {
				ss.subs = map[string]*Subscription{}
			}
			g.prev = ss.subs[req.Filter]
			ss.subs[req.Filter] = sub
			g.isNew = s.subs.add(ss, sub)
		}
		ss.mu.Unlock()
		codes[i] = packets.ReasonCode(req.QoS)
		done = append(done, g)
	}
	// A persistent session's subscriptions reach the cluster's session log
	// before the client is told they exist (the backend decides whether
	// to write: only sessions that outlive the connection are recorded);
	// when that fails they are undone and refused with 0x80.
	if len(done) > 0 {
		if err := s.SaveSubscriptions(ss.id); err != nil {
			s.log.Warn("mqtt: save subscriptions: SUBSCRIBE refused", "client", ss.id, "err", err)
			ss.mu.Lock()
			for _, g := range slices.Backward(done) { // a filter given twice unwinds in order
				codes[g.i] = packets.ReasonUnspecifiedError
				if ss.dead || ss.subs[g.sub.Filter] != g.sub {
					continue
				}
				if g.prev != nil {
					ss.subs[g.sub.Filter] = g.prev
					s.subs.add(ss, g.prev)
				} else {
					delete(ss.subs, g.sub.Filter)
					s.subs.remove(ss, g.sub.Filter)
				}
			}
			ss.mu.Unlock()
			done = nil
		}
	}
	c.send(&packets.Suback{PacketID: p.PacketID, ReasonCodes: codes})
	for _, g := range done {
		rh := g.sub.RetainHandling
		if !packets.IsShared(g.sub.Filter) && (rh == 0 || rh == 1 && g.isNew) {
			ss.deliverRetained(s.ctx, g.sub)
		}
	}
}

// maySubscribe decides a SUBSCRIBE's filter: 0 when granted, else the v5
// reason code (3.1.1 sends 0x80 for all) and a detail for the log. A
// filter naming a reserved topic (reserved.go) is refused with 0x8F topic
// filter invalid unless Options.Reserved allows it; an ACL denial is 0x87
// not authorized.
func (s *Server) maySubscribe(info ClientInfo, filter string) (packets.ReasonCode, string) {
	_, inner := splitFilter(filter)
	switch {
	case s.res.names(inner) && (s.opts.Reserved == nil || !s.opts.Reserved(info, filter, true)):
		return packets.ReasonTopicFilterInvalid, "the filter names a reserved topic"
	case s.acl != nil && !s.acl.Allowed(info.ClientID, info.Username, filter, true):
		return packets.ReasonNotAuthorized, "denied by the ACL"
	}
	if s.opts.Authorize != nil {
		if err := s.opts.Authorize(info, filter, true); err != nil {
			return packets.ReasonNotAuthorized, err.Error()
		}
	}
	return 0, ""
}

func (c *conn) handleUnsubscribe(p *packets.Unsubscribe) {
	s := c.srv
	ss := c.session
	codes := make([]packets.ReasonCode, len(p.Filters))
	for i, f := range p.Filters {
		ss.mu.Lock()
		_, had := ss.subs[f]
		delete(ss.subs, f)
		if had {
			s.subs.remove(ss, f)
		}
		ss.mu.Unlock()
		if !had {
			codes[i] = packets.ReasonNoSubscriptionExisted
		}
	}
	// A persistent session's subscriptions reach the cluster's session log
	// before the client is told they exist (the backend decides whether
	// to write: only sessions that outlive the connection are recorded).
	if err := s.SaveSubscriptions(ss.id); err != nil {
		s.log.Warn("mqtt: save subscriptions", "client", ss.id, "err", err)
	}
	c.send(&packets.Unsuback{PacketID: p.PacketID, ReasonCodes: codes})
}

// sendPublishLocked sends one PUBLISH to the client (caller holds the
// session lock). It returns false if the message was not sent: expired,
// over the client's Maximum Packet Size, not encodable, or a QoS 0
// message while the socket is backed up. now is the caller's clock
// reading (a poller round's, Round.SendToRecycled); zero reads the clock,
// only for a message that expires.
func (c *conn) sendPublishLocked(msg *Message, qos byte, id uint16, retain, dup bool, subIDs []uint32, r *Round) bool {
	s := c.srv
	var now time.Time
	if !msg.Expiry.IsZero() {
		now = r.wallNow()
		if msg.expired(now) {
			return false
		}
	}
	if qos == 0 && c.dropQoS0() {
		return false
	}
	p := packets.Publish{QoS: qos, PacketID: id, Retain: retain, Dup: dup, Topic: msg.Topic, Payload: msg.Payload}
	newAlias := false
	if c.version == packets.Version5 {
		pr := &p.Properties
		if msg.HasPayloadFormat {
			pr.Present.Add(packets.PropPayloadFormat)
			pr.PayloadFormat = msg.PayloadFormat
		}
		if !msg.Expiry.IsZero() {
			pr.Present.Add(packets.PropMessageExpiry)
			pr.MessageExpiry = uint32((msg.Expiry.Sub(now) + time.Second - 1) / time.Second)
		}
		if msg.ContentType != "" {
			pr.Present.Add(packets.PropContentType)
			pr.ContentType = msg.ContentType
		}
		if msg.ResponseTopic != "" {
			pr.Present.Add(packets.PropResponseTopic)
			pr.ResponseTopic = msg.ResponseTopic
		}
		if msg.CorrelationData != nil {
			pr.Present.Add(packets.PropCorrelationData)
			pr.CorrelationData = msg.CorrelationData
		}
		pr.User = msg.User
		pr.SubscriptionIdentifiers = subIDs
		if c.aliasOutMax > 0 {
			if a, ok := c.aliasOut[msg.Topic]; ok {
				pr.Present.Add(packets.PropTopicAlias)
				pr.TopicAlias = a
				p.Topic = ""
			} else if len(c.aliasOut) < int(c.aliasOutMax) {
				if c.aliasOut == nil {
					c.aliasOut = map[string]uint16{}
				}
				a := uint16(len(c.aliasOut) + 1)
				// A copy: the message's bytes may be rewritten once it
				// is acknowledged (SendToRecycled).
				c.aliasOut[strings.Clone(msg.Topic)] = a
				pr.Present.Add(packets.PropTopicAlias)
				pr.TopicAlias = a
				newAlias = true
			}
		}
	}
	if c.maxOut > 0 {
		if n, err := packets.PublishSize(&p, c.version); err != nil || n > int(c.maxOut) {
			if newAlias {
				delete(c.aliasOut, msg.Topic)
			}
			s.stats.Dropped.Add(1)
			s.log.Debug("mqtt: message over the client's maximum packet size dropped", "client", c.session.id, "topic", msg.Topic)
			return false
		}
	}
	sent, err := c.sendPublish(&p, r)
	if err != nil {
		// No connection can take it (a string over 65535 bytes): dropped,
		// not left in flight where it would hold a receive-maximum slot
		// and be resent for ever.
		if newAlias {
			delete(c.aliasOut, msg.Topic)
		}
		s.stats.Dropped.Add(1)
		return false
	}
	switch {
	case !sent:
	case r != nil:
		r.st.dirty = true
		r.st.sent++
		r.st.sentQoS[min(qos, 2)]++
	default:
		s.stats.Sent.Add(1)
		s.stats.SentQoS[min(qos, 2)].Add(1)
	}
	return true
}
