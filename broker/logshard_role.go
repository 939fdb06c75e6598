package broker

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"io/fs"
	"os"
)

// Hosted engine shards in controller mode follow the broker's role (the
// state store and twin hosts are roleListeners and hand it to their
// shardLog):
//
//   - promotion (becameMaster): the shards keep applying the replicated
//     log until each has applied every entry of its queue (as far as the
//     writer has put them), then the host serves as master; until then it
//     answers as a slave does (clients retry);
//   - demotion (becameSlave): it stops serving at once and follows the log
//     again;
//   - a cut log (truncated): a shard that applied entries past the cut is
//     reset and rebuilt from its snapshot (dropped when it covers the cut)
//     and its queue, before the new master's entries arrive.
//
// A master answers a read only once the entries it was read from are on
// every member of the sync state set (readBarrier), so no reader sees a
// write a failover takes back; a write counts only once the set has it.
// A master's snapshots cover only entries consumers may see (the dispatch
// limit follows the confirm offset), so a cut never goes below them.

// becameMaster starts a promotion (see above).
func (h *shardLog) becameMaster() {
	h.roleMu.Lock()
	defer h.roleMu.Unlock()
	h.wantMaster.Store(true)
	h.takeOverLocked()
}

// becameSlave stops serving.
func (h *shardLog) becameSlave() {
	h.roleMu.Lock()
	defer h.roleMu.Unlock()
	h.wantMaster.Store(false)
	h.slave.Store(true)
	h.log.Info("follows the log (slave)")
	if n := h.roleWake.Load(); n != nil {
		n.Notify()
	}
}

// tryTakeOver finishes a promotion once every shard caught up.
func (h *shardLog) tryTakeOver() {
	h.roleMu.Lock()
	defer h.roleMu.Unlock()
	if h.wantMaster.Load() && h.slave.Load() {
		h.takeOverLocked()
	}
}

// takeOverLocked applies what is visible of every queue and serves as
// master if no shard is behind the writer. Caller holds roleMu.
func (h *shardLog) takeOverLocked() {
	st := h.b.store
	behind := 0
	for _, sh := range h.shards {
		sh.mu.Lock()
		if sh.failed == nil {
			if err := h.catchUpLocked(sh); err != nil {
				sh.fail(err)
				h.log.Error("shard stopped", "shard", sh.id, "err", err)
			} else if sh.next < st.NextQueueOffset(h.topic, sh.id) {
				behind++
			}
		}
		sh.mu.Unlock()
	}
	if behind > 0 {
		h.log.Info("waiting for shards to catch up before serving as master", "behind", behind)
		return
	}
	if h.onTakeOver != nil {
		for _, sh := range h.shards {
			sh.mu.Lock()
			if sh.failed == nil {
				h.onTakeOver(sh)
			}
			sh.mu.Unlock()
		}
	}
	h.slave.Store(false)
	h.log.Info("serves as master")
}

// truncated resets the shards with entries at or past offset.
func (h *shardLog) truncated(offset int64) error {
	var errs []error
	for _, sh := range h.shards {
		sh.snapMu.Lock() // no snapshot file is being written meanwhile
		sh.mu.Lock()
		if sh.lastEnd > offset || sh.next > h.b.store.MaxOffset(h.topic, sh.id) || sh.failed != nil {
			errs = append(errs, h.reloadLocked(sh))
		}
		sh.mu.Unlock()
		sh.snapMu.Unlock()
	}
	return errors.Join(errs...)
}

// reloadLocked empties the shard's engine and rebuilds it from its
// snapshot (set aside when it covers entries the cut took) and its queue.
// Called with sh.snapMu and sh.mu held.
func (h *shardLog) reloadLocked(sh *logShard) error {
	if err := sh.snap.Restore(bytes.NewReader(h.empty)); err != nil {
		return fmt.Errorf("broker: %s shard %d: reset: %w", h.what, sh.id, err)
	}
	sh.next, sh.lastEnd, sh.snapAt, sh.failed = 0, 0, 0, nil
	sh.applied.Store(0)
	sh.down.Store(false)
	if data, err := os.ReadFile(h.snapPath(sh.id)); err == nil {
		next, _, derr := decodeShardSnapshot(data, h.magic, sh.id)
		if derr != nil || next > h.b.store.MaxOffset(h.topic, sh.id) {
			if derr == nil {
				derr = fmt.Errorf("%w: it covers queue offsets up to %d, the cut log ends at %d", errSnapshotAhead, next, h.b.store.MaxOffset(h.topic, sh.id))
			}
			if err := h.setAside(sh, derr); err != nil {
				return err
			}
		}
	} else if !errors.Is(err, fs.ErrNotExist) {
		return fmt.Errorf("broker: %s shard %d: %w", h.what, sh.id, err)
	}
	if err := h.loadSnapshot(sh); err != nil {
		sh.fail(err)
		return err
	}
	if err := h.catchUpLocked(sh); err != nil {
		sh.fail(err)
		return err
	}
	h.log.Info("shard reloaded after the log was cut", "shard", sh.id, "next", sh.next)
	return nil
}

// readBarrier (controller mode) returns once the log up to end is on
// every member of the sync state set and the master lease holds, so a read
// never shows a write a failover could take back.
func (h *shardLog) readBarrier(ctx context.Context, end int64) error {
	if !h.b.controlled() {
		return nil
	}
	if ok, why := h.b.writable(); !ok {
		return fmt.Errorf("%w: the broker %s", h.errNotOwner, why)
	}
	if end <= 0 {
		return nil
	}
	if code := h.b.waitSlave(ctx, 0, end, true); code != 0 {
		return fmt.Errorf("%w: read barrier at %d: code %d", h.errUnavailable, end, code)
	}
	return nil
}
