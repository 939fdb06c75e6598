package broker

import (
	"context"
	"math"
	"time"

	"github.com/smartgo/smartgo/internal/beat"
)

// Expiry of the state store's keys: expiryLoop logs an expire entry
// (statestore.Engine.PrepareExpire) for every shard whose next expiry is
// due, and releases the notifications a shard held (statestore_held.go).
// It sleeps until the earliest due expiry, at most a tick of the shared
// clock; an apply that adds an earlier one nudges it (expiryDue).

// expiryDue nudges the expiry loop when sh's next expiry comes before the
// loop's next look (after an apply that may have added one).
func (s *StateStore) expiryDue(sh *ssShard) {
	if due, ok := sh.eng.NextExpiry(); ok && due.UnixMilli() < s.expiryAt.Load() {
		s.nudge()
	}
}

// nudge wakes expiryLoop without blocking.
func (s *StateStore) nudge() {
	select {
	case s.wake <- struct{}{}:
	default:
	}
}

// expiryLoop logs an expire entry for every shard whose next expiry is due.
func (s *StateStore) expiryLoop(ctx context.Context) {
	t := time.NewTimer(0)
	defer t.Stop()
	// The longest sleep is a tick of the shared clock (beat): an idle
	// store's look shares the process's once-a-second wake-up.
	look := beat.NewTicker(defaultStateStoreMaxDelay)
	defer look.Stop()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-look.C:
		case <-s.wake:
		}
		s.expiryAt.Store(math.MaxInt64) // applies from now on nudge: this round may miss them
		s.expiryRounds.Add(1)
		now := s.b.now()
		wait := defaultStateStoreMaxDelay
		for _, sh := range s.shards {
			if s.host.slave.Load() {
				break // controller mode: a slave's tables follow the log
			}
			if sh.held.waiting() {
				s.releaseHeld(sh, 0)
				wait = min(wait, heldLook)
			}
			due, ok := sh.eng.NextExpiry()
			if !ok {
				continue
			}
			if d := due.Sub(now); d > 0 {
				wait = min(wait, d)
				continue
			}
			s.expire(ctx, sh)
			wait = min(wait, time.Millisecond) // look again soon: more keys may be due
		}
		if !t.Stop() {
			select {
			case <-t.C:
			default:
			}
		}
		wait = max(wait, time.Millisecond)
		s.expiryAt.Store(now.Add(wait).UnixMilli())
		if wait < defaultStateStoreMaxDelay {
			t.Reset(wait)
		}
	}
}

func (s *StateStore) expire(ctx context.Context, sh *ssShard) {
	sh.mu.Lock()
	s.applyPendingLocked(sh) // mutations deferred before it first (log order)
	if sh.failed != nil {
		sh.mu.Unlock()
		return
	}
	entry, ok := sh.eng.PrepareExpire(s.b.now())
	if !ok {
		sh.mu.Unlock()
		return
	}
	out, err := s.appendApply(ctx, sh, entry)
	var queued *ssNotes
	if err == nil {
		queued = s.queueNotes(sh, out.Notifications, false)
	}
	sh.mu.Unlock()
	if err != nil {
		s.log.Warn("state store expire", "shard", sh.id, "err", err)
		return
	}
	s.routeQueued(sh, queued)
}
