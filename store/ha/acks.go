package ha

import (
	"context"
	"errors"
	"fmt"
	"time"
)

// Acknowledgements. A sync master answers a write once a slave holds it
// (in controlled mode: every member of the sync state set). WaitAck blocks
// a goroutine until then; WhenAcked leaves a callback instead, and the
// server's ack loop calls it when the acknowledgement comes (or its
// timeout passes, or no slave is fit to acknowledge it), so that no
// goroutine waits per write. Both decide with ackState.

// errAckPending: the write is not acknowledged yet, and may still be.
var errAckPending = errors.New("ha: acknowledgement pending")

// ackWaiter is a write waiting for its acknowledgement (WhenAcked).
type ackWaiter struct {
	end      int64
	deadline time.Time
	done     func(error)
}

// ackSnap is what decides acknowledgements, read once for many writes.
type ackSnap struct {
	controlled bool
	ok         bool  // a slave is connected (controlled: enough members)
	ack        int64 // the best slave's end (controlled: the lowest member's)
	lowest     int64 // controlled: the member with the lowest end, -1 if none
	members    int   // controlled: members, this master included
	confirmed  int   // controlled: members the controller holds, this master included
	minInSync  int   // controlled: the fewest members for a write
}

// ackSnapshot reads the slaves' acknowledgements.
func (h *Server) ackSnapshot() ackSnap {
	if h.opts.Controlled {
		return h.syncSetSnap()
	}
	snap := ackSnap{ack: -1}
	h.mu.Lock()
	for c := range h.conns {
		if a := c.ack.Load(); a >= 0 && a > snap.ack {
			snap.ack, snap.ok = a, true
		}
	}
	h.mu.Unlock()
	return snap
}

// state decides a write ending at end: nil when it is acknowledged,
// ErrSlaveNotAvailable when no slave is fit to acknowledge it (none
// connected, too few members in controlled mode; or, checked on the first
// look only, the best slave is more than FallBehindMax behind), else an
// error wrapping errAckPending.
func (a ackSnap) state(end int64, first bool, fallBehindMax int64) error {
	if a.controlled {
		switch {
		case !a.ok:
			return fmt.Errorf("%w: %d in-sync replicas, %d required", ErrSlaveNotAvailable, a.members, a.minInSync)
		case a.lowest >= 0 && a.ack < end:
			return fmt.Errorf("%w: in-sync replica %d has not reached %d", errAckPending, a.lowest, end)
		case a.confirmed < a.minInSync:
			return fmt.Errorf("%w: the controller's sync state set holds %d members, %d required", errAckPending, a.confirmed, a.minInSync)
		}
		return nil
	}
	switch {
	case a.ok && a.ack >= end:
		return nil
	case !a.ok || (first && end-a.ack > fallBehindMax):
		return fmt.Errorf("%w: best slave at %d, need %d", ErrSlaveNotAvailable, a.ack, end)
	}
	return fmt.Errorf("%w: slave at %d, need %d", errAckPending, a.ack, end)
}

// ackState decides one write now (see ackSnap.state).
func (h *Server) ackState(end int64, first bool) error {
	return h.ackSnapshot().state(end, first, h.opts.FallBehindMax)
}

// timedOut turns a pending state into the timeout error.
func timedOut(pending error) error {
	return fmt.Errorf("%w: %w", ErrSlaveAckTimeout, pending)
}

// WaitAck waits until a slave (in controlled mode: every member of the
// sync state set) reported an end >= end. It fails at once with
// ErrSlaveNotAvailable when no slave is fit to acknowledge (see ackState;
// also when the last slave goes while waiting), with ErrSlaveAckTimeout
// when ctx ends first, and with ErrClosed when the server closes.
func (h *Server) WaitAck(ctx context.Context, end int64) error {
	first := true
	for {
		wake := h.acks.Wait()
		err := h.ackState(end, first)
		if !errors.Is(err, errAckPending) {
			return err
		}
		if first {
			h.data.Notify()
			first = false
		}
		select {
		case <-wake:
		case <-ctx.Done():
			return timedOut(err)
		case <-h.done:
			return ErrClosed
		}
	}
}

// WhenAcked is WaitAck without a waiting goroutine: done is called once
// with what WaitAck would return, timeout after the call at the latest.
// When the answer is known at once (acknowledged already, or no slave fit)
// done runs before WhenAcked returns; otherwise it runs later on the
// server's ack loop, so it must not block.
func (h *Server) WhenAcked(end int64, timeout time.Duration, done func(error)) {
	err := h.ackState(end, true)
	if !errors.Is(err, errAckPending) {
		done(err)
		return
	}
	h.waitMu.Lock()
	select {
	case <-h.done:
		h.waitMu.Unlock()
		done(ErrClosed)
		return
	default:
	}
	h.waiters = append(h.waiters, ackWaiter{end: end, deadline: time.Now().Add(timeout), done: done})
	first := len(h.waiters) == 1
	h.waitMu.Unlock()
	if first {
		select {
		case h.waitKick <- struct{}{}:
		default:
		}
	}
	h.data.Notify()
}

// ackLoop answers the WhenAcked waiters: after every acknowledgement (and
// every change of the slaves or the sync state set) and at the earliest
// deadline. At Close it answers those left with ErrClosed.
func (h *Server) ackLoop() {
	timer := time.NewTimer(time.Hour)
	timer.Stop()
	defer timer.Stop()
	for {
		wake := h.acks.Wait()
		select {
		case <-h.done:
			// Closing (the slaves' connections are going too): what is
			// left is answered ErrClosed, not judged on the way out.
			h.waitMu.Lock()
			left := h.waiters
			h.waiters = nil
			h.waitMu.Unlock()
			for _, w := range left {
				w.done(ErrClosed)
			}
			return
		default:
		}
		if next := h.settleAcks(time.Now()); !next.IsZero() {
			timer.Reset(time.Until(next))
		} else {
			timer.Stop()
		}
		select {
		case <-wake:
		case <-h.waitKick:
		case <-timer.C:
		case <-h.done:
		}
	}
}

// settleAcks calls back the waiters that are acknowledged, can no longer
// be, or timed out; it returns the earliest deadline left (zero if none).
func (h *Server) settleAcks(now time.Time) time.Time {
	type result struct {
		w   ackWaiter
		err error
	}
	var due []result
	h.waitMu.Lock()
	if len(h.waiters) == 0 {
		h.waitMu.Unlock()
		return time.Time{}
	}
	snap := h.ackSnapshot()
	keep := h.waiters[:0]
	for _, w := range h.waiters {
		err := snap.state(w.end, false, h.opts.FallBehindMax)
		switch {
		case !errors.Is(err, errAckPending):
			due = append(due, result{w, err})
		case !now.Before(w.deadline):
			due = append(due, result{w, timedOut(err)})
		default:
			keep = append(keep, w)
		}
	}
	clear(h.waiters[len(keep):])
	h.waiters = keep
	var next time.Time
	for _, w := range keep {
		if next.IsZero() || w.deadline.Before(next) {
			next = w.deadline
		}
	}
	h.waitMu.Unlock()
	for _, r := range due {
		r.w.done(r.err)
	}
	return next
}
