package bridge

// The wills of nodes that died (doc.go, "Wills"): claims on them, their
// publication by a surviving node, and the loop that notices dead nodes.

import (
	"context"
	"errors"
	"slices"
	"strings"
	"time"

	"github.com/smartgo/smartgo/internal/beat"
	"github.com/smartgo/smartgo/mqtt"
)

// claimGrace is how long a claim on another node's will waits for that
// node to revoke it (it is alive, though the registries do not list it)
// before the will is published (Options.WillClaimGrace).
func (b *Backend) claimGrace() time.Duration {
	if b.testClaimGrace > 0 {
		return b.testClaimGrace
	}
	return b.opts.WillClaimGrace
}

// heardFor is how long a node that revoked a claim counts as alive for
// the wills, whatever the registries say.
func (b *Backend) heardFor() time.Duration {
	return max(5*b.opts.HeartbeatInterval, 10*time.Second)
}

// revokeClaim writes the revoke of claim, another node's claim on the
// will id of clientID, which this node stored and still holds. A write
// that fails is tried again (the claimer publishes once its grace is
// over) for as long as the claim stands and this node holds the will.
func (b *Backend) revokeClaim(clientID, id, claim string) {
	b.log.Warn("bridge: another node claimed the will of a client of this node; revoking (this node looks gone to it)",
		"client", clientID, "claim", claim)
	b.goOwned(func() {
		wait := 50 * time.Millisecond
		for try := 0; ; try++ {
			err := b.writeMarker(b.ctx, &sessionRecord{ClientID: clientID, Node: b.opts.NodeID, WillDone: id, Revoke: claim})
			if err == nil || b.ctx.Err() != nil || !b.claimStands(clientID, id, claim) {
				return
			}
			if try == 0 {
				b.log.Warn("bridge: revoke a claim on a will; trying again", "client", clientID, "err", err)
			}
			t := time.NewTimer(wait)
			select {
			case <-b.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			wait = min(2*wait, time.Second)
		}
	})
}

// claimStands reports whether claim is still the claim on the will id of
// clientID, a will this process holds.
func (b *Backend) claimStands(clientID, id, claim string) bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.holdsLocked(clientID, id) && slices.ContainsFunc(b.wills.owed[clientID], func(e owedWill) bool {
		return e.w.ID == id && e.claim == claim
	})
}

// publishOrphan publishes the will w of clientID, whose node is gone and
// which this process's claim holds, then settles it. When publishing
// fails, the will loop claims it again.
//
// The claim is the firing the tail found holding when it returned w: the
// goroutine publishes only while that firing is still the will's. A
// revoke (or a marker) the tail applies before the goroutine runs drops
// it; the goroutine must not then take the missing firing for one that
// has no grace to wait, and publish a live client's will at once.
func (b *Backend) publishOrphan(clientID string, w *willRecord) {
	ws := b.willServer()
	if ws == nil {
		return
	}
	b.mu.Lock()
	f := b.wills.fire[w.ID]
	b.mu.Unlock()
	if f == nil {
		return
	}
	b.goOwned(func() {
		if b.testFiringHook != nil {
			b.testFiringHook(clientID)
		}
		b.mu.Lock()
		held, wait := b.wills.fire[w.ID] == f, f.waiting
		b.mu.Unlock()
		if held && wait {
			t := time.NewTimer(b.claimGrace())
			select {
			case <-b.ctx.Done():
				t.Stop()
				return
			case <-t.C:
			}
			// A revoke stored within the grace counts even if this
			// node's tail has not applied it yet.
			ctx, cancel := context.WithTimeout(b.ctx, b.opts.SendTimeout)
			if err := b.catchUpSys(ctx, b.opts.SessionTopic); err != nil {
				b.log.Debug("bridge: session topic not caught up before publishing a claimed will", "client", clientID, "err", err)
			}
			cancel()
			b.mu.Lock()
			held = b.wills.fire[w.ID] == f // else a revoke dropped it
			f.waiting = false
			b.mu.Unlock()
		}
		if !held {
			b.log.Info("bridge: will not published: its node revoked the claim, or it was settled", "client", clientID)
			return
		}
		if b.testWillHook != nil && !b.testWillHook(clientID) {
			return // the process "dies" here
		}
		b.log.Info("bridge: publishing the will of a client whose node is gone", "client", clientID, "topic", w.Topic)
		err := ws.PublishWill(w.message())
		if errors.Is(err, mqtt.ErrUnstorable) {
			// No try can store it: settled as if published, not claimed
			// again and again.
			b.log.Warn("bridge: will of a client whose node is gone cannot be stored; dropped", "client", clientID, "err", err)
			err = nil
		}
		if err != nil {
			b.log.Warn("bridge: will of a client whose node is gone", "client", clientID, "err", err)
			b.mu.Lock()
			if b.wills.fire[w.ID] == f {
				delete(b.wills.fire, w.ID)
			}
			b.mu.Unlock()
			return
		}
		b.mu.Lock()
		if b.wills.fire[w.ID] == f {
			f.published = true
		}
		b.mu.Unlock()
		b.settleFired(b.ctx, clientID, w.ID)
	})
}

// orphan is an owed will of a node that is gone, due at due: to claim
// (taking over the claim prev), or (settle) to settle, published.
type orphan struct {
	clientID string
	id       string
	due      time.Time
	prev     string
	settle   bool
}

// claimGoneLocked reports whether the process of claim ("node/process")
// is gone: an earlier process of this node, a process of a node in gone,
// or this process when it is not publishing the will id (publishing
// failed).
func (b *Backend) claimGoneLocked(claim, id string, gone map[string]time.Time) bool {
	at := strings.LastIndexByte(claim, '/')
	node, proc := claim[:max(at, 0)], claim[at+1:]
	if node == b.opts.NodeID {
		return proc != b.wills.inc || b.wills.fire[id] == nil
	}
	_, ok := gone[node]
	return ok
}

// orphansLocked lists the owed wills whose node is gone: this node's
// earlier process (same node id, ids it did not give), and nodes in gone
// (since when each was first seen gone).
func (b *Backend) orphansLocked(gone map[string]time.Time) []orphan {
	if len(b.wills.owners) == 0 {
		return nil
	}
	self := b.wills.owners[b.opts.NodeID] > 0
	some := self
	for n := range gone {
		some = some || b.wills.owners[n] > 0
	}
	if !some {
		return nil
	}
	var out []orphan
	for id, list := range b.wills.owed {
		for _, e := range list {
			since, ok := gone[e.node]
			if e.node == b.opts.NodeID && !strings.HasPrefix(e.w.ID, b.wills.inc+"-") {
				since, ok = b.wills.started, true
			}
			if !ok {
				continue
			}
			if at, heard := b.wills.heard[e.node]; heard && e.node != b.opts.NodeID && time.Since(at) < b.heardFor() {
				// It revoked a claim since the look that found it gone:
				// alive (lookNodes says so from its next look on).
				continue
			}
			due := since.Add(e.w.wait())
			if e.w.DueAtMs > 0 {
				// Its delay was running already when the node went.
				due = time.UnixMilli(e.w.DueAtMs)
			}
			o := orphan{clientID: id, id: e.w.ID, due: due, prev: e.claim}
			f := b.wills.fire[e.w.ID]
			switch {
			case f != nil && f.published && !f.settling:
				o.settle = true
			case f != nil:
				continue // its claim or marker is on its way, or it is publishing
			case e.claim != "" && !b.claimGoneLocked(e.claim, e.w.ID, gone):
				continue // a live process publishes it
			}
			out = append(out, o)
		}
	}
	return out
}

// fireOrphans writes a claim, to publish it, for each orphaned will that
// is due (or, for one this process published, the marker that settles
// it).
func (b *Backend) fireOrphans(ctx context.Context, gone map[string]time.Time) {
	b.mu.Lock()
	list := b.orphansLocked(gone)
	b.mu.Unlock()
	now := time.Now()
	for _, o := range list {
		if now.Before(o.due) {
			continue
		}
		if o.settle {
			b.settleFired(ctx, o.clientID, o.id)
			continue
		}
		if err := b.claimWill(ctx, o.clientID, o.id, o.prev); err != nil && ctx.Err() == nil {
			b.log.Warn("bridge: will of a client whose node is gone", "client", o.clientID, "err", err)
		}
	}
}

// willTick is how often the will loop looks for orphaned wills that are
// due, while there are any (more often with a HeartbeatInterval below
// it: the loop looks at the nodes no more often than it ticks).
const willTick = time.Second

// willLoop publishes the wills whose node is gone. Every
// HeartbeatInterval it reads the bridge nodes the registries list; a node
// with owed wills that two looks in a row did not list is gone, since
// the first of them. Only the listed node with the smallest id publishes
// other nodes' wills (another that does too writes a marker that comes
// second); this node's earlier process's wills it publishes itself.
func (b *Backend) willLoop() {
	defer b.wg.Done()
	absent := map[string]time.Time{} // nodes with owed wills not listed, since
	var gone map[string]time.Time
	nextLook := time.Time{}
	t := beat.NewTicker(min(willTick, b.opts.HeartbeatInterval))
	defer t.Stop()
	for {
		if now := time.Now(); !now.Before(nextLook) {
			nextLook = now.Add(b.opts.HeartbeatInterval)
			gone = b.lookNodes(absent)
		}
		b.fireOrphans(b.ctx, gone)
		select {
		case <-b.ctx.Done():
			return
		case <-t.C:
		}
	}
}

// lookNodes updates absent (nodes with owed wills that the registries do
// not list, since when) and returns the nodes whose wills this node
// publishes: absent in two looks in a row, when this node has the
// smallest id of those listed (or, whatever its id, a node that claimed
// one of this node's own wills).
func (b *Backend) lookNodes(absent map[string]time.Time) map[string]time.Time {
	b.mu.Lock()
	owners := make([]string, 0, len(b.wills.owners))
	for n := range b.wills.owners {
		if n != b.opts.NodeID {
			owners = append(owners, n)
		}
	}
	// Nodes that revoked a claim lately are alive, whatever the
	// registries say.
	var heard map[string]bool
	for n, at := range b.wills.heard {
		if time.Since(at) >= b.heardFor() {
			delete(b.wills.heard, n)
			continue
		}
		if heard == nil {
			heard = map[string]bool{}
		}
		heard[n] = true
	}
	// claimers of this node's own wills: another node claimed one (while
	// this node was down) and is gone too; this node claims it again
	// whether or not it has the smallest id (orphansLocked never asks
	// another node to publish this node's wills).
	var claimers map[string]bool
	if len(owners) > 0 || b.wills.owners[b.opts.NodeID] > 0 {
		// A node that claimed a will and is gone too: another claims it.
		for _, list := range b.wills.owed {
			for _, e := range list {
				at := strings.LastIndexByte(e.claim, '/')
				if at <= 0 || e.claim[:at] == b.opts.NodeID {
					continue
				}
				if e.node == b.opts.NodeID {
					if claimers == nil {
						claimers = map[string]bool{}
					}
					claimers[e.claim[:at]] = true
				}
				if !slices.Contains(owners, e.claim[:at]) {
					owners = append(owners, e.claim[:at])
				}
			}
		}
	}
	b.mu.Unlock()
	if len(owners) == 0 {
		clear(absent)
		return nil // no other node's wills: no need to ask the registries
	}
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.HeartbeatInterval)
	nodes, err := b.BridgeNodes(ctx)
	cancel()
	if err != nil {
		b.log.Debug("bridge: bridge nodes for the wills", "err", err)
		return nil
	}
	if b.testNodesHook != nil {
		nodes = b.testNodesHook(nodes)
	}
	live := map[string]bool{b.opts.NodeID: true}
	for n := range heard {
		live[n] = true
	}
	smallest := b.opts.NodeID
	for _, n := range nodes {
		live[n] = true
		smallest = min(smallest, n)
	}
	now := time.Now()
	seen := map[string]bool{}
	var gone map[string]time.Time
	for _, n := range owners {
		if live[n] {
			continue
		}
		seen[n] = true
		since, ok := absent[n]
		if !ok {
			absent[n] = now
			continue
		}
		if smallest == b.opts.NodeID || claimers[n] {
			if gone == nil {
				gone = map[string]time.Time{}
			}
			gone[n] = since
		}
	}
	for n := range absent {
		if !seen[n] {
			delete(absent, n)
		}
	}
	return gone
}
