package mqtt

import (
	"crypto/tls"
	"errors"
	"net"
	"strconv"
	"sync"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
	"golang.org/x/sys/unix"
)

// Socket I/O. Plain TCP connections are raw non-blocking descriptors
// accepted with accept4 and registered edge-triggered (EPOLLIN, EPOLLOUT,
// EPOLLRDHUP) in one of a few epoll instances; a poller goroutine reads
// ready sockets into its own 64 KiB buffer and appends only the bytes to a
// connection's input (nil when drained), then hands the connection to the
// worker pool. Writes go straight to the socket from whichever goroutine
// sends; what the socket does not take waits in the connection's output
// buffer (nil when empty) until EPOLLOUT; a worker's unit of work holds
// the output of the connections it writes to and flushes each once at its
// end (batch.go). An idle connection therefore owns no goroutine and no
// buffer. TLS connections use crypto/tls over net.Conn
// with a reader and a writer goroutine each (documented cost).

const (
	readBufSize = 64 << 10
	// pauseInput is the unparsed input above which a connection's socket
	// is no longer read until its worker catches up.
	pauseInput = 256 << 10
)

var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

// listenTLS starts a TLS listener; its connections use goroutines.
func (s *Server) listenTLS(addr string, cfg *tls.Config) (net.Listener, error) {
	l, err := tls.Listen("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	s.acceptPiped(l, addr)
	return l, nil
}

// acceptPiped accepts l's connections on a goroutine and serves each with
// a reader and a writer goroutine (tlsPipe): TLS connections, and plain
// ones where there is no epoll (netio_other.go).
func (s *Server) acceptPiped(l net.Listener, addr string) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := l.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				s.log.Warn("mqtt: accept", "addr", addr, "err", err)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			c := s.newConn(nc.RemoteAddr().String())
			c.tls, c.fd = &tlsPipe{nc: nc, wake: make(chan struct{}, 1), memWake: make(chan struct{}, 1)}, -1
			if !s.track(c) {
				nc.Close()
				continue
			}
			s.wg.Add(2)
			go c.tlsReader()
			go c.tlsWriter()
		}
	}()
}

func (c *conn) tlsReader() {
	defer c.srv.wg.Done()
	defer func() {
		if c.tls.ends.Add(1) == 2 {
			c.tls.nc.Close()
		}
	}()
	buf := make([]byte, 4096)
	for {
		room := c.tlsRoom(len(buf))
		if room == 0 {
			<-c.tls.memWake // memResume, or unqueue at the close
			continue
		}
		n, err := c.tls.nc.Read(buf[:room])
		if n > 0 {
			c.feed(buf[:n])
		}
		if err != nil {
			c.inMu.Lock()
			c.eof = true
			sched := !c.scheduled && !c.closed
			c.scheduled = c.scheduled || sched
			c.inMu.Unlock()
			if sched {
				c.srv.pool.submit(c.work)
			}
			return
		}
	}
}

func (c *conn) tlsWriter() {
	defer c.srv.wg.Done()
	var b []byte
	for range c.tls.wake {
		c.outMu.Lock()
		b, c.out = c.out, b[:0]
		c.backedUpSince = 0
		closed, linger := c.wclosed, c.tls.linger
		c.outMu.Unlock()
		if len(b) > 0 {
			if !closed {
				c.tls.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			}
			n, err := c.tls.nc.Write(b)
			c.srv.stats.BytesSent.Add(int64(n))
			if err != nil {
				c.tls.nc.Close()
				c.fail("write: " + err.Error())
				return
			}
		}
		if closed {
			if cw, ok := c.tls.nc.(interface{ CloseWrite() error }); linger && ok {
				cw.CloseWrite()
				if c.tls.ends.Add(1) == 2 {
					c.tls.nc.Close()
				}
				return
			}
			c.tls.nc.Close()
			return
		}
	}
}

// feed appends TLS plaintext to the input and schedules the worker (the
// TLS path's counterpart of readable).
func (c *conn) feed(b []byte) {
	c.lastRecv.Store(nanotime())
	c.srv.stats.BytesReceived.Add(int64(len(b)))
	c.inMu.Lock()
	if c.closed {
		c.inMu.Unlock()
		return // closed, lingering: dropped
	}
	c.appendIn(b)
	sched := !c.scheduled && !c.closed
	c.scheduled = c.scheduled || sched
	c.inMu.Unlock()
	if sched {
		c.srv.pool.submit(c.work)
	}
}

// readable reads everything the socket holds (edge-triggered) into the
// connection's input and schedules its worker. A read shorter than buf
// drained the socket's receive queue, so readable stops there instead of
// reading again for EAGAIN: with EPOLLET every arrival of data (and of the
// peer's FIN) after that read queues a new event for this descriptor, so
// nothing is missed. The one thing a short read can leave unread is an
// end of stream that arrived before it; hup (the event carried EPOLLRDHUP,
// EPOLLHUP or EPOLLERR) says so, and then readable reads on to the 0 or
// the error. resume passes hup too (it was not called for an event). r
// is the poller's round (nil from resume, on a worker).
func (c *conn) readable(buf []byte, hup bool, r *Round) {
	c.inMu.Lock()
	if c.closed || c.eof {
		draining := c.draining
		c.inMu.Unlock()
		if draining {
			c.drain()
		}
		return
	}
	if hup && r != nil {
		c.mem |= memHungUp // (the event comes once: inbound.go's throttle)
		if c.mem&memWaiting != 0 {
			c.hangUpThrottled()
		}
	}
	if c.paused || c.mem&memWaiting != 0 || c.eof {
		c.inMu.Unlock()
		return // the worker (or the budget's wake-up) reads again
	}
	got := false
	for {
		rb := buf
		if c.mem&memPassing == 0 && c.srv.pressed() {
			// The inbound budget is used up (inbound.go): read only
			// what fits in the input's array, or stop.
			if room := c.roomUnderPressure(); room <= 0 {
				if c.throttle() {
					break
				}
				if c.eof {
					break // hung up inside a packet it cannot finish
				}
			} else if room < len(rb) {
				rb = rb[:room]
			}
		}
		n, err := sysRead(c.fd, rb)
		c.srv.io.reads.Add(1)
		if n > 0 {
			c.srv.stats.BytesReceived.Add(int64(n))
			got = true
			c.appendIn(buf[:n])
			if len(c.in) >= pauseInput {
				c.paused = true
				break
			}
			if n < len(rb) && !hup {
				break // drained; the next arrival is a new edge
			}
			continue
		}
		if err == unix.EINTR {
			continue
		}
		if err != unix.EAGAIN {
			c.eof = true // n == 0 (peer closed) or a socket error
		}
		break
	}
	if got {
		c.lastRecv.Store(nanotime())
	}
	sched := !c.scheduled && (len(c.in) > 0 || c.eof)
	c.scheduled = c.scheduled || sched
	inline := sched && !c.eof && !c.paused && c.connected.Load() && c.srv.inlineOnly(c.in)
	// Input that ends inside a packet waits for the rest of it, which may
	// be fewer bytes than a raised SO_RCVLOWAT mark (the last segment of
	// a request split by the network): the mark comes down, or that
	// request would wait for the sweep (lowat_linux.go).
	split := got && c.inlined && !inline && !c.paused && len(c.in) > 0 && c.srv.endsInPacket(c.in)
	c.inMu.Unlock()
	if split {
		c.lowatOff()
	}
	switch {
	case inline:
		c.workInline(r)
	case sched:
		c.srv.pool.submit(c.work)
	}
}

// inlineOnly reports whether b holds only whole packets the poller
// handles itself (workInline): PUBACK, PUBCOMP and PINGREQ, and PUBLISHes
// to an inline handler's topic (Server.HandleInline). Their handling
// never blocks (a session lock, at most a write that does not wait), so
// waking a worker for them would cost more than the work.
func (s *Server) inlineOnly(b []byte) bool {
	for len(b) > 0 {
		typ, flags, rl, hl, err := s.dec.DecodeFixedHeader(b)
		if err != nil || hl+rl > len(b) {
			return false
		}
		switch packets.Type(typ) {
		case packets.TypePuback, packets.TypePubcomp, packets.TypePingreq:
		case packets.TypePublish:
			if !s.inlinePublish(flags, b[hl:hl+rl]) {
				return false
			}
		default:
			return false
		}
		b = b[hl+rl:]
	}
	return true
}

// endsInPacket reports whether b ends inside a packet: its last fixed
// header, or the packet it starts, is not whole.
func (s *Server) endsInPacket(b []byte) bool {
	for len(b) > 0 {
		_, _, rl, hl, err := s.dec.DecodeFixedHeader(b)
		if err != nil {
			return err == packets.ErrIncomplete
		}
		if hl+rl > len(b) {
			return true
		}
		b = b[hl+rl:]
	}
	return false
}

// workInline is work on the poller for input that inlineOnly accepted
// (the caller set scheduled, so the poller owns the worker fields). A
// packet that fails to decode is left in the input for a worker, which
// closes the connection (closing may wait on the backend). After
// batchPackets packets the rest goes to a worker too, as work yields
// after as many: one client's burst of requests does not hold up the
// poller's other connections. r is the poller's round (nil when a
// worker's resume reads): a handler may defer work to its end
// (round.go), and then the connection stays held until the round's
// writes; before input goes to a worker the round's deferred work runs
// (the worker's requests see it done).
func (c *conn) workInline(r *Round) {
	sc := scratches.Get().(*packets.Scratch)
	defer scratches.Put(sc)
	c.more = false
	c.fl.hold(c)
	if r != nil {
		r.conn = false
		c.onRound = true // cleared before the connection is given up
	}
	for n := 0; ; n++ {
		c.inMu.Lock()
		if c.closed {
			c.dropIn()
			c.onRound, c.scheduled = false, false
			c.inMu.Unlock()
			c.fl.release()
			return
		}
		// Decoded in place: an inline handler's request is valid only
		// during its call (HandleInline), and the rest is copied below.
		p, used, err := c.srv.dec.NextScratchAlias(c.version, c.in, sc)
		if err == packets.ErrIncomplete && len(c.in) == 0 {
			c.dropIn()
			c.onRound, c.scheduled = false, false
			c.inMu.Unlock()
			if r != nil && r.conn {
				c.fl.moveTo(&r.fl) // written once the deferred work ran
				return
			}
			c.fl.release()
			return
		}
		if err != nil || n == batchPackets {
			c.inMu.Unlock()
			c.toWorker(r)
			return
		}
		pub, isPub := p.(*packets.Publish)
		if isPub {
			if !c.publishInline(pub) {
				// Left in the input for a worker, which decodes it again.
				c.inMu.Unlock()
				c.toWorker(r)
				return
			}
			c.inlined = true
			c.lowatOn()
		} else {
			packets.Detach(p) // an acknowledgement's properties, if any
		}
		raw := c.in[:used]
		c.in = c.in[used:]
		c.inMu.Unlock()
		c.srv.stats.PacketsReceived.Add(1)
		if !isPub {
			c.handle(p)
			continue
		}
		c.handlePublish(pub, true)
		if poisonInline {
			// Tests under the race detector: what a handler kept of
			// its request reads as garbage from now on.
			for i := range raw {
				raw[i] = poisonByte
			}
		}
	}
}

// toWorker hands the rest of workInline's input to a worker (c stays
// scheduled), after the round's deferred work: the worker's requests
// must see it done.
func (c *conn) toWorker(r *Round) {
	if r != nil {
		r.Flush()
	}
	c.onRound = false
	c.fl.release()
	c.srv.pool.submit(c.work)
}

// inBufSize is the size of the pooled input arrays: what one read of a
// connection usually brings.
const inBufSize = 4 << 10

// inBufs recycles input arrays: decoded packets own their bytes (the
// decoder detaches them), so an array is free again once the input is
// drained; an idle connection keeps none.
var inBufs = sync.Pool{New: func() any { b := make([]byte, inBufSize); return &b }}

// appendIn appends b to the input (caller holds inMu), into a pooled
// array when the input was drained and b fits in one; a larger input
// moves to an array of its own, charged to the inbound budget (growIn).
func (c *conn) appendIn(b []byte) {
	if c.in == nil && len(b) <= inBufSize {
		c.inBuf = inBufs.Get().(*[]byte)
		c.in = (*c.inBuf)[:0]
	}
	if len(c.in)+len(b) > cap(c.in) {
		c.growIn(len(b))
	}
	c.in = append(c.in, b...)
}

// poisonByte is what an inline request's bytes read as after its handler
// returned, in tests under the race detector (poisonInline).
const poisonByte = 0xDB

// dropIn empties the input, returning a pooled array (caller holds inMu).
func (c *conn) dropIn() {
	n := c.charged()
	if c.inBuf != nil && n == 0 {
		inBufs.Put(c.inBuf)
	}
	c.in, c.inBuf = nil, nil
	c.uncharge(n)
}

// resume reads a paused socket again (from the worker).
func (c *conn) resume() {
	bp := readBufs.Get().(*[]byte)
	c.readable(*bp, true, nil)
	readBufs.Put(bp)
}

// write sends b, buffering what the socket does not take now (and, while
// a unit of work holds the connection, everything up to holdMax: see
// batch.go). It returns false if the connection is closed or its output is
// over the limit (then the connection is being dropped as a slow reader).
func (c *conn) write(b []byte) bool { return c.writeOut(b, false) }

// writeOut is write; with now it writes at once even while the
// connection is held (what the unit holds goes first, in order).
func (c *conn) writeOut(b []byte, now bool) bool {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.wclosed || c.draining {
		return false
	}
	if c.heldBy != nil && !now && !c.blocked && len(c.out)+len(b) <= c.srv.holdMax {
		if c.out == nil && c.tls == nil {
			c.out = getOutBuf()
		}
		c.out = append(c.out, b...)
		return true
	}
	if c.tls != nil {
		c.out = append(c.out, b...)
		c.wakeWriter()
	} else {
		switch {
		case len(c.out) == 0:
			for len(b) > 0 {
				n, err := sysWrite(c.fd, b)
				c.srv.io.writes.Add(1)
				if n > 0 {
					c.srv.stats.BytesSent.Add(int64(n))
					b = b[n:]
					continue
				}
				if err == unix.EINTR {
					continue
				}
				if err == unix.EAGAIN {
					c.blocked = true
					break
				}
				c.wclosed = true
				c.out = nil
				c.srv.pool.submit(func() { c.fail("write: " + errString(err)) })
				return false
			}
			if len(b) > 0 {
				c.out = append(c.out, b...)
			}
		case c.blocked:
			c.out = append(c.out, b...) // EPOLLOUT flushes it
		default:
			// Held output about to pass holdMax (or now): write it all.
			c.out = append(c.out, b...)
			if !c.flushLocked() {
				return false
			}
		}
	}
	if len(c.out) > c.srv.opts.MaxOutbound {
		// The stream may end mid-packet here, so no DISCONNECT follows;
		// the log line carries 0x97.
		c.wclosed = true
		c.out = nil
		if !c.slowReader {
			c.slowReader = true
			c.srv.stats.SlowReaders.Add(1)
		}
		c.srv.pool.submit(func() {
			c.closeWith(packets.ReasonQuotaExceeded, "slow reader: output buffer over "+strconv.Itoa(c.srv.opts.MaxOutbound)+" bytes", closeServer)
		})
		return false
	}
	return true
}

// wakeWriter signals a TLS connection's writer goroutine (caller holds
// outMu).
func (c *conn) wakeWriter() {
	select {
	case c.tls.wake <- struct{}{}:
	default:
	}
}

// outBufs recycles the output arrays of held connections (an idle
// connection keeps none). The pool holds array pointers, which it stores
// without allocating; an array that grew, or was partly written before a
// refusal, is left to the collector.
const outBufSize = 4 << 10

var outBufs = sync.Pool{New: func() any { return new([outBufSize]byte) }}

func getOutBuf() []byte { return outBufs.Get().(*[outBufSize]byte)[:0] }

// putOutBuf takes back b, an output array from its start.
func putOutBuf(b []byte) {
	if cap(b) == outBufSize {
		outBufs.Put((*[outBufSize]byte)(b[:outBufSize]))
	}
}

// dropLogEvery is the least time between two "QoS 0 messages dropped"
// lines for one client.
const dropLogEvery = 10 * time.Second

// dropQoS0 reports whether a QoS 0 message must be dropped because the
// client's output is backed up (over MaxOutbound/2). MQTT allows the drop;
// it is counted (Stats.Dropped, Stats.DroppedQoS0) and logged, at most
// one line per client every dropLogEvery with the count since the last
// one. A client backed up for SlowReaderTimeout (the output has not
// drained below MaxOutbound/4 since it went over half) is disconnected
// with 0x97 quota exceeded: the limit is the client's own, imposed by
// the server, not a server-wide overload (0x89 server busy would invite
// the client to retry unchanged). The DISCONNECT queues behind the
// pending output and goes only if the socket takes it before the close.
func (c *conn) dropQoS0() bool {
	s := c.srv
	c.outMu.Lock()
	if c.wclosed || len(c.out) <= s.opts.MaxOutbound/2 {
		c.outMu.Unlock()
		return false
	}
	now := nanotime()
	if c.backedUpSince == 0 {
		c.backedUpSince = now
	}
	c.dropsUnlogged++
	var logN int64
	if c.lastDropLog == 0 || now-c.lastDropLog >= int64(dropLogEvery) {
		logN, c.dropsUnlogged, c.lastDropLog = c.dropsUnlogged, 0, now
	}
	backlog := len(c.out)
	since := time.Duration(now - c.backedUpSince)
	slow := s.opts.SlowReaderTimeout > 0 && since >= s.opts.SlowReaderTimeout && !c.slowReader
	if slow {
		c.slowReader = true
	}
	c.outMu.Unlock()
	s.stats.Dropped.Add(1)
	s.stats.DroppedQoS0.Add(1)
	if logN > 0 {
		s.log.Warn("mqtt: QoS 0 messages dropped, client output backed up", "client", c.clientID(), "remote", c.remote,
			"dropped", logN, "backlog", backlog, "backed_up_for", since.Round(time.Millisecond))
	}
	if slow {
		s.stats.SlowReaders.Add(1)
		// Not inline: the caller holds a session lock, closeWith takes
		// the server's.
		s.pool.submit(func() {
			c.closeWith(packets.ReasonQuotaExceeded, "slow reader: output backed up for "+since.Round(time.Millisecond).String(), closeServer)
		})
	}
	return true
}

func errString(err error) string {
	if err == nil {
		return "EOF"
	}
	return err.Error()
}

// outLen is the number of bytes waiting for the socket.
func (c *conn) outLen() int {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	return len(c.out)
}

// flush writes buffered output when the socket becomes writable.
func (c *conn) flush() {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.wclosed || len(c.out) == 0 {
		c.blocked = false
		c.shutWriteLocked()
		return
	}
	c.flushLocked()
	c.shutWriteLocked()
}

// flushLocked writes c.out until it is empty or the socket refuses
// (blocked: EPOLLOUT flushes the rest). It returns false after a write
// error (the connection is being dropped). Caller holds outMu.
func (c *conn) flushLocked() bool {
	base := c.out
	for len(c.out) > 0 {
		n, err := sysWrite(c.fd, c.out)
		c.srv.io.writes.Add(1)
		if n > 0 {
			c.srv.stats.BytesSent.Add(int64(n))
			c.out = c.out[n:]
			continue
		}
		if err == unix.EINTR {
			continue
		}
		if err == unix.EAGAIN {
			c.blocked = true
			if len(c.out) <= c.srv.opts.MaxOutbound/4 {
				c.backedUpSince = 0
			}
			return true
		}
		c.wclosed = true
		c.out = nil
		c.srv.pool.submit(func() { c.fail("write: " + errString(err)) })
		return false
	}
	putOutBuf(base)
	c.out = nil
	c.blocked = false
	c.backedUpSince = 0
	return true
}

// closeLinger bounds how long a connection closed by the server with a
// reason (DISCONNECT, refused CONNACK) stays half open after it: its
// output is flushed and the write side shut (FIN), and its input is read
// and dropped until the client closes too or closeLinger passes. Closing
// a socket with unread input makes the kernel send a reset, and a reset
// can destroy the DISCONNECT before the client reads it (a client
// pipelining PUBLISHes into a receive maximum violation always has input
// in flight).
const closeLinger = 2 * time.Second

// shutdownIO stops the connection's input and output once: with linger
// (see closeLinger) it returns true when the socket lingers half open and
// closeFD must follow (the caller arms the timer); otherwise it pushes
// out what is buffered (a final DISCONNECT) and closes the socket.
func (c *conn) shutdownIO(linger bool) bool {
	c.inMu.Lock()
	c.outMu.Lock()
	if c.closed {
		c.outMu.Unlock()
		c.inMu.Unlock()
		return false
	}
	c.closed = true
	if c.scheduled {
		// The poller may be running an inline handler on requests that
		// alias the array (workInline): it is left to the collector
		// rather than handed to another connection.
		n := c.charged()
		c.in, c.inBuf = nil, nil
		c.uncharge(n)
	} else {
		c.dropIn()
	}
	c.unqueue()
	if c.tls != nil {
		linger = linger && !c.wclosed
		c.tls.linger = linger
		c.wclosed = true
		select {
		case c.tls.wake <- struct{}{}:
		default:
		}
		// The writer goroutine flushes and closes (or, lingering, shuts
		// the write side and leaves the close to the reader): bound both.
		c.tls.nc.SetWriteDeadline(time.Now().Add(time.Second))
		if linger {
			c.tls.nc.SetReadDeadline(time.Now().Add(closeLinger))
		} else {
			c.tls.nc.SetReadDeadline(time.Now())
		}
		c.outMu.Unlock()
		c.inMu.Unlock()
		return false // the TLS goroutines end on their own
	}
	if linger && !c.wclosed {
		c.draining = true
		c.flushLocked()
		c.shutWriteLocked()
		c.outMu.Unlock()
		c.inMu.Unlock()
		c.drain()
		return true
	}
	if !c.wclosed && len(c.out) > 0 {
		sysWrite(c.fd, c.out)
	}
	c.closeFDLocked()
	c.outMu.Unlock()
	c.inMu.Unlock()
	if c.p != nil {
		c.p.remove(c)
	}
	return false
}

// shutWriteLocked ends a draining connection's output with a FIN once
// everything buffered is written (EPOLLOUT calls it again through flush
// while the socket refuses). Caller holds outMu.
func (c *conn) shutWriteLocked() {
	if c.draining && !c.wclosed && len(c.out) == 0 {
		c.wclosed = true
		unix.Shutdown(c.fd, unix.SHUT_WR)
	}
}

// drain reads and drops a lingering connection's input; at the client's
// end of stream (or an error) the socket is closed.
func (c *conn) drain() {
	bp := readBufs.Get().(*[]byte)
	defer readBufs.Put(bp)
	c.inMu.Lock()
	if !c.draining || c.fdClosed {
		c.inMu.Unlock()
		return
	}
	end := false
	for {
		n, err := sysRead(c.fd, *bp)
		if n > 0 {
			c.srv.stats.BytesReceived.Add(int64(n))
			continue
		}
		if err == unix.EINTR {
			continue
		}
		end = err != unix.EAGAIN
		break
	}
	c.inMu.Unlock()
	if end {
		c.closeFD()
	}
}

// closeFD closes the socket of a closed connection (the end of a linger,
// from the wheel, drain or the poller's close). It is idempotent.
func (c *conn) closeFD() {
	if c.tls != nil {
		return
	}
	c.inMu.Lock()
	c.outMu.Lock()
	done := c.fdClosed
	c.closeFDLocked()
	c.outMu.Unlock()
	c.inMu.Unlock()
	if !done && c.p != nil {
		c.p.remove(c)
	}
}

// closeFDLocked closes the descriptor once (caller holds inMu and outMu).
func (c *conn) closeFDLocked() {
	if c.fdClosed {
		return
	}
	c.fdClosed, c.draining, c.wclosed = true, false, true
	c.lowat = false // the sweep drops c from its list
	if c.out != nil {
		putOutBuf(c.out)
		c.out = nil
	}
	unix.Close(c.fd)
}

var clockStart = time.Now()

// nanotime is a monotonic clock reading in nanoseconds.
func nanotime() int64 { return int64(time.Since(clockStart)) }
