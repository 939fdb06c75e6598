package amqp

import (
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// consumer is one basic.consume. Guarded by Server.mu.
type consumer struct {
	ch        *channel
	q         *queue
	tag       string
	noAck     bool
	exclusive bool
	prefetch  int // 0: unlimited
	unacked   int
	prio      int64 // x-priority
}

// canTake reports whether a delivery may go to cons now.
func (cons *consumer) canTake() bool {
	ch := cons.ch
	if !ch.active || ch.closing.Load() || ch.c.gone {
		return false
	}
	if !cons.noAck {
		if cons.prefetch > 0 && cons.unacked >= cons.prefetch {
			return false
		}
		if ch.globalPrefetch > 0 && ch.globalUnacked >= ch.globalPrefetch {
			return false
		}
	}
	return !ch.c.out.full()
}

// dispatch delivers ready messages of q to its consumers, round robin,
// until no consumer can take one. Server.mu held.
func (s *Server) dispatch(q *queue) { s.dispatchFresh(q, nil) }

// dispatchFresh is dispatch for a message just added: fresh does not
// expire during this dispatch, so a TTL of 0 means "delivered now if a
// consumer can take it, else dropped" as in RabbitMQ. Server.mu held.
func (s *Server) dispatchFresh(q *queue, fresh *qmsg) {
	if q.deleted || len(q.consumers) == 0 {
		return
	}
	var now int64
	for q.readyLen() > 0 {
		m := q.peek()
		if m.expireAt != 0 && m != fresh {
			if now == 0 {
				now = time.Now().UnixNano()
			}
			if m.expireAt <= now {
				q.pop()
				s.deadLetter(q, m, "expired")
				continue
			}
		}
		cons := q.pick()
		if cons == nil {
			return
		}
		if e := headerTooLarge(cons.ch.c, m.m, nil); e != nil {
			// The consumer's connection cannot take the message: its
			// channel closes with the reason; the message stays for a
			// consumer that can.
			s.logLimited("amqp: a message's content header is larger than a consumer's frame_max; its channel is closed",
				"queue", q.name, "consumer", cons.tag, "err", e)
			s.asyncChannelError(cons.ch, e)
			if q.deleted {
				return
			}
			continue
		}
		q.pop()
		s.deliver(cons, q, m)
	}
}

// pick returns the next consumer, round robin, that can take a message;
// with x-single-active-consumer only the first consumer, the longest
// standing one, is considered.
func (q *queue) pick() *consumer {
	if q.qa.singleActive {
		if cons := q.consumers[0]; cons.canTake() {
			return cons
		}
		return nil
	}
	n := len(q.consumers)
	if q.prioConsumers > 0 {
		// Consumer priorities: the highest priority that can take one,
		// round robin among equals.
		var best *consumer
		at := 0
		for i := range n {
			cons := q.consumers[(q.rr+i)%n]
			if (best == nil || cons.prio > best.prio) && cons.canTake() {
				best, at = cons, i
			}
		}
		if best != nil {
			q.rr = (q.rr + at + 1) % n
		}
		return best
	}
	for i := range n {
		cons := q.consumers[(q.rr+i)%n]
		if cons.canTake() {
			q.rr = (q.rr + i + 1) % n
			return cons
		}
	}
	return nil
}

// deliver sends m to cons as basic.deliver. Server.mu held.
func (s *Server) deliver(cons *consumer, q *queue, m *qmsg) {
	ch := cons.ch
	ch.nextTag++
	tag := ch.nextTag
	if cons.noAck {
		s.messageGone(q, m)
	} else {
		ch.unacked[tag] = delivery{tag: tag, q: q, m: m, cons: cons}
		cons.unacked++
		ch.globalUnacked++
		q.unacked++
	}
	// The method is encoded from the channel's scratch copy: a
	// BasicDeliver of its own would escape (one allocation a delivery).
	d := &ch.deliverMethod
	*d = wire.BasicDeliver{ConsumerTag: cons.tag, DeliveryTag: tag, Redelivered: m.redelivered, Exchange: m.m.exchange, RoutingKey: m.m.key}
	b := wire.AppendMethodFrame(make([]byte, 0, deliverySize(ch.c.frameMax, m.m, len(cons.tag))), ch.id, d)
	ch.c.out.push(appendContent(b, ch.id, ch.c.frameMax, m.m))
	s.stats.Delivered++
	q.counts.delivered++
}

// headerTooLarge is the 406 PRECONDITION_FAILED channel error for a
// message whose content header frame does not fit c's negotiated
// frame_max (a header is never split; a client drops the connection on
// a frame over its frame_max), nil when it fits. method names the method
// the error is about.
func headerTooLarge(c *conn, m *msgData, method wire.Method) *amqpError {
	n := wire.ContentHeaderFrameSize(m.props)
	if n <= int(c.frameMax) {
		return nil
	}
	return chErr(wire.PreconditionFailed, method, "message content header of %d bytes exceeds the connection's frame_max %d", n, c.frameMax)
}

// deliverySize is the bytes of a delivery's frames: method (with its
// strings), content header, body frames.
func deliverySize(frameMax uint32, m *msgData, extra int) int {
	frames := len(m.body)/max(int(frameMax)-8, 1) + 1
	return 64 + extra + len(m.exchange) + len(m.key) + 22 + len(m.props) + len(m.body) + 8*frames
}

// appendContent appends a message's content header and body frames, the
// body split to fit frameMax.
func appendContent(b []byte, channel uint16, frameMax uint32, m *msgData) []byte {
	b = wire.AppendContentHeaderFrame(b, channel, 60, uint64(len(m.body)), m.props)
	return wire.AppendBodyFrames(b, channel, m.body, frameMax)
}

// dispatchConsumers dispatches the queues the channel consumes from.
// Server.mu held.
func (ch *channel) dispatchConsumers() {
	for _, cons := range ch.consumers {
		ch.c.srv.dispatch(cons.q)
	}
}

func (ch *channel) basicQos(m *wire.BasicQos) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	if m.Global {
		ch.globalPrefetch = int(m.PrefetchCount)
	} else {
		ch.prefetch = int(m.PrefetchCount)
	}
	ch.send(&wire.BasicQosOk{})
	ch.dispatchConsumers()
	s.mu.Unlock()
	return nil
}

func (ch *channel) basicConsume(m *wire.BasicConsume) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	q, e := ch.lookupQueue(m.Queue, m)
	if e != nil {
		return e
	}
	tag := m.ConsumerTag
	if tag == "" {
		tag = randomName("amq.ctag-")
	}
	if ch.consumers[tag] != nil {
		return connErr(wire.NotAllowed, m, "attempt to reuse consumer tag '%s'", tag)
	}
	if len(q.consumers) > 0 && (m.Exclusive || q.consumers[0].exclusive) {
		return chErr(wire.AccessRefused, m, "queue '%s' in vhost '%s' in exclusive use", q.name, q.vh.name)
	}
	cons := &consumer{ch: ch, q: q, tag: tag, noAck: m.NoAck, exclusive: m.Exclusive, prefetch: ch.prefetch}
	if v, ok := m.Arguments["x-priority"]; ok {
		p, isInt := wire.AsInt64(v)
		if !isInt {
			return chErr(wire.PreconditionFailed, m, "invalid arg 'x-priority' for consumer: %T is not an integer", v)
		}
		cons.prio = p
		if p != 0 {
			q.prioConsumers++
		}
	}
	ch.consumers[tag] = cons
	q.consumers = append(q.consumers, cons)
	q.hadConsumer = true
	q.lastUse = time.Now()
	s.stats.Consumers++
	if !m.NoWait {
		ch.send(&wire.BasicConsumeOk{ConsumerTag: tag})
	}
	s.dispatch(q)
	return nil
}

func (ch *channel) basicCancel(m *wire.BasicCancel) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if cons := ch.consumers[m.ConsumerTag]; cons != nil {
		s.removeConsumer(cons, false)
	}
	if !m.NoWait {
		ch.send(&wire.BasicCancelOk{ConsumerTag: m.ConsumerTag})
	}
	return nil
}

// removeConsumer ends cons; an auto-delete queue left without consumers
// is deleted (unless the queue itself is going: queueGone). Its unacked
// deliveries stay on the channel. Server.mu held.
func (s *Server) removeConsumer(cons *consumer, queueGone bool) {
	ch, q := cons.ch, cons.q
	if ch.consumers[cons.tag] != cons {
		return
	}
	delete(ch.consumers, cons.tag)
	for i, o := range q.consumers {
		if o == cons {
			q.consumers = append(q.consumers[:i], q.consumers[i+1:]...)
			break
		}
	}
	if q.rr >= len(q.consumers) {
		q.rr = 0
	}
	s.stats.Consumers--
	if cons.prio != 0 {
		q.prioConsumers--
	}
	q.lastUse = time.Now()
	if !queueGone && q.autoDelete && len(q.consumers) == 0 && q.hadConsumer {
		s.deleteQueue(q, true)
	}
}

func (ch *channel) basicGet(m *wire.BasicGet) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	q, e := ch.lookupQueue(m.Queue, m)
	if e != nil {
		return e
	}
	q.lastUse = time.Now()
	s.expire(q, time.Now())
	if q.readyLen() == 0 {
		ch.send(&wire.BasicGetEmpty{})
		return nil
	}
	if e := headerTooLarge(ch.c, q.peek().m, m); e != nil {
		return e // the message stays ready
	}
	qm := q.pop()
	ch.nextTag++
	tag := ch.nextTag
	if m.NoAck {
		s.messageGone(q, qm)
	} else {
		ch.unacked[tag] = delivery{tag: tag, q: q, m: qm}
		q.unacked++
	}
	b := wire.AppendMethodFrame(make([]byte, 0, deliverySize(ch.c.frameMax, qm.m, 0)), ch.id, &wire.BasicGetOk{DeliveryTag: tag, Redelivered: qm.redelivered,
		Exchange: qm.m.exchange, RoutingKey: qm.m.key, MessageCount: uint32(q.readyLen())})
	ch.c.out.push(appendContent(b, ch.id, ch.c.frameMax, qm.m))
	s.stats.Delivered++
	q.counts.delivered++
	return nil
}

// Settlement kinds.
const (
	settleAck = iota
	settleReject
)

// settle handles basic.ack, basic.nack and basic.reject.
func (ch *channel) settle(m wire.Method, tag uint64, multiple bool, kind int, requeue bool) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch.tx {
		// Held until tx.commit; the deliveries stay unacked meanwhile.
		if _, ok := ch.unacked[tag]; (tag != 0 || !multiple) && !ok {
			return chErr(wire.PreconditionFailed, m, "unknown delivery tag %d", tag)
		}
		ch.txAcks = append(ch.txAcks, txAck{m: m, tag: tag, multiple: multiple, kind: kind, requeue: requeue})
		return nil
	}
	ds, e := ch.takeDeliveries(m, tag, multiple)
	if e != nil {
		return e
	}
	s.applySettle(ch, ds, kind, requeue)
	return nil
}

// takeDeliveries removes from the channel's unacked the deliveries tag
// (and, with multiple, all below it; tag 0 with multiple: all). An
// unknown tag is 406 PRECONDITION_FAILED. Server.mu held.
func (ch *channel) takeDeliveries(m wire.Method, tag uint64, multiple bool) ([]delivery, *amqpError) {
	if tag != 0 || !multiple {
		if _, ok := ch.unacked[tag]; !ok {
			return nil, chErr(wire.PreconditionFailed, m, "unknown delivery tag %d", tag)
		}
	}
	var ds []delivery
	if !multiple {
		ds = append(ds, ch.unacked[tag])
		delete(ch.unacked, tag)
	} else {
		if tag == 0 {
			tag = ch.nextTag
		}
		for t := ch.lowTag; t <= tag; t++ {
			if d, ok := ch.unacked[t]; ok {
				ds = append(ds, d)
				delete(ch.unacked, t)
			}
		}
	}
	for ch.lowTag <= ch.nextTag {
		if _, ok := ch.unacked[ch.lowTag]; ok {
			break
		}
		ch.lowTag++
	}
	return ds, nil
}

// applySettle acks or rejects deliveries already taken from the channel.
// Server.mu held.
func (s *Server) applySettle(ch *channel, ds []delivery, kind int, requeue bool) {
	var touched []*queue
	for _, d := range ds {
		q := d.q
		q.unacked--
		if d.cons != nil {
			d.cons.unacked--
			ch.globalUnacked--
		}
		switch {
		case kind == settleAck:
			s.messageGone(q, d.m)
			s.stats.Acked++
			q.counts.acked++
		case requeue && !q.deleted:
			q.requeue(d.m)
			touched = appendQueue(touched, q)
		default:
			s.deadLetter(q, d.m, "rejected")
		}
	}
	for _, q := range touched {
		s.dispatch(q)
	}
	ch.dispatchConsumers()
}

func appendQueue(qs []*queue, q *queue) []*queue {
	for _, o := range qs {
		if o == q {
			return qs
		}
	}
	return append(qs, q)
}

// recover requeues every unacked message of the channel (basic.recover
// with requeue true; requeue false is 540 NOT_IMPLEMENTED, as in
// RabbitMQ).
func (ch *channel) recover() {
	s := ch.c.srv
	s.mu.Lock()
	ch.requeueAll()
	ch.dispatchConsumers()
	s.mu.Unlock()
}

// requeueAll puts back every unacked message of the channel. Server.mu
// held.
func (ch *channel) requeueAll() {
	if len(ch.unacked) == 0 {
		return
	}
	ds, _ := ch.takeDeliveries(nil, 0, true)
	ch.c.srv.applySettle(ch, ds, settleReject, true)
}

// messageGone records that m left q for good (acked, dropped, expired,
// dead-lettered): a durable queue's acknowledged offset may advance.
// Server.mu held.
func (s *Server) messageGone(q *queue, m *qmsg) {
	if q.dur == nil {
		return
	}
	if m.stored {
		q.dur.gone(m.offset)
	} else {
		m.gone = true // appended() skips it when the log reports it
	}
}

// expire drops the expired messages at the head of q, and deletes q when
// x-expires says it has been unused too long. Server.mu held.
func (s *Server) expire(q *queue, now time.Time) {
	if q.deleted {
		return
	}
	if q.qa.expires > 0 && len(q.consumers) == 0 && now.Sub(q.lastUse) >= time.Duration(q.qa.expires)*time.Millisecond {
		s.deleteQueue(q, true)
		return
	}
	n := now.UnixNano()
	for q.readyLen() > 0 {
		m := q.peek()
		if m.expireAt == 0 || m.expireAt > n {
			break
		}
		q.pop()
		s.deadLetter(q, m, "expired")
	}
}
