package mqtt

import (
	"context"
	"time"
)

// Poller rounds. A poller serves the ready connections of one epoll_wait
// in a round (netio_linux.go), and an inline handler (Server.HandleInline)
// called on it may put part of its work off to the round's end with
// Round.Defer: work whose cost is shared by every request of the round
// (the state store's SETs: one pwrite for all the records the round put,
// instead of one per SET). What a handler defers runs on the poller,
// after every ready connection of the round was read and handled and
// before the poller waits again; the connections whose requests deferred
// work stay held (batch.go) until then, so a deferred answer still leaves
// in one write with its request's acknowledgement (queued when the
// handler returned, or by later's done: either is part of the round's
// unit of work).
//
// The round belongs to its poller goroutine: Defer and Flush are called
// only from an inline handler's call on that poller (RoundOf returns nil
// elsewhere: a worker, a TLS connection's reader).

// Round is a poller's round of ready connections (see RoundOf).
type Round struct {
	ctx     context.Context // the server's, carrying the round (RoundOf)
	srv     *Server
	cur     *conn       // the connection whose inline handler is being called (callAsync)
	hooks   []RoundHook // deferred work, in Defer order
	fl      outBatch    // connections held until the hooks ran
	running bool        // Flush is running the hooks
	conn    bool        // the connection being handled deferred work (workInline)
	// The round's clock readings, taken on first use and forgotten at
	// its end (clock): its requests arrived before it started, so one
	// reading serves them all (a clock read costs 40-90 ns on a VM).
	wall time.Time
	mono int64
	st   roundStats // counts folded into the server's (roundstats.go)
}

// RoundHook is work an inline handler put off to its round's end.
type RoundHook interface {
	// RoundEnd runs the deferred work on the poller. It must not block
	// (the rules of an inline handler) and must not keep the request's
	// bytes (they belonged to the handler's call).
	RoundEnd()
}

type roundKey struct{}

// RoundOf returns the poller round an inline handler is called in, from
// the handler's ctx, or nil when the call is not on a poller.
func RoundOf(ctx context.Context) *Round {
	r, _ := ctx.Value(roundKey{}).(*Round)
	return r
}

// Defer runs h at the end of the round (or at an earlier Flush), after
// the hooks deferred before it. The calling connection's output is held
// until the round's writes, and with it whatever the request's
// acknowledgement wrote (sent when the handler returns, or by done if it
// called later), so the acknowledgement and what h sends leave in one
// write.
func (r *Round) Defer(h RoundHook) {
	r.hooks = append(r.hooks, h)
	r.conn = true
}

// Flush runs the hooks deferred so far, now: a handler whose request
// must see the deferred work done (a read after a pipelined write) calls
// it first. The poller flushes before a connection's input goes to a
// worker, and at the round's end.
func (r *Round) Flush() {
	r.fold() // what the hooks send may answer the round's requests
	if r.running {
		return
	}
	r.running = true
	for i := 0; i < len(r.hooks); i++ {
		h := r.hooks[i]
		r.hooks[i] = nil
		h.RoundEnd()
	}
	r.hooks = r.hooks[:0]
	r.running = false
}

// end ends the round: the deferred hooks run, then the held connections
// are written (one write each).
func (r *Round) end() {
	r.Flush()
	r.fold() // what the hooks sent
	if r.fl.pending() {
		r.fl.release()
	}
	r.wall, r.mono, r.cur = time.Time{}, 0, nil
}

// RoundClient names the session whose request an inline handler is
// serving (Round.Client), so that the work the handler deferred to the
// round's end answers it without looking the session up
// (SendToClientRecycled). The zero RoundClient names none. It is only
// good until the round ends.
type RoundClient struct{ ss *session }

// Client returns the session of the request an inline handler is being
// called for, the zero RoundClient outside such a call.
func (r *Round) Client() RoundClient {
	if r != nil && r.cur != nil {
		return RoundClient{r.cur.session}
	}
	return RoundClient{}
}

// SendToClientRecycled is SendToRecycled for an answer deferred to the
// round's end: c, taken by Client in the handler's call, is the session
// the request came in on, used when it is clientID's (a lookup in the
// server's session table, under its lock, otherwise: 0.7 % of a SET's
// CPU). As with SendToRecycled, a session taken over during the round
// is still the one answered.
func (r *Round) SendToClientRecycled(c RoundClient, clientID string, msg *Message, rec Recycler) error {
	if c.ss != nil && c.ss.id == clientID {
		return c.ss.deliverTo(msg, false, rec, r).err(clientID)
	}
	return r.SendToRecycled(clientID, msg, rec)
}

// wallNow is the round's wall clock reading, for the expiry of the
// messages its requests carry: time.Now on the round's first call (and
// on every call of a nil Round: not on a poller).
func (r *Round) wallNow() time.Time {
	if r == nil {
		return time.Now()
	}
	if r.wall.IsZero() {
		r.wall = time.Now()
	}
	return r.wall
}

// Now is the round's reading of the wall clock (time.Now for a nil
// round): an inline request's message expiry (Message.Expiry) was
// computed from it, so Expiry.Sub(Now()) is what remained of its
// interval when the round began.
func (r *Round) Now() time.Time { return r.wallNow() }

// monoNow is wallNow for nanotime (a connection's last receipt).
func (r *Round) monoNow() int64 {
	if r == nil {
		return nanotime()
	}
	if r.mono == 0 {
		r.mono = nanotime()
	}
	return r.mono
}

// init readies a poller's round on the server's context.
func (r *Round) init(s *Server) {
	r.ctx = context.WithValue(s.ctx, roundKey{}, r)
	r.srv = s
}

// SendToRecycled is Server.SendToRecycled for an inline handler's call on
// the round's poller, or a hook it deferred (RoundHook). When clientID is
// the client whose request the handler is serving, its session is the
// connection's, found without the server's lock and session table; and a
// message that expires is checked (and its remaining interval computed)
// against the round's clock reading, the one its request's expiry was
// computed from, instead of a fresh one: a message may so go out up to
// the round's length after its expiry, never before.
//
// The one difference from Server.SendToRecycled: should the client's
// connection have been taken over by a new one with a clean start while
// its request was being served, the answer goes to the session the
// request came in on, which is being discarded, not to the new one (which
// never sent the request).
func (r *Round) SendToRecycled(clientID string, msg *Message, rec Recycler) error {
	if c := r.cur; c != nil && c.session != nil && c.session.id == clientID {
		return c.session.deliverTo(msg, false, rec, r).err(clientID)
	}
	// Another client's connection, written now (not held by the round):
	// the round's requests are counted before, the message after.
	r.fold()
	ss, err := r.srv.sessionOf(clientID)
	if err != nil {
		return err
	}
	defer r.fold()
	return ss.deliverTo(msg, false, rec, r).err(clientID)
}
