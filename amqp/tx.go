package amqp

import (
	"github.com/smartgo/smartgo/amqp/wire"
)

// txPublish is a publish held until tx.commit.
type txPublish struct {
	x         *exchange
	mandatory bool
	m         *msgData
}

// txAck is an ack, nack or reject held until tx.commit.
type txAck struct {
	m        wire.Method
	tag      uint64
	multiple bool
	kind     int
	requeue  bool
}

func (ch *channel) txSelect(m *wire.TxSelect) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch.confirm {
		return chErr(wire.PreconditionFailed, m, "cannot switch from confirm to tx mode")
	}
	ch.tx = true
	ch.send(&wire.TxSelectOk{})
	return nil
}

// txCommit applies the held publishes, then the held acks, in order.
func (ch *channel) txCommit(m *wire.TxCommit) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ch.tx {
		return chErr(wire.PreconditionFailed, m, "channel is not transactional")
	}
	pubs, acks := ch.txPubs, ch.txAcks
	ch.txPubs, ch.txAcks = nil, nil
	// commit-ok waits until durable queues have stored the publishes; a
	// failed store closes the channel with 541 instead.
	done := &pubConfirm{ch: ch, remaining: 1}
	done.onDone = func(nack bool) {
		if nack {
			s.asyncChannelError(ch, chErr(wire.InternalError, m, "cannot store the transaction's messages"))
			return
		}
		if !ch.closing.Load() && !ch.c.gone {
			ch.send(&wire.TxCommitOk{})
		}
	}
	for _, p := range pubs {
		if p.x.deleted {
			return chErr(wire.NotFound, m, "no exchange '%s' in vhost '%s'", p.x.name, ch.c.vh.name)
		}
		s.publishTo(ch, p.x, p.mandatory, p.m, true, done)
	}
	for _, a := range acks {
		ds, e := ch.takeDeliveries(a.m, a.tag, a.multiple)
		if e != nil {
			return e
		}
		s.applySettle(ch, ds, a.kind, a.requeue)
	}
	s.confirmStep(done, false, true)
	return nil
}

func (ch *channel) txRollback(m *wire.TxRollback) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if !ch.tx {
		return chErr(wire.PreconditionFailed, m, "channel is not transactional")
	}
	ch.txPubs, ch.txAcks = nil, nil
	ch.send(&wire.TxRollbackOk{})
	return nil
}
