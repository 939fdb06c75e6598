package amqp

import (
	"strings"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// This file holds the queue class's methods and queue deletion.

func (ch *channel) queueDeclare(m *wire.QueueDeclare) *amqpError {
	s := ch.c.srv
	c := ch.c
	vh := c.vh
	name := m.Queue
	s.mu.Lock()
	if m.Passive {
		q, e := ch.lookupQueue(name, m)
		if e != nil {
			s.mu.Unlock()
			return e
		}
		q.lastUse = time.Now()
		ok := &wire.QueueDeclareOk{Queue: q.name, MessageCount: uint32(q.count()), ConsumerCount: uint32(len(q.consumers))}
		s.mu.Unlock()
		if !m.NoWait {
			ch.send(ok)
		}
		return nil
	}
	if name == "" {
		name = randomName("amq.gen-")
	} else if strings.HasPrefix(name, "amq.") {
		s.mu.Unlock()
		return chErr(wire.AccessRefused, m, "queue name '%s' contains reserved prefix 'amq.*'", name)
	}
	if q := vh.queues[name]; q != nil {
		defer s.mu.Unlock()
		if q.exclusive && q.owner != c {
			return chErr(wire.ResourceLocked, m, "cannot obtain exclusive access to locked queue '%s' in vhost '%s'", name, vh.name)
		}
		for _, d := range []struct {
			arg      string
			got, has bool
		}{{"durable", m.Durable, q.durable}, {"exclusive", m.Exclusive, q.exclusive}, {"auto_delete", m.AutoDelete, q.autoDelete}} {
			if d.got != d.has {
				return chErr(wire.PreconditionFailed, m, "inequivalent arg '%s' for queue '%s' in vhost '%s': received '%s' but current is '%s'", d.arg, name, vh.name, boolText(d.got), boolText(d.has))
			}
		}
		if arg, ok := queueArgsEquivalent(m.Arguments, q.args); !ok {
			return chErr(wire.PreconditionFailed, m, "inequivalent arg '%s' for queue '%s' in vhost '%s'", arg, name, vh.name)
		}
		q.lastUse = time.Now()
		if !m.NoWait {
			ch.send(&wire.QueueDeclareOk{Queue: q.name, MessageCount: uint32(q.count()), ConsumerCount: uint32(len(q.consumers))})
		}
		return nil
	}
	qa, err := parseQueueArgs(m.Arguments)
	if err != nil {
		s.mu.Unlock()
		return chErr(wire.PreconditionFailed, m, "%v", err)
	}
	raw, err := encodeArgs(m.Arguments)
	if err != nil {
		s.mu.Unlock()
		return chErr(wire.PreconditionFailed, m, "arguments: %v", err)
	}
	q := &queue{vh: vh, name: name, durable: m.Durable, exclusive: m.Exclusive, autoDelete: m.AutoDelete,
		args: m.Arguments, argsRaw: raw, qa: qa, lastUse: time.Now(), levels: make([]msgList, int(qa.maxPrio)+1)}
	persist := q.durable && !q.exclusive && s.opts.Backend != nil
	if persist {
		// A queue of this name being deleted must be gone first.
		for {
			wait := s.durable.deleting[vhost2key(vh.name, name)]
			if wait == nil {
				break
			}
			s.mu.Unlock()
			<-wait
			s.mu.Lock()
		}
		if vh.queues[name] != nil { // declared meanwhile: start again
			s.mu.Unlock()
			return ch.queueDeclare(m)
		}
		ctx, cancel := opContext()
		log, err := s.opts.Backend.OpenQueue(ctx, vh.name, name)
		cancel()
		if err != nil {
			s.mu.Unlock()
			return chErr(wire.InternalError, m, "cannot open the log of queue '%s': %v", name, err)
		}
		// A log left by an earlier queue of this name starts where it
		// was committed; its messages are not this queue's.
		q.dur = newDurableQueue(log, 0)
		s.durable.logs[q] = log
		s.defsVer++
	}
	if q.exclusive {
		q.owner = c
		c.exclusive[q] = struct{}{}
	}
	vh.queues[name] = q
	if q.qa.ttl >= 0 || q.qa.expires > 0 {
		s.addTimedLocked(q)
	}
	ok := &wire.QueueDeclareOk{Queue: name}
	s.mu.Unlock()
	if persist {
		if e := s.saveDefs(m); e != nil {
			return e
		}
	}
	if !m.NoWait {
		ch.send(ok)
	}
	return nil
}

// count is the messages of the queue ready for delivery.
func (q *queue) count() int { return q.readyLen() }

// purge drops q's ready messages and returns how many. Server.mu held.
func (s *Server) purge(q *queue) int {
	n := q.readyLen()
	for q.readyLen() > 0 {
		s.messageGone(q, q.pop())
	}
	return n
}

func (ch *channel) queuePurge(m *wire.QueuePurge) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	q, e := ch.lookupQueue(m.Queue, m)
	if e != nil {
		s.mu.Unlock()
		return e
	}
	n := s.purge(q)
	s.mu.Unlock()
	if !m.NoWait {
		ch.send(&wire.QueuePurgeOk{MessageCount: uint32(n)})
	}
	return nil
}

func (ch *channel) queueDelete(m *wire.QueueDelete) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	q := ch.c.vh.queues[m.Queue]
	if q == nil {
		s.mu.Unlock()
		if !m.NoWait {
			ch.send(&wire.QueueDeleteOk{})
		}
		return nil
	}
	q, e := ch.lookupQueue(m.Queue, m)
	if e != nil {
		s.mu.Unlock()
		return e
	}
	if m.IfUnused && len(q.consumers) > 0 {
		s.mu.Unlock()
		return chErr(wire.PreconditionFailed, m, "queue '%s' in vhost '%s' in use", q.name, q.vh.name)
	}
	if m.IfEmpty && q.count() > 0 {
		s.mu.Unlock()
		return chErr(wire.PreconditionFailed, m, "queue '%s' in vhost '%s' is not empty", q.name, q.vh.name)
	}
	n := q.count()
	before := s.defsVer
	wait := s.deleteQueue(q, true)
	save := s.defsVer != before
	s.mu.Unlock()
	if wait != nil {
		<-wait
	}
	if save {
		if e := s.saveDefs(m); e != nil {
			return e
		}
	}
	if !m.NoWait {
		ch.send(&wire.QueueDeleteOk{MessageCount: uint32(n)})
	}
	return nil
}

// deleteQueue removes q: its consumers are cancelled (basic.cancel to
// clients that handle it, when notify), its bindings removed, its
// messages dropped; a durable queue's log is closed and deleted by the
// durable worker, and the returned channel closes when that is done.
// Server.mu held.
func (s *Server) deleteQueue(q *queue, notify bool) chan struct{} {
	if q.deleted {
		return nil
	}
	q.deleted = true
	vh := q.vh
	delete(vh.queues, q.name)
	delete(s.timed, q)
	if q.owner != nil {
		delete(q.owner.exclusive, q)
	}
	for _, cons := range append([]*consumer(nil), q.consumers...) {
		s.removeConsumer(cons, true)
		if cons.ch.c.cancelNotify && !cons.ch.closing.Load() && !cons.ch.c.gone {
			cons.ch.send(&wire.BasicCancel{ConsumerTag: cons.tag, NoWait: true})
		}
	}
	for _, b := range append([]*binding(nil), q.bindings...) {
		s.unbind(b)
	}
	q.clearReady()
	if q.dur == nil {
		return nil
	}
	s.defsVer++
	return s.durable.drop(q)
}
