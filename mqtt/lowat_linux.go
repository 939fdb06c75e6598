package mqtt

import (
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// Acknowledgements that wait for the next request. A request/response
// client (one that sends PUBLISHes to an inline handler's topic,
// Server.HandleInline: the state store's clients) answers each QoS 1
// response with a PUBACK, and sends it on its own, some microseconds to
// milliseconds after the response and before or after its next request.
// Read on its own, that PUBACK costs a wake-up of the process (the
// runtime's epoll_pwait, a context switch, the poller's epoll_wait and a
// read) for 4-6 bytes that nothing waits for: a server that answers
// requests keeps the response in flight until it comes, and that is all.
//
// So once a connection has had an inline request handled, its socket's
// SO_RCVLOWAT is raised to lowatBytes (one setsockopt): the kernel then
// signals the socket readable only when at least that many bytes wait,
// which two small acknowledgements do not reach and any request does. The
// PUBACK is read with the next request, in one read, in order. A read
// takes whatever the socket holds (the mark only governs readiness), so
// nothing else changes for the reader.
//
// What stays below the mark with nothing after it (a client that goes
// quiet after its last PUBACK, a lone PINGREQ, a short SUBSCRIBE) must
// not wait for ever, so the mark comes down again (SO_RCVLOWAT 1, which
// makes the kernel signal what waits at once):
//   - by the sweep, on the wheel: a connection with the mark that has
//     read nothing for lowatIdle has its waiting bytes looked at, at
//     every sweep (a MSG_PEEK recv, which neither consumes them nor
//     wakes anything): anything but whole PUBACKs (a PINGREQ, a
//     DISCONNECT, a short SUBSCRIBE or PUBLISH, the head of a split
//     request) has the mark lowered, so such a packet is read within
//     about two wheel ticks (100-200 ms) whenever it came. Nothing waits
//     on a PUBACK but the response it frees (and a message queued for
//     the client's quota, below), so PUBACKs alone, or nothing, keep the
//     mark until the connection has read nothing for lowatRest; then it
//     comes down whatever waits, and an idle connection keeps no mark
//     and costs the sweep nothing. On a loaded machine the clients of a
//     state store stall for 50 ms and more many times a load (their
//     process waits for a CPU): lowering the mark then cost a
//     setsockopt, the wake-up and read of the PUBACK alone and a
//     setsockopt to raise it again, 1,400 to 5,200 setsockopt calls per
//     load of BenchmarkStateStoreAzureCPU at load average 20-28 where
//     about 100 are needed. A look costs a raw recvfrom (about 0.5 µs)
//     per quiet marked connection per sweep; looking once per quiet
//     spell instead (1766961) left a small packet that came after the
//     look waiting up to lowatRest;
//   - when a session queues a message for lack of the client's receive
//     quota (session.deliverLocked): the acknowledgements that free it
//     must not wait;
//   - when a read leaves the input inside a packet (readable): the rest
//     of it, the last segment of a request the network split, may be
//     shorter than the mark;
//   - the next inline request raises it again (only if it was lowered).
//
// A client that keeps sending requests thus costs one setsockopt for its
// whole life and one wake-up per request instead of up to two.

const (
	// lowatBytes is the raised mark: more than five MQTT 5 PUBACKs with
	// a reason code (6 bytes each; the Azure client was seen to leave
	// three unread between requests) or seven MQTT 3.1.1 ones (4), less
	// than any request (a state store request is hundreds of bytes).
	lowatBytes = 32
	// lowatIdle is how long a connection with the mark may read nothing
	// before the sweep lowers it unless only PUBACKs wait.
	lowatIdle = 50 * time.Millisecond
	// lowatRest is how long a connection with the mark may read nothing
	// before the sweep lowers it whatever waits.
	lowatRest = time.Second
)

// lowatOn raises c's mark after an inline request (from the poller's
// workInline, which holds inMu; lock order inMu, outMu, lowMu).
func (c *conn) lowatOn() {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.lowat || c.p == nil || c.fdClosed || c.wclosed {
		return
	}
	if setRcvLowat(c.fd, lowatBytes) != nil {
		return
	}
	c.lowat = true
	c.p.lowatAdd(c)
}

// lowatOff lowers c's mark (the kernel then signals bytes already waiting).
func (c *conn) lowatOff() {
	c.outMu.Lock()
	c.lowatOffLocked()
	c.outMu.Unlock()
}

// lowatOffLocked is lowatOff; caller holds outMu.
func (c *conn) lowatOffLocked() {
	if !c.lowat {
		return
	}
	c.lowat = false
	if !c.fdClosed {
		setRcvLowat(c.fd, 1)
		c.srv.io.lowered.Add(1)
	}
}

// setRcvLowat sets fd's SO_RCVLOWAT. It never blocks, so it is a raw
// system call: through the runtime's entersyscall, a call made while
// every P was idle (the poller had just woken) woke the runtime's monitor
// thread from its deep sleep into a millisecond or more of 20 µs naps;
// half of its wake-ups under the state store load came from here.
func setRcvLowat(fd, n int) error {
	v := int32(n)
	_, _, e := unix.RawSyscall6(unix.SYS_SETSOCKOPT, uintptr(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, uintptr(unsafe.Pointer(&v)), 4, 0)
	if e != 0 {
		return e
	}
	return nil
}

// lowatAdd lists c for the sweep (caller holds c.outMu).
func (p *poller) lowatAdd(c *conn) {
	p.lowMu.Lock()
	defer p.lowMu.Unlock()
	if c.lowListed {
		return
	}
	c.lowListed = true
	p.lowConns = append(p.lowConns, lowEntry{c: c})
	if !p.lowArmed {
		p.lowArmed = true
		p.s.wheel.armEvery(&p.lowTimer, lowatIdle, p.lowatSweep)
	}
}

// lowEntry is a connection listed for the sweep.
type lowEntry struct {
	c *conn
}

// lowatSweep lowers the mark of listed connections that have read
// nothing for lowatIdle (unless only PUBACKs wait, up to lowatRest) and
// drops those without a mark; it runs on the pool from the wheel's
// periodic timer, which it disarms when no connection stays listed. Two
// sweeps may overlap on a loaded machine (the next period came before
// this one ran): each takes the list it finds, and the last to put its
// connections back arms the timer again if an earlier one disarmed it.
func (p *poller) lowatSweep() {
	p.lowMu.Lock()
	list := p.lowConns
	p.lowConns = nil
	p.lowMu.Unlock()
	now := nanotime()
	keep := list[:0]
	for _, e := range list {
		c := e.c
		c.outMu.Lock()
		if c.lowat {
			last := c.lastRecv.Load()
			switch idle := now - last; {
			case idle < int64(lowatIdle):
				// Busy.
			case !c.onlyAcksWaitLocked():
				c.srv.io.lowSeen.Add(1)
				c.lowatOffLocked()
			case idle >= c.srv.lowRest():
				c.lowatOffLocked()
			default:
				c.srv.io.lowKept.Add(1)
			}
		}
		if c.lowat {
			keep = append(keep, e)
		} else {
			p.lowMu.Lock()
			c.lowListed = false
			p.lowMu.Unlock()
		}
		c.outMu.Unlock()
	}
	clear(list[len(keep):])
	p.lowMu.Lock()
	defer p.lowMu.Unlock()
	// Connections listed meanwhile are in p.lowConns already.
	p.lowConns = append(keep, p.lowConns...)
	switch armed := len(p.lowConns) > 0; {
	case armed && !p.lowArmed:
		p.s.wheel.armEvery(&p.lowTimer, lowatIdle, p.lowatSweep)
	case !armed && p.lowArmed:
		p.s.wheel.disarm(&p.lowTimer)
	}
	p.lowArmed = len(p.lowConns) > 0
}

// onlyAcksWaitLocked reports whether what waits in c's socket is nothing
// or whole PUBACKs only (looked at with MSG_PEEK: nothing is consumed).
// Anything else, a read error or the peer's end report false: the mark
// must come down. Caller holds outMu.
func (c *conn) onlyAcksWaitLocked() bool {
	if c.fdClosed {
		return false
	}
	var buf [lowatBytes]byte
	n, _, e := unix.RawSyscall6(unix.SYS_RECVFROM, uintptr(c.fd), uintptr(unsafe.Pointer(&buf[0])), uintptr(len(buf)),
		unix.MSG_PEEK|unix.MSG_DONTWAIT, 0, 0)
	switch {
	case e == unix.EAGAIN:
		return true
	case e != 0 || n == 0:
		return false
	}
	return onlyPubacks(buf[:n])
}

// lowRest is lowatRest, or the bound a test set in restNanos.
func (s *Server) lowRest() int64 {
	if r := s.io.restNanos.Load(); r > 0 {
		return r
	}
	return int64(lowatRest)
}

// onlyPubacks reports whether b is one or more whole PUBACK packets
// (MQTT 3.1.1 or 5: fixed header 0x40, a one-byte remaining length of at
// least 2). b holds fewer than lowatBytes bytes when the mark held them
// back; a full b (the poller has not read it yet) or one that ends
// inside a packet reports false.
func onlyPubacks(b []byte) bool {
	if len(b) == 0 || len(b) >= lowatBytes {
		return false
	}
	for len(b) > 0 {
		if len(b) < 2 || b[0] != 0x40 || b[1] < 2 || b[1] > 0x7f || len(b) < 2+int(b[1]) {
			return false
		}
		b = b[2+int(b[1]):]
	}
	return true
}
