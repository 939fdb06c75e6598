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
			c.tls, c.fd = &tlsPipe{nc: nc, wake: make(chan struct{}, 1)}, -1
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
	buf := make([]byte, 4096)
	for {
		n, err := c.tls.nc.Read(buf)
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
		closed := c.wclosed
		c.outMu.Unlock()
		if len(b) > 0 {
			c.tls.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			if _, err := c.tls.nc.Write(b); err != nil {
				c.fail("write: " + err.Error())
				return
			}
		}
		if closed {
			c.tls.nc.Close()
			return
		}
	}
}

// feed appends TLS plaintext to the input and schedules the worker (the
// TLS path's counterpart of readable).
func (c *conn) feed(b []byte) {
	c.lastRecv.Store(nanotime())
	c.inMu.Lock()
	c.in = append(c.in, b...)
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
// the error. resume passes hup too (it was not called for an event).
func (c *conn) readable(buf []byte, hup bool) {
	c.inMu.Lock()
	if c.closed || c.eof {
		c.inMu.Unlock()
		return
	}
	if c.paused {
		c.inMu.Unlock()
		return // the worker reads again when it resumes
	}
	got := false
	for {
		n, err := unix.Read(c.fd, buf)
		c.srv.io.reads.Add(1)
		if n > 0 {
			got = true
			c.in = append(c.in, buf[:n]...)
			if len(c.in) >= pauseInput {
				c.paused = true
				break
			}
			if n < len(buf) && !hup {
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
	c.inMu.Unlock()
	if sched {
		c.srv.pool.submit(c.work)
	}
}

// resume reads a paused socket again (from the worker).
func (c *conn) resume() {
	bp := readBufs.Get().(*[]byte)
	c.readable(*bp, true)
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
	if c.wclosed {
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
				n, err := unix.Write(c.fd, b)
				c.srv.io.writes.Add(1)
				if n > 0 {
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

// outBufs recycles output buffers of held connections (an idle connection
// keeps none).
var outBufs = sync.Pool{New: func() any { b := make([]byte, 0, 4<<10); return &b }}

func getOutBuf() []byte { return (*outBufs.Get().(*[]byte))[:0] }

func putOutBuf(b []byte) {
	if c := cap(b); c >= 1<<10 && c <= holdMaxBytes {
		b = b[:0]
		outBufs.Put(&b)
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
		return
	}
	c.flushLocked()
}

// flushLocked writes c.out until it is empty or the socket refuses
// (blocked: EPOLLOUT flushes the rest). It returns false after a write
// error (the connection is being dropped). Caller holds outMu.
func (c *conn) flushLocked() bool {
	for len(c.out) > 0 {
		n, err := unix.Write(c.fd, c.out)
		c.srv.io.writes.Add(1)
		if n > 0 {
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
	putOutBuf(c.out[:cap(c.out)])
	c.out = nil
	c.blocked = false
	c.backedUpSince = 0
	return true
}

// shutdownIO closes the socket after trying to push out what is buffered
// (a final DISCONNECT). It is idempotent.
func (c *conn) shutdownIO() {
	c.inMu.Lock()
	c.outMu.Lock()
	if c.closed {
		c.outMu.Unlock()
		c.inMu.Unlock()
		return
	}
	c.closed = true
	c.in = nil
	if c.tls != nil {
		c.wclosed = true
		select {
		case c.tls.wake <- struct{}{}:
		default:
		}
		// the writer goroutine flushes and closes; bound it with a deadline
		c.tls.nc.SetDeadline(time.Now().Add(time.Second))
	} else {
		if !c.wclosed && len(c.out) > 0 {
			unix.Write(c.fd, c.out)
		}
		c.wclosed = true
		c.out = nil
		unix.Close(c.fd)
	}
	c.outMu.Unlock()
	c.inMu.Unlock()
	if c.p != nil {
		c.p.remove(c)
	}
}

var clockStart = time.Now()

// nanotime is a monotonic clock reading in nanoseconds.
func nanotime() int64 { return int64(time.Since(clockStart)) }
