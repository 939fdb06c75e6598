package iothub

import (
	"errors"
	"maps"
	"slices"
	"time"

	twincli "github.com/smartgo/smartgo/client/twin"
)

// Devices of a node that died. A bridge node records its devices'
// disconnects as they happen; one that dies (kill -9, power loss) records
// none, and their twins would say Connected until each device connected
// again. Every staleLooks heartbeat intervals, the live node with the
// smallest id looks for clients whose latest session record (an online
// claim or a connect request) names a node that the registries listed in
// neither this look nor the one before, and records those that are
// devices or modules disconnected (deviceDisconnected events follow).
// Clean sessions leave no record: a device connected with clean session 1
// to a node that died stays Connected until it connects again.

// staleLooks is the interval between looks, in heartbeat intervals.
const staleLooks = 3

// staleLoop runs the looks until the hub closes.
func (h *Hub) staleLoop() {
	defer h.wg.Done()
	t := time.NewTicker(staleLooks * h.br.Backend().HeartbeatInterval())
	defer t.Stop()
	var prev map[string]bool
	done := map[string]bool{} // clients already recorded (or not devices)
	for {
		select {
		case <-h.ctx.Done():
			return
		case <-t.C:
		}
		prev = h.dropStale(prev, done)
	}
}

// dropStale makes one look with prev, the live nodes of the previous one,
// and returns this look's (nil when the registries did not answer). done
// remembers the clients already recorded, so that each is recorded once.
func (h *Hub) dropStale(prev, done map[string]bool) map[string]bool {
	be := h.br.Backend()
	ctx, cancel := h.requestCtx(h.ctx)
	nodes, err := be.BridgeNodes(ctx)
	cancel()
	if err != nil {
		h.log.Debug("iothub: bridge nodes", "err", err)
		return nil
	}
	live := map[string]bool{h.nodeID: true}
	for _, n := range nodes {
		live[n] = true
	}
	if prev == nil || slices.Min(slices.Collect(maps.Keys(live))) != h.nodeID {
		return live
	}
	stale := be.ConnectedOn(func(node string) bool { return !live[node] && !prev[node] })
	seen := make(map[string]bool, len(stale))
	for _, cid := range stale {
		seen[cid] = true
		id, ok := ParseClientID(cid)
		if !ok || done[cid] {
			continue
		}
		rctx, cancel := h.requestCtx(h.ctx)
		err := h.twins.SetDisconnected(rctx, id.DeviceID, id.ModuleID, "")
		cancel()
		switch {
		case err == nil:
			done[cid] = true
			h.log.Info("iothub: device of a node that is gone recorded disconnected", "device", cid)
		case errors.Is(err, twincli.ErrNotFound):
			done[cid] = true
		default:
			h.log.Warn("iothub: record disconnection", "device", cid, "err", err)
		}
	}
	for cid := range done {
		if !seen[cid] {
			delete(done, cid)
		}
	}
	return live
}
