package remoting

import (
	"log/slog"
	"sync"
	"sync/atomic"

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
	proc Processor
	pool *workerPool
}

type task struct {
	c    *Conn
	req  *protocol.Command
	proc Processor
}

// workerPool runs tasks on a fixed number of goroutines from a bounded
// queue.
type workerPool struct {
	name  string
	queue chan task
	n     int
}

// mux maps request codes to processors and their pools. Registration
// copies the table (registrations are rare, lookups constant).
type mux struct {
	log    *slog.Logger
	pools  [numPools]*workerPool
	routes atomic.Pointer[map[int32]route]
	regMu  sync.Mutex // serializes registrations
	wg     sync.WaitGroup
	stop   chan struct{}
	once   sync.Once
}

func newMux(log *slog.Logger, sizes func(Pool) PoolOptions) *mux {
	m := &mux{log: log, stop: make(chan struct{})}
	empty := map[int32]route{}
	m.routes.Store(&empty)
	for p := Pool(0); p < numPools; p++ {
		po := sizes(p)
		m.pools[p] = &workerPool{name: p.String(), queue: make(chan task, po.QueueSize), n: po.Workers}
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

func (m *mux) register(code int32, pool Pool, p Processor) {
	if pool >= numPools {
		pool = PoolDefault
	}
	m.regMu.Lock()
	defer m.regMu.Unlock()
	old := *m.routes.Load()
	next := make(map[int32]route, len(old)+1)
	for k, v := range old {
		next[k] = v
	}
	next[code] = route{proc: p, pool: m.pools[pool]}
	m.routes.Store(&next)
}

func (m *mux) dispatch(c *Conn, req *protocol.Command) {
	r, ok := (*m.routes.Load())[req.Code]
	if !ok {
		m.log.Debug("remoting: request code not supported", "peer", c.peer, "code", req.Code)
		c.answerInline(req, protocol.NewResponse(protocol.RequestCodeNotSupported, protocol.NotSupportedRemark(req.Code)))
		return
	}
	select {
	case r.pool.queue <- task{c: c, req: req, proc: r.proc}:
	default:
		m.log.Warn("remoting: pool full, rejecting request", "pool", r.pool.name, "peer", c.peer, "code", req.Code)
		c.answerInline(req, protocol.NewResponse(protocol.SystemBusy, protocol.RemarkSystemBusy))
	}
}

func (m *mux) work(p *workerPool) {
	defer m.wg.Done()
	for {
		select {
		case t := <-p.queue:
			m.run(t)
		case <-m.stop:
			for { // drain what is queued, then stop
				select {
				case t := <-p.queue:
					m.run(t)
				default:
					return
				}
			}
		}
	}
}

func (m *mux) run(t task) {
	resp, err := m.call(t)
	if err != nil {
		m.log.Debug("remoting: processor failed", "peer", t.c.peer, "code", t.req.Code, "err", err)
		resp = protocol.NewResponse(protocol.SystemError, err.Error())
	}
	if resp == nil {
		return
	}
	_ = t.c.WriteResponse(t.req, resp)
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
	return t.proc.ProcessRequest(t.c, t.req)
}
