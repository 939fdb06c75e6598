package remoting

import (
	"log/slog"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Processor serves one kind of request. It returns the response to write,
// or nil to write nothing now: either the request was one-way, or the
// processor keeps req and c and answers later with c.WriteResponse (long
// polling). A non-nil error is answered SYSTEM_ERROR with the error text as
// remark. Responses to one-way requests are never written.
type Processor interface {
	ProcessRequest(c *Conn, req *protocol.Command) (*protocol.Command, error)
}

// ProcessorFunc adapts a function to Processor.
type ProcessorFunc func(c *Conn, req *protocol.Command) (*protocol.Command, error)

// ProcessRequest implements Processor.
func (f ProcessorFunc) ProcessRequest(c *Conn, req *protocol.Command) (*protocol.Command, error) {
	return f(c, req)
}

type route struct {
	proc     Processor
	pool     *workerPool
	inline   bool // may run on the connection's reader (RegisterInline)
	noRetain bool // keeps no part of req.Body (RegisterOptions.NoRetain)
	// eager counts the next leads that hand off the reading before the
	// processor runs: set when the watchdog had to take the reading from
	// a lead of this route (its processor blocks).
	eager atomic.Int32
}

// task is one request for a pool (32 bytes: the queues hold up to
// QueueSize of them).
type task struct {
	c   *Conn
	req *protocol.Command
	r   *route
	at  int64 // when it was queued (monoNanos); 0 when it never was
}

// workerPool runs tasks on a bounded number of goroutines from a bounded
// queue.
//
// slots bounds the tasks of the pool that run at once to n: a worker holds
// a slot while it runs a task, and so does a connection reader that leads
// (runs a task itself, see mux.lead). Tasks run inline on a reader
// (RegisterInline) take no slot: they are bounded by busy < n on their own.
//
// pending counts the tasks queued or taken by a worker that waits for a
// slot; it bounds the accepted tasks not yet running to QueueSize. A
// request may skip the queue (lead or run inline) only while pending is 0,
// so it never overtakes a request queued before it.
type workerPool struct {
	name    string
	queue   chan task
	slots   chan struct{} // cap n: one element per task running on a slot
	n       int
	size    int          // QueueSize
	pending atomic.Int32 // queued or waiting for a slot
	busy    atomic.Int32 // tasks running: on workers, leading or inline
	// leaders lists the connections whose reader runs a task of the pool
	// with nobody reading (at most n: each holds a slot), for the watchdog.
	leaders []atomic.Pointer[Conn]
	// For PoolStats' head wait: the queue time of the last task a worker
	// took, and of the last task queued while nothing was pending. The
	// oldest task still queued was queued no earlier than either (FIFO).
	lastTakenAt atomic.Int64
	firstAt     atomic.Int64
}

// tryInline claims a busy slot for a task run inline on the reader
// goroutine: it succeeds only while nothing is pending and fewer than n
// tasks run, so inline work never overtakes queued requests and at most n
// tasks run inline at once (the workers may run n more from the queue
// meanwhile). The caller releases the slot with busy.Add(-1).
func (p *workerPool) tryInline() bool {
	if p.pending.Load() > 0 {
		return false
	}
	for {
		b := p.busy.Load()
		if int(b) >= p.n {
			return false
		}
		if p.busy.CompareAndSwap(b, b+1) {
			return true
		}
	}
}

// tryLead claims a slot for a task its reader runs (mux.lead): only while
// nothing is pending and a slot is free. The caller releases it with
// endLead.
func (p *workerPool) tryLead() bool {
	if p.pending.Load() > 0 {
		return false
	}
	select {
	case p.slots <- struct{}{}:
		p.busy.Add(1)
		return true
	default:
		return false
	}
}

func (p *workerPool) endLead() {
	p.busy.Add(-1)
	<-p.slots
}

// enqueue queues t unless QueueSize tasks are pending already.
func (p *workerPool) enqueue(t task) bool {
	n := p.pending.Add(1)
	if int(n) > p.size {
		p.pending.Add(-1)
		return false
	}
	t.at = monoNanos()
	if n == 1 {
		p.firstAt.Store(t.at)
	}
	select {
	case p.queue <- t: // len(queue) <= pending <= size: never blocks
		return true
	default:
		p.pending.Add(-1)
		return false
	}
}

// mux maps request codes to processors and their pools. Registration
// copies the table (registrations are rare, lookups constant).
type mux struct {
	log    *slog.Logger
	pools  [numPools]*workerPool
	routes atomic.Pointer[map[int32]*route]
	regMu  sync.Mutex // serializes registrations
	wg     sync.WaitGroup
	stop   chan struct{}
	once   sync.Once

	watching atomic.Bool   // the watchdog ticks (or was woken to)
	wake     chan struct{} // cap 1: starts the watchdog ticking
}

func newMux(log *slog.Logger, sizes func(Pool) PoolOptions) *mux {
	m := &mux{log: log, stop: make(chan struct{}), wake: make(chan struct{}, 1)}
	empty := map[int32]*route{}
	m.routes.Store(&empty)
	for p := Pool(0); p < numPools; p++ {
		po := sizes(p)
		m.pools[p] = &workerPool{
			name: p.String(), n: po.Workers, size: po.QueueSize,
			queue: make(chan task, po.QueueSize), slots: make(chan struct{}, po.Workers),
			leaders: make([]atomic.Pointer[Conn], po.Workers),
		}
	}
	return m
}

// start launches the workers, and the watchdog if readers may lead.
func (m *mux) start(watch bool) {
	for _, p := range m.pools {
		for i := 0; i < p.n; i++ {
			m.wg.Add(1)
			go m.work(p)
		}
	}
	if watch {
		m.wg.Add(1)
		go m.watch()
	}
}

// close stops the workers after the tasks already queued and waits.
func (m *mux) close() {
	m.once.Do(func() { close(m.stop) })
	m.wg.Wait()
}

func (m *mux) register(code int32, pool Pool, p Processor, ro RegisterOptions) {
	if pool >= numPools {
		pool = PoolDefault
	}
	m.regMu.Lock()
	defer m.regMu.Unlock()
	old := *m.routes.Load()
	next := make(map[int32]*route, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[code] = &route{proc: p, pool: m.pools[pool], inline: ro.Inline, noRetain: ro.NoRetain}
	m.routes.Store(&next)
}

// dispatch serves req from the reader goroutine of c. It returns ok when
// the caller is to lead: the task holds a slot of its pool, and the caller
// hands the reading of c to another goroutine and then runs it with lead.
// Only readers of connections that can hand off (c.spawn set) lead.
func (m *mux) dispatch(c *Conn, req *protocol.Command) (t task, ok bool) {
	r, found := (*m.routes.Load())[req.Code]
	if !found {
		m.log.Debug("remoting: request code not supported", "peer", c.peer, "code", req.Code)
		c.answerInline(req, protocol.NewResponse(protocol.RequestCodeNotSupported, protocol.NotSupportedRemark(req.Code)))
		req.Recycle() // never seen by a processor
		return task{}, false
	}
	t = task{c: c, req: req, r: r}
	if r.inline {
		if r.pool.tryInline() {
			m.run(t, true)
			r.pool.busy.Add(-1)
			return task{}, false
		}
	} else if c.spawn != nil && r.pool.tryLead() {
		return t, true
	}
	if !r.pool.enqueue(t) {
		m.log.Warn("remoting: pool full, rejecting request", "pool", r.pool.name, "peer", c.peer, "code", req.Code)
		c.answerInline(req, protocol.NewResponse(protocol.SystemBusy, protocol.RemarkSystemBusy))
		req.Recycle() // never seen by a processor
	}
	return task{}, false
}

// Leading.
//
// A request for a pool with a free slot and nothing pending runs on the
// goroutine that read it, like an inline one, so that no other goroutine
// has to be woken for it (a wake-up of an idle P's thread per request is
// what the hand-off to a worker costs). Meanwhile nobody reads the
// connection; the watchdog, which ticks every watchPeriod while leads are
// under way, hands the reading to a new goroutine when it finds the same
// lead still running on two ticks in a row (it ran for between one and
// two periods at least). Whoever of the leader (done) and the watchdog
// (timeout) moves Conn.leadSeq from the lead's odd value on first decides:
// the leader reads on, or the new goroutine does and the leader stops
// once its processor returned. A route whose lead had to be taken over
// hands the reading off eagerly, before the processor runs, for its next
// eagerLeads leads, so blocking processors (a sync flush) do not stall
// their connection for a period each.
const (
	watchPeriod = time.Millisecond
	watchQuiet  = 100 // ticks without leads before the watchdog sleeps
	eagerLeads  = 10000
)

// lead runs t, whose slot dispatch claimed, on c's reader and releases the
// slot; it reports whether the reading was handed off meanwhile (then the
// caller must not touch the reader's state again).
func (m *mux) lead(c *Conn, t task) (handedOff bool) {
	p := t.r.pool
	defer p.endLead()
	if e := t.r.eager.Load(); e > 0 {
		t.r.eager.CompareAndSwap(e, e-1)
		c.spawn()
		m.run(t, false)
		return true
	}
	v := c.leadSeq.Load() + 1 // odd: a lead with nobody reading
	c.leadRoute.Store(t.r)
	c.leadSeq.Store(v)
	i := 0
	for !p.leaders[i].CompareAndSwap(nil, c) { // a free entry exists: we hold a slot
		i = (i + 1) % len(p.leaders)
	}
	if !m.watching.Load() && m.watching.CompareAndSwap(false, true) {
		select {
		case m.wake <- struct{}{}:
		default:
		}
	}
	resp, err := m.call(t)
	p.leaders[i].Store(nil)
	if c.leadSeq.CompareAndSwap(v, v+1) {
		// Still the reader: queue the answer for the batch's one write.
		m.respond(t, resp, err, true)
		return false
	}
	m.respond(t, resp, err, false)
	<-c.handed // the watchdog spawned the new reader
	return true
}

// watch is the watchdog: asleep until a lead starts, then ticking until
// watchQuiet ticks found no lead.
func (m *mux) watch() {
	defer m.wg.Done()
	tk := time.NewTicker(watchPeriod)
	tk.Stop()
	for {
		select {
		case <-m.wake:
		case <-m.stop:
			return
		}
		tk.Reset(watchPeriod)
		for quiet := 0; quiet < watchQuiet; {
			select {
			case <-tk.C:
			case <-m.stop:
				tk.Stop()
				return
			}
			if m.scan() {
				quiet = 0
			} else {
				quiet++
			}
		}
		tk.Stop()
		m.watching.Store(false)
		// A lead that started before the store saw watching set and did
		// not wake us; it is listed already, so this scan finds it.
		if m.scan() && m.watching.CompareAndSwap(false, true) {
			select {
			case m.wake <- struct{}{}:
			default:
			}
		}
	}
}

// scan hands off the reading of the connections whose lead it saw on the
// previous scan already, and reports whether any lead is under way.
func (m *mux) scan() bool {
	active := false
	for _, p := range m.pools {
		for i := range p.leaders {
			c := p.leaders[i].Load()
			if c == nil {
				continue
			}
			active = true
			v := c.leadSeq.Load()
			if v&1 == 0 {
				continue
			}
			if v != c.seenLead {
				c.seenLead = v
				continue
			}
			r := c.leadRoute.Load()
			if c.leadSeq.CompareAndSwap(v, v+1) {
				if r != nil {
					r.eager.Store(eagerLeads)
				}
				c.spawn()
				c.handed <- struct{}{}
			}
		}
	}
	return active
}

func (m *mux) work(p *workerPool) {
	defer m.wg.Done()
	for {
		select {
		case t := <-p.queue:
			m.runQueued(p, t)
		case <-m.stop:
			for { // drain what is queued, then stop
				select {
				case t := <-p.queue:
					m.runQueued(p, t)
				default:
					return
				}
			}
		}
	}
}

// runQueued runs a task taken from p's queue on a slot, waiting for one.
func (m *mux) runQueued(p *workerPool, t task) {
	p.lastTakenAt.Store(t.at)
	p.slots <- struct{}{}
	p.pending.Add(-1)
	p.busy.Add(1)
	m.run(t, false)
	p.busy.Add(-1)
	<-p.slots
}

// run serves t; inline (on the reader) queues the response for the
// reader's next flush.
//
// The request of a NoRetain processor is recycled once the processor
// returned and nothing written may still read its body: at once when there
// is no response; right after the response was queued when its Body is
// copied into the write buffer (at most copyBodyMax bytes, no BodyBuffers:
// send copies before it returns, so an echo may alias the request); else
// after the response was written or dropped, chained to its Release.
func (m *mux) run(t task, inline bool) {
	resp, err := m.call(t)
	m.respond(t, resp, err, inline)
}

// respond writes what the processor of t returned (see run).
func (m *mux) respond(t task, resp *protocol.Command, err error, inline bool) {
	if err != nil {
		m.log.Debug("remoting: processor failed", "peer", t.c.peer, "code", t.req.Code, "err", err)
		resp = protocol.NewResponse(protocol.SystemError, err.Error())
	}
	if resp == nil {
		if t.r.noRetain {
			t.req.Recycle()
		}
		return
	}
	recycleAfter := false
	if t.r.noRetain {
		if len(resp.Body) <= copyBodyMax && len(resp.BodyBuffers) == 0 {
			recycleAfter = true
		} else {
			resp.Release = recycleWith(resp.Release, t.req)
		}
	}
	if inline {
		_ = t.c.writeResponseLazy(t.req, resp)
	} else {
		_ = t.c.WriteResponse(t.req, resp)
	}
	if recycleAfter {
		t.req.Recycle()
	}
}

// recycleWith returns a release callback that runs release (if any) and
// then recycles req.
func recycleWith(release func(), req *protocol.Command) func() {
	return func() {
		if release != nil {
			release()
		}
		req.Recycle()
	}
}

// call runs the processor, turning a panic into an error so one bad
// request cannot take the process down.
func (m *mux) call(t task) (resp *protocol.Command, err error) {
	defer func() {
		if r := recover(); r != nil {
			m.log.Error("remoting: processor panic", "peer", t.c.peer, "code", t.req.Code, "panic", r)
			resp, err = nil, errPanic
		}
	}()
	return t.r.proc.ProcessRequest(t.c, t.req)
}
