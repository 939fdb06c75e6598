package store

import (
	"context"
	"log/slog"
	"runtime"
	"sync"
	"time"
)

// groupCommit lets many sync-flush putters share one fdatasync: each waiter
// asks the flusher for a sync and waits on the current generation channel;
// the flusher syncs everything written so far, publishes the flushed offset
// and closes the channel, waking every waiter it covered at once.
type groupCommit struct {
	mu  sync.Mutex
	gen chan struct{} // closed after the next sync; protected by mu
	req chan struct{} // wakes the flusher (capacity 1)
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
func (s *Store) flushLoop() {
	tick := time.NewTicker(s.opts.FlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-s.gc.req:
			// Let putters that were just woken (and are runnable) append
			// before the target is taken, so one fdatasync covers more.
			for range 3 {
				runtime.Gosched()
			}
		case <-tick.C:
		}
		s.flushCommitLog()
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
// checkpoint, every LogicFlushInterval.
func (s *Store) logicFlushLoop() {
	tick := time.NewTicker(s.opts.LogicFlushInterval)
	defer tick.Stop()
	for {
		select {
		case <-s.done:
			return
		case <-tick.C:
			// Consume queues, index and checkpoint are rebuilt from the
			// commitlog after a failure: writes go on, the checkpoint
			// stays where it was until a flush succeeds (and Close keeps
			// the abort file if its own does not).
			if err := s.flushLogic(false); err != nil {
				s.rlog.Log(s.log, slog.LevelError, "logic flush", "store: consume-queue, index or checkpoint flush failed; will retry", "err", err)
			}
		}
	}
}

// flushLogic makes consume queues durable, and the index too when
// IndexFlushInterval has passed (or all is set), then records in the
// checkpoint the store timestamps they (and the flushed commitlog) cover.
// Timestamps are sampled before the syncs, so they never claim more than
// what was synced. Only the logic flusher, and Close after it stopped,
// call it.
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
		s.indexFlushedAt = now
	} else {
		indexTs = prev.Index
	}
	cp := checkpoint{Physic: physTs, Logics: logicTs, Index: indexTs}
	if cp == prev {
		return nil
	}
	if err := writeCheckpoint(s.opts.Root, cp); err != nil {
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
