package mqtt

import (
	"time"

	"golang.org/x/sys/unix"
)

// Closing a connection's socket (netio.go): the half-open linger after a
// DISCONNECT, the drain of what is left, and the descriptor's close.

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
