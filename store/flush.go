package store

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"

	"github.com/smartgo/smartgo/internal/beat"
)

// groupCommit lets many sync-flush putters share one fdatasync. A putter
// asks the flusher for a sync and then either waits on the current
// generation channel (PutWait: the flusher closes it after the sync,
// waking every waiter it covered at once) or leaves a callback in waiters
// (PutAsync: no goroutine waits; the flusher calls back every put its sync
// covered, and those whose SyncFlushTimeout passed).
type groupCommit struct {
	mu      sync.Mutex
	gen     chan struct{} // closed after the next sync; protected by mu
	waiters []flushWaiter // puts to call back, in append order; protected by mu
	closed  bool          // the store's last sync is done; protected by mu
	req     chan struct{} // wakes the flusher (capacity 1)
}

// flushWaiter is a put whose result waits for the group commit.
type flushWaiter struct {
	ap       appended  // durable once the flushed offset reaches ap.end
	deadline time.Time // SyncFlushTimeout after the put
	done     func(PutStatus)
}

func (g *groupCommit) init() {
	g.gen = make(chan struct{})
	g.req = make(chan struct{}, 1)
}

// current returns the channel closed by the next completed sync.
func (g *groupCommit) current() chan struct{} {
	g.mu.Lock()
	ch := g.gen
	g.mu.Unlock()
	return ch
}

// wakeAll closes the current generation (after a sync, or at shutdown).
func (g *groupCommit) wakeAll() {
	g.mu.Lock()
	close(g.gen)
	g.gen = make(chan struct{})
	g.mu.Unlock()
}

var timerPool = sync.Pool{New: func() any {
	t := time.NewTimer(time.Hour)
	t.Stop()
	return t
}}

// whenDurable arranges for done to be called once the commitlog is
// durable up to ap.end (PutOK), or the records were taken back (the disk
// filled: PutServiceNotAvailable), or the sync timeout passed, or the
// store failed or closed (the status of failedWait). It reports false, without
// calling done, when the answer is known now; st is that answer.
func (s *Store) whenDurable(ap appended, done func(PutStatus)) (st PutStatus, pending bool) {
	if s.cl.flushed.Load() >= ap.end {
		if s.cl.discards.discarded(ap.gen, ap.start) {
			return PutServiceNotAvailable, false
		}
		return PutOK, false
	}
	s.gc.mu.Lock()
	if s.gc.closed || s.werr.Load() != nil {
		s.gc.mu.Unlock()
		return s.failedWait(ap), false
	}
	s.gc.waiters = append(s.gc.waiters, flushWaiter{ap: ap, deadline: time.Now().Add(s.opts.SyncFlushTimeout), done: done})
	s.gc.mu.Unlock()
	select {
	case s.gc.req <- struct{}{}:
	default:
	}
	return 0, true
}

// settle calls back the waiting puts that the flushed offset covers, and
// those whose deadline passed (all of them when final: the store is
// closing and nothing will be synced again). It returns the earliest
// deadline left (zero if none). Only the flusher, and shutdown after it
// stopped, call it.
func (s *Store) settle(now time.Time, final bool) time.Time {
	s.gc.mu.Lock()
	flushed := s.cl.flushed.Load()
	failed := s.werr.Load() != nil
	var due []flushWaiter
	keep := s.gc.waiters[:0]
	for _, w := range s.gc.waiters {
		if w.ap.end <= flushed || final || failed || !now.Before(w.deadline) || s.cl.discards.discarded(w.ap.gen, w.ap.start) {
			due = append(due, w)
		} else {
			keep = append(keep, w)
		}
	}
	clear(s.gc.waiters[len(keep):])
	s.gc.waiters = keep
	s.gc.closed = s.gc.closed || final
	var next time.Time
	if len(keep) > 0 {
		next = keep[0].deadline // deadlines grow with the append order
	}
	s.gc.mu.Unlock()
	for _, w := range due {
		switch {
		case s.cl.discards.discarded(w.ap.gen, w.ap.start):
			w.done(PutServiceNotAvailable)
		case w.ap.end <= flushed:
			w.done(PutOK)
		default:
			w.done(s.failedWait(w.ap))
		}
	}
	return next
}

// waitFlushed waits until the commitlog is durable up to end, the sync
// timeout passes, ctx ends, the store closes or fails, or the records in
// [start, end), appended after gen discards, are taken back. It reports
// success.
func (s *Store) waitFlushed(ctx context.Context, start, end, gen int64) bool {
	if s.cl.flushed.Load() >= end {
		return true
	}
	t := timerPool.Get().(*time.Timer)
	t.Reset(s.opts.SyncFlushTimeout)
	defer func() {
		t.Stop()
		timerPool.Put(t)
	}()
	var ctxDone <-chan struct{}
	if ctx != nil {
		ctxDone = ctx.Done()
	}
	for {
		ch := s.gc.current()
		if s.cl.flushed.Load() >= end {
			return true
		}
		if s.closed.Load() || s.werr.Load() != nil {
			return false
		}
		if g := s.cl.discards.gen.Load(); g != gen {
			if s.cl.discards.discarded(gen, start) {
				return false // these records were taken back
			}
			gen = g // later ones were: keep waiting
		}
		select {
		case s.gc.req <- struct{}{}:
		default:
		}
		select {
		case <-ch:
		case <-t.C:
			return s.cl.flushed.Load() >= end
		case <-ctxDone:
			return s.cl.flushed.Load() >= end
		}
	}
}

// flushLoop is the commitlog flusher. In sync mode it syncs as soon as a
// putter asks (group commit: it writes out the records buffered so far
// with one pwrite, and one fdatasync covers them all); in both modes it
// also syncs every FlushInterval.
//
// Under async flush it is also the logic flusher: one round makes the
// commitlog durable and then, when LogicFlushInterval has passed, the
// consume queues, the index and the checkpoint, so the store's periodic
// system calls come in one burst rather than in bursts of two goroutines
// on their own clocks (each burst of blocking calls wakes the runtime's
// monitor thread into 20 µs polling for a millisecond or more, which the
// state store's SETs paid for). Both rounds tick on the process's shared
// clock (internal/beat), at multiples of their intervals: with the
// defaults (500 ms and 1 s) every second commitlog round falls in the
// same wake-up as the logic round (which takes a commitlog flush with
// it), and both with the process's other once-a-second work. Under sync
// flush the logic flush keeps a goroutine of its own (logicFlushLoop), so
// a group commit never waits for consume queue and index syncs.
func (s *Store) flushLoop() {
	round := beat.NewTicker(s.opts.FlushInterval)
	defer round.Stop()
	var logic <-chan time.Time // merged rounds (async flush) only
	if s.opts.FlushMode == FlushAsync {
		lt := beat.NewTicker(s.opts.LogicFlushInterval)
		defer lt.Stop()
		logic = lt.C
	}
	expire := time.NewTimer(time.Hour) // the earliest waiting put's deadline
	expire.Stop()
	// tick is the instant of the last round or logic tick served: at the
	// shared clock's multiples of both intervals both tickers send the
	// same instant, and one commitlog flush serves both.
	var tick time.Time
	for {
		select {
		case <-s.done:
			expire.Stop()
			return
		case <-s.gc.req:
			// Let putters that were just woken (and are runnable) append
			// before the target is taken, so one fdatasync covers more.
			for range 3 {
				runtime.Gosched()
			}
			s.flushCommitLog()
		case at := <-round.C:
			if !at.Equal(tick) { // else the same instant's logic round flushed
				s.flushCommitLog()
			}
			tick = at
		case at := <-logic:
			if !at.Equal(tick) { // else the same instant's round flushed just now
				s.flushCommitLog()
			}
			s.logicRound()
			tick = at
		case <-expire.C:
		}
		if next := s.settle(time.Now(), false); !next.IsZero() {
			expire.Reset(time.Until(next))
		} else {
			expire.Stop()
		}
	}
}

func (s *Store) flushCommitLog() {
	if s.cl.appended.Load() > s.cl.flushed.Load() && s.werr.Load() == nil {
		start := time.Now()
		target, err := s.cl.flush()
		if err != nil {
			s.setWriteErr(err)
		} else {
			d := time.Since(start)
			s.stats.recordFlush(d)
			if d > time.Second {
				s.emit(Event{Kind: EventSlowFlush, Offset: target, Duration: d})
			}
		}
	}
	s.gc.wakeAll()
}

// logicFlushLoop flushes consume queues and index files and then writes the
// checkpoint, every LogicFlushInterval, under sync flush (under async
// flush the commitlog flusher does it in its rounds: flushLoop).
func (s *Store) logicFlushLoop() {
	tick := beat.NewTicker(s.opts.LogicFlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
			s.logicRound()
		}
	}
}

// logicRound is one periodic logic flush. Consume queues, index and
// checkpoint are rebuilt from the commitlog after a failure: writes go on,
// the checkpoint stays where it was until a flush succeeds (and Close
// keeps the abort file if its own does not).
func (s *Store) logicRound() {
	if err := s.flushLogic(false); err != nil {
		s.rlog.Log(s.log, slog.LevelError, "logic flush", "store: consume-queue, index or checkpoint flush failed; will retry", "err", err)
	}
}

// flushLogic makes consume queues durable, and the index too when
// IndexFlushInterval has passed (or all is set), then records in the
// checkpoint the store timestamps they (and the flushed commitlog) cover.
// Timestamps are sampled before the syncs, so they never claim more than
// what was synced. Only the goroutine doing the logic rounds (flushLoop
// under async flush, logicFlushLoop under sync), and Close after it
// stopped, call it.
func (s *Store) flushLogic(all bool) error {
	logicTs := s.dispatchTs.Load()
	indexTs := s.indexTs.Load()
	physTs := s.cl.flushedTs.Load()
	for _, cq := range s.allCQs() {
		if err := cq.flush(); err != nil {
			return err
		}
	}
	prev := s.lastCheckpoint()
	if now := time.Now(); all || now.Sub(s.indexFlushedAt) >= s.opts.IndexFlushInterval {
		if err := s.idx.flush(); err != nil {
			return err
		}
		// The interval runs from the first sync that covered an indexed
		// record: the shared clock's first logic round can come just
		// after start, before anything is indexed, and must not put the
		// first record's index sync a whole interval away.
		if indexTs != 0 {
			s.indexFlushedAt = now
		}
	} else {
		indexTs = prev.Index
	}
	cp := checkpoint{Physic: physTs, Logics: logicTs, Index: indexTs}
	if cp == prev {
		return nil
	}
	if err := s.writeCheckpoint(cp); err != nil {
		return err
	}
	s.cpMu.Lock()
	s.cp = cp
	s.cpMu.Unlock()
	return nil
}

func (s *Store) lastCheckpoint() checkpoint {
	s.cpMu.Lock()
	defer s.cpMu.Unlock()
	return s.cp
}
