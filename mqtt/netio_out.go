package mqtt

import (
	"strconv"
	"sync"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
	"golang.org/x/sys/unix"
)

// The output side of the socket I/O (netio.go): writes straight to the
// socket, the output buffer that waits for EPOLLOUT, and the QoS 0 drop
// of a backed-up client.

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
