package amqp

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// Durability. A durable queue (on a Backend) appends every message it
// takes to its QueueLog; the message is deliverable at once (as in
// RabbitMQ), and its publisher's confirm waits until the log reports it
// stored. A message whose store failed stays in the queue (in memory
// only); its publisher gets basic.nack under confirms, otherwise its
// channel is closed with 541 INTERNAL_ERROR. Acks advance the queue's low-water mark, the first offset still held
// (ready, unacked or being stored); the durable worker commits it every
// commitEvery and when the server closes. At start each durable queue's
// messages from the committed offset on are ready again, redelivered.

// commitEvery batches commits of acknowledged offsets.
const commitEvery = 200 * time.Millisecond

// opTimeout bounds one Backend call the engine makes.
const opTimeout = 30 * time.Second

func opContext() (context.Context, context.CancelFunc) {
	return context.WithTimeout(context.Background(), opTimeout)
}

// recoverBatch is how many messages a restart reads from a log at once.
const recoverBatch = 1024

// durableQueue is the log state of a durable queue. Guarded by Server.mu.
type durableQueue struct {
	log       QueueLog
	appending []*appendEntry // in Append order
	live      offsetSet      // offsets stored and not yet gone
	low       uint64         // first offset that may still be live
	knownEnd  uint64         // offsets below are all known (stored or gone)
	committed uint64         // last commit handed to the worker
	dirty     bool
}

func newDurableQueue(log QueueLog, committed uint64) *durableQueue {
	return &durableQueue{log: log, low: committed, knownEnd: committed, committed: committed}
}

// appendEntry is one message on its way into a log.
type appendEntry struct {
	ch     *channel // the publisher's; nil for dead-lettered messages
	q      *queue
	m      *qmsg
	conf   *pubConfirm
	done   bool
	err    error
	offset uint64
}

// gone records that the message at offset left the queue for good.
func (d *durableQueue) gone(offset uint64) {
	d.live.remove(offset)
	d.advance()
}

func (d *durableQueue) advance() {
	for d.low < d.knownEnd {
		if d.live.has(d.low) {
			break
		}
		d.low++
	}
	if d.low != d.committed {
		d.dirty = true
	}
}

// durableWorker is the server's goroutine for queue logs: it calls
// Append in the order messages were enqueued, commits low-water marks,
// and closes and deletes the logs of deleted queues, all in one order so
// a log is never used after its Close.
type durableWorker struct {
	s        *Server
	mu       sync.Mutex
	jobs     []durableJob
	wake     chan struct{}
	stop     chan struct{}            // closed when every connection has ended
	deleting map[string]chan struct{} // vhost/queue being deleted; guarded by Server.mu
	logs     map[*queue]QueueLog      // open logs; guarded by Server.mu
	closed   bool
}

type durableJob struct {
	q    *queue
	e    *appendEntry // an append; nil: close and delete q's log (or a gap)
	done chan struct{}
	// gap, when set: read the log's messages at offsets [gap[0], gap[1])
	// into the queue (see loadGap).
	gap *[2]uint64
}

func newDurableWorker(s *Server) *durableWorker {
	return &durableWorker{s: s, wake: make(chan struct{}, 1), stop: make(chan struct{}), deleting: map[string]chan struct{}{}, logs: map[*queue]QueueLog{}}
}

func vhost2key(vhost, name string) string { return vhost + "\x00" + name }

func (w *durableWorker) push(j durableJob) {
	w.mu.Lock()
	w.jobs = append(w.jobs, j)
	w.mu.Unlock()
	select {
	case w.wake <- struct{}{}:
	default:
	}
}

// append queues qm for q's log. Server.mu held.
func (w *durableWorker) append(ch *channel, q *queue, qm *qmsg, conf *pubConfirm) {
	e := &appendEntry{ch: ch, q: q, m: qm, conf: conf}
	q.dur.appending = append(q.dur.appending, e)
	w.push(durableJob{q: q, e: e})
}

// drop queues the close and deletion of q's log; the channel closes when
// done. Server.mu held.
func (w *durableWorker) drop(q *queue) chan struct{} {
	done := make(chan struct{})
	w.deleting[vhost2key(q.vh.name, q.name)] = done
	for _, e := range q.dur.appending {
		if e.conf != nil {
			w.s.confirmStep(e.conf, false, true)
		}
	}
	q.dur.appending = nil
	w.push(durableJob{q: q, done: done})
	return done
}

// run serves jobs and periodic commits until the server's context ends,
// then finishes the queued jobs.
func (w *durableWorker) run() {
	t := time.NewTicker(commitEvery)
	defer t.Stop()
	for {
		select {
		case <-w.wake:
			w.runJobs()
		case <-t.C:
			w.commit()
		case <-w.stop:
			w.runJobs()
			return
		}
	}
}

func (w *durableWorker) runJobs() {
	for {
		w.mu.Lock()
		jobs := w.jobs
		w.jobs = nil
		w.mu.Unlock()
		if len(jobs) == 0 {
			return
		}
		for i := 0; i < len(jobs); {
			j := jobs[i]
			if j.gap != nil {
				w.loadGap(j.q, j.gap[0], j.gap[1])
				i++
				continue
			}
			if j.e == nil {
				w.dropLog(j)
				i++
				continue
			}
			// A run of appends to one queue becomes one Append.
			k := i + 1
			for k < len(jobs) && jobs[k].q == j.q && jobs[k].e != nil {
				k++
			}
			w.appendRun(j.q, jobs[i:k])
			i = k
		}
	}
}

func (w *durableWorker) appendRun(q *queue, jobs []durableJob) {
	entries := make([]*appendEntry, len(jobs))
	msgs := make([]StoredMessage, len(jobs))
	for i, j := range jobs {
		entries[i] = j.e
		md := j.e.m.m
		msgs[i] = StoredMessage{Exchange: md.exchange, RoutingKey: md.key, Properties: md.props, Body: md.body}
	}
	q.dur.log.Append(msgs, func(first uint64, err error) {
		w.s.appended(q, entries, first, err)
	})
}

// appended is the done of an Append: the entries at the head of the
// queue's appending list that are done become ready (or are nacked).
func (s *Server) appended(q *queue, entries []*appendEntry, first uint64, err error) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if err != nil {
		s.logLimited("amqp: storing messages failed", "queue", q.name, "err", err)
	}
	for i, e := range entries {
		e.done, e.err, e.offset = true, err, first+uint64(i)
	}
	d := q.dur
	if q.deleted {
		return
	}
	// The confirms that became due are flushed at the end: one
	// basic.ack (multiple) for the run rather than one per message.
	var due []*channel
	defer func() {
		for _, ch := range due {
			if !ch.closing.Load() {
				s.flushConfirms(ch)
			}
		}
	}()
	for len(d.appending) > 0 && d.appending[0].done {
		e := d.appending[0]
		d.appending[0] = nil
		d.appending = d.appending[1:]
		if e.err != nil {
			if e.conf != nil {
				due = confirmDue(due, s.confirmRecord(e.conf, true))
			} else if e.ch != nil {
				// No confirms: the publisher learns of it by its
				// channel's closing.
				s.asyncChannelError(e.ch, chErr(wire.InternalError, &wire.BasicPublish{},
					"cannot store the message in queue '%s': %v", q.name, e.err))
			}
			continue
		}
		e.m.offset, e.m.stored = e.offset, true
		if !e.m.gone {
			d.live.add(e.offset)
		}
		if e.offset > d.knownEnd {
			s.gapFound(q, d.knownEnd, e.offset)
		}
		if e.offset+1 > d.knownEnd {
			d.knownEnd = e.offset + 1
		}
		d.advance()
		if e.conf != nil {
			due = confirmDue(due, s.confirmRecord(e.conf, false))
		}
	}
}

// asyncChannelError closes ch with e from a goroutine other than its
// connection's reader (which then ignores the channel's frames but close
// and close-ok). Server.mu held.
func (s *Server) asyncChannelError(ch *channel, e *amqpError) {
	if ch.closing.Load() || ch.c.gone || ch.c.channels[ch.id] != ch {
		return
	}
	s.closeChannel(ch)
	ch.closing.Store(true)
	ch.send(&wire.ChannelClose{ReplyCode: e.code, ReplyText: e.text, FailingClassID: e.classID, FailingMethodID: e.methodID})
}

// gapFound: the log stored a message at an offset past every one the
// engine knows, so the offsets [from, to) hold messages the engine does
// not: stored before a crash but not yet readable when the queue was
// loaded (a broker restarted on a full disk indexes its last records
// only once space frees), or stored by an append whose outcome was
// reported as a failure. They are held (the low-water mark stays below
// them, so no commit passes them) until the durable worker has read them
// into the queue. Server.mu held.
func (s *Server) gapFound(q *queue, from, to uint64) {
	s.log.Warn("amqp: a durable queue's log holds messages the queue did not load; reading them", "queue", q.name,
		"from", from, "to", to)
	for o := from; o < to; o++ {
		q.dur.live.add(o)
	}
	s.durable.push(durableJob{q: q, gap: &[2]uint64{from, to}})
}

// loadGap reads the messages at offsets [from, to) of q's log and makes
// them ready (delivered at least once: a failed append's messages may be
// in the queue already). Offsets the log does not return (removed,
// damaged) are let go; a read that fails keeps them held, so a restart
// loads them.
func (w *durableWorker) loadGap(q *queue, from, to uint64) {
	s := w.s
	var msgs []StoredMessage
	var err error
	for off := from; off < to; {
		ctx, cancel := opContext()
		got, rerr := q.dur.log.Read(ctx, off, min(recoverBatch, int(to-off)))
		cancel()
		if rerr != nil {
			err = rerr
			break
		}
		if len(got) == 0 {
			break
		}
		for _, m := range got {
			if m.Offset < to {
				msgs = append(msgs, m)
			}
		}
		off = got[len(got)-1].Offset + 1
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	if q.deleted {
		return
	}
	if err != nil {
		s.logLimited("amqp: reading messages the queue did not load failed; a restart loads them", "queue", q.name,
			"from", from, "to", to, "err", err)
		return
	}
	now := time.Now()
	got := map[uint64]bool{}
	for _, sm := range msgs {
		if !q.dur.live.has(sm.Offset) || got[sm.Offset] {
			continue
		}
		got[sm.Offset] = true
		q.pushStored(sm, now, false)
	}
	for o := from; o < to; o++ {
		if !got[o] {
			q.dur.live.remove(o)
		}
	}
	q.dur.advance()
	s.log.Warn("amqp: messages the queue did not load are ready again", "queue", q.name, "from", from, "to", to, "read", len(got))
	s.dispatch(q)
}

func (s *Server) logLimited(msg string, args ...any) {
	if ok, dropped := s.logLimit.allow(); ok {
		s.log.Warn(msg, append(args, "suppressed", dropped)...)
	}
}

func (w *durableWorker) dropLog(j durableJob) {
	s := w.s
	q := j.q
	if err := q.dur.log.Close(); err != nil {
		s.logLimited("amqp: closing a deleted queue's log", "queue", q.name, "err", err)
	}
	ctx, cancel := opContext()
	defer cancel()
	if err := s.opts.Backend.DeleteQueue(ctx, q.vh.name, q.name); err != nil {
		s.logLimited("amqp: deleting a queue's log", "queue", q.name, "err", err)
	}
	s.mu.Lock()
	delete(w.logs, q)
	delete(w.deleting, vhost2key(q.vh.name, q.name))
	s.mu.Unlock()
	close(j.done)
	// Deletions the client did not ask for (auto-delete, x-expires,
	// exclusive owners) still change the saved definitions.
	if e := s.saveDefs(nil); e != nil {
		s.logLimited("amqp: saving definitions after a queue deletion", "err", e)
	}
}

// commit hands each durable queue's low-water mark to its log.
func (w *durableWorker) commit() {
	s := w.s
	type c struct {
		log QueueLog
		off uint64
	}
	var cs []c
	s.mu.Lock()
	for q, log := range w.logs {
		if q.dur.dirty && !q.deleted {
			q.dur.dirty = false
			q.dur.committed = q.dur.low
			cs = append(cs, c{log, q.dur.low})
		}
	}
	s.mu.Unlock()
	for _, c := range cs {
		ctx, cancel := opContext()
		if err := c.log.Commit(ctx, c.off); err != nil {
			s.logLimited("amqp: committing an acknowledged offset", "err", err)
		}
		cancel()
	}
}

// closeLogs commits and closes every open log (Server.Close, after the
// worker ended).
func (w *durableWorker) closeLogs() error {
	w.mu.Lock()
	if w.closed {
		w.mu.Unlock()
		return nil
	}
	w.closed = true
	w.mu.Unlock()
	w.commit()
	s := w.s
	s.mu.Lock()
	logs := w.logs
	w.logs = map[*queue]QueueLog{}
	s.mu.Unlock()
	var errs []error
	for q, log := range logs {
		if err := log.Close(); err != nil {
			errs = append(errs, fmt.Errorf("amqp: close log of queue %q: %w", q.name, err))
		}
	}
	return errors.Join(errs...)
}

// recover loads the saved definitions and the durable queues' messages.
func (s *Server) recover(ctx context.Context) error {
	b := s.opts.Backend
	defs, err := b.LoadDefinitions(ctx)
	if err != nil {
		return fmt.Errorf("amqp: load definitions: %w", err)
	}
	s.mu.Lock()
	defer s.mu.Unlock()
	// Definitions of a virtual host no longer in Options.VirtualHosts are
	// kept (and saved again) but no client can open it.
	vhost := func(name string) *vhost {
		vh := s.vhosts[name]
		if vh == nil {
			vh = newVhost(name)
			s.vhosts[name] = vh
		}
		return vh
	}
	for _, d := range defs.Exchanges {
		vh := vhost(d.VHost)
		if isBuiltinExchange(d.Name) || !knownExchangeType(d.Type) {
			continue
		}
		args, err := decodeArgs(d.Arguments)
		if err != nil {
			return fmt.Errorf("amqp: exchange %q: arguments: %w", d.Name, err)
		}
		vh.exchanges[d.Name] = &exchange{vh: vh, name: d.Name, typ: d.Type, durable: true,
			autoDelete: d.AutoDelete, internal: d.Internal, args: args, argsRaw: d.Arguments}
	}
	for _, d := range defs.Queues {
		vh := vhost(d.VHost)
		args, err := decodeArgs(d.Arguments)
		if err != nil {
			return fmt.Errorf("amqp: queue %q: arguments: %w", d.Name, err)
		}
		qa, err := parseQueueArgs(args)
		if err != nil {
			return fmt.Errorf("amqp: queue %q: %w", d.Name, err)
		}
		q := &queue{vh: vh, name: d.Name, durable: true, autoDelete: d.AutoDelete, args: args,
			argsRaw: d.Arguments, qa: qa, lastUse: time.Now(), levels: make([]msgList, int(qa.maxPrio)+1)}
		if err := s.loadQueue(ctx, q); err != nil {
			return err
		}
		vh.queues[d.Name] = q
		if qa.ttl >= 0 || qa.expires > 0 {
			s.addTimedLocked(q)
		}
	}
	for _, d := range defs.Bindings {
		vh := vhost(d.VHost)
		src := vh.exchanges[d.Source]
		if src == nil || d.Source == "" {
			continue
		}
		args, err := decodeArgs(d.Arguments)
		if err != nil {
			return fmt.Errorf("amqp: binding from %q: arguments: %w", d.Source, err)
		}
		nb, err := newBinding(src, d.RoutingKey, args)
		if err != nil {
			return err
		}
		if d.ToExchange {
			if nb.dstX = vh.exchanges[d.Destination]; nb.dstX == nil {
				continue
			}
		} else if nb.dstQ = vh.queues[d.Destination]; nb.dstQ == nil {
			continue
		}
		s.applyBinding(nb, true)
	}
	s.defsSaved = s.defsVer
	return nil
}

// loadQueue opens q's log and makes its messages from the committed
// offset on ready again. Server.mu held.
func (s *Server) loadQueue(ctx context.Context, q *queue) error {
	log, err := s.opts.Backend.OpenQueue(ctx, q.vh.name, q.name)
	if err != nil {
		return fmt.Errorf("amqp: open queue %q: %w", q.name, err)
	}
	s.durable.logs[q] = log
	from, err := log.Committed(ctx)
	if err != nil {
		return fmt.Errorf("amqp: queue %q: committed offset: %w", q.name, err)
	}
	q.dur = newDurableQueue(log, from)
	now := time.Now()
	for {
		msgs, err := log.Read(ctx, from, recoverBatch)
		if err != nil {
			return fmt.Errorf("amqp: queue %q: read from %d: %w", q.name, from, err)
		}
		if len(msgs) == 0 {
			return nil
		}
		for _, sm := range msgs {
			q.pushStored(sm, now, true)
			q.dur.live.add(sm.Offset)
			from = sm.Offset + 1
		}
		q.dur.knownEnd = from
	}
}

// pushStored makes a message read from q's log ready. Server.mu held.
func (q *queue) pushStored(sm StoredMessage, now time.Time, redelivered bool) {
	md := &msgData{exchange: sm.Exchange, key: sm.RoutingKey, props: sm.Properties, body: sm.Body}
	qm := &qmsg{m: md, offset: sm.Offset, stored: true, redelivered: redelivered, prio: q.priority(md)}
	if ttl := md.ttl(); ttl >= 0 || q.qa.ttl >= 0 {
		qm.expireAt = q.expiry(now, ttl)
	}
	q.nextSeq++
	qm.seq = q.nextSeq
	q.pushReady(qm)
}

// saveDefs saves the current durable definitions unless a save after
// the last change already did. m is the method to blame on failure (nil:
// none, the caller logs). Server.mu not held.
func (s *Server) saveDefs(m wire.Method) *amqpError {
	b := s.opts.Backend
	if b == nil {
		return nil
	}
	s.defsMu.Lock()
	defer s.defsMu.Unlock()
	s.mu.Lock()
	ver := s.defsVer
	if s.defsSaved >= ver {
		s.mu.Unlock()
		return nil
	}
	defs := s.definitions()
	s.mu.Unlock()
	ctx, cancel := opContext()
	defer cancel()
	if err := b.SaveDefinitions(ctx, defs); err != nil {
		return chErr(wire.InternalError, m, "cannot save definitions: %v", err)
	}
	s.defsSaved = ver
	return nil
}

// definitions snapshots the durable entities. Server.mu held.
func (s *Server) definitions() Definitions {
	var d Definitions
	for _, vh := range s.vhosts {
		for _, x := range vh.exchanges {
			if !x.durable || isBuiltinExchange(x.name) {
				continue
			}
			d.Exchanges = append(d.Exchanges, ExchangeDef{VHost: vh.name, Name: x.name, Type: x.typ,
				AutoDelete: x.autoDelete, Internal: x.internal, Arguments: x.argsRaw})
		}
		for _, q := range vh.queues {
			if q.dur != nil {
				d.Queues = append(d.Queues, QueueDef{VHost: vh.name, Name: q.name, AutoDelete: q.autoDelete, Arguments: q.argsRaw})
			}
		}
		for _, x := range vh.exchanges {
			if !x.durable {
				continue
			}
			for _, b := range x.bindings {
				switch {
				case b.dstQ != nil && b.dstQ.dur != nil:
					d.Bindings = append(d.Bindings, BindingDef{VHost: vh.name, Source: x.name, Destination: b.dstQ.name,
						RoutingKey: b.key, Arguments: b.argsRaw})
				case b.dstX != nil && b.dstX.durable:
					d.Bindings = append(d.Bindings, BindingDef{VHost: vh.name, Source: x.name, Destination: b.dstX.name,
						ToExchange: true, RoutingKey: b.key, Arguments: b.argsRaw})
				}
			}
		}
	}
	return d
}
