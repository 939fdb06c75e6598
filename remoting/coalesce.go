package remoting

import (
	"errors"
	"time"
)

// Read coalescing. A client that pipelines single-message requests (the
// standard RocketMQ clients' asynchronous sends: each request its own
// write, hundreds in flight) but sends them more slowly than the server
// serves them finds the server's reader idle at every request: each one
// costs a wake-up, a read that finds it, another that finds nothing, and
// a write of its answer on its own, which together cost several times
// the request's own work. Like a network card's interrupt moderation, the
// reader of such a connection waits ReadCoalesce before reading again,
// so that one read finds the requests that came meanwhile and one write
// carries their answers, and it raises the socket's receive low-water
// mark (SO_RCVLOWAT) while it waits, so that the kernel does not wake the
// poller at every segment either.
//
// Only pipelined peers are worth the wait, and only they can take it
// without slowing down: a peer that waits for each answer before its next
// request would be slowed by the wait at every request. The reader
// therefore tries coalescing only when requests arrive faster than four
// per ReadCoalesce on average (over coalesceProbe frames), keeps it while
// each wait finds at least coalesceMin frames, and otherwise goes back to
// reading at once, trying again only after a number of batches that
// doubles at each failed try (up to coalesceMaxSkip): a request-response
// peer pays one wait in thousands of requests. A read that filled its
// buffer is followed by another at once (there is more), and a wait that
// finds nothing ends coalescing before the reader blocks, so a blocked
// reader always has the low-water mark of one byte and no request waits
// longer than ReadCoalesce for its read.
const (
	coalesceProbe   = 16   // frames over which the arrival rate is measured
	coalesceMin     = 2    // frames a wait must find for coalescing to go on
	coalesceMaxSkip = 4096 // most batches between two tries
	// The receive low-water mark while the reader waits is a quarter of
	// the socket's receive buffer as the kernel has grown it, within
	// these bounds. The reader does not wait on the socket while it
	// sleeps, so the mark serves only to keep the kernel from waking the
	// poller for nothing at each segment that comes meanwhile: the higher
	// the better, up to where raising it would grow the receive buffer
	// and clamp the window (about half of the buffer).
	coalesceLowatMin = 16 << 10
	coalesceLowatMax = 1 << 20
)

// coalesceLowat is the low-water mark for a wait on a socket whose
// receive buffer is rcvbuf bytes.
func coalesceLowat(rcvbuf int) int {
	return min(max(rcvbuf/4, coalesceLowatMin), coalesceLowatMax)
}

// coalescer is a server reader's read-coalescing state, owned by the
// reader goroutine.
type coalescer struct {
	wait    time.Duration // ConnOptions.ReadCoalesce; 0: off
	on      bool          // the low-water mark is raised and reads wait
	skip    int           // batches to serve before the next try
	backoff int           // skip after the next failed try
	frames  int           // frames served since since
	since   time.Time     // start of the arrival-rate window
}

// errWouldBlock is sock.readNow's answer when nothing can be read.
var errWouldBlock = errors.New("remoting: read would block")

// coalesceBeforeRead runs between a batch of served frames (served of them, read
// by a read that filled its buffer when full) and the next read. It
// returns whether that read must not block (coalescing is on: the reader
// waited, or goes on reading a full stream, with the low-water mark
// raised).
func (c *Conn) coalesceBeforeRead(served int, full bool) bool {
	co := &c.co
	if co.on {
		if served < coalesceMin && !full {
			c.coalesceStop()
			return false
		}
		co.backoff = 0
		if !full {
			time.Sleep(co.wait)
		}
		return true
	}
	if served == 0 {
		return false
	}
	co.frames += served
	if co.skip > 0 {
		co.skip--
		if co.skip == 0 {
			co.frames, co.since = 0, time.Time{}
		}
		return false
	}
	now := c.batchAt
	if now.IsZero() {
		now = time.Now()
	}
	if co.since.IsZero() {
		co.since, co.frames = now, 0
		return false
	}
	if co.frames < coalesceProbe {
		return false
	}
	fast := now.Sub(co.since)*4 < co.wait*time.Duration(co.frames)
	co.since, co.frames = now, 0
	if !fast || full {
		return false
	}
	rcvbuf, err := c.sock.rcvbuf()
	if err != nil {
		co.wait = 0 // not supported here: never again
		return false
	}
	if err := c.sock.setLowat(coalesceLowat(rcvbuf)); err != nil {
		co.wait = 0 // not supported here: never again
		return false
	}
	co.on = true
	time.Sleep(co.wait)
	return true
}

// coalesceStop ends coalescing after a try that found too little: the
// low-water mark goes back to one byte before the reader may block, and
// the next try waits for twice as many batches as the last.
func (c *Conn) coalesceStop() {
	co := &c.co
	co.on = false
	if err := c.sock.setLowat(1); err != nil {
		co.wait = 0
	}
	co.backoff = min(max(2*co.backoff, coalesceProbe), coalesceMaxSkip)
	co.skip = co.backoff
	co.since, co.frames = time.Time{}, 0
}
