package controller

import (
	"errors"
	"fmt"
	"math"
	"slices"
	"time"

	"github.com/hashicorp/raft"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// registerProcessors adds the controller's request codes to the server.
// Heartbeats and metadata are answered by any replica; registrations,
// sync state set changes and elections only by the leader.
func (c *Controller) registerProcessors() {
	reg := func(code int32, pool remoting.Pool, fn func(*remoting.Conn, *protocol.Command) (*protocol.Command, error)) {
		c.srv.RegisterWith(code, pool, remoting.ProcessorFunc(fn), remoting.RegisterOptions{NoRetain: true})
	}
	reg(protocol.BrokerHeartbeat, remoting.PoolHeartbeat, c.processHeartbeat)
	reg(protocol.ControllerRegisterBroker, remoting.PoolAdmin, c.processRegister)
	reg(protocol.ControllerAlterSyncStateSet, remoting.PoolAdmin, c.processAlterSyncStateSet)
	reg(protocol.ControllerElectMaster, remoting.PoolAdmin, c.processElect)
	reg(protocol.ControllerGetMetadata, remoting.PoolDefault, c.processMetadata)
}

func errResp(code int32, format string, args ...any) *protocol.Command {
	return protocol.NewResponse(code, fmt.Sprintf(format, args...))
}

func bodyResp(code int32, remark string, v any) (*protocol.Command, error) {
	b, err := protocol.EncodeJSON(v)
	if err != nil {
		return nil, err
	}
	r := protocol.NewResponse(code, remark)
	r.Body = b
	return r, nil
}

// notLeader answers a leader-only request on a follower.
func (c *Controller) notLeader() *protocol.Command {
	leader := c.Leader()
	r := errResp(protocol.ControllerNotLeader, "controller %s is not the leader (leader: %q)", c.self.Addr, leader)
	r.ExtFields = protocol.ExtFields{protocol.ControllerLeaderField: leader}
	return r
}

// proposeResp proposes cmd and maps a failure to a response.
func (c *Controller) proposeResp(cmd *command) (result, *protocol.Command) {
	r, err := c.propose(cmd)
	switch {
	case errors.Is(err, ErrNotLeader):
		return r, c.notLeader()
	case err != nil:
		return r, errResp(protocol.SystemError, "%v", err)
	}
	return r, nil
}

func (c *Controller) processHeartbeat(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var hb protocol.ControllerHeartbeat
	if err := protocol.DecodeControllerBody(req.Body, &hb); err != nil {
		return errResp(protocol.ControllerInvalidRequest, "%v", err), nil
	}
	g := c.fsm.group(hb.BrokerName)
	if g == nil || g.Members[hb.BrokerID] == nil || g.Members[hb.BrokerID].Addr != hb.BrokerAddr {
		return errResp(protocol.ControllerBrokerNeedToBeRegistered, "broker %s/%d at %s is not registered here",
			hb.BrokerName, hb.BrokerID, hb.BrokerAddr), nil
	}
	c.heard(hb.BrokerName, hb.BrokerID, hb.BrokerAddr, hb.Epoch, hb.MaxOffset, hb.Master)
	resp := protocol.ControllerHeartbeatResponse{Group: c.view(g), Leader: c.Leader()}
	// A master is also refused below an epoch another live broker of the
	// group reports: the group moved on past this replica's state (it
	// lost an election, see repairBehind), and the master it names at
	// its older epoch was deposed; renewing its lease would give the
	// group two masters.
	_, _, top, _ := c.masterClaim(g, time.Now())
	if hb.Master && (hb.Epoch < g.MasterEpoch || g.MasterID != hb.BrokerID || hb.Epoch < top) {
		remark := fmt.Sprintf("refused: broker %s/%d claims to be master at epoch %d; the group is at epoch %d with master %d (live brokers report epochs up to %d)",
			hb.BrokerName, hb.BrokerID, hb.Epoch, g.MasterEpoch, g.MasterID, top)
		if c.note(fmt.Sprintf("fenced/%s/%d", hb.BrokerName, hb.BrokerID), 5*time.Second) {
			c.log.Warn("controller: "+remark, "broker", hb.BrokerAddr)
		}
		return bodyResp(protocol.ControllerFencedMasterEpoch, remark, resp)
	}
	if g.MasterID == 0 || hb.BrokerID == g.MasterID {
		c.wake()
	}
	return bodyResp(protocol.Success, "", resp)
}

func (c *Controller) processRegister(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var rg protocol.ControllerRegister
	if err := protocol.DecodeControllerBody(req.Body, &rg); err != nil {
		return errResp(protocol.ControllerInvalidRequest, "%v", err), nil
	}
	if c.raft.State() != raft.Leader {
		return c.notLeader(), nil
	}
	r, resp := c.proposeResp(&command{Op: opRegister, Group: rg.BrokerName, Cluster: rg.ClusterName, ID: rg.BrokerID,
		Addr: rg.BrokerAddr, HAAddr: rg.HAAddr, Token: rg.Token, Epoch: rg.Epoch})
	if resp != nil {
		return resp, nil
	}
	if r.Code != protocol.Success {
		c.log.Warn("controller: registration refused", "group", rg.BrokerName, "broker", rg.BrokerAddr, "id", rg.BrokerID, "reason", r.Remark)
		return errResp(r.Code, "%s", r.Remark), nil
	}
	c.heard(rg.BrokerName, r.ID, rg.BrokerAddr, rg.Epoch, rg.MaxOffset, false)
	c.mu.Lock()
	if _, ok := c.firstSeen[rg.BrokerName]; !ok {
		c.firstSeen[rg.BrokerName] = time.Now()
	}
	c.mu.Unlock()
	if rg.Epoch > r.Group.MasterEpoch && r.Group.MasterEpoch > 0 {
		c.log.Warn("controller: a broker reports an epoch newer than the controller's; was the controller's state reset?",
			"group", rg.BrokerName, "id", r.ID, "brokerEpoch", rg.Epoch, "controllerEpoch", r.Group.MasterEpoch)
	}
	c.log.Info("controller: broker registered", "group", rg.BrokerName, "id", r.ID, "addr", rg.BrokerAddr,
		"epoch", rg.Epoch, "maxOffset", rg.MaxOffset, "master", r.Group.MasterID)
	c.wake()
	return bodyResp(protocol.Success, "", protocol.ControllerRegisterResponse{
		BrokerID: r.ID, Group: c.view(r.Group),
		HeartbeatIntervalMillis: c.opts.HeartbeatInterval.Milliseconds(),
		HeartbeatTimeoutMillis:  c.opts.HeartbeatTimeout.Milliseconds(),
		LeaseMillis:             LeaseFor(c.opts.HeartbeatTimeout).Milliseconds(),
	})
}

func (c *Controller) processAlterSyncStateSet(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var a protocol.ControllerAlterSyncState
	if err := protocol.DecodeControllerBody(req.Body, &a); err != nil {
		return errResp(protocol.ControllerInvalidRequest, "%v", err), nil
	}
	if c.raft.State() != raft.Leader {
		return c.notLeader(), nil
	}
	g := c.fsm.group(a.BrokerName)
	if g == nil {
		return errResp(protocol.ControllerBrokerMetadataNotExist, "no broker group %s", a.BrokerName), nil
	}
	// A broker the controller does not hear from cannot join the set (it
	// could not be elected); the rest of the change applies. Refusing the
	// whole change would keep a master whose slave caught up from ever
	// counting it (a write needs the controller's set to reach
	// min_insync_replicas), when another joiner is, say, cut off from the
	// controllers but not from the master.
	now := time.Now()
	set := make([]int64, 0, len(a.SyncStateSet))
	var left []int64
	for _, id := range a.SyncStateSet {
		if g.Members[id] != nil && !slices.Contains(g.SyncStateSet, id) && id != a.MasterID {
			if alive, _, _ := c.liveness(a.BrokerName, id, now); !alive {
				left = append(left, id)
				continue
			}
		} // else the state machine checks membership
		set = append(set, id)
	}
	if len(left) > 0 {
		sorted := slices.Compact(slices.Sorted(slices.Values(set)))
		if a.MasterEpoch == g.MasterEpoch && a.MasterID == g.MasterID && a.SyncStateSetEpoch == g.SyncEpoch &&
			slices.Equal(sorted, g.SyncStateSet) {
			// Nothing left to change: answered from the state, no log entry.
			return bodyResp(protocol.Success, "", c.view(g))
		}
		c.log.Info("controller: sync state set change without brokers that send no heartbeats",
			"group", a.BrokerName, "left", left, "set", sorted)
		a.SyncStateSet = set
	}
	r, resp := c.proposeResp(&command{Op: opAlterSSS, Group: a.BrokerName, ID: a.MasterID, Epoch: a.MasterEpoch,
		SyncEpoch: a.SyncStateSetEpoch, Set: a.SyncStateSet})
	if resp != nil {
		return resp, nil
	}
	if r.Code != protocol.Success {
		if r.Code == protocol.ControllerFencedMasterEpoch || r.Code == protocol.ControllerInvalidMaster {
			c.log.Warn("controller: refused sync state set change from a deposed master", "group", a.BrokerName,
				"broker", a.MasterID, "epoch", a.MasterEpoch, "reason", r.Remark)
		}
		if r.Group != nil {
			return bodyResp(r.Code, r.Remark, c.view(r.Group))
		}
		return errResp(r.Code, "%s", r.Remark), nil
	}
	c.log.Info("controller: sync state set changed", "group", a.BrokerName, "syncStateSet", r.Group.SyncStateSet,
		"epoch", r.Group.SyncEpoch)
	c.notify(r.Group)
	return bodyResp(protocol.Success, "", c.view(r.Group))
}

func (c *Controller) processElect(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var e protocol.ControllerElect
	if err := protocol.DecodeControllerBody(req.Body, &e); err != nil {
		return errResp(protocol.ControllerInvalidRequest, "%v", err), nil
	}
	if e.BrokerID < 0 || e.BrokerID > math.MaxInt32 {
		return errResp(protocol.ControllerInvalidRequest, "broker id %d out of range", e.BrokerID), nil
	}
	if c.raft.State() != raft.Leader {
		return c.notLeader(), nil
	}
	g := c.fsm.group(e.BrokerName)
	if g == nil {
		return errResp(protocol.ControllerBrokerMetadataNotExist, "no broker group %s", e.BrokerName), nil
	}
	now := time.Now()
	if e.BrokerID == 0 {
		if alive, _, _ := c.liveness(g.Name, g.MasterID, now); alive && g.MasterID != 0 {
			return bodyResp(protocol.ControllerMasterStillExist, fmt.Sprintf("master %d of %s is alive", g.MasterID, g.Name), c.view(g))
		}
	} else {
		switch alive, _, _ := c.liveness(g.Name, e.BrokerID, now); {
		case g.Members[e.BrokerID] == nil:
			return errResp(protocol.ControllerInvalidReplicas, "broker %d is not in group %s", e.BrokerID, g.Name), nil
		case e.BrokerID == g.MasterID:
			return bodyResp(protocol.ControllerMasterStillExist, fmt.Sprintf("broker %d is already the master of %s", e.BrokerID, g.Name), c.view(g))
		case !alive:
			return errResp(protocol.ControllerBrokerNotAlive, "broker %d of %s sends no heartbeats", e.BrokerID, g.Name), nil
		}
	}
	cand, unclean := c.pickMaster(g, now, e.BrokerID, e.Unclean)
	if cand == 0 {
		return errResp(protocol.ControllerMasterNotAvailable,
			"no live broker of %s in the sync state set %v can become master (name one with unclean to force it)", g.Name, g.SyncStateSet), nil
	}
	r, err := c.electAndNotify(g, cand, c.seenAbove(g, now), "requested by an operator", unclean)
	switch {
	case errors.Is(err, ErrNotLeader):
		return c.notLeader(), nil
	case err != nil && r.Group == nil:
		return errResp(protocol.SystemError, "%v", err), nil
	case err != nil:
		return bodyResp(r.Code, r.Remark, c.view(r.Group))
	}
	return bodyResp(protocol.Success, "", c.view(r.Group))
}

func (c *Controller) processMetadata(_ *remoting.Conn, _ *protocol.Command) (*protocol.Command, error) {
	return bodyResp(protocol.Success, "", c.Metadata())
}

// Metadata returns this replica's view: replicas, leader, Raft state and
// every group.
func (c *Controller) Metadata() protocol.ControllerMetadata {
	leader := c.Leader()
	md := protocol.ControllerMetadata{Groups: []protocol.ControllerGroup{}, Leader: leader, Self: c.self.Addr,
		State: c.raft.State().String(), LastContactMillis: -1}
	md.Term = c.raft.CurrentTerm() // not Stats: it waits for Raft's main loop
	switch lc := c.raft.LastContact(); {
	case c.raft.State() == raft.Leader:
		md.LastContactMillis = 0
	case !lc.IsZero():
		md.LastContactMillis = time.Since(lc).Milliseconds()
	}
	if leader == "" {
		md.Warning = "no leader: a majority of controller replicas is not reachable; brokers keep their current masters, elections are suspended"
	}
	for _, p := range c.peers {
		md.Peers = append(md.Peers, protocol.ControllerPeer{Addr: p.Addr, RaftAddr: p.RaftAddr, Leader: p.Addr == leader})
	}
	for _, g := range c.fsm.groups() {
		md.Groups = append(md.Groups, c.view(g))
	}
	return md
}
