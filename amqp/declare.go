package amqp

import (
	"strings"

	"github.com/smartgo/smartgo/amqp/wire"
)

// This file holds the exchange and queue classes: declare, delete, bind,
// unbind, purge.

func boolText(b bool) string {
	if b {
		return "true"
	}
	return "false"
}

func (ch *channel) exchangeDeclare(m *wire.ExchangeDeclare) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	vh := ch.c.vh
	x := vh.exchanges[m.Exchange]
	if m.Passive {
		s.mu.Unlock()
		if x == nil {
			return chErr(wire.NotFound, m, "no exchange '%s' in vhost '%s'", m.Exchange, vh.name)
		}
		if !m.NoWait {
			ch.send(&wire.ExchangeDeclareOk{})
		}
		return nil
	}
	if m.Exchange == "" || strings.HasPrefix(m.Exchange, "amq.") {
		s.mu.Unlock()
		return chErr(wire.AccessRefused, m, "exchange name '%s' contains reserved prefix 'amq.*' or is the default exchange", m.Exchange)
	}
	if !knownExchangeType(m.Type) {
		s.mu.Unlock()
		return connErr(wire.CommandInvalid, m, "unknown exchange type '%s'", m.Type)
	}
	if x != nil {
		s.mu.Unlock()
		switch {
		case x.typ != m.Type:
			return chErr(wire.PreconditionFailed, m, "inequivalent arg 'type' for exchange '%s' in vhost '%s': received '%s' but current is '%s'", m.Exchange, vh.name, m.Type, x.typ)
		case x.durable != m.Durable:
			return chErr(wire.PreconditionFailed, m, "inequivalent arg 'durable' for exchange '%s' in vhost '%s': received '%s' but current is '%s'", m.Exchange, vh.name, boolText(m.Durable), boolText(x.durable))
		case x.autoDelete != m.AutoDelete:
			return chErr(wire.PreconditionFailed, m, "inequivalent arg 'auto_delete' for exchange '%s' in vhost '%s': received '%s' but current is '%s'", m.Exchange, vh.name, boolText(m.AutoDelete), boolText(x.autoDelete))
		case x.internal != m.Internal:
			return chErr(wire.PreconditionFailed, m, "inequivalent arg 'internal' for exchange '%s' in vhost '%s': received '%s' but current is '%s'", m.Exchange, vh.name, boolText(m.Internal), boolText(x.internal))
		}
		if !m.NoWait {
			ch.send(&wire.ExchangeDeclareOk{})
		}
		return nil
	}
	raw, err := encodeArgs(m.Arguments)
	if err != nil {
		s.mu.Unlock()
		return chErr(wire.PreconditionFailed, m, "arguments: %v", err)
	}
	x = &exchange{vh: vh, name: m.Exchange, typ: m.Type, durable: m.Durable, autoDelete: m.AutoDelete,
		internal: m.Internal, args: m.Arguments, argsRaw: raw}
	vh.exchanges[x.name] = x
	if x.durable {
		s.defsVer++
	}
	s.mu.Unlock()
	if x.durable {
		if e := s.saveDefs(m); e != nil {
			return e
		}
	}
	if !m.NoWait {
		ch.send(&wire.ExchangeDeclareOk{})
	}
	return nil
}

func (ch *channel) exchangeDelete(m *wire.ExchangeDelete) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	vh := ch.c.vh
	if m.Exchange == "" || strings.HasPrefix(m.Exchange, "amq.") {
		s.mu.Unlock()
		return chErr(wire.AccessRefused, m, "operation not permitted on exchange '%s' in vhost '%s'", m.Exchange, vh.name)
	}
	x := vh.exchanges[m.Exchange]
	if x == nil {
		s.mu.Unlock()
		if !m.NoWait {
			ch.send(&wire.ExchangeDeleteOk{})
		}
		return nil
	}
	if m.IfUnused && len(x.bindings) > 0 {
		s.mu.Unlock()
		return chErr(wire.PreconditionFailed, m, "exchange '%s' in vhost '%s' in use", m.Exchange, vh.name)
	}
	save := s.deleteExchange(x)
	s.mu.Unlock()
	if save {
		if e := s.saveDefs(m); e != nil {
			return e
		}
	}
	if !m.NoWait {
		ch.send(&wire.ExchangeDeleteOk{})
	}
	return nil
}

// deleteExchange removes x and every binding from or to it; it reports
// whether durable definitions changed. Server.mu held.
func (s *Server) deleteExchange(x *exchange) bool {
	vh := x.vh
	if x.deleted {
		return false
	}
	x.deleted = true
	delete(vh.exchanges, x.name)
	save := x.durable
	for _, b := range x.bindings {
		if b.dstQ != nil {
			b.dstQ.bindings = removeBinding(b.dstQ.bindings, b)
		}
	}
	x.bindings = nil
	for _, src := range vh.exchanges {
		var gone []*binding
		for _, b := range src.bindings {
			if b.dstX == x {
				gone = append(gone, b)
			}
		}
		for _, b := range gone {
			if s.unbind(b) {
				save = true
			}
		}
	}
	if save {
		s.defsVer++
	}
	return save
}

func removeBinding(list []*binding, b *binding) []*binding {
	for i, o := range list {
		if o == b {
			return append(list[:i], list[i+1:]...)
		}
	}
	return list
}

// unbind removes b; an auto-delete source left without bindings goes too.
// It reports whether durable definitions changed. Server.mu held.
func (s *Server) unbind(b *binding) bool {
	save := b.src.durable && (b.dstQ != nil && b.dstQ.dur != nil || b.dstX != nil && b.dstX.durable)
	b.src.bindings = removeBinding(b.src.bindings, b)
	if b.dstQ != nil {
		b.dstQ.bindings = removeBinding(b.dstQ.bindings, b)
	}
	if b.src.autoDelete && len(b.src.bindings) == 0 && !b.src.deleted {
		if s.deleteExchange(b.src) {
			save = true
		}
	}
	if save {
		s.defsVer++
	}
	return save
}

// bindingArgs encodes a binding's arguments once.
func newBinding(src *exchange, key string, args wire.Table) (*binding, error) {
	raw, err := encodeArgs(args)
	if err != nil {
		return nil, err
	}
	b := &binding{src: src, key: key, args: args, argsRaw: raw}
	if src.typ == typeTopic {
		b.topic = strings.Split(key, ".")
	}
	return b, nil
}

func (ch *channel) exchangeBind(dst, src, key string, args wire.Table, noWait, bind bool, m wire.Method) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	vh := ch.c.vh
	if dst == "" || src == "" {
		s.mu.Unlock()
		return chErr(wire.AccessRefused, m, "operation not permitted on the default exchange")
	}
	d, sx := vh.exchanges[dst], vh.exchanges[src]
	if d == nil || sx == nil {
		s.mu.Unlock()
		missing := dst
		if sx == nil {
			missing = src
		}
		return chErr(wire.NotFound, m, "no exchange '%s' in vhost '%s'", missing, vh.name)
	}
	var ok wire.Method
	switch {
	case noWait:
	case bind:
		ok = &wire.ExchangeBindOk{}
	default:
		ok = &wire.ExchangeUnbindOk{}
	}
	return ch.bindLocked(sx, key, args, func(nb *binding) { nb.dstX = d }, bind, m, ok)
}

// bindLocked makes the binding of src with key and args, has dst set its
// destination, and adds it (bind) or removes its equal; it saves the
// definitions when a durable binding changed, then sends ok unless it is
// nil. Called with Server.mu held (the lookups of source and
// destination and the change are one step); it releases it.
func (ch *channel) bindLocked(src *exchange, key string, args wire.Table, dst func(*binding), bind bool, m, ok wire.Method) *amqpError {
	s := ch.c.srv
	nb, err := newBinding(src, key, args)
	if err != nil {
		s.mu.Unlock()
		return chErr(wire.PreconditionFailed, m, "arguments: %v", err)
	}
	dst(nb)
	save := s.applyBinding(nb, bind)
	s.mu.Unlock()
	if save {
		if e := s.saveDefs(m); e != nil {
			return e
		}
	}
	if ok != nil {
		ch.send(ok)
	}
	return nil
}

// applyBinding adds nb (bind) or removes its equal (unbind); it reports
// whether durable definitions changed. Server.mu held.
func (s *Server) applyBinding(nb *binding, bind bool) bool {
	for _, b := range nb.src.bindings {
		if b.same(nb) {
			if bind {
				return false
			}
			return s.unbind(b)
		}
	}
	if !bind {
		return false
	}
	nb.src.bindings = append(nb.src.bindings, nb)
	if nb.dstQ != nil {
		nb.dstQ.bindings = append(nb.dstQ.bindings, nb)
	}
	if nb.src.durable && (nb.dstQ != nil && nb.dstQ.dur != nil || nb.dstX != nil && nb.dstX.durable) {
		s.defsVer++
		return true
	}
	return false
}

func (ch *channel) queueBind(qname, xname, key string, args wire.Table, noWait, bind bool, m wire.Method) *amqpError {
	s := ch.c.srv
	s.mu.Lock()
	vh := ch.c.vh
	q, e := ch.lookupQueue(qname, m)
	if e != nil {
		s.mu.Unlock()
		return e
	}
	if xname == "" {
		s.mu.Unlock()
		return chErr(wire.AccessRefused, m, "operation not permitted on the default exchange")
	}
	x := vh.exchanges[xname]
	if x == nil {
		s.mu.Unlock()
		return chErr(wire.NotFound, m, "no exchange '%s' in vhost '%s'", xname, vh.name)
	}
	var ok wire.Method
	switch {
	case !bind:
		ok = &wire.QueueUnbindOk{} // queue.unbind has no no-wait
	case !noWait:
		ok = &wire.QueueBindOk{}
	}
	return ch.bindLocked(x, key, args, func(nb *binding) { nb.dstQ = q }, bind, m, ok)
}

// lookupQueue finds a queue the channel's connection may use: 404 when
// missing, 405 when another connection's exclusive queue. Server.mu held.
func (ch *channel) lookupQueue(name string, m wire.Method) (*queue, *amqpError) {
	vh := ch.c.vh
	q := vh.queues[name]
	if q == nil {
		return nil, chErr(wire.NotFound, m, "no queue '%s' in vhost '%s'", name, vh.name)
	}
	if q.exclusive && q.owner != ch.c {
		return nil, chErr(wire.ResourceLocked, m, "cannot obtain exclusive access to locked queue '%s' in vhost '%s'", name, vh.name)
	}
	return q, nil
}

// encodeArgs is a field table as Definitions store it: without the
// leading length.
func encodeArgs(t wire.Table) ([]byte, error) {
	if len(t) == 0 {
		return nil, nil
	}
	b, err := wire.AppendTable(nil, t)
	if err != nil {
		return nil, err
	}
	return b[4:], nil
}

// decodeArgs reverses encodeArgs.
func decodeArgs(raw []byte) (wire.Table, error) {
	if len(raw) == 0 {
		return wire.Table{}, nil
	}
	b := make([]byte, 4+len(raw))
	b[0], b[1], b[2], b[3] = byte(len(raw)>>24), byte(len(raw)>>16), byte(len(raw)>>8), byte(len(raw))
	copy(b[4:], raw)
	t, _, err := wire.DecodeTable(b)
	return t, err
}
