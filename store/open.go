package store

// Opening and closing a store: recovery, the store's goroutines, and the
// clean shutdown that flushes everything and releases the files.

import (
	"context"
	"errors"
	"fmt"
	"math"
	"reflect"
	"time"

	"github.com/smartgo/smartgo/internal/ratelog"
)

// Open opens (creating if needed) the store under opts.Root, recovers it
// and starts its goroutines. It is OpenContext with a context that never
// ends.
func Open(opts Options) (*Store, error) {
	return OpenContext(context.Background(), opts)
}

// OpenContext is Open whose recovery ends early when ctx does (the
// process's stop signal): it then returns ctx's error wrapped, having
// released the files, and the next start recovers again (recover_stop.go).
// ctx bounds only the opening, not the store's life (Close ends that).
func OpenContext(ctx context.Context, opts Options) (*Store, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	// time.Now itself (a broker passes its default on) is the wall clock.
	wallClock := opts.Now == nil || reflect.ValueOf(opts.Now).Pointer() == reflect.ValueOf(time.Now).Pointer()
	opts = opts.withDefaults()
	if st, err := opts.FS.Stat(opts.Root); err == nil && !st.IsDir() {
		return nil, fmt.Errorf("%w: %s is not a directory", ErrBadRoot, opts.Root)
	}
	if err := opts.FS.MkdirAll(opts.Root, 0o755); err != nil {
		return nil, fmt.Errorf("%w: %v", ErrBadRoot, err)
	}
	hours, _ := parseDeleteWhen(opts.DeleteWhen)
	s := &Store{
		opts:         opts,
		fs:           newFileSys(opts.FS, opts.MaxOpenFiles),
		log:          opts.Logger,
		rlog:         ratelog.New(0, nil),
		deleteHours:  hours,
		queueOffsets: make(map[cqKey]*queueNext),
		cqs:          make(map[string]map[int32]*consumeQueue),
		dispatchWake: make(chan struct{}, 1),
		done:         make(chan struct{}),
		idxRepaired:  make(chan struct{}),
	}
	s.clock.wall = wallClock
	s.gc.init()
	s.ix.init()
	s.dispatchLimit.Store(math.MaxInt64)
	s.disp.lastPhy, s.disp.keyedPhy = -1, -1
	s.dispMark = dispatchMark{lastPhy: -1, keyedPhy: -1}
	s.cl = newCommitLog(s)
	s.idx = newIndexService(s)
	lf, err := lockRoot(opts.Root)
	if err != nil {
		return nil, err
	}
	s.lockFile = lf
	if s.epochs, err = loadEpochs(opts.Root); err != nil {
		_ = lf.Close()
		return nil, err
	}
	abnormal, err := createAbort(opts.Root)
	if err != nil {
		_ = lf.Close()
		return nil, err
	}
	s.rstop = recoverStop{ctx: ctx}
	err = s.recover(abnormal)
	s.rstop = recoverStop{}
	if err != nil {
		s.releaseFiles()
		_ = lf.Close()
		return nil, err
	}
	if s.cl.active == nil && len(s.cl.list()) == 0 && opts.WarmSegments {
		// A new store: make the first segment warm before the first put.
		s.cl.prepare(s.cl.writePos)
	}
	s.checkSpace()
	s.start("allocator", func() { s.cl.allocLoop(s.done) })
	s.start("space-watcher", s.spaceLoop)
	if s.cl.prefault {
		s.start("prefaulter", func() { s.cl.prefaultLoop(s.done) })
	}
	s.start("dispatcher", s.dispatchLoop)
	s.start("indexer", s.indexLoop)
	s.start("flusher", s.flushLoop)
	if s.opts.FlushMode == FlushSync {
		s.start("logic-flusher", s.logicFlushLoop) // under async flush, the flusher's rounds
	}
	s.start("cleaner", s.cleanLoop)
	s.start("index-repair", s.repairIndex)
	if s.cl.active != nil {
		s.cl.scheduleNextLocked()
	}
	return s, nil
}

// start runs fn on a goroutine owned by the store; Close waits for it.
func (s *Store) start(name string, fn func()) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		s.log.Debug("store: goroutine started", "name", name)
		fn()
		s.log.Debug("store: goroutine stopped", "name", name)
	}()
}

// Close stops accepting writes, dispatches and flushes everything written,
// writes the checkpoint, removes the abort marker and releases the lock.
// Mappings still held by unreleased results stay valid until released.
// Close is idempotent.
func (s *Store) Close() error {
	s.closeOnce.Do(func() { s.closeErr = s.shutdown(true) })
	return s.closeErr
}

func (s *Store) shutdown(clean bool) error {
	s.putMu.Lock()
	s.closed.Store(true)
	s.putMu.Unlock()
	close(s.done)
	s.wg.Wait()
	// A Drain dispatching on another goroutine finishes first; later ones
	// leave the files alone (Drain).
	s.dispMu.Lock()
	s.disp.closed = true
	s.dispMu.Unlock()
	var errs []error
	// hintsLost: what only speeds up the next start (the consume queues,
	// the index and the checkpoint, all rebuilt from the commitlog; the
	// queue manifest) found no room on the disk. The abort file then
	// stays: the next start recovers as after a crash, and nothing
	// stored is lost, so it is a WARN, not Close's error. Any other
	// failure (EIO) is Close's error: the disk needs a look.
	hintsLost := false
	if clean {
		s.dispatchAvailable()
		s.indexAvailable()
		if _, err := s.cl.flush(); err != nil {
			errs = append(errs, err)
		}
		if err := s.flushLogic(true); isNoSpace(err) {
			s.log.Warn("store: consume queues, index or checkpoint not flushed at shutdown (no space); the next start rebuilds them from the commitlog as after a crash, nothing is lost", "err", err)
			hintsLost = true
		} else if err != nil {
			errs = append(errs, err)
		}
		if len(errs) == 0 && !hintsLost && s.werr.Load() == nil {
			if err := s.writeQueueManifest(); isNoSpace(err) {
				s.log.Warn("store: queue manifest not written at shutdown (no space); the next start recovers as after a crash, nothing is lost", "err", err)
				hintsLost = true
			} else if err != nil {
				errs = append(errs, err)
			}
		}
	}
	s.gc.wakeAll()
	s.settle(time.Now(), true)
	s.answerWritten()
	s.releaseFiles()
	if clean && len(errs) == 0 && !hintsLost && s.werr.Load() == nil {
		if err := removeAbort(s.opts.Root); err != nil {
			errs = append(errs, err)
		}
	}
	if err := s.closeCheckpoint(); err != nil {
		errs = append(errs, err)
	}
	if s.lockFile != nil {
		if err := s.lockFile.Close(); err != nil {
			errs = append(errs, fmt.Errorf("store: close lock: %w", err))
		}
	}
	return errors.Join(errs...)
}

func (s *Store) releaseFiles() {
	s.disp.releaseCur()
	s.ix.releaseCur()
	s.cl.closeAll()
	s.idx.closeAll()
	s.cqMu.Lock()
	for _, qs := range s.cqs {
		for _, cq := range qs {
			cq.closeAll(false)
		}
	}
	s.cqMu.Unlock()
}
