package bridge

import (
	"context"
	"errors"
	"slices"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// Sessions whose queue overflowed (see doc.go, Delivery). The live
// consumer hands messages over with mqtt.Server.DeliverLive: a session
// whose queue is full does not drop a QoS 1/2 message but enters
// overflow, and from then on this node owes it every live message from
// the position of the first one it did not take, per queue. A goroutine
// per such session reads them back from the log (BrowseMessages, a
// bounded batch at a time) and hands them over with mqtt.Server.Refill as
// the session's queue drains; once it reached the live consumer's
// position it finishes with live delivery paused, and the session is live
// again. Session records taken meanwhile resume from the reader's
// position, so a session that moves or a node that dies loses nothing of
// the backlog either.

// refillBatch is how many messages of one queue the reader asks a broker
// for at a time (and so holds at most, beyond the session's queue).
const refillBatch = admin.MaxBrowse

// refillWait bounds one wait for room in the session: a session that went
// offline never drains, the reader then checks it is still there.
const refillWait = time.Second

// overflowState is what this node owes one overflowed session instance.
type overflowState struct {
	// inst is the session instance; 0 until the server installs a
	// session resumed in overflow (resumeOverflow).
	inst atomic.Uint64
	// active: the session is in overflow; next holds, per queue, the
	// offset of the first message not handed over yet (protected by mu).
	active bool
	next   map[client.MessageQueue]int64
	// reading: its reader goroutine runs (protected by mu).
	reading bool
	// held are the latest messages handed over with their log positions,
	// oldest first, so that records find them (protected by mu).
	held []heldMsg
	// rewound holds, per queue, the lowest offset the live consumer went
	// back to (its broker gave the offsets from there again) since the
	// reader last looked (protected by mu): the reader reads that queue
	// again from there (applyRewindsLocked).
	rewound map[client.MessageQueue]int64
}

// rewindOverflowsLocked tells every overflowed session that q's offsets
// from off on were given again (rewindLocked): what it is owed there is
// read back from off, not from the reader's position past it. The
// messages handed over from there are no longer at their positions: a
// record stores them whole (as rewindLocked drops them from the ring).
func (b *Backend) rewindOverflowsLocked(q client.MessageQueue, off int64) {
	for _, st := range b.overflows {
		st.held = slices.DeleteFunc(st.held, func(h heldMsg) bool { return h.pos.q == q && h.pos.off >= off })
		if !st.active {
			continue
		}
		if n, ok := st.next[q]; ok && n > off {
			st.next[q] = off
		}
		if st.rewound == nil {
			st.rewound = map[client.MessageQueue]int64{}
		}
		if r, ok := st.rewound[q]; !ok || off < r {
			st.rewound[q] = off
		}
	}
}

// applyRewindsLocked moves the reader of st back to the offsets its
// queues were rewound to: its position, the messages it read at or past
// them and not handed over yet (lost from the log with its tail), and
// what the session is owed from.
func applyRewindsLocked(st *overflowState, cursor map[client.MessageQueue]int64, buf *[]heldMsg) {
	if len(st.rewound) == 0 {
		return
	}
	for q, off := range st.rewound {
		if c, ok := cursor[q]; ok && c > off {
			cursor[q] = off
		}
		if n, ok := st.next[q]; ok && n > off {
			st.next[q] = off
		}
	}
	*buf = slices.DeleteFunc(*buf, func(h heldMsg) bool {
		r, ok := st.rewound[h.pos.q]
		return ok && h.pos.off >= r
	})
	clear(st.rewound)
}

type heldMsg struct {
	msg *mqtt.Message
	pos ringPos
}

// heldKeep is how many handed-over messages a state remembers at most
// (at least half as many once it remembered that many; half of it once
// the overflow ended): more than a session holds at once with the
// default queue limit and flight window. Older ones still unacknowledged
// are stored whole in records, like messages that did not come from the
// log.
const heldKeep = 4096

// onOverflow is DeliverLive's overflow callback: the session inst of
// clientID did not take the message being delivered (curQ, curOff), nor
// will it take later ones until its reader caught up. It runs on the
// deliverLoop goroutine, the only writer of curQ and curOff.
func (b *Backend) onOverflow(clientID string, inst uint64) {
	b.mu.Lock()
	st := b.overflows[clientID]
	if st == nil || st.inst.Load() != inst {
		st = &overflowState{}
		st.inst.Store(inst)
		b.overflows[clientID] = st
	}
	if !st.active {
		st.active, st.next = true, map[client.MessageQueue]int64{}
	}
	if _, ok := st.next[b.curQ]; !ok {
		st.next[b.curQ] = b.curOff
	}
	start := !st.reading
	st.reading = true
	b.mu.Unlock()
	if start {
		b.wg.Add(1)
		go b.refillLoop(clientID, st)
	}
}

// refillLoop reads an overflowed session's messages back from the log
// and hands them over until the session is live again or gone.
func (b *Backend) refillLoop(clientID string, st *overflowState) {
	defer b.wg.Done()
	srv := b.server()
	var buf []heldMsg                         // read, not handed over yet
	cursor := map[client.MessageQueue]int64{} // next offset to read per queue
	done := false                             // the overflow ended
	defer func() {
		b.mu.Lock()
		st.reading = false
		if done {
			st.active, st.next = false, nil
			if k := heldKeep / 2; len(st.held) > k {
				st.held = append([]heldMsg(nil), st.held[len(st.held)-k:]...)
			}
		}
		b.mu.Unlock()
	}()
	if srv == nil {
		return
	}
	// hand gives buf to the session; it returns the wait for room, nil
	// when the overflow ended, and whether the reader goes on.
	hand := func(last bool) (<-chan struct{}, bool) {
		msgs := make([]*mqtt.Message, len(buf))
		for i, h := range buf {
			msgs[i] = h.msg
		}
		taken, room, err := srv.Refill(clientID, st.inst.Load(), msgs, last)
		if err != nil {
			// The session ended or moved: the records written for it
			// took the positions (the state stays until swept).
			return nil, false
		}
		b.mu.Lock()
		for _, h := range buf[:taken] {
			if r, ok := st.rewound[h.pos.q]; ok && h.pos.off >= r {
				// Read before its queue went back (a rewind while Refill
				// ran): handed over, but no longer at its position.
				continue
			}
			st.next[h.pos.q] = h.pos.off + 1
			if len(st.held) == heldKeep {
				n := copy(st.held, st.held[len(st.held)/2:])
				clear(st.held[n:])
				st.held = st.held[:n]
			}
			st.held = append(st.held, h)
		}
		buf = buf[taken:]
		applyRewindsLocked(st, cursor, &buf) // none when last: delivery is paused
		b.mu.Unlock()
		if last && room == nil {
			done = true
			return nil, false
		}
		return room, true
	}
	for b.ctx.Err() == nil {
		if len(buf) == 0 {
			more, err := b.readBack(st, cursor, &buf, false)
			if err != nil {
				b.log.Warn("bridge: reading an overflowed session's messages back", "client", clientID, "err", err)
				if !b.sleep(refillWait) {
					return
				}
				continue
			}
			if !more && len(buf) == 0 {
				// Caught up: finish with live delivery held back.
				b.pause()
				_, err := b.readBack(st, cursor, &buf, true)
				var goOn bool
				var room <-chan struct{}
				if err == nil {
					room, goOn = hand(true)
				}
				b.unpause()
				if err != nil {
					b.log.Warn("bridge: reading an overflowed session's messages back", "client", clientID, "err", err)
					if !b.sleep(refillWait) {
						return
					}
					continue
				}
				if !goOn {
					return
				}
				if len(buf) > 0 && !b.waitRoom(room) {
					return
				}
				continue
			}
			if len(buf) == 0 {
				continue
			}
		}
		room, goOn := hand(false)
		if !goOn {
			return
		}
		if len(buf) > 0 && !b.waitRoom(room) {
			return
		}
	}
}

// waitRoom waits until room is closed, at most refillWait; false when
// the backend closes.
func (b *Backend) waitRoom(room <-chan struct{}) bool {
	t := time.NewTimer(refillWait)
	defer t.Stop()
	select {
	case <-room:
	case <-t.C:
	case <-b.ctx.Done():
		return false
	}
	return true
}

// sleep waits d; false when the backend closes.
func (b *Backend) sleep(d time.Duration) bool { return b.sleepCtx(b.ctx, d) }

// sleepCtx waits d; false when ctx ends first.
func (b *Backend) sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-t.C:
		return true
	case <-ctx.Done():
		return false
	}
}

// readBack appends to buf the next messages of st's queues up to the live
// consumer's position: one batch of one queue, or with all everything up
// to that position (live delivery is paused then). It reports whether a
// queue was behind the live position when it looked.
func (b *Backend) readBack(st *overflowState, cursor map[client.MessageQueue]int64, buf *[]heldMsg, all bool) (bool, error) {
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.SendTimeout)
	defer cancel()
	type span struct {
		q        client.MessageQueue
		from, to int64
	}
	var work []span
	b.mu.Lock()
	applyRewindsLocked(st, cursor, buf)
	for q, off := range st.next {
		from, ok := cursor[q]
		if !ok || from < off {
			from = off
		}
		if qs := b.queues[q]; qs != nil && from < qs.next {
			work = append(work, span{q, from, qs.next})
		}
	}
	b.mu.Unlock()
	for _, w := range work {
		for w.from < w.to {
			n := min(int64(refillBatch), w.to-w.from)
			msgs, next, _, _, err := b.adm.BrowseMessages(ctx, w.q.Topic, w.q.BrokerName, w.q.QueueID, w.from, int(n))
			if err != nil {
				return true, err
			}
			for _, x := range msgs {
				if x.QueueOffset < w.from || x.QueueOffset >= w.to {
					continue
				}
				if x.QueueOffset > w.from {
					b.log.Warn("bridge: overflowed session's messages no longer in the log (retention) skipped",
						"queue", w.q, "from", w.from, "to", x.QueueOffset)
				}
				w.from = x.QueueOffset + 1
				if m := fromBroker(x); packets.ValidTopicName(m.Topic) {
					*buf = append(*buf, heldMsg{msg: m, pos: ringPos{q: w.q, off: x.QueueOffset}})
				}
			}
			if len(msgs) == 0 {
				if next <= w.from {
					return true, errors.New("bridge: no progress reading the log back")
				}
				w.from = min(next, w.to) // moved past a gap
			}
			cursor[w.q] = w.from
			if !all {
				return true, nil
			}
		}
	}
	return len(work) > 0, nil
}

// overflowPointsLocked moves the resume points of clientID back to what
// this node still owes its session when it is in overflow, and returns
// the log positions of the messages handed over to it (when withHeld).
func (b *Backend) overflowPointsLocked(clientID string, points map[client.MessageQueue]*resumePoint, withHeld bool) map[*mqtt.Message]ringPos {
	st := b.overflows[clientID]
	if st == nil {
		return nil
	}
	if st.active {
		for q, off := range st.next {
			if rp := points[q]; rp != nil {
				rp.From, rp.Live = min(rp.From, off), min(rp.Live, off)
			}
		}
	}
	if !withHeld || len(st.held) == 0 {
		return nil
	}
	out := make(map[*mqtt.Message]ringPos, len(st.held))
	for _, h := range st.held {
		out[h.msg] = h.pos
	}
	return out
}

// sweepOverflows forgets the states of sessions the server holds no more
// (ended, replaced or moved: their records took the positions).
func (b *Backend) sweepOverflows() {
	srv := b.server()
	if srv == nil {
		return
	}
	type entry struct {
		id string
		st *overflowState
	}
	var idle []entry
	b.mu.Lock()
	for id, st := range b.overflows {
		if !st.reading {
			idle = append(idle, entry{id, st})
		}
	}
	b.mu.Unlock()
	for _, e := range idle {
		if srv.SessionInstance(e.id) == e.st.inst.Load() {
			continue
		}
		b.mu.Lock()
		if b.overflows[e.id] == e.st && !e.st.reading {
			delete(b.overflows, e.id)
		}
		b.mu.Unlock()
	}
}

// resumeOverflow is what LoadSession sets as mqtt.SessionState.Overflow
// for a session whose backlog in the log is longer than it hands over at
// once: the server installs the session in overflow, and a reader hands it
// the rest, per queue from next on, as its queue drains (as for a session
// that overflowed under live delivery). The state is this node's from now
// on, so that records of the session resume from next.
func (b *Backend) resumeOverflow(clientID string, next map[client.MessageQueue]int64) func(inst uint64) {
	st := &overflowState{active: true, next: next, reading: true}
	b.mu.Lock()
	b.overflows[clientID] = st
	b.mu.Unlock()
	return func(inst uint64) {
		// Called by the server before the session is reachable: a live
		// message that overflows it finds this state (onOverflow).
		st.inst.Store(inst)
		b.wg.Add(1)
		go b.refillLoop(clientID, st)
	}
}
