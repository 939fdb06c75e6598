package controller

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// The leader's election loop: every scan it looks at each group and, when
// the master's heartbeats stopped for HeartbeatTimeout (counted from when
// this replica became leader at the earliest), proposes the best live
// member of the sync state set as the new master. A proposal names the
// epoch it was decided on and applies only if that is still the epoch, so
// a late or repeated decision changes nothing.

// scanInterval is the period of the election scan.
func (c *Controller) scanInterval() time.Duration {
	return max(c.opts.HeartbeatInterval/2, 20*time.Millisecond)
}

// run is the replica's loop: elections while leading, the no-majority
// watchdog otherwise.
func (c *Controller) run() {
	t := time.NewTicker(c.scanInterval())
	defer t.Stop()
	var leaderlessSince, graceUntil time.Time
	lastScan := time.Now()
	for {
		select {
		case <-c.ctx.Done():
			return
		case <-t.C:
		case <-c.kick:
		}
		graceUntil, lastScan = c.stallGrace(graceUntil, lastScan)
		if c.raft.State() != raft.Leader {
			c.mu.Lock()
			c.leaderSince = time.Time{}
			c.mu.Unlock()
			leaderlessSince = c.watchMajority(leaderlessSince)
			continue
		}
		if !leaderlessSince.IsZero() {
			leaderlessSince = time.Time{}
		}
		c.mu.Lock()
		since := c.leaderSince
		c.mu.Unlock()
		if since.IsZero() {
			// Apply everything committed before deciding anything.
			if err := c.raft.Barrier(applyTimeout).Error(); err != nil {
				c.log.Warn("controller: barrier after becoming leader failed", "err", err)
				continue
			}
			c.mu.Lock()
			c.leaderSince = time.Now()
			c.mu.Unlock()
			c.log.Info("controller: this replica leads; masters are judged after a grace period",
				"self", c.self.Addr, "grace", c.opts.HeartbeatTimeout)
			continue
		}
		if time.Now().Before(graceUntil) {
			continue
		}
		for _, g := range c.fsm.groups() {
			c.scanGroup(g, since)
		}
	}
}

// stallGrace notices a stall of this replica itself: a scan later than
// the last by more than HeartbeatTimeout (the process was stopped,
// swapped out, its host suspended). It heard no heartbeat meanwhile, and
// those the brokers sent wait unread in its sockets: every master would
// look dead at once. So no master is judged for one more heartbeat
// interval (and a scan) from now, which lets each live broker's queued
// and next heartbeats in. It returns the grace's end (the one given, when
// there was no stall) and the time of this scan.
func (c *Controller) stallGrace(graceUntil, lastScan time.Time) (time.Time, time.Time) {
	now := time.Now()
	if late := now.Sub(lastScan) - c.scanInterval(); late > c.opts.HeartbeatTimeout {
		graceUntil = now.Add(c.opts.HeartbeatInterval + c.scanInterval())
		c.log.Warn("controller: this replica's scan ran late (the process stalled?): masters get one more heartbeat interval before they are judged",
			"late", late.Round(time.Millisecond), "heartbeatTimeout", c.opts.HeartbeatTimeout, "grace", c.opts.HeartbeatInterval+c.scanInterval())
	}
	return graceUntil, now
}

// watchMajority logs, once per outage and then every 30 s, that there is
// no leader: brokers keep their masters, elections wait.
func (c *Controller) watchMajority(since time.Time) time.Time {
	_, id := c.raft.LeaderWithID()
	if id != "" {
		if !since.IsZero() {
			c.log.Info("controller: a leader is back; elections resume", "leader", string(id))
		}
		return time.Time{}
	}
	now := time.Now()
	if since.IsZero() {
		return now
	}
	if now.Sub(since) > 2*c.opts.ElectionTimeout && c.note("no-majority", 30*time.Second) {
		c.log.Warn("controller: no leader: a majority of controller replicas is not reachable; "+
			"brokers keep their current masters, elections are suspended", "self", c.self.Addr,
			"replicas", len(c.peers), "for", now.Sub(since).Round(time.Millisecond))
	}
	return since
}

// scanGroup elects a master for g if it needs one.
func (c *Controller) scanGroup(g *groupState, leaderSince time.Time) {
	now := time.Now()
	if c.repairBehind(g, leaderSince, now) {
		return
	}
	// seen: the newest epoch a live broker reports when above g's (a
	// lost election whose master is gone too: repairBehind found nobody
	// acting at it); the replica's master, alive or not, was deposed
	// then, and the new master goes above that epoch.
	seen := c.seenAbove(g, now)
	if g.MasterID != 0 {
		if alive, _, _ := c.liveness(g.Name, g.MasterID, now); alive && seen == 0 {
			return
		}
		if now.Sub(leaderSince) < c.opts.HeartbeatTimeout {
			return // a new leader gives the master a full timeout
		}
	} else if g.MasterEpoch == 0 && g.SeenEpoch > 0 {
		// Brokers with a history but a controller without one: wait a
		// timeout for the others to register, then take the best log.
		c.mu.Lock()
		first, ok := c.firstSeen[g.Name]
		c.mu.Unlock()
		if !ok || now.Sub(first) < c.opts.HeartbeatTimeout {
			return
		}
	}
	cand, unclean := c.pickMaster(g, now, 0, false)
	if cand == 0 {
		if c.note("nomaster/"+g.Name, 10*time.Second) {
			c.log.Warn("controller: no broker may become master: none alive in the sync state set (unclean election is off)",
				"group", g.Name, "master", g.MasterID, "epoch", g.MasterEpoch, "syncStateSet", g.SyncStateSet)
		}
		return
	}
	reason := "master heartbeat timed out"
	switch {
	case seen != 0:
		reason = fmt.Sprintf("the controller's state is behind: live brokers report epoch %d, the controller's master %d is at epoch %d and nobody acts as master at the newer one",
			seen, g.MasterID, g.MasterEpoch)
	case g.MasterID == 0:
		reason = "group has no master"
	}
	if _, err := c.electAndNotify(g, cand, seen, reason, unclean); err != nil && !errors.Is(err, ErrNotLeader) {
		c.log.Warn("controller: election failed", "group", g.Name, "candidate", cand, "err", err)
	}
}

// A replica whose state lost an election (the tail of its raft.log cut,
// every replica at once; a replica restored from an older snapshot)
// names an older master at an older epoch than the group acts on: the
// master it elected since heartbeats as master at a higher epoch than
// the replica's, and is fenced (no lease: the group refuses writes),
// while the master the replica names may be alive as that master's
// slave, so no election ever happens. The brokers' epochs come only from
// elections, so a live broker acting as master at an epoch above the
// group's was elected after the replica's last entry: repairBehind
// elects it again, at an epoch above every epoch a live broker reports
// (command.Seen), so that no epoch goes back and the other brokers,
// whatever epoch they are at, take the new view. Among several such
// claimants the one at the highest epoch was elected last; two at the
// same epoch cannot both be right, and neither is chosen (logged). The
// leader waits a heartbeat timeout after it took over, as for any
// election, so every live broker has reported first.

// seenAbove is the highest epoch a live member of g reports when it is
// above g's (command.Seen of an election), else 0.
func (c *Controller) seenAbove(g *groupState, now time.Time) int32 {
	if _, _, top, _ := c.masterClaim(g, now); top > g.MasterEpoch {
		return top
	}
	return 0
}

// repairBehind elects a live broker that acts as master at an epoch
// above g's; true when it found one (elected, or left to the next scan).
func (c *Controller) repairBehind(g *groupState, leaderSince time.Time, now time.Time) bool {
	cand, epoch, top, tie := c.masterClaim(g, now)
	if cand == 0 || epoch <= g.MasterEpoch {
		return false
	}
	if now.Sub(leaderSince) < c.opts.HeartbeatTimeout {
		return true // every live broker reports before anything is decided
	}
	if tie {
		if c.note("behind-tie/"+g.Name, 10*time.Second) {
			c.log.Warn("controller: two brokers act as master at the same epoch above the controller's; electing neither",
				"group", g.Name, "epoch", epoch, "controllerEpoch", g.MasterEpoch)
		}
		return true
	}
	reason := fmt.Sprintf("the controller's state is behind: broker %d acts as master at epoch %d, the controller's master %d is at epoch %d (a lost election)",
		cand, epoch, g.MasterID, g.MasterEpoch)
	if _, err := c.electAndNotify(g, cand, top, reason, false); err != nil && !errors.Is(err, ErrNotLeader) {
		c.log.Warn("controller: election failed", "group", g.Name, "candidate", cand, "err", err)
	}
	return true
}

// pickMaster chooses the new master of g: among the live members of the
// sync state set other than the current master (any live member for a
// group that never had one; the followers of a newer epoch when the
// replica's state is behind, see followersAt), the one with the highest (epoch, log end),
// then the lowest id. want != 0 asks for that broker. With no candidate
// and unclean elections allowed (by option or by the request), any live
// member qualifies; unclean reports that.
func (c *Controller) pickMaster(g *groupState, now time.Time, want int64, allowUnclean bool) (id int64, unclean bool) {
	var pool []int64
	if seen := c.seenAbove(g, now); seen != 0 {
		pool = c.followersAt(g, seen, now)
	} else if g.MasterID == 0 && g.MasterEpoch == 0 {
		pool = g.ids()
	} else {
		for _, m := range g.SyncStateSet {
			if m != g.MasterID {
				pool = append(pool, m)
			}
		}
	}
	best := c.best(g, pool, now, want)
	if best == 0 && (c.opts.UncleanElection || allowUnclean) {
		others := slices.DeleteFunc(g.ids(), func(m int64) bool { return m == g.MasterID })
		if best = c.best(g, others, now, want); best != 0 {
			return best, true
		}
	}
	return best, false
}

// followersAt is the pool of an election while the replica's state is
// behind (live brokers report epoch seen, above g's, and nobody acts as
// master at it: that master is gone too). The replica's sync state set
// is then older than the group's: the set of the master at seen is
// unknown here, and may hold brokers the replica's set lacks (brokers
// that joined after the lost entries) while the members it names are
// gone, so that no election ever happened. Every live broker that
// follows epoch seen qualifies: logs that followed one master are
// prefixes of its log, so the longest of them holds every write that
// master acknowledged if any live broker was in its set (best picks the
// highest (epoch, log end)). The replica's own master, deposed but
// possibly a follower at seen by now, comes last so that it wins no tie.
// A broker below seen never followed that master and does not qualify
// (only an unclean election takes it).
func (c *Controller) followersAt(g *groupState, seen int32, now time.Time) []int64 {
	var pool []int64
	for _, id := range g.ids() {
		if id == g.MasterID {
			continue
		}
		if alive, epoch, _ := c.liveness(g.Name, id, now); alive && epoch >= seen {
			pool = append(pool, id)
		}
	}
	if alive, epoch, _ := c.liveness(g.Name, g.MasterID, now); g.MasterID != 0 && alive && epoch >= seen {
		pool = append(pool, g.MasterID)
	}
	return pool
}

func (c *Controller) best(g *groupState, pool []int64, now time.Time, want int64) int64 {
	var bestID int64
	var bestEpoch int32
	var bestEnd int64
	for _, id := range pool {
		alive, epoch, end := c.liveness(g.Name, id, now)
		if !alive || (want != 0 && id != want) {
			continue
		}
		if bestID == 0 || epoch > bestEpoch || (epoch == bestEpoch && end > bestEnd) {
			bestID, bestEpoch, bestEnd = id, epoch, end
		}
	}
	return bestID
}

// electAndNotify proposes cand as g's master (applied only if g's epoch
// is unchanged; the new epoch above seen too) and tells the group.
func (c *Controller) electAndNotify(g *groupState, cand int64, seen int32, reason string, unclean bool) (result, error) {
	r, err := c.propose(&command{Op: opElect, Group: g.Name, ID: cand, Epoch: g.MasterEpoch, Seen: seen})
	if err != nil {
		return r, err
	}
	if r.Code != protocol.Success {
		return r, fmt.Errorf("controller: elect %d in %s: %s", cand, g.Name, r.Remark)
	}
	lvl := c.log.Info
	if unclean {
		lvl = c.log.Warn
		reason += "; UNCLEAN: the new master was not in the sync state set, messages only the old master had are lost"
	}
	lvl("controller: elected master", "group", g.Name, "master", cand, "addr", r.Group.Members[cand].Addr,
		"epoch", r.Group.MasterEpoch, "oldMaster", g.MasterID, "reason", reason)
	c.notify(r.Group)
	return r, nil
}

// notify tells every broker of g its new state (one-way
// NOTIFY_BROKER_ROLE_CHANGED; brokers also learn it from heartbeat
// answers, so a lost notification only costs time).
func (c *Controller) notify(g *groupState) {
	v := c.view(g)
	body, err := protocol.EncodeJSON(v)
	if err != nil {
		c.log.Error("controller: encode notification", "err", err)
		return
	}
	for _, m := range v.Brokers {
		addr := m.Addr
		c.goFunc(func() {
			ctx, cancel := context.WithTimeout(c.ctx, time.Second)
			defer cancel()
			req := protocol.NewRequest(protocol.NotifyBrokerRoleChanged, nil, body)
			if err := c.client.InvokeOneway(ctx, addr, req); err != nil {
				c.log.Debug("controller: notify broker", "broker", addr, "err", err)
			}
		})
	}
}
