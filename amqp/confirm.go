package amqp

import (
	"slices"

	"github.com/smartgo/smartgo/amqp/wire"
)

// confirmState is a channel's publisher-confirm sequence.
type confirmState struct {
	seq     uint64          // last sequence number given
	low     uint64          // first not yet confirmed
	results map[uint64]bool // finished, unconfirmed: true = nack
	dirty   bool            // results waiting for flush
}

// pubConfirm tracks one published message until every queue has it.
type pubConfirm struct {
	ch        *channel
	cs        *confirmState
	seq       uint64
	remaining int // routing (1) plus each durable queue storing it
	nack      bool
	onDone    func(nack bool) // instead of a confirm (tx.commit)
}

func (cs *confirmState) next(ch *channel) *pubConfirm {
	cs.seq++
	return &pubConfirm{ch: ch, cs: cs, seq: cs.seq, remaining: 1}
}

func (ch *channel) confirmSelect(m *wire.ConfirmSelect) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	defer s.mu.Unlock()
	if ch.tx {
		return chErr(wire.PreconditionFailed, m, "cannot switch from tx to confirm mode")
	}
	if !ch.confirm {
		ch.confirm = true
		ch.confirms = &confirmState{low: 1, results: map[uint64]bool{}}
	}
	if !m.NoWait {
		ch.send(&wire.ConfirmSelectOk{})
	}
	return nil
}

// confirmStep finishes one part of conf (failed: nack). When all parts
// are done the result is recorded; results are confirmed in sequence
// order, consecutive equal ones in one frame with multiple=true. A step
// on the reader goroutine (async false) defers the flush until the
// reader has no more buffered frames, so bursts coalesce. Server.mu held.
func (s *Server) confirmStep(conf *pubConfirm, failed bool, async bool) {
	ch := s.confirmRecord(conf, failed)
	if ch == nil {
		return
	}
	if async {
		s.flushConfirms(ch)
		return
	}
	if cs := ch.confirms; !cs.dirty {
		cs.dirty = true
		ch.c.dirty = append(ch.c.dirty, ch)
	}
}

// confirmRecord finishes one part of conf (failed: nack). When that was
// the last part it records the result and returns the publisher's
// channel, whose confirms the caller flushes (flushConfirms, once for
// many records: one basic.ack with multiple=true covers them); nil when
// nothing is due. Server.mu held.
func (s *Server) confirmRecord(conf *pubConfirm, failed bool) *channel {
	if failed {
		conf.nack = true
	}
	conf.remaining--
	if conf.remaining > 0 {
		return nil
	}
	if conf.onDone != nil {
		conf.onDone(conf.nack)
		return nil
	}
	ch, cs := conf.ch, conf.cs
	if ch.confirms != cs || ch.closing.Load() || ch.c.gone {
		return nil
	}
	cs.results[conf.seq] = conf.nack
	return ch
}

// confirmDue adds ch, if not nil, to the channels whose confirms are due.
func confirmDue(due []*channel, ch *channel) []*channel {
	if ch == nil || slices.Contains(due, ch) {
		return due
	}
	return append(due, ch)
}

// flushConfirms sends the confirms that are due. Server.mu held.
func (s *Server) flushConfirms(ch *channel) {
	cs := ch.confirms
	if cs == nil {
		return
	}
	cs.dirty = false
	for {
		nack, ok := cs.results[cs.low]
		if !ok {
			return
		}
		end := cs.low
		for {
			n, ok := cs.results[end+1]
			if !ok || n != nack {
				break
			}
			end++
		}
		for t := cs.low; t <= end; t++ {
			delete(cs.results, t)
		}
		multiple := end > cs.low
		if nack {
			ch.send(&wire.BasicNack{DeliveryTag: end, Multiple: multiple})
		} else {
			ch.send(&wire.BasicAck{DeliveryTag: end, Multiple: multiple})
			s.stats.Confirmed += end - cs.low + 1
		}
		cs.low = end + 1
	}
}

// flushDirty sends the deferred confirms of c's channels. Server.mu not
// held.
func (c *conn) flushDirty() {
	s := c.srv
	s.mu.Lock()
	for _, ch := range c.dirty {
		if ch.confirms != nil && ch.confirms.dirty && !ch.closing.Load() {
			s.flushConfirms(ch)
		}
	}
	c.dirty = c.dirty[:0]
	s.mu.Unlock()
}
