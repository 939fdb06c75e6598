package mqtt

import (
	"log/slog"
	"strings"
	"sync"
	"sync/atomic"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// Pipelined ingress (AsyncBackend): a connection hands each PUBLISH to the
// backend without waiting and keeps decoding; the acknowledgements wait in
// c.acks, in arrival order, and leave as soon as every earlier one is
// complete (MQTT requires PUBACKs in PUBLISH order). When ReceiveMaximum
// acknowledgements are pending the worker parks until some complete.

// pendingAck is the PUBACK/PUBREC owed for one received QoS 1/2 PUBLISH.
type pendingAck struct {
	id     uint16
	qos    byte
	done   bool
	code   packets.ReasonCode
	detail string
	// lost: the store failed with this code, which a 3.1.1 client's
	// acknowledgement cannot carry (it is disconnected instead); a QoS 2
	// id is then not received, so the client's DUP is stored.
	lost packets.ReasonCode
	// inCall is set while the worker is inside PublishAsync: a completion
	// then (MemoryBackend's) is part of the worker's unit of work and its
	// acknowledgement may be held; a later one, from the backend's
	// goroutine, is written at once (batch.go).
	inCall atomic.Bool
}

// ackLimit is how many acknowledgements may be pending per connection.
func (c *conn) ackLimit() int { return max(c.srv.opts.ReceiveMaximum, 1) }

// parkIfFull stops the worker when the connection has ackLimit pending
// acknowledgements; completeAck reschedules it. The caller keeps
// c.scheduled set, so no other worker starts meanwhile.
func (c *conn) parkIfFull() bool {
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	if len(c.acks) < c.ackLimit() {
		return false
	}
	c.parked = true
	return true
}

// acksFull reports whether the connection has ackLimit pending
// acknowledgements (the worker flushes its held output, then parks).
func (c *conn) acksFull() bool {
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	return len(c.acks) >= c.ackLimit()
}

// qos2State looks up an incoming QoS 2 packet id: inStore when a PUBLISH
// with that id is still being stored (its PUBREC is coming; a duplicate is
// ignored), received when it was stored and awaits its PUBREL (a duplicate
// gets its PUBREC again), and over when a new one would pass the receive
// maximum. Every QoS 2 message the client has not released counts against
// that maximum, stored or still being stored: a client pipelining QoS 2
// PUBLISHes faster than the backend stores them must not slip past it.
// The two sets are read under ackMu then session.mu (completeAck's order),
// so a message moving from one to the other is counted once.
func (c *conn) qos2State(id uint16) (inStore, received, over bool) {
	ss := c.session
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	if _, inStore = c.qos2Store[id]; inStore {
		return true, false, false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.storingElsewhereLocked(c, id) {
		// A DUP of what an earlier connection of the session is storing
		// (or has stored and is recording): its PUBREC is owed here, in
		// order, once that store ends (qos2store.go).
		a := &pendingAck{id: id, qos: 2}
		ss.awaitStoreLocked(id, func(code packets.ReasonCode, detail string) { c.completeFailed(a, code, detail) })
		c.acks = append(c.acks, a)
		if c.qos2Store == nil {
			c.qos2Store = map[uint16]struct{}{}
		}
		c.qos2Store[id] = struct{}{}
		return true, false, false
	}
	if received = ss.hasReceivedLocked(id); received {
		return false, true, false
	}
	return false, false, ss.receivedLenLocked()+len(c.qos2Store) >= c.srv.opts.ReceiveMaximum
}

// ack sends (or queues behind pending ones) the acknowledgement of a
// PUBLISH whose outcome is known.
func (c *conn) ack(qos byte, id uint16, code packets.ReasonCode, detail string) {
	if qos == 0 {
		return
	}
	// ack runs where c's input is handled: on the poller's round, its
	// count of the acknowledgement is the round's (roundstats.go).
	r := c.roundOf()
	if !c.srv.pipelined() {
		c.sendAck(r, qos, id, code, detail)
		return
	}
	if qos == 1 {
		// Nothing pending before it: sent now, with no pendingAck (the
		// write is under ackMu, as completeAck's are, so a completion
		// of an earlier PUBLISH cannot pass it).
		c.ackMu.Lock()
		if len(c.acks) == 0 {
			c.sendAck(r, qos, id, code, detail)
			c.ackMu.Unlock()
			return
		}
		c.ackMu.Unlock()
	}
	a := c.addAck(qos, id)
	a.inCall.Store(true) // completed by the worker: part of its unit
	c.completeAck(a, code, detail)
}

// addAck registers a pending acknowledgement in arrival order.
func (c *conn) addAck(qos byte, id uint16) *pendingAck {
	a, _ := c.addAckIf(qos, id, false)
	return a
}

// addAckIf is addAck; with attached, a QoS 2 one only while the session
// is c's: once it went on without c (an eviction or a resume took it, c
// ended), nil and false, and the PUBLISH is not stored: the client,
// which got no PUBREC, sends it again where the session is
// (qos2store.go).
func (c *conn) addAckIf(qos byte, id uint16, attached bool) (*pendingAck, bool) {
	a := &pendingAck{id: id, qos: qos}
	c.ackMu.Lock()
	defer c.ackMu.Unlock()
	if qos == 2 {
		ss := c.session
		ss.mu.Lock()
		if attached && ss.conn != c {
			ss.mu.Unlock()
			return nil, false
		}
		ss.beginStoreLocked(c, id)
		ss.mu.Unlock()
		if c.qos2Store == nil {
			c.qos2Store = map[uint16]struct{}{}
		}
		c.qos2Store[id] = struct{}{}
	}
	c.acks = append(c.acks, a)
	return a, true
}

// publishAsync hands a PUBLISH to the AsyncBackend; its acknowledgement is
// sent from the completion.
func (c *conn) publishAsync(p *packets.Publish, msg *Message) {
	var a *pendingAck
	if p.QoS > 0 {
		var ok bool
		if a, ok = c.addAckIf(p.QoS, p.PacketID, true); !ok {
			return
		}
		a.inCall.Store(true)
		defer a.inCall.Store(false)
	}
	done := c.asyncDone(a, msg.Topic)
	if p.QoS == 2 && c.srv.qos2 != nil {
		done = c.storedQoS2(p.PacketID, done)
	}
	c.srv.async.PublishAsync(c.workCtx(), msg, done)
}

// storedQoS2 wraps the completion of a QoS 2 PUBLISH for a QoS2Backend:
// once the message is stored its id joins the session's received ids, and
// its PUBREC waits until the backend recorded them.
func (c *conn) storedQoS2(id uint16, done func(error)) func(error) {
	return func(err error) {
		if err != nil {
			done(err)
			return
		}
		// The id moves from the ids being stored to the session's
		// received ones now (ackMu then session.mu, as qos2State reads
		// them), so the record has it and the receive maximum counts it
		// once while its PUBREC waits for the record. A duplicate
		// meanwhile is acknowledged behind this PUBREC (acks go in order).
		c.ackMu.Lock()
		delete(c.qos2Store, id)
		c.session.received(id)
		c.ackMu.Unlock()
		c.srv.recordQoS2(c.session, func() { done(nil) })
	}
}

// asyncCall is the state of one AsyncHandler call: what later needs to
// queue the acknowledgement. Calls take one from asyncCalls and give it
// back when the handler returned (done does not use it), so that neither
// the state nor its later func is allocated per request.
type asyncCall struct {
	c       *conn
	qos     byte
	id      uint16
	topic   string
	a       *pendingAck // queued by later
	later   bool        // later was called
	aliased bool        // the call's request points into the connection's input
	laterFn func() func(error)
	msg     Message // an inline handler's request (aliased)
}

var asyncCalls = sync.Pool{New: func() any { return &asyncCall{} }}

// callAsync calls an AsyncHandler. later reports that the handler called
// later (the acknowledgement is queued and sent from done); otherwise err
// is its answer, acknowledged like a Handler's, without a queued
// acknowledgement or any allocation.
//
// A nil msg: p is aliased (workInline) and the Message is built in the
// pooled call state, valid, like p, only during the call.
func (c *conn) callAsync(h AsyncHandler, p *packets.Publish, info ClientInfo, msg *Message) (later bool, err error) {
	ac := asyncCalls.Get().(*asyncCall)
	if ac.laterFn == nil {
		ac.laterFn = ac.defer1 // once per pooled state
	}
	ac.c, ac.qos, ac.id, ac.topic = c, p.QoS, p.PacketID, p.Topic
	if msg == nil {
		ac.aliased = true
		msg = &ac.msg
		fillMessage(msg, p.Topic, p.Payload, p.QoS, p.Retain, &p.Properties, c.roundOf())
		msg.ClientID, msg.Username = info.ClientID, info.Username
	}
	ctx := c.srv.ctx
	r := c.roundOf()
	var prev *conn
	if r != nil {
		ctx = r.ctx // the handler may defer work to the round (RoundOf)
		prev, r.cur = r.cur, c
	}
	err = h(ctx, info, msg, ac.laterFn)
	later = ac.later
	if r != nil {
		r.cur = prev
		if later {
			r.fold() // done may answer from another goroutine at once
		}
	}
	if ac.a != nil {
		ac.a.inCall.Store(false)
	}
	*ac = asyncCall{laterFn: ac.laterFn}
	asyncCalls.Put(ac)
	if later {
		return true, nil
	}
	return false, err
}

// defer1 is the later of the current call: it queues the acknowledgement
// and returns its completion (a second call returns a completion that
// does nothing).
func (ac *asyncCall) defer1() func(error) {
	if ac.later {
		return func(error) {}
	}
	ac.later = true
	if ac.qos > 0 {
		ac.a = ac.c.addAck(ac.qos, ac.id)
		ac.a.inCall.Store(true)
	}
	topic := ac.topic
	if ac.aliased {
		topic = strings.Clone(topic) // logged by done, after the call
	}
	return ac.c.asyncDone(ac.a, topic)
}

// asyncDone returns the completion of an asynchronous publish (a nil a:
// QoS 0, nothing to acknowledge): the outcome completes a's
// acknowledgement; a 3.1.1 client, which has no negative one, is
// disconnected instead unless the publish was merely not authorized.
func (c *conn) asyncDone(a *pendingAck, topic string) func(error) {
	return func(err error) {
		var code packets.ReasonCode
		detail := ""
		if err != nil {
			code, detail = errReason(err), err.Error()
			c.logRefusal(slog.LevelInfo, "mqtt: publish refused", "topic", topic, "reason", code.String(), "code", byte(code), "detail", detail)
		}
		if a != nil {
			c.completeFailed(a, code, detail)
		} else if code != 0 && c.version != packets.Version5 && code != packets.ReasonNotAuthorized {
			c.closeWith(code, "publish failed: "+detail, closeServer)
		}
	}
}

// completeFailed is completeAck for an outcome that may be a failure: a
// 3.1.1 client, which has no negative acknowledgement, is disconnected
// instead unless the publish was merely not authorized (a is marked
// lost, so its QoS 2 id is not taken as received).
func (c *conn) completeFailed(a *pendingAck, code packets.ReasonCode, detail string) {
	if code >= 0x80 && c.version != packets.Version5 {
		if code != packets.ReasonNotAuthorized {
			c.closeWith(code, "publish failed: "+detail, closeServer)
			a.lost = code
		}
		code = 0
	}
	c.completeAck(a, code, detail)
}

// completeAck records a's outcome and sends every acknowledgement at the
// head of the queue that is complete, in one write when they carry no
// reason (a backend completing a batch last message first gets one write
// for all of it). It resumes a parked worker once there is room again.
func (c *conn) completeAck(a *pendingAck, code packets.ReasonCode, detail string) {
	now := !a.inCall.Load()
	c.ackMu.Lock()
	a.done, a.code, a.detail = true, code, detail
	n := 0
	k := int64(0) // acknowledgements in buf
	var arr [256]byte
	buf := arr[:0]
	var endedArr [16]*pendingAck
	ended := endedArr[:0] // QoS 2 stores whose PUBREC is written
	for ; n < len(c.acks) && c.acks[n].done; n++ {
		x := c.acks[n]
		c.acks[n] = nil
		if x.qos == 2 {
			delete(c.qos2Store, x.id)
			if x.code < 0x80 && x.lost == 0 {
				c.session.received(x.id)
			}
			ended = append(ended, x)
		}
		if x.code == 0 {
			t := packets.TypePuback
			if x.qos == 2 {
				t = packets.TypePubrec
			}
			buf, _ = packets.AppendAck(buf, t, x.id, 0, nil, c.version)
			k++
			continue
		}
		if len(buf) > 0 {
			c.srv.stats.PacketsSent.Add(k)
			c.writeOut(buf, now)
			buf, k = buf[:0], 0
		}
		c.sendAck(nil, x.qos, x.id, x.code, x.detail)
	}
	if len(buf) > 0 {
		c.srv.stats.PacketsSent.Add(k) // one add for the write's k acknowledgements
		c.writeOut(buf, now)
	}
	if n > 0 {
		c.acks = c.acks[n:]
		if len(c.acks) == 0 {
			c.acks = nil
		}
	}
	resume := c.parked && len(c.acks) < c.ackLimit()
	if resume {
		c.parked = false
	}
	c.ackMu.Unlock()
	for _, x := range ended {
		code := x.code
		if x.lost != 0 {
			code = x.lost
		}
		c.session.endStore(c, x.id, code, x.detail)
	}
	if resume {
		c.srv.pool.submit(c.work)
	}
}

// sendAck sends one PUBACK (QoS 1) or PUBREC (QoS 2), counted in the
// poller's round r (nil: at once); a successful PUBREC of the synchronous
// path also records the packet id as received.
func (c *conn) sendAck(r *Round, qos byte, id uint16, code packets.ReasonCode, detail string) {
	switch qos {
	case 1:
		props := c.ackProps(code, detail)
		c.sendAckIn(r, packets.TypePuback, id, code, &props)
	case 2:
		if code < 0x80 && c.srv.async == nil {
			c.session.received(id)
			props := c.ackProps(code, detail)
			c.srv.recordQoS2(c.session, func() { c.sendAckOf(packets.TypePubrec, id, code, &props) })
			return
		}
		props := c.ackProps(code, detail)
		c.sendAckIn(r, packets.TypePubrec, id, code, &props)
	}
}

// received records an incoming QoS 2 packet id as stored and awaiting its
// PUBREL.
func (ss *session) received(id uint16) {
	ss.mu.Lock()
	ss.addReceivedLocked(id)
	ss.mu.Unlock()
}
