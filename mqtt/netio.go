package mqtt

import (
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
//
// This file holds the input side (readable, the inline and worker hand-
// off); netio_out.go the output side, netio_close.go the close, and
// netio_tls.go the TLS path; netio_linux.go the pollers.

const (
	readBufSize = 64 << 10
	// pauseInput is the unparsed input above which a connection's socket
	// is no longer read until its worker catches up.
	pauseInput = 256 << 10
)

var readBufs = sync.Pool{New: func() any { b := make([]byte, readBufSize); return &b }}

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
		if r != nil {
			r.st.dirty = true
			r.st.reads++
		} else {
			c.srv.io.reads.Add(1)
		}
		if n > 0 {
			if r != nil {
				r.st.bytesIn += int64(n)
			} else {
				c.srv.stats.BytesReceived.Add(int64(n))
			}
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
		c.lastRecv.Store(r.monoNow())
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
	default:
		if r != nil {
			r.fold() // a worker may answer before the round ends
		}
		if sched {
			c.srv.pool.submit(c.work)
		}
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
			if c.fl.pending() {
				// Released while c is still this unit's (below).
				c.inMu.Unlock()
				c.fl.release()
				continue
			}
			c.dropIn()
			c.onRound, c.scheduled = false, false
			c.inMu.Unlock()
			return
		}
		// Decoded in place: an inline handler's request is valid only
		// during its call (HandleInline), and the rest is copied below.
		p, used, err := c.srv.dec.NextScratchAlias(c.version, c.in, sc)
		if err == packets.ErrIncomplete && len(c.in) == 0 {
			if c.fl.pending() {
				// The output goes (or goes to the round) before c is
				// given up: once scheduled is clear, the next unit (the
				// poller reading the client's answer to these bytes,
				// when this one runs on a worker) holds c.fl. Then look
				// again: input may have come meanwhile.
				c.inMu.Unlock()
				if r != nil && r.conn {
					c.fl.moveTo(&r.fl) // written once the deferred work ran
				} else {
					if r != nil {
						r.fold()
					}
					c.fl.release()
				}
				continue
			}
			c.dropIn()
			c.onRound, c.scheduled = false, false
			c.inMu.Unlock()
			if r != nil && !r.conn {
				r.fold()
			}
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
		} else if !bareAck(p) {
			packets.Detach(p) // an acknowledgement's properties
		}
		raw := c.in[:used]
		c.in = c.in[used:]
		c.inMu.Unlock()
		if r != nil {
			r.st.dirty = true
			r.st.packetsIn++
		} else {
			c.srv.stats.PacketsReceived.Add(1)
		}
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

// bareAck reports whether p, decoded into a Scratch (whose packets start
// zeroed), is an acknowledgement without properties (every PUBACK of the
// state store's clients): nothing of it points into the input, so it
// needs no Detach, whose two passes over its properties cost more than
// the rest of handling it.
func bareAck(p packets.Packet) bool {
	var pr *packets.Properties
	switch a := p.(type) {
	case *packets.Puback:
		pr = &a.Properties
	case *packets.Pubrec:
		pr = &a.Properties
	case *packets.Pubrel:
		pr = &a.Properties
	case *packets.Pubcomp:
		pr = &a.Properties
	default:
		return false
	}
	return pr.Present == 0 && len(pr.User) == 0
}

// toWorker hands the rest of workInline's input to a worker (c stays
// scheduled), after the round's deferred work: the worker's requests
// must see it done.
func (c *conn) toWorker(r *Round) {
	if r != nil {
		r.Flush() // (which folds the round's counts first)
		r.fold()  // and what its hooks sent
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

var clockStart = time.Now()

// nanotime is a monotonic clock reading in nanoseconds.
func nanotime() int64 { return int64(time.Since(clockStart)) }
