package mqtt

import (
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// Inbound memory budget (Options.MaxInboundMemory).
//
// A connection's unparsed input lives in a pooled inBufSize array while it
// fits one; only an input that outgrows it (a large packet arriving, or a
// burst of small ones) moves to an array of its own, and that array's
// size is charged to the server's budget (Stats.InboundBytes) until the
// input drains or shrinks back into a small array, or the connection
// closes. The small arrays are not charged: they are the per-connection
// floor, so a client whose packets fit in inBufSize is never held up by
// the budget. The hot path pays one atomic load per socket read; the
// charge itself moves only when an input array is replaced.
//
// While the budget is used up (Stats.InboundBytes >= MaxInboundMemory):
//
//   - a connection reads only into the room its input already has (a
//     charged array's spare capacity, or up to inBufSize for an uncharged
//     one), so no read makes the total grow;
//   - a connection with no room left stops being read (throttled,
//     Stats.InboundThrottled): TCP flow control holds the client back, and
//     the connection waits in a FIFO queue, woken when charges are
//     released;
//   - one connection at a time holds the pass: the first to find no room
//     while nobody holds it reads on past the budget until a whole packet
//     is handled (or its input drains, or it closes). So a single legal
//     packet always completes, even when throttled connections hold the
//     whole budget in partial packets, and the total stays under
//     MaxInboundMemory plus one MaxPacketSize (plus a read or two);
//   - every InboundStallTimeout while connections wait, those that hold a
//     charge and have sent nothing for that long although they were being
//     read (a client stalled inside a partial packet, the pass holder
//     included) are disconnected (v5: 0x97 quota exceeded,
//     Stats.InboundStalled; one log line per 10 s and burst).
//
// A waiting connection owns no goroutine: the poller ignores its read
// events until a release wakes it through the worker pool.
type inbound struct {
	limit   int64
	mu      sync.Mutex
	waiters []*conn // protected by mu: throttled connections, in arrival order
	nwait   atomic.Int32
	pass    *conn    // protected by mu: the connection allowed past the budget
	sweep   timer    // the stall sweep, armed while connections wait
	armed   bool     // protected by mu: sweep is armed
	log     logLimit // the stall disconnections' log lines
}

// pressed reports whether the budget is used up.
func (s *Server) pressed() bool { return s.stats.InboundBytes.Load() >= s.inb.limit }

// memFlag is a connection's state in the budget (conn.mem).
type memFlag uint8

const (
	memWaiting memFlag = 1 << iota // throttled: queued, not read
	memPassing                     // holds the pass
	memHungUp                      // an event said the peer hung up (EPOLLRDHUP and co.)
)

// charged is the size of the input's array charged to the budget, 0
// when it is a small one (caller holds inMu).
func (c *conn) charged() int {
	if c.inBuf != nil && cap(*c.inBuf) > inBufSize {
		return cap(*c.inBuf)
	}
	return 0
}

// roomUnderPressure is how many bytes the connection may read while the
// budget is used up: what fits in its input array without a charge
// (caller holds inMu).
func (c *conn) roomUnderPressure() int {
	switch {
	case c.in == nil:
		return inBufSize
	case c.charged() == 0:
		return inBufSize - len(c.in) // growIn keeps it uncharged
	default:
		return cap(c.in) - len(c.in)
	}
}

// growIn moves the input to an array with room for extra more bytes and
// charges its size when it is over inBufSize (caller holds inMu). The
// array doubles, but not past the end of the packet the input starts
// with: a large packet's input ends in an array of its size.
func (c *conn) growIn(extra int) {
	s := c.srv
	need := len(c.in) + extra
	old := c.charged()
	size := inBufSize
	reserved := false
	if need > inBufSize {
		size = max(need, 2*cap(c.in))
		if end := s.packetEnd(c.in); end >= need && end < size {
			size = end
		}
		// Room to grow into is reserved only if the budget has it
		// (atomically: readers on other goroutines grow too); else
		// the array takes just what is read, and the next read finds
		// the budget used up.
		if d := size - old; c.mem&memPassing == 0 && size > need && d > 0 {
			if s.stats.InboundBytes.Add(int64(d)) > s.inb.limit {
				s.release(int64(d))
				size = need
			} else {
				reserved = true
			}
		}
	}
	in := make([]byte, len(c.in), size)
	copy(in, c.in)
	if c.inBuf != nil && old == 0 && !c.scheduled {
		// A pooled array goes back to the pool only when nobody works
		// on the input: an inline handler on another goroutine
		// (workInline, run from a worker's resume while the poller
		// reads) may still read its request in place there, so then
		// it is left to the collector.
		inBufs.Put(c.inBuf)
	}
	c.in, c.inBuf = in, nil
	if size > inBufSize {
		whole := in[:0:size]
		c.inBuf = &whole
	}
	if !reserved {
		s.adjust(c.charged() - old)
	}
	if size <= inBufSize && c.mem&memPassing != 0 {
		c.dropPass()
	}
}

// packetEnd is the length of the packet b starts with, 0 when its fixed
// header is not whole (or not valid: the worker reports that).
func (s *Server) packetEnd(b []byte) int {
	if len(b) == 0 {
		return 0
	}
	_, _, rl, hl, err := s.dec.DecodeFixedHeader(b)
	if err != nil {
		return 0
	}
	return hl + rl
}

// compactIn moves a charged input that shrank to a few bytes back into a
// pooled array, releasing the charge (caller holds inMu; the caller owns
// the worker fields, so no inline handler reads the old array).
func (c *conn) compactIn() {
	old := c.charged()
	bp := inBufs.Get().(*[]byte)
	in := (*bp)[:len(c.in)]
	copy(in, c.in)
	c.in, c.inBuf = in, bp
	c.uncharge(old)
}

// uncharge releases the old array's charge, n bytes (maybe 0); a
// connection whose charge ends gives up the pass (caller holds inMu).
func (c *conn) uncharge(n int) {
	c.srv.adjust(-n)
	if c.mem&memPassing != 0 {
		c.dropPass()
	}
}

// adjust moves the budget's use by d bytes.
func (s *Server) adjust(d int) {
	if d > 0 {
		s.stats.InboundBytes.Add(int64(d))
	} else if d < 0 {
		s.release(int64(-d))
	}
}

// release gives n bytes back to the budget and wakes waiting
// connections if that leaves room.
func (s *Server) release(n int64) {
	used := s.stats.InboundBytes.Add(-n)
	if used < s.inb.limit && s.inb.nwait.Load() > 0 {
		s.inb.mu.Lock()
		s.wakeLocked(int((s.inb.limit-used)/readBufSize) + 1)
		s.inb.mu.Unlock()
	}
}

// throttle is called by a read that found no room under pressure (caller
// holds inMu). It gives the connection the pass if nobody holds it
// (false: read on), else queues it and stops its reads (true). If the
// budget was released meanwhile it does neither (false).
func (c *conn) throttle() bool {
	s := c.srv
	if c.mem&memHungUp != 0 && c.cannotFinish() {
		c.eof = true // read no more: the worker closes the connection
		return false
	}
	b := &s.inb
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.pass == nil {
		b.pass = c
		c.mem |= memPassing
		return false
	}
	b.waiters = append(b.waiters, c)
	b.nwait.Add(1)
	if c.mem&memHungUp != 0 {
		// Its last packet is whole in the socket: it goes first.
		copy(b.waiters[1:], b.waiters)
		b.waiters[0] = c
	}
	// A release that came before the queue held c saw no waiter: look
	// again (either it sees c queued or c sees its release).
	if !s.pressed() {
		b.unqueueLocked(c)
		return false
	}
	c.mem |= memWaiting
	s.stats.InboundThrottled.Add(1)
	if !b.armed {
		b.armed = true
		s.wheel.arm(&b.sweep, s.opts.InboundStallTimeout, s.inboundSweep)
	}
	return true
}

// dropPass gives up the pass and wakes the first waiting connection,
// which may take it (caller holds inMu).
func (c *conn) dropPass() {
	b := &c.srv.inb
	b.mu.Lock()
	if b.pass == c {
		b.pass = nil
	}
	c.mem &^= memPassing
	c.srv.wakeLocked(1)
	b.mu.Unlock()
}

// unqueue takes a closing connection out of the waiters (caller holds
// inMu).
func (c *conn) unqueue() {
	if c.mem&memWaiting == 0 {
		return
	}
	c.mem &^= memWaiting
	if c.tls != nil {
		c.tlsWake()
	}
	b := &c.srv.inb
	b.mu.Lock()
	b.unqueueLocked(c)
	b.mu.Unlock()
}

func (b *inbound) unqueueLocked(c *conn) {
	for i, w := range b.waiters {
		if w == c {
			b.waiters = append(b.waiters[:i], b.waiters[i+1:]...)
			b.nwait.Add(-1)
			return
		}
	}
}

// cannotFinish reports whether a client that hung up left too few bytes
// in the socket to finish the packet its input ends in (caller holds
// inMu): reading on would only hold memory until the end of stream.
func (c *conn) cannotFinish() bool {
	if c.tls != nil {
		return false
	}
	rest := c.in
	for len(rest) > 0 {
		end := c.srv.packetEnd(rest)
		if end == 0 {
			return false // not known: read on (the worker reports errors)
		}
		if end > len(rest) {
			avail := sysInq(c.fd)
			return avail >= 0 && avail < end-len(rest)
		}
		rest = rest[end:]
	}
	return false
}

// hangUpThrottled handles the hang-up of a throttled connection (caller
// holds inMu): one that cannot finish its packet is closed now, freeing
// its memory; another goes to the front of the queue.
func (c *conn) hangUpThrottled() {
	b := &c.srv.inb
	if c.cannotFinish() {
		c.unqueue()
		c.eof = true
		if !c.scheduled {
			c.scheduled = true
			c.srv.pool.submit(c.work)
		}
		return
	}
	b.mu.Lock()
	for i, w := range b.waiters {
		if w == c {
			copy(b.waiters[1:i+1], b.waiters[:i])
			b.waiters[0] = c
			break
		}
	}
	b.mu.Unlock()
}

// wakeLocked hands the first n waiting connections to the pool, which
// reads them again (caller holds inb.mu).
func (s *Server) wakeLocked(n int) {
	b := &s.inb
	n = min(n, len(b.waiters))
	if n == 0 {
		return
	}
	for _, c := range b.waiters[:n] {
		s.pool.submit(c.memResume)
	}
	k := copy(b.waiters, b.waiters[n:])
	clear(b.waiters[k:])
	b.waiters = b.waiters[:k]
	b.nwait.Add(int32(-n))
}

// memResume reads a woken connection again (on a worker; a TLS
// connection's reader goroutine is signalled instead).
func (c *conn) memResume() {
	c.inMu.Lock()
	if c.mem&memWaiting == 0 {
		c.inMu.Unlock()
		return
	}
	c.mem &^= memWaiting
	c.inMu.Unlock()
	if c.tls != nil {
		c.tlsWake()
		return
	}
	c.resume()
}

func (c *conn) tlsWake() {
	select {
	case c.tls.memWake <- struct{}{}:
	default:
	}
}

// tlsRoom is how many bytes a TLS connection's reader may read now, up
// to n; 0 when the connection was throttled (the reader waits for
// memWake).
func (c *conn) tlsRoom(n int) int {
	if !c.srv.pressed() {
		return n
	}
	c.inMu.Lock()
	defer c.inMu.Unlock()
	if c.mem&memPassing != 0 || c.closed {
		return n
	}
	room := c.roomUnderPressure()
	if room <= 0 {
		if c.throttle() {
			return 0
		}
		return n
	}
	return min(room, n)
}

// inboundSweep runs every InboundStallTimeout while connections wait for
// the budget: it disconnects the holders of charges that stalled (see the
// package comment above) and wakes waiters a missed release left queued.
func (s *Server) inboundSweep() {
	b := &s.inb
	b.mu.Lock()
	waiting := len(b.waiters)
	b.mu.Unlock()
	if waiting > 0 {
		s.mu.Lock()
		conns := make([]*conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		now, stall := nanotime(), int64(s.opts.InboundStallTimeout)
		for _, c := range conns {
			c.inMu.Lock()
			held := c.charged()
			idle := now - c.lastRecv.Load()
			// (The pass may be held with no charge yet: a full small
			// array.)
			stalled := (held > 0 || c.mem&memPassing != 0) && !c.closed && !c.closing.Load() && c.mem&memWaiting == 0 && !c.paused && !c.scheduled && idle >= stall
			c.inMu.Unlock()
			if stalled {
				s.kickStalled(c, held, time.Duration(idle), waiting)
			}
		}
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if len(b.waiters) > 0 && !s.pressed() {
		s.wakeLocked(len(b.waiters))
	}
	b.armed = len(b.waiters) > 0
	if b.armed {
		s.wheel.arm(&b.sweep, s.opts.InboundStallTimeout, s.inboundSweep)
	}
}

// kickStalled disconnects a connection stalled inside a partial packet
// while others wait for the budget it holds.
func (s *Server) kickStalled(c *conn, held int, idle time.Duration, waiting int) {
	s.stats.InboundStalled.Add(1)
	if ok, suppressed := s.inb.log.take(); ok {
		s.log.Warn("mqtt: inbound memory budget used up: disconnecting a client stalled inside a partial packet",
			"client", c.clientID(), "remote", c.remote, "held", held, "idle", idle.Round(time.Millisecond),
			"waiting", waiting, "budget", s.inb.limit, "suppressed", suppressed)
	}
	s.pool.submit(func() {
		c.closeWith(packets.ReasonQuotaExceeded, "stalled inside a partial packet holding "+strconv.Itoa(held)+
			" bytes of the inbound memory budget", closeServer)
	})
}
