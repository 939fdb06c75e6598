package remoting

import (
	"log/slog"
	"maps"
	"sync"
	"sync/atomic"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Processor serves one kind of request. It returns the response to write,
// or nil to write nothing now: either the request was one-way, or the
// processor keeps req and c and answers later with c.WriteResponse (a held
// pull, a send waiting for its group commit). A non-nil error is answered
// SYSTEM_ERROR with the error text as remark. Responses to one-way
// requests are never written.
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
	inline   bool // runs on the connection's reader (RegisterInline)
	noRetain bool // keeps no part of req.Body (RegisterOptions.NoRetain)
	noKeep   bool // keeps no reference to req either (RegisterOptions.NoKeep)
	typed    bool // reads the header through DecodeHeader (RegisterOptions.TypedHeader)
	batchEnd func(c *Conn)
}

// task is one request for a pool (32 bytes: the queues hold up to
// QueueSize of them).
type task struct {
	c   *Conn
	req *protocol.Command
	r   *route
	at  int64 // when it was queued (monoNanos)
}

// workerPool runs tasks on Workers goroutines from a queue of QueueSize;
// a task that finds the queue full is refused (SYSTEM_BUSY).
type workerPool struct {
	name    string
	queue   chan task
	n       int
	size    int          // QueueSize
	pending atomic.Int32 // queued, not yet taken by a worker
	busy    atomic.Int32 // running on a worker
	// For PoolStats' head wait: the queue time of the last task a worker
	// took, and of the last task queued while nothing was pending. The
	// oldest task still queued was queued no earlier than either (FIFO).
	lastTakenAt atomic.Int64
	firstAt     atomic.Int64
}

// enqueue queues t unless the queue is full.
func (p *workerPool) enqueue(t task) bool {
	t.at = monoNanos()
	if p.pending.Add(1) == 1 {
		p.firstAt.Store(t.at)
	}
	select {
	case p.queue <- t:
		return true
	default:
		p.pending.Add(-1)
		return false
	}
}

// routeTable maps request codes to routes: codes below lowCodes (every
// RocketMQ request code) by index, others by map. It is never changed
// once stored: a registration copies it. Looked up twice per request (the
// reader's rawFields and dispatch), the array costs an index where a map
// of the broker's hundred codes cost a hash and a probe each time.
type routeTable struct {
	low  [lowCodes]*route
	high map[int32]*route
}

// lowCodes bounds the codes routeTable indexes: RocketMQ's request codes
// are below 512; the table is copied per registration (4 KiB).
const lowCodes = 512

// get returns code's route, or nil.
func (t *routeTable) get(code int32) *route {
	if uint32(code) < lowCodes {
		return t.low[code]
	}
	return t.high[code]
}

// mux maps request codes to processors and their pools. Registration
// copies the table (registrations are rare, lookups constant).
type mux struct {
	log    *slog.Logger
	pools  [numPools]*workerPool
	routes atomic.Pointer[routeTable]
	regMu  sync.Mutex // serializes registrations
	wg     sync.WaitGroup
	stop   chan struct{}
	once   sync.Once
}

func newMux(log *slog.Logger, sizes func(Pool) PoolOptions) *mux {
	m := &mux{log: log, stop: make(chan struct{})}
	m.routes.Store(&routeTable{})
	for p := Pool(0); p < numPools; p++ {
		po := sizes(p)
		m.pools[p] = &workerPool{name: p.String(), n: po.Workers, size: po.QueueSize, queue: make(chan task, po.QueueSize)}
	}
	return m
}

// start launches the workers.
func (m *mux) start() {
	for _, p := range m.pools {
		for i := 0; i < p.n; i++ {
			m.wg.Add(1)
			go m.work(p)
		}
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
	r := &route{proc: p, pool: m.pools[pool], inline: ro.Inline, noRetain: ro.NoRetain || ro.NoKeep, noKeep: ro.NoKeep, typed: ro.TypedHeader, batchEnd: ro.BatchEnd}
	next := *m.routes.Load()
	if uint32(code) < lowCodes {
		next.low[code] = r
	} else {
		next.high = maps.Clone(next.high)
		if next.high == nil {
			next.high = map[int32]*route{}
		}
		next.high[code] = r
	}
	m.routes.Store(&next)
}

// rawFields implements dispatcher.
func (m *mux) rawFields(code int32) bool {
	r := m.routes.Load().get(code)
	return r != nil && r.typed
}

// dispatch serves req on the reader goroutine of c: an inline processor
// runs right here, others are queued for their pool's workers.
func (m *mux) dispatch(c *Conn, req *protocol.Command) {
	r := m.routes.Load().get(req.Code)
	if r == nil {
		m.log.Debug("remoting: request code not supported", "peer", c.peer, "code", req.Code)
		c.answerQueued(req, protocol.NewResponse(protocol.RequestCodeNotSupported, protocol.NotSupportedRemark(req.Code)))
		req.Recycle() // never seen by a processor
		return
	}
	t := task{c: c, req: req, r: r}
	if r.inline {
		m.run(t, true)
		if r.batchEnd != nil {
			c.atBatchEnd(r)
		}
		return
	}
	if !r.pool.enqueue(t) {
		m.log.Warn("remoting: pool full, rejecting request", "pool", r.pool.name, "peer", c.peer, "code", req.Code)
		c.answerQueued(req, protocol.NewResponse(protocol.SystemBusy, protocol.RemarkSystemBusy))
		req.Recycle() // never seen by a processor
	}
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

// runQueued runs a task a worker took from p's queue.
func (m *mux) runQueued(p *workerPool, t task) {
	p.lastTakenAt.Store(t.at)
	p.pending.Add(-1)
	p.busy.Add(1)
	m.run(t, false)
	if t.r.batchEnd != nil {
		t.r.batchEnd(t.c)
	}
	p.busy.Add(-1)
}

// run serves t; onReader queues the response for the reader's flush at
// the end of its batch, a worker's response goes to the writer goroutine.
//
// The request of a NoRetain processor is recycled once the processor
// returned and nothing written may still read its body: at once when there
// is no response; right after the response was queued when its Body is
// copied into the write buffer (at most copyBodyMax bytes, no BodyBuffers:
// send copies before it returns, so an echo may alias the request); else
// after the response was written or dropped, chained to its Release.
func (m *mux) run(t task, onReader bool) {
	resp, err := m.call(t)
	if err != nil {
		m.log.Debug("remoting: processor failed", "peer", t.c.peer, "code", t.req.Code, "err", err)
		resp = protocol.NewResponse(protocol.SystemError, err.Error())
	}
	if resp == nil {
		if t.r.noRetain {
			t.r.recycle(t.req)
		}
		return
	}
	recycleAfter := false
	if t.r.noRetain {
		if len(resp.Body) <= copyBodyMax && len(resp.BodyBuffers) == 0 {
			recycleAfter = true
		} else {
			resp.Release = t.r.recycleWith(resp.Release, t.req)
		}
	}
	if onReader {
		t.c.answerQueued(t.req, resp)
	} else {
		_ = t.c.WriteResponse(t.req, resp)
	}
	if recycleAfter {
		t.r.recycle(t.req)
	}
}

// recycle recycles req, which a NoRetain processor is done with: Done, so
// that its Command serves a later frame, when the processor keeps no
// reference to it either (NoKeep).
func (r *route) recycle(req *protocol.Command) {
	if r.noKeep {
		req.Done()
	} else {
		req.Recycle()
	}
}

// recycleWith returns a release callback that runs release (if any) and
// then recycles req.
func (r *route) recycleWith(release func(), req *protocol.Command) func() {
	return func() {
		if release != nil {
			release()
		}
		r.recycle(req)
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
