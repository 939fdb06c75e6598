package mqtt

import (
	"context"
	"sync/atomic"
	"time"
)

// Write coalescing. A unit of work (a worker handling a batch of one
// connection's packets, and the deliveries those packets cause through a
// synchronous backend) holds back the output of the connections it writes
// to: while a connection is held, write appends to its output buffer
// without a syscall, and the holder flushes every connection it held with
// one write each when the unit ends (before the worker gives up the
// connection, parks, yields or closes). A request whose handler answers
// the same client (a response PUBLISH, then the PUBACK) thus costs one
// write instead of two, a read's worth of QoS 1 PUBLISHes stored at once
// one write for all their PUBACKs, and a publisher's batch of messages one
// write per subscriber instead of one per delivery.
//
// Bounds: a held connection is written as soon as its output would pass
// holdMax (min(holdMaxBytes, MaxOutbound/4), so held bytes never count as
// a backed-up client for the QoS 0 drop at MaxOutbound/2), and output is
// held only while the unit computes: the worker flushes before it parks
// and before it calls code that may block (a handler, a synchronous
// backend), so what it holds never waits behind a handler; the handler's
// own answer and the PUBACK after it leave together. Subscribers of a
// publisher's packets are held only while more of its input follows (the
// last packet's deliveries go straight out: holding a subscriber that gets
// one message saves nothing and delays it behind the whole fan-out).
// Writes to a connection no unit holds go out at once as before; other
// goroutines' writes to a held connection (a SendTo from elsewhere) wait
// for the unit's end, which is short by the rules above. An AsyncBackend
// completing on its own goroutine writes its acknowledgements at once
// (after what the unit holds, in order): they must not wait for the
// worker. Output held while the socket refuses (blocked, waiting for
// EPOLLOUT) is simply appended: the EPOLLOUT flush sends it.
//
// Ordering: one connection has one output buffer, appended to under outMu
// in the order the packets are sent, and a flush writes it from its
// start, so holding changes when bytes leave, never their order (the
// response PUBLISH still precedes its request's PUBACK).

// holdMaxBytes is the most output a unit of work holds back for one
// connection before writing it.
const holdMaxBytes = 64 << 10

// outBatch is the set of connections a unit of work holds. It belongs to
// the worker running the unit (conn.fl: only one worker runs a
// connection's work at a time).
type outBatch struct {
	conns []*conn
}

// hold makes c's output wait for b.release, unless another unit already
// holds it (that one flushes it) or c is closed.
func (b *outBatch) hold(c *conn) {
	c.outMu.Lock()
	if c.heldBy == nil && !c.wclosed {
		c.heldBy = b
		b.conns = append(b.conns, c)
	}
	c.outMu.Unlock()
}

// pending reports whether b holds any connection.
func (b *outBatch) pending() bool { return len(b.conns) > 0 }

// release flushes every connection b holds, in the order b took them.
// Only the unit that owns b calls it: a unit that gives its connection up
// (clears scheduled) releases first, or the connection's next unit (the
// poller's, answering the bytes this release wrote) holds b meanwhile.
func (b *outBatch) release() {
	for i, c := range b.conns {
		c.unhold(b)
		if h := afterUnhold.Load(); h != nil {
			(*h)()
		}
		b.conns[i] = nil
	}
	b.conns = b.conns[:0]
}

// afterUnhold, set by tests only, runs after release wrote a connection:
// a client's answer to those bytes may be read meanwhile.
var afterUnhold atomic.Pointer[func()]

// moveTo hands the connections b holds to dst, which writes them when it
// is released (a poller's round, round.go).
func (b *outBatch) moveTo(dst *outBatch) {
	for i, c := range b.conns {
		c.outMu.Lock()
		if c.heldBy == b {
			c.heldBy = dst
			dst.conns = append(dst.conns, c)
		}
		c.outMu.Unlock()
		b.conns[i] = nil
	}
	b.conns = b.conns[:0]
}

// unhold ends b's hold on c and writes what c's output holds (for TLS,
// wakes the writer).
func (c *conn) unhold(b *outBatch) {
	c.outMu.Lock()
	defer c.outMu.Unlock()
	if c.heldBy != b {
		return
	}
	c.heldBy = nil
	if c.wclosed || len(c.out) == 0 || c.blocked {
		return
	}
	if c.tls != nil {
		c.wakeWriter()
		return
	}
	c.flushLocked()
}

// flushHeld writes what c's unit of work holds before the worker calls
// code that may block (a handler, a synchronous backend), then holds c
// again, so that what that call sends to c (a handler's response) leaves
// with the acknowledgement that follows it.
func (c *conn) flushHeld() {
	c.fl.release()
	c.fl.hold(c)
}

// workKey is the context key under which a unit of work passes its
// connection to a synchronous backend (MemoryBackend.Publish), so that the
// deliveries it makes are held by the unit (see contextDeliverer).
type workKey struct{}

// workCtx is the context the worker passes to backend publishes: the
// server's, carrying c. Worker-owned.
func (c *conn) workCtx() context.Context {
	if c.wctx == nil {
		c.wctx = context.WithValue(c.srv.ctx, workKey{}, c)
	}
	return c.wctx
}

// contextDeliverer is implemented by the Server: a backend that delivers
// synchronously, inside Publish, calls deliverContext with Publish's
// context so that a worker's deliveries are held by its unit of work. The
// context must not be used after Publish returns.
type contextDeliverer interface {
	deliverContext(ctx context.Context, msg *Message)
}

// deliverContext is Deliver for a synchronous backend: when ctx carries
// the connection whose worker is publishing, the subscribers' connections
// are held by that worker's unit of work and written once when it ends.
func (s *Server) deliverContext(ctx context.Context, msg *Message) {
	w, _ := ctx.Value(workKey{}).(*conn)
	if w == nil || !w.more {
		// Outside a unit, or its last packet: holding a subscriber that
		// gets one message saves nothing and delays it behind the whole
		// fan-out. Connections the unit already holds stay held (write
		// appends to them), so order is kept.
		s.Deliver(msg)
		return
	}
	s.deliverHeld(&w.fl, msg)
}

// deliverHeld delivers msg to the matching subscriptions, holding each
// connection written to in b.
func (s *Server) deliverHeld(b *outBatch, msg *Message) {
	if msg.expired(time.Now()) {
		return
	}
	for _, t := range s.subs.match(msg.Topic, msg.ClientID) {
		retain := msg.Retain && t.rap
		ss := t.s
		ss.mu.Lock()
		if c := ss.conn; c != nil {
			b.hold(c)
		}
		ss.deliverLocked(msg, min(msg.QoS, t.qos), retain, t.subIDs, nil)
		ss.mu.Unlock()
	}
}
