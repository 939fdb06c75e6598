package broker

import (
	"context"
	"errors"
	"fmt"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/internal/pace"
	"github.com/smartgo/smartgo/store"
)

// Opening the shards. A shard's engine is rebuilt from its snapshot and
// the queue after it, so it can be loaded only once the consume queues
// cover the whole commitlog. After a crash the dispatcher may still be
// rebuilding them; on a disk that stays full it cannot write them at all
// (store.Store.DispatchStalled). The broker must start anyway: the host
// then answers every request with its errUnavailable and the reason, and
// loads the shards in the background as soon as the queues are written
// (space freed), without a restart.

// Opening bounds and paces.
const (
	// openWait is how long Open waits for the consume queues before it
	// leaves the shards to the background (sooner when the dispatcher
	// reports a stall).
	openWait = 30 * time.Second
	// openPoll is how often the background open looks at the queues.
	openPoll = 50 * time.Millisecond
	// openLogEvery spaces the background open's lines saying why the
	// shards are not open yet.
	openLogEvery = 30 * time.Second
)

// shardOpen is the opening state of a host (shardLog.opening).
type shardOpen struct {
	opened  atomic.Bool           // the shards are loaded and serve
	pending atomic.Pointer[error] // why they are not (nil: opening at once, or open)
	logGate pace.Gate
}

// notOpen returns nil once the shards are loaded; before, the error a
// request gets: the host's errUnavailable with why they are not open.
// Nothing that reads h.shards runs before it returned nil (they are
// assigned by the goroutine that sets opened).
func (h *shardLog) notOpen() error {
	if h.opening.opened.Load() {
		return nil
	}
	if p := h.opening.pending.Load(); p != nil {
		return *p
	}
	return fmt.Errorf("%w: not open yet", h.errUnavailable)
}

// start opens the shards (open; controller mode does not wait for the
// consume queues: the dispatch limit may hide what a master's slaves
// lack) and, in controller mode, has l follow the broker's role, taking
// over as master now when the broker is one. When the shards cannot be
// loaded, the host's loops are stopped and the error returned.
func (h *shardLog) start(ctx context.Context, l roleListener, load func() error) error {
	if err := h.open(ctx, !h.b.controlled(), load); err != nil {
		h.stop()
		return err
	}
	if h.b.controlled() {
		h.b.addRoleListener(l)
		if !h.b.isSlave() {
			if err := l.becameMaster(ctx); err != nil {
				h.log.Warn(h.what+": taking over as master", "err", err)
			}
		}
	}
	return nil
}

// open loads the shards with load and marks them open, once the consume
// queues cover the whole commitlog (at once when wait is false). When
// they do within openWait, or the dispatcher reports no stall by then,
// load runs before open returns and its error is open's. Otherwise open
// returns nil at once and load runs on one of the host's goroutines
// (goFunc, ended with ctx by stop) when the queues are written; until
// then requests get notOpen's error and a line says why every
// openLogEvery. A load that fails there leaves the host unavailable with
// that error (Err reports it).
//
// The wait also ends when the broker's start context does (NewContext:
// the process is stopping): then nothing is loaded, requests are refused
// as not open, and Close follows.
func (h *shardLog) open(ctx context.Context, wait bool, load func() error) error {
	if wait {
		behind := h.waitDispatched(h.b.startCtx, openWait)
		if errors.Is(behind, errStopping) {
			h.log.Info(h.what + ": start-up wait for the consume queues ended: the process is stopping")
			err := fmt.Errorf("%w: not open: %w", h.errUnavailable, behind)
			h.opening.pending.Store(&err)
			return nil
		}
		if behind != nil {
			h.setPending(behind)
			h.goFunc(func() { h.openLater(ctx, load) })
			return nil
		}
	}
	if err := load(); err != nil {
		h.failOpen(err)
		return err
	}
	h.opening.opened.Store(true)
	return nil
}

// failOpen records that loading the shards failed with err.
func (h *shardLog) failOpen(err error) {
	err = fmt.Errorf("%w: not opened: %w", h.errFailed, err)
	h.opening.pending.Store(&err)
}

// setPending records why the shards are not open and logs it, at most
// once every openLogEvery.
func (h *shardLog) setPending(why error) {
	// Not %w: a request refused while a full disk keeps the shards
	// closed is not a write refused for a full disk (a read is refused
	// too), which store.ErrDiskFull would tell the front ends.
	err := fmt.Errorf("%w: not open yet: %v", h.errUnavailable, why)
	h.opening.pending.Store(&err)
	if h.opening.logGate.Allow(openLogEvery) {
		h.log.Warn(h.what+" not open: it opens by itself once the consume queues are rebuilt", "err", why)
	}
}

// openLater is open's background half.
func (h *shardLog) openLater(ctx context.Context, load func() error) {
	t := time.NewTicker(openPoll)
	defer t.Stop()
	for {
		st := h.b.store
		if st.DispatchedPhysicalOffset() >= st.MaxPhysicalOffset() {
			break
		}
		if why := h.dispatchBehind(); why != nil {
			h.setPending(why)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
	if err := load(); err != nil {
		h.log.Error(h.what+" not opened", "err", err)
		h.failOpen(err)
		return
	}
	h.opening.opened.Store(true)
}

// errStopping is waitDispatched's answer when the start context ended.
var errStopping = errors.New("the broker is stopping")

// waitDispatched waits until the consume queues cover the whole commitlog
// (after recovery the dispatcher may still be rebuilding them), at most
// limit, and not past the dispatcher's report that it cannot write an
// entry (a disk that stays full after a crash): then it returns why
// (dispatchBehind). It returns errStopping when ctx ends first.
func (h *shardLog) waitDispatched(ctx context.Context, limit time.Duration) error {
	st := h.b.store
	wctx, cancel := context.WithTimeout(ctx, limit)
	defer cancel()
	for {
		err := st.WaitDispatched(wctx, st.MaxPhysicalOffset())
		why := h.dispatchBehind()
		switch {
		case why == nil:
			return nil
		case ctx.Err() != nil:
			return errStopping
		case err != nil: // stalled, or out of time
			return why
		}
		// The log grew while it waited: wait for its new end.
	}
}

// dispatchBehind says why the consume queues do not cover the commitlog
// (nil when they do). When the dispatcher cannot write an entry the error
// names the file and wraps the cause (store.ErrDiskFull for a full disk).
func (h *shardLog) dispatchBehind() error {
	st := h.b.store
	at := st.DispatchedPhysicalOffset()
	if at >= st.MaxPhysicalOffset() {
		return nil
	}
	stall := st.DispatchStalled()
	switch {
	case errors.Is(stall, store.ErrDiskFull):
		return fmt.Errorf("consume queues not rebuilt: the commitlog from offset %d on waits for consume-queue entries the full disk has no room for "+
			"(%w); free space on the disk of %s", at, stall, h.b.opts.Store.Root)
	case stall != nil:
		return fmt.Errorf("consume queues not rebuilt: the commitlog from offset %d on waits for a consume-queue entry that cannot be written (%w)",
			at, stall)
	}
	return fmt.Errorf("consume queues not rebuilt yet: the dispatcher is at commitlog offset %d of %d", at, st.MaxPhysicalOffset())
}
