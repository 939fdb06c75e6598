package store

import (
	"context"
	"fmt"
)

// Stopping a recovery: Open's recovery reads the whole commitlog after a
// crash (and re-dispatches and re-indexes it when its consume queues are
// gone), which on a large store takes minutes. OpenContext's context ends
// it: the walks check it every recoverStopEvery records and at each step
// between them, and Open returns the context's error wrapped.
//
// An interrupted recovery writes nothing that a finished one would not:
// the commitlog is never cut (its torn tail is cut only once the scan
// reached the end), consume-queue entries re-dispatched so far point at
// valid records, and the index's header is not committed. The abort
// marker stays, so the next start recovers as after a crash, from the
// files as they are.

// recoverStopEvery is how many records a recovery walk visits between two
// looks at its context (a look is an atomic load: 1/1024 of a record's
// cost).
const recoverStopEvery = 1024

// recoverStop is the recovery's view of its context; the zero value never
// stops. Owned by recovery (one goroutine).
type recoverStop struct {
	ctx context.Context // nil outside recovery
	n   uint32
	err error // the context's error once seen
}

// stopped reports whether recovery must stop: every recoverStopEvery
// calls it looks at the context.
func (r *recoverStop) stopped() bool {
	if r.err != nil {
		return true
	}
	if r.ctx == nil {
		return false
	}
	r.n++
	if r.n%recoverStopEvery != 0 {
		return false
	}
	return r.check()
}

// check looks at the context now (between the steps of recovery).
func (r *recoverStop) check() bool {
	if r.err == nil && r.ctx != nil {
		r.err = r.ctx.Err()
	}
	return r.err != nil
}

// stopErr is the error recovery returns when it stopped during step.
func (r *recoverStop) stopErr(step string) error {
	return fmt.Errorf("store: recovery stopped during %s; the next start recovers again: %w", step, r.err)
}
