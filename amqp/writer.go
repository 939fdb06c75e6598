package amqp

import (
	"net"
	"sync"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// Outbound limits of one connection.
const (
	// outSkipBytes: while more than this waits in a connection's outbound
	// queue, queues skip its consumers (the slow consumer then holds up
	// nobody); they come back when the writer has drained it.
	outSkipBytes = 1 << 20
	// outPauseBytes: while more than this waits, the connection's reader
	// stops reading (a peer that publishes but never reads its confirms
	// cannot grow the queue without bound).
	outPauseBytes = 8 << 20
	// flushTimeout bounds the final writes of a closing connection.
	flushTimeout = 5 * time.Second
	// writeTimeout (or twice the heartbeat interval, if longer) bounds one
	// write: a peer that stops reading altogether is dropped.
	writeTimeout = 60 * time.Second
)

// outq is a connection's outbound queue: whole frames, written in order by
// the connection's writer goroutine. push never blocks.
type outq struct {
	mu      sync.Mutex
	cond    *sync.Cond // signalled when bytes drop or the queue closes
	bufs    [][]byte
	bytes   int
	closed  bool // no more pushes; the writer drains and ends
	failed  bool // the socket failed: pushes are discarded
	skipped bool // a queue skipped a consumer on this connection
	wake    chan struct{}
}

func newOutq() *outq {
	o := &outq{wake: make(chan struct{}, 1)}
	o.cond = sync.NewCond(&o.mu)
	return o
}

// push queues b (which the queue now owns).
func (o *outq) push(b []byte) {
	o.mu.Lock()
	if o.closed || o.failed {
		o.mu.Unlock()
		return
	}
	o.bufs = append(o.bufs, b)
	o.bytes += len(b)
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// full reports whether deliveries should skip this connection, and
// remembers that one did.
func (o *outq) full() bool {
	o.mu.Lock()
	defer o.mu.Unlock()
	if o.bytes > outSkipBytes {
		o.skipped = true
		return true
	}
	return o.failed
}

// waitRoom blocks the connection's own reader while its outbound queue is
// over outPauseBytes.
func (o *outq) waitRoom() {
	o.mu.Lock()
	for o.bytes > outPauseBytes && !o.closed && !o.failed {
		o.cond.Wait()
	}
	o.mu.Unlock()
}

func (o *outq) close() {
	o.mu.Lock()
	o.closed = true
	o.cond.Broadcast()
	o.mu.Unlock()
	select {
	case o.wake <- struct{}{}:
	default:
	}
}

// writeLoop is the connection's writer goroutine: it writes what push
// queued, sends heartbeats when nothing else went out for half the
// interval, and ends when the queue is closed and drained or the socket
// fails. After draining below outSkipBytes it asks the queues that
// skipped this connection to deliver again (kick).
func (c *conn) writeLoop() {
	o := c.out
	var bufs net.Buffers
	var tick <-chan time.Time
	hbSet := c.hbSet
	wrote := false
	for {
		o.mu.Lock()
		if len(o.bufs) == 0 {
			closed := o.closed
			o.mu.Unlock()
			if closed {
				return
			}
			select {
			case <-o.wake:
			case <-tick:
				if !wrote {
					o.push(wire.AppendHeartbeat(nil))
				}
				wrote = false
			case <-hbSet:
				hbSet = nil
				if hb := time.Duration(c.heartbeat.Load()); hb > 0 {
					t := time.NewTicker(hb / 2)
					defer t.Stop()
					tick = t.C
				}
			}
			continue
		}
		batch := o.bufs
		o.bufs = nil
		timeout := max(writeTimeout, 2*time.Duration(c.heartbeat.Load()))
		if o.closed {
			timeout = flushTimeout
		}
		o.mu.Unlock()
		c.nc.SetWriteDeadline(time.Now().Add(timeout))
		n := 0
		for _, b := range batch {
			n += len(b)
		}
		bufs = append(bufs[:0], batch...)
		_, err := bufs.WriteTo(c.nc)
		wrote = true
		o.mu.Lock()
		o.bytes -= n
		kick := o.skipped && o.bytes <= outSkipBytes/2
		if kick {
			o.skipped = false
		}
		if err != nil {
			o.failed = true
			o.bufs = nil
			o.bytes = 0
		}
		o.cond.Broadcast()
		o.mu.Unlock()
		if err != nil {
			c.nc.Close() // ends the reader too
			return
		}
		if kick {
			c.srv.kick(c)
		}
	}
}
