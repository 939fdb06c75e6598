package remoting

import (
	"context"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"net/netip"
	"sync"
	"sync/atomic"
	"syscall"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// copyBodyMax is the largest Body copied into the write buffer; larger
// bodies are written from the caller's slice (no copy).
const copyBodyMax = 16 << 10

// dispatcher serves requests that arrive on a connection: dispatch, called
// by the connection's reader, answers, queues or runs req.
type dispatcher interface {
	dispatch(c *Conn, req *protocol.Command)
	// rawFields reports whether requests with code go to a processor
	// that reads their header only through DecodeHeader or Fields
	// (RegisterOptions.TypedHeader): the reader then decodes them
	// without building the ExtFields map.
	rawFields(code int32) bool
}

// mark records, at byte offset at of the write buffer, body parts written
// from the caller's slices and the callback to run once they are written.
type mark struct {
	at      int
	body    []byte
	bufs    [][]byte
	release func()
}

// call is a request waiting for its response.
type call struct {
	opaque int32 // protected by Conn.mu
	resp   *protocol.Command
	err    error
	done   chan struct{}                  // sync calls: one value on completion
	cb     func(*protocol.Command, error) // async calls
	timer  *time.Timer                    // async timeout
}

// Conn is one remoting connection, on either side: its reader goroutine
// reads frames, routes responses to the requests waiting for them and
// requests to its dispatcher; any goroutine may send requests, one-way
// requests and responses. Writes are combined into one writev per batch
// (see the package doc, Writing).
type Conn struct {
	nc     net.Conn
	sock   *sock // nc's reads and writes (sock_linux.go)
	opts   ConnOptions
	log    *slog.Logger
	peer   string
	disp   dispatcher
	raw    protocol.RawFields // disp.rawFields
	opaque atomic.Int32
	// server: the reader stops reading while MaxWriteQueue bytes of
	// responses wait (a peer that sends requests but does not read their
	// answers is held back). Client readers never wait for writes, so
	// two peers can never block each other's readers.
	server bool

	mu      sync.Mutex
	pending map[int32]*call            // protected by mu
	hooks   []func(c *Conn, err error) // protected by mu
	err     error                      // close reason; protected by mu

	rb     readBuf   // owned by the reader goroutine
	idleAt time.Time // read deadline for IdleTimeout; owned by the reader
	dlSet  time.Time // read deadline last set; owned by the reader
	queued bool      // the reader queued answers not written yet; owned by the reader
	ends   []*route  // routes whose BatchEnd runs at the end of the batch; owned by the reader
	co     coalescer // read coalescing (server connections); owned by the reader
	// batchAt is BatchTime's reading for the current batch (zero until
	// its first call); owned by the reader.
	batchAt time.Time

	wmu      sync.Mutex
	wcond    *sync.Cond    // on wmu: signalled when a batch was written or the conn closed
	wbuf     []byte        // frames waiting to be written; protected by wmu
	marks    []mark        // external body parts in wbuf order; protected by wmu
	wext     int64         // bytes of external parts in marks; protected by wmu
	writing  bool          // a goroutine owns the socket's write side; protected by wmu
	batchEnd bool          // the reader runs BatchEnd and writes next: no writer wake-up; protected by wmu
	wclosed  bool          // protected by wmu
	spare    []byte        // second buffer swapped with wbuf; protected by wmu
	spareMk  []mark        // protected by wmu
	wkick    chan struct{} // cap 1: the writer goroutine has a batch to write
	iov      net.Buffers   // parts of one writev; owned by the goroutine that set writing
	wdl      time.Time     // write deadline set; owned like iov

	closeOnce sync.Once
	done      chan struct{}
	cbwg      sync.WaitGroup // async callbacks
	value     atomic.Pointer[any]

	// The peer's TCP address (an IPv4-mapped one unmapped) when peerTCP,
	// read once: a broker stamps it on every message (RemoteAddrPort).
	peerAP  netip.AddrPort
	peerTCP bool
}

func newConn(nc net.Conn, opts ConnOptions, log *slog.Logger, d dispatcher) *Conn {
	c := &Conn{
		nc: nc, sock: newSock(nc), opts: opts, log: log, peer: nc.RemoteAddr().String(), disp: d, raw: d.rawFields,
		pending: make(map[int32]*call),
		done:    make(chan struct{}),
		wkick:   make(chan struct{}, 1),
	}
	c.wcond = sync.NewCond(&c.wmu)
	if ta, ok := nc.RemoteAddr().(*net.TCPAddr); ok {
		ap := ta.AddrPort()
		c.peerAP, c.peerTCP = netip.AddrPortFrom(ap.Addr().Unmap(), ap.Port()), true
	}
	return c
}

// start runs the connection's reader and writer goroutines, counted in wg;
// the reader waits for the connection's async callbacks before it ends.
func (c *Conn) start(wg *sync.WaitGroup) {
	wg.Add(2)
	go func() {
		defer wg.Done()
		c.serve()
		c.cbwg.Wait()
	}()
	go func() {
		defer wg.Done()
		c.writeLoop()
	}()
}

// RemoteAddr returns the peer's address.
func (c *Conn) RemoteAddr() net.Addr { return c.nc.RemoteAddr() }

// RemoteAddrPort returns the peer's TCP address, an IPv4-mapped one as
// IPv4; ok is false for a connection that is not TCP. It is read once,
// when the connection is made (a broker stamps it on every message).
func (c *Conn) RemoteAddrPort() (ap netip.AddrPort, ok bool) { return c.peerAP, c.peerTCP }

// LocalAddr returns the local address.
func (c *Conn) LocalAddr() net.Addr { return c.nc.LocalAddr() }

// Done is closed when the connection is closed.
func (c *Conn) Done() <-chan struct{} { return c.done }

// Err returns why the connection closed, or nil while it is open.
func (c *Conn) Err() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.err
}

// SetValue attaches a value to the connection (e.g. the client id).
func (c *Conn) SetValue(v any) { c.value.Store(&v) }

// Value returns the value attached with SetValue, or nil.
func (c *Conn) Value() any {
	if p := c.value.Load(); p != nil {
		return *p
	}
	return nil
}

// OnClose registers fn to run once when the connection closes, with the
// reason. If it is already closed fn runs at once.
func (c *Conn) OnClose(fn func(c *Conn, err error)) {
	c.mu.Lock()
	if c.err == nil {
		c.hooks = append(c.hooks, fn)
		c.mu.Unlock()
		return
	}
	err := c.err
	c.mu.Unlock()
	fn(c, err)
}

// Close closes the connection; pending requests fail with ErrConnClosed.
// It is idempotent and waits for the reader goroutine to stop unless
// called from it.
func (c *Conn) Close() error {
	c.closeWith(ErrConnClosed)
	return nil
}

func (c *Conn) closeWith(reason error) {
	c.closeOnce.Do(func() {
		c.mu.Lock()
		c.err = reason
		pend := c.pending
		c.pending = nil
		hooks := c.hooks
		c.hooks = nil
		c.mu.Unlock()
		close(c.done)
		_ = c.nc.Close()

		c.wmu.Lock()
		c.wclosed = true
		marks := c.marks
		c.marks, c.wbuf = nil, nil
		c.wcond.Broadcast()
		c.wmu.Unlock()
		runReleases(marks)

		failErr := reason
		if !errors.Is(reason, ErrConnClosed) {
			failErr = fmt.Errorf("%w: %w", ErrConnClosed, reason)
		}
		for _, cl := range pend {
			c.finish(cl, nil, failErr)
		}
		for _, fn := range hooks {
			fn(c, reason)
		}
	})
}

func runReleases(marks []mark) {
	for i := range marks {
		if r := marks[i].release; r != nil {
			marks[i].release = nil
			r()
		}
	}
}

// serve runs the read loop until the connection fails or closes.
func (c *Conn) serve() {
	err := c.readLoop()
	c.rb.release()
	c.logClose(err)
	c.closeWith(err)
}

func (c *Conn) logClose(err error) {
	select {
	case <-c.done:
		c.log.Debug("remoting: connection closed", "peer", c.peer)
		return
	default:
	}
	switch {
	case errors.Is(err, io.EOF):
		c.log.Debug("remoting: connection closed by peer", "peer", c.peer)
	case errors.Is(err, ErrIdle):
		c.log.Info("remoting: closing connection", "peer", c.peer, "reason", err)
	default:
		c.log.Warn("remoting: closing connection", "peer", c.peer, "reason", err)
	}
}

// complete hands a response to the request waiting for it; responses
// nobody waits for (timed out, or clients that never set the oneway bit)
// are dropped.
func (c *Conn) complete(resp *protocol.Command) {
	c.mu.Lock()
	cl := c.pending[resp.Opaque]
	if cl != nil {
		delete(c.pending, cl.opaque)
	}
	c.mu.Unlock()
	if cl == nil {
		c.log.Debug("remoting: response without request", "peer", c.peer, "opaque", resp.Opaque, "code", resp.Code)
		resp.Recycle()
		return
	}
	c.finish(cl, resp, nil)
}

func (c *Conn) finish(cl *call, resp *protocol.Command, err error) {
	if cl.cb != nil {
		c.cbwg.Add(1)
	}
	c.finishCounted(cl, resp, err)
}

// finishCounted is finish for a call whose callback (if it has one)
// c.cbwg already counts. The timeout of an async call counts it while it
// holds c.mu: the connection's close takes c.mu before the reader waits
// for the callbacks, so the count is taken before that wait (counted
// after, it raced the wait, and the wait could end before the callback
// ran).
func (c *Conn) finishCounted(cl *call, resp *protocol.Command, err error) {
	cl.resp, cl.err = resp, err
	if cl.cb == nil {
		cl.done <- struct{}{} // buffered; the last touch of cl here
		return
	}
	if cl.timer != nil {
		cl.timer.Stop()
	}
	go func() {
		defer c.cbwg.Done()
		cl.cb(resp, err)
	}()
}

// register assigns req an opaque and records cl as waiting for it.
func (c *Conn) register(req *protocol.Command, cl *call) error {
	req.Opaque = c.opaque.Add(1)
	for req.Opaque == 0 { // 0 marks "not registered"; skip it on wrap-around
		req.Opaque = c.opaque.Add(1)
	}
	req.Flag &^= protocol.FlagResponse | protocol.FlagOneway
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending == nil {
		return c.closedErrLocked()
	}
	cl.opaque = req.Opaque
	c.pending[req.Opaque] = cl
	return nil
}

func (c *Conn) closedErrLocked() error {
	if c.err == nil || errors.Is(c.err, ErrConnClosed) {
		return ErrConnClosed
	}
	return fmt.Errorf("%w: %w", ErrConnClosed, c.err)
}

// unregister removes a pending call; it reports whether it was still
// pending (false: a response or close got there first).
func (c *Conn) unregister(opaque int32, cl *call) bool {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.pending[opaque] == cl {
		delete(c.pending, opaque)
		return true
	}
	return false
}

var timerPool sync.Pool

// getTimer returns a running timer from the pool (Go >= 1.23 timers drop
// stale ticks on Reset, so reuse is safe).
func getTimer(d time.Duration) *time.Timer {
	if t, ok := timerPool.Get().(*time.Timer); ok {
		t.Reset(d)
		return t
	}
	return time.NewTimer(d)
}

func putTimer(t *time.Timer) {
	t.Stop()
	timerPool.Put(t)
}

// Invoke sends req and waits for its response, until ctx is done or, when
// ctx has no deadline, RequestTimeout. req's opaque and flag are set here;
// req must not be modified until Invoke returns. The response's Body
// aliases the connection's receive buffer: a caller done with it (having
// copied what it keeps) may call resp.Recycle so the buffer can be reused.
func (c *Conn) Invoke(ctx context.Context, req *protocol.Command) (*protocol.Command, error) {
	cl := getCall()
	if err := c.register(req, cl); err != nil {
		putCall(cl)
		req.ReleaseBody()
		return nil, err
	}
	opaque := req.Opaque
	if err := c.Send(req); err != nil {
		if c.unregister(opaque, cl) {
			putCall(cl)
		} // else finish owns cl now: let it go
		return nil, err
	}
	var timeout <-chan time.Time
	if _, ok := ctx.Deadline(); !ok {
		t := getTimer(c.opts.RequestTimeout)
		defer putTimer(t)
		timeout = t.C
	}
	select {
	case <-cl.done:
		return takeCall(cl)
	case <-ctx.Done():
		if c.unregister(opaque, cl) {
			putCall(cl)
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("%w: code %d to %s: %w", ErrTimeout, req.Code, c.peer, ctx.Err())
			}
			return nil, ctx.Err()
		}
	case <-timeout:
		if c.unregister(opaque, cl) {
			putCall(cl)
			return nil, fmt.Errorf("%w: code %d to %s after %v", ErrTimeout, req.Code, c.peer, c.opts.RequestTimeout)
		}
	}
	<-cl.done // lost the race: the result is already there
	return takeCall(cl)
}

// callPool recycles the calls of Invoke with their buffered done channels.
// A call goes back only when nobody else can reach it: its result was
// received from done, or it was unregistered before any completion.
var callPool = sync.Pool{New: func() any { return &call{done: make(chan struct{}, 1)} }}

func getCall() *call { return callPool.Get().(*call) }

func putCall(cl *call) {
	*cl = call{done: cl.done}
	callPool.Put(cl)
}

// takeCall returns cl's result and recycles it.
func takeCall(cl *call) (*protocol.Command, error) {
	resp, err := cl.resp, cl.err
	putCall(cl)
	return resp, err
}

// InvokeAsync sends req and calls cb once with its response or an error
// (ErrTimeout after timeout, RequestTimeout if zero; ErrConnClosed). cb runs
// on its own goroutine. The returned error reports a failure to send, in
// which case cb is not called. cb may recycle the response as after Invoke.
// Like Send, it waits while MaxWriteQueue bytes wait for the socket.
func (c *Conn) InvokeAsync(req *protocol.Command, timeout time.Duration, cb func(*protocol.Command, error)) error {
	return c.invokeAsync(req, timeout, cb, sendWait)
}

// InvokeNoWait is InvokeAsync that never blocks, for calls to a peer that
// may have stopped reading (the broker's calls to a client on behalf of
// an admin command or a responder): req is queued without waiting and
// the writer goroutine writes it. When MaxWriteQueue bytes already wait
// for the socket it is not queued: the returned error wraps
// ErrNotReading. A response that does not come within timeout fails with
// ErrTimeout, wrapping ErrNotReading too when req was still waiting for
// the socket then.
func (c *Conn) InvokeNoWait(req *protocol.Command, timeout time.Duration, cb func(*protocol.Command, error)) error {
	return c.invokeAsync(req, timeout, cb, sendRefuse)
}

func (c *Conn) invokeAsync(req *protocol.Command, timeout time.Duration, cb func(*protocol.Command, error), mode sendMode) error {
	if timeout <= 0 {
		timeout = c.opts.RequestTimeout
	}
	cl := &call{cb: cb}
	code := req.Code
	var written *atomic.Bool // sendRefuse: req reached the socket (or was dropped)
	if mode == sendRefuse {
		written = new(atomic.Bool)
		release := req.Release
		req.Release = func() {
			written.Store(true)
			if release != nil {
				release()
			}
		}
	}
	cl.timer = time.AfterFunc(timeout, func() {
		c.mu.Lock()
		ok := cl.opaque != 0 && c.pending[cl.opaque] == cl
		if ok {
			delete(c.pending, cl.opaque)
			if cl.cb != nil {
				c.cbwg.Add(1) // see finishCounted
			}
		}
		c.mu.Unlock()
		if !ok {
			return
		}
		err := fmt.Errorf("%w: code %d to %s after %v", ErrTimeout, code, c.peer, timeout)
		if written != nil && !written.Load() {
			err = fmt.Errorf("%w: code %d to %s after %v, still waiting to be written: %w", ErrTimeout, code, c.peer, timeout, ErrNotReading)
		}
		c.finishCounted(cl, nil, err)
	})
	if err := c.register(req, cl); err != nil {
		cl.timer.Stop()
		req.ReleaseBody()
		return err
	}
	opaque := req.Opaque
	if err := c.send(req, mode); err != nil {
		if c.unregister(opaque, cl) {
			cl.timer.Stop()
			return err
		}
		return nil // closed meanwhile: cb got ErrConnClosed
	}
	return nil
}

// Oneway sends req with the oneway bit set; no response is expected.
func (c *Conn) Oneway(req *protocol.Command) error {
	return c.Send(c.oneway(req))
}

// OnewayNoWait is Oneway that never blocks, like WriteResponse: req is
// queued whatever the write queue holds and the writer goroutine writes
// it. It is for notices one goroutine sends to many peers (the members of
// a consumer group), which a peer that stopped reading must not hold up:
// there the notice waits in that peer's queue until WriteTimeout cuts it
// off.
func (c *Conn) OnewayNoWait(req *protocol.Command) error {
	return c.send(c.oneway(req), sendKick)
}

func (c *Conn) oneway(req *protocol.Command) *protocol.Command {
	req.Opaque = c.opaque.Add(1)
	req.Flag = req.Flag&^protocol.FlagResponse | protocol.FlagOneway
	return req
}

// WriteResponse sends resp as the response to req: response bit, req's
// opaque and serialize type. It never blocks: the response is queued and
// the connection's writer goroutine writes it, so any goroutine may
// answer (a group commit completing sends, a held pull woken by a new
// message) without waiting for a slow peer. Processors that answer later
// keep req and the Conn and call this when ready. Responses to one-way
// requests are dropped.
func (c *Conn) WriteResponse(req, resp *protocol.Command) error {
	if req.IsOneway() {
		resp.ReleaseBody()
		return nil
	}
	return c.send(resp.ResponseTo(req), sendKick)
}

// answerQueued is WriteResponse for the reader goroutine: the response is
// queued and written by the reader's flushQueued at the end of its batch,
// with the answers to the other requests it read.
func (c *Conn) answerQueued(req, resp *protocol.Command) {
	if req.IsOneway() {
		resp.ReleaseBody()
		return
	}
	c.queued = true
	_ = c.send(resp.ResponseTo(req), sendQueue)
}

// Send writes cmd as it is (opaque and flag untouched). It returns once cmd
// is queued or written; while more than MaxWriteQueue bytes wait for a
// slow socket it blocks (backpressure; a peer that stops reading is cut
// off after WriteTimeout). If no write is under way the calling goroutine
// writes itself. cmd.Release runs after the bytes reached the socket or
// were dropped. cmd must not be modified after Send.
func (c *Conn) Send(cmd *protocol.Command) error { return c.send(cmd, sendWait) }

// How send hands cmd to the socket.
type sendMode uint8

const (
	sendWait   sendMode = iota // wait while MaxWriteQueue bytes wait; write if idle (Send)
	sendKick                   // never wait; wake the writer goroutine if idle (WriteResponse, OnewayNoWait)
	sendQueue                  // never wait; leave it for the reader's flushQueued
	sendRefuse                 // sendKick, refused (ErrNotReading) while MaxWriteQueue bytes wait (InvokeNoWait)
)

func (c *Conn) send(cmd *protocol.Command, mode sendMode) error {
	c.wmu.Lock()
	for mode == sendWait && c.writing && !c.wclosed && int64(len(c.wbuf))+c.wext >= c.opts.MaxWriteQueue {
		c.wcond.Wait()
	}
	if c.wclosed {
		c.wmu.Unlock()
		cmd.ReleaseBody()
		return c.sendClosedErr()
	}
	if mode == sendRefuse && c.notReadingLocked() {
		q := c.waitingLocked()
		c.wmu.Unlock()
		cmd.ReleaseBody()
		return fmt.Errorf("%w: %s: %d bytes wait for its socket", ErrNotReading, c.peer, q)
	}
	var err error
	c.wbuf, err = protocol.AppendFramePrefix(c.wbuf, cmd)
	if err != nil {
		c.wmu.Unlock()
		cmd.ReleaseBody()
		return fmt.Errorf("remoting: encode %v: %w", cmd, err)
	}
	if len(cmd.Body) <= copyBodyMax {
		c.wbuf = append(c.wbuf, cmd.Body...)
		if len(cmd.BodyBuffers) > 0 || cmd.Release != nil {
			c.marks = append(c.marks, mark{at: len(c.wbuf), bufs: cmd.BodyBuffers, release: cmd.Release})
		}
	} else {
		c.marks = append(c.marks, mark{at: len(c.wbuf), body: cmd.Body, bufs: cmd.BodyBuffers, release: cmd.Release})
		c.wext += int64(len(cmd.Body))
	}
	for _, b := range cmd.BodyBuffers {
		c.wext += int64(len(b))
	}
	cmd.Release = nil
	switch {
	case c.writing || mode == sendQueue || c.batchEnd && mode != sendWait:
		c.wmu.Unlock()
		return nil
	case mode == sendKick || mode == sendRefuse:
		c.writing = true
		c.wmu.Unlock()
		c.wkick <- struct{}{} // cap 1, and only the one who set writing sends
		return nil
	}
	c.writing = true
	return c.flushLocked()
}

// NotReading reports whether the peer looks as if it stopped reading: a
// write to its socket is under way and MaxWriteQueue bytes or more wait
// for the socket, counting what that write has not written yet (a writer
// that took everything queued in one write leaves nothing queued behind
// it, however much it holds). InvokeNoWait refuses requests
// (ErrNotReading) while it holds.
func (c *Conn) NotReading() bool {
	c.wmu.Lock()
	defer c.wmu.Unlock()
	return c.notReadingLocked()
}

func (c *Conn) notReadingLocked() bool {
	return c.writing && c.waitingLocked() >= c.opts.MaxWriteQueue
}

// waitingLocked is how many bytes wait for the socket: queued, and not yet
// written by the write under way.
func (c *Conn) waitingLocked() int64 {
	return int64(len(c.wbuf)) + c.wext + c.sock.left.Load()
}

// writeLoop is the writer goroutine: it writes what non-blocking senders
// queued (WriteResponse) when they find no write under way.
func (c *Conn) writeLoop() {
	for {
		select {
		case <-c.wkick:
			c.wmu.Lock()
			_ = c.flushLocked()
		case <-c.done:
			return
		}
	}
}

// flushQueued writes what the reader queued, unless a write is under way
// already (then its writer takes the reader's answers along). On a server
// connection it then holds the reader back while MaxWriteQueue bytes
// still wait: the peer is not reading its answers, so its requests are
// not read either. The reader calls it before it may block reading.
func (c *Conn) flushQueued() {
	c.wmu.Lock()
	c.batchEnd = false
	if !c.writing && !c.wclosed && len(c.wbuf) > 0 {
		c.writing = true
		_ = c.flushLocked()
		c.wmu.Lock()
	}
	for c.server && c.writing && !c.wclosed && int64(len(c.wbuf))+c.wext >= c.opts.MaxWriteQueue {
		c.wcond.Wait()
	}
	c.wmu.Unlock()
}

// writeParts writes buf with the external parts of marks spliced in: one
// plain write when there are none, else one writev. It runs on the
// goroutine that set c.writing, which owns c.iov.
func (c *Conn) writeParts(buf []byte, marks []mark) error {
	if len(marks) == 0 {
		return c.sock.write(buf)
	}
	iov := c.iov[:0]
	last := 0
	for i := range marks {
		m := &marks[i]
		if m.at > last {
			iov = append(iov, buf[last:m.at])
			last = m.at
		}
		if len(m.body) > 0 {
			iov = append(iov, m.body)
		}
		for _, b := range m.bufs {
			if len(b) > 0 {
				iov = append(iov, b)
			}
		}
	}
	if last < len(buf) {
		iov = append(iov, buf[last:])
	}
	err := c.sock.writev(iov)
	for i := range iov {
		iov[i] = nil
	}
	c.iov = iov[:0]
	return err
}

func (c *Conn) sendClosedErr() error {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.closedErrLocked()
}

// flushLocked writes queued frames until the queue is empty; it is called
// with wmu held and c.writing set, and returns with wmu released.
func (c *Conn) flushLocked() error {
	for {
		if len(c.wbuf) == 0 || c.wclosed {
			c.writing = false
			c.wmu.Unlock()
			return nil
		}
		buf, marks := c.wbuf, c.marks
		c.wbuf, c.marks = c.spare[:0], c.spareMk[:0]
		c.spare, c.spareMk = nil, nil
		// What was taken still waits for the socket until the write has
		// it (the socket's own count, which the write sets again and
		// lowers as the socket takes it): counted from here on, not from
		// the write's start, so that NotReading never sees a stuck
		// writer's bytes vanish between the two.
		c.sock.left.Store(int64(len(buf)) + c.wext)
		c.wext = 0
		c.wmu.Unlock()

		var err error
		if d := c.opts.WriteTimeout; d > 0 {
			if now := time.Now(); now.Add(d).After(c.wdl) {
				c.wdl = now.Add(d + deadlineSlack(d))
				err = c.nc.SetWriteDeadline(c.wdl)
			}
		}
		if err == nil {
			err = c.writeParts(buf, marks)
		} else {
			c.sock.left.Store(0)
		}
		runReleases(marks)
		for i := range marks {
			marks[i] = mark{}
		}

		c.wmu.Lock()
		if cap(buf) <= 2*int(c.opts.MaxWriteQueue) {
			c.spare = buf[:0]
		}
		c.spareMk = marks[:0]
		c.wcond.Broadcast()
		if err != nil {
			c.writing = false
			err = fmt.Errorf("remoting: write to %s: %w", c.peer, err)
			if peerReset(err) {
				// The peer reset the connection. What it sent before
				// the reset is still in the socket: closing it now
				// would drop those requests (a client's last oneway
				// offset commits, written right before its close).
				// Nothing more is written; the reader serves what is
				// left, gets the reset and closes the connection.
				c.wclosed = true
				c.wcond.Broadcast()
				c.wmu.Unlock()
				c.log.Debug("remoting: peer reset, reading what it sent before", "peer", c.peer, "reason", err)
				_ = c.nc.SetReadDeadline(time.Now().Add(peerResetDrain))
				return fmt.Errorf("%w: %w", ErrConnClosed, err)
			}
			c.wmu.Unlock()
			c.log.Warn("remoting: closing connection", "peer", c.peer, "reason", err)
			c.closeWith(err)
			return fmt.Errorf("%w: %w", ErrConnClosed, err)
		}
	}
}

// peerResetDrain bounds how long the reader of a connection whose peer
// reset it may take to read what the peer sent before (the socket holds
// it; the read ends at the reset).
const peerResetDrain = 5 * time.Second

// peerReset reports whether a write failed because the peer reset the
// connection (ECONNRESET, or EPIPE on a later write).
func peerReset(err error) bool {
	return errors.Is(err, syscall.ECONNRESET) || errors.Is(err, syscall.EPIPE)
}
