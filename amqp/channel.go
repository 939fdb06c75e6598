package amqp

import (
	"sync/atomic"

	"github.com/smartgo/smartgo/amqp/wire"
)

// channel is one open channel of a connection. Fields marked "reader"
// belong to the connection's reader goroutine; the rest are guarded by
// Server.mu.
type channel struct {
	c  *conn
	id uint16

	// closing: channel.close sent by the server; the channel ignores all
	// but close and close-ok. Set under Server.mu; the reader reads it
	// without.
	closing atomic.Bool
	active  bool // channel.flow: deliveries allowed

	consumers      map[string]*consumer
	prefetch       int // basic.qos global=false: for consumers created later
	globalPrefetch int // basic.qos global=true: shared by the channel's consumers
	globalUnacked  int // unacked deliveries to consumers of this channel

	nextTag uint64              // last delivery tag given
	unacked map[uint64]delivery // by delivery tag (values: no allocation per delivery)
	lowTag  uint64              // no unacked tag is below it
	// deliverMethod is deliver's scratch basic.deliver. Server.mu held.
	deliverMethod wire.BasicDeliver

	confirm  bool
	confirms *confirmState // nil after the channel closed

	tx     bool
	txPubs []txPublish
	txAcks []txAck

	// Content assembly (reader).
	pub      *wire.BasicPublish
	header   bool
	props    []byte
	bodySize uint64
	body     []byte
}

// bodyPrealloc caps the buffer allocated for a body before its bytes
// arrive.
const bodyPrealloc = 64 << 10

// delivery is an unacked message of a channel.
type delivery struct {
	tag  uint64
	q    *queue
	m    *qmsg
	cons *consumer // nil for basic.get
}

// openChannel creates channel id. Server.mu held.
func (c *conn) openChannel(id uint16) *channel {
	ch := &channel{c: c, id: id, active: true, consumers: map[string]*consumer{},
		unacked: map[uint64]delivery{}, lowTag: 1}
	c.channels[id] = ch
	c.srv.stats.Channels++
	return ch
}

func (ch *channel) send(m wire.Method) { ch.c.send(ch.id, m) }

// method handles one method frame on the channel.
func (ch *channel) method(m wire.Method) *amqpError {
	s := ch.c.srv
	if ch.closing.Load() {
		switch m.(type) {
		case *wire.ChannelCloseOk:
			s.mu.Lock()
			delete(ch.c.channels, ch.id)
			s.stats.Channels--
			s.mu.Unlock()
		case *wire.ChannelClose:
			ch.send(&wire.ChannelCloseOk{})
		}
		return nil
	}
	if ch.pub != nil {
		return connErr(wire.UnexpectedFrame, m, "expected content header or body for basic.publish on channel %d, got method %d.%d", ch.id, m.ClassID(), m.MethodID())
	}
	var e *amqpError
	switch m := m.(type) {
	case *wire.ChannelOpen:
		return connErr(wire.ChannelError, m, "channel %d is already open", ch.id)
	case *wire.ChannelClose:
		s.mu.Lock()
		s.closeChannel(ch)
		delete(ch.c.channels, ch.id)
		s.stats.Channels--
		s.mu.Unlock()
		ch.send(&wire.ChannelCloseOk{})
		return nil
	case *wire.ChannelCloseOk:
		return nil
	case *wire.ChannelFlow:
		s.mu.Lock()
		ch.active = m.Active
		ch.send(&wire.ChannelFlowOk{Active: m.Active})
		if m.Active {
			ch.dispatchConsumers()
		}
		s.mu.Unlock()
		return nil
	case *wire.ChannelFlowOk:
		return nil
	case *wire.BasicPublish:
		if !ch.c.waitAlarm() {
			return errClientClosed // the connection ended while blocked
		}
		e = ch.startPublish(m)
	default:
		e = ch.dispatchMethod(m)
	}
	if e != nil && !e.hard {
		ch.channelError(e)
		return nil
	}
	return e
}

// dispatchMethod routes a class's method to its handler.
func (ch *channel) dispatchMethod(m wire.Method) *amqpError {
	switch m := m.(type) {
	case *wire.ExchangeDeclare:
		return ch.exchangeDeclare(m)
	case *wire.ExchangeDelete:
		return ch.exchangeDelete(m)
	case *wire.ExchangeBind:
		return ch.exchangeBind(m.Destination, m.Source, m.RoutingKey, m.Arguments, m.NoWait, true, m)
	case *wire.ExchangeUnbind:
		return ch.exchangeBind(m.Destination, m.Source, m.RoutingKey, m.Arguments, m.NoWait, false, m)
	case *wire.QueueDeclare:
		return ch.queueDeclare(m)
	case *wire.QueueBind:
		return ch.queueBind(m.Queue, m.Exchange, m.RoutingKey, m.Arguments, m.NoWait, true, m)
	case *wire.QueueUnbind:
		return ch.queueBind(m.Queue, m.Exchange, m.RoutingKey, m.Arguments, false, false, m)
	case *wire.QueuePurge:
		return ch.queuePurge(m)
	case *wire.QueueDelete:
		return ch.queueDelete(m)
	case *wire.BasicQos:
		return ch.basicQos(m)
	case *wire.BasicConsume:
		return ch.basicConsume(m)
	case *wire.BasicCancel:
		return ch.basicCancel(m)
	case *wire.BasicGet:
		return ch.basicGet(m)
	case *wire.BasicAck:
		return ch.settle(m, m.DeliveryTag, m.Multiple, settleAck, false)
	case *wire.BasicNack:
		return ch.settle(m, m.DeliveryTag, m.Multiple, settleReject, m.Requeue)
	case *wire.BasicReject:
		return ch.settle(m, m.DeliveryTag, false, settleReject, m.Requeue)
	case *wire.BasicRecover:
		if !m.Requeue {
			return connErr(wire.NotImplemented, m, "requeue=false")
		}
		ch.recover()
		ch.send(&wire.BasicRecoverOk{})
		return nil
	case *wire.BasicRecoverAsync:
		if !m.Requeue {
			return connErr(wire.NotImplemented, m, "requeue=false")
		}
		ch.recover()
		return nil
	case *wire.ConfirmSelect:
		return ch.confirmSelect(m)
	case *wire.TxSelect:
		return ch.txSelect(m)
	case *wire.TxCommit:
		return ch.txCommit(m)
	case *wire.TxRollback:
		return ch.txRollback(m)
	}
	return connErr(wire.CommandInvalid, m, "method %d.%d is not valid from a client", m.ClassID(), m.MethodID())
}

// channelError closes the channel with e's reply code; the channel then
// ignores all but close and close-ok.
func (ch *channel) channelError(e *amqpError) {
	s := ch.c.srv
	s.logConnErr(ch.c, "channel error", e)
	s.mu.Lock()
	s.closeChannel(ch)
	ch.closing.Store(true)
	s.mu.Unlock()
	ch.pub, ch.body, ch.props = nil, nil, nil
	ch.send(&wire.ChannelClose{ReplyCode: e.code, ReplyText: e.text, FailingClassID: e.classID, FailingMethodID: e.methodID})
}

// closeChannel releases what the channel holds: its consumers are
// cancelled and its unacked messages requeued. Server.mu held.
func (s *Server) closeChannel(ch *channel) {
	if ch.closing.Load() {
		return
	}
	for _, cons := range ch.consumers {
		s.removeConsumer(cons, false)
	}
	ch.requeueAll()
	ch.confirms = nil
	ch.txPubs, ch.txAcks = nil, nil
}

// content handles a content header or body frame.
func (ch *channel) content(f wire.Frame) *amqpError {
	if ch.closing.Load() {
		return nil
	}
	if ch.pub == nil {
		return connErr(wire.UnexpectedFrame, nil, "content frame on channel %d without basic.publish", ch.id)
	}
	s := ch.c.srv
	if f.Type == wire.FrameHeader {
		if ch.header {
			return connErr(wire.UnexpectedFrame, nil, "second content header on channel %d", ch.id)
		}
		h, err := wire.DecodeContentHeader(f.Payload)
		if err != nil {
			return connErr(wire.FrameError, nil, "content header: %v", err)
		}
		if h.ClassID != 60 {
			return connErr(wire.UnexpectedFrame, nil, "content header of class %d after basic.publish", h.ClassID)
		}
		if h.BodySize > uint64(s.opts.MaxMessageSize) {
			ch.pub = nil
			ch.channelError(chErr(wire.PreconditionFailed, &wire.BasicPublish{}, "message size %d is larger than configured max size %d", h.BodySize, s.opts.MaxMessageSize))
			return nil
		}
		ch.header = true
		ch.props = append([]byte(nil), h.Raw...)
		ch.bodySize = h.BodySize
		// The claimed size is only a claim: grow with what arrives.
		ch.body = make([]byte, 0, min(h.BodySize, bodyPrealloc))
	} else {
		if !ch.header {
			return connErr(wire.UnexpectedFrame, nil, "content body before its header on channel %d", ch.id)
		}
		if uint64(len(ch.body))+uint64(len(f.Payload)) > ch.bodySize {
			return connErr(wire.FrameError, nil, "content body exceeds the header's body size %d", ch.bodySize)
		}
		ch.body = append(ch.body, f.Payload...)
	}
	if uint64(len(ch.body)) < ch.bodySize {
		return nil
	}
	pub, props, body := ch.pub, ch.props, ch.body
	ch.pub, ch.header, ch.props, ch.body = nil, false, nil, nil
	if e := ch.publish(pub, props, body); e != nil {
		if !e.hard {
			ch.channelError(e)
			return nil
		}
		return e
	}
	return nil
}
