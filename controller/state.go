package controller

import (
	"encoding/json"
	"fmt"
	"math"
	"slices"
	"sort"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// The replicated state: what every replica's state machine holds after
// applying the same Raft log. It does no I/O and reads no clock; liveness
// (heartbeats) is kept beside it by the leader and only decides which
// commands the leader proposes.

// state is the whole replicated state: broker groups by broker name.
type state struct {
	Groups map[string]*groupState `json:"groups"`
}

// groupState is one broker group.
type groupState struct {
	Cluster string                 `json:"cluster"`
	Name    string                 `json:"name"`
	Members map[int64]*memberState `json:"members"`
	// NextID is the id the next broker registering without one gets.
	NextID int64 `json:"nextId"`
	// MasterID is the current master (0 = none yet, or cleared because
	// its data is gone).
	MasterID int64 `json:"masterId"`
	// MasterEpoch is bumped by every election; a broker's log records the
	// offset at which each epoch began.
	MasterEpoch int32 `json:"masterEpoch"`
	// SeenEpoch is the highest epoch a registering broker reported from
	// its epoch file: a controller whose state was lost starts above it.
	SeenEpoch int32 `json:"seenEpoch"`
	// SyncStateSet holds the ids whose logs have every acknowledged
	// message, sorted; it contains the master whenever there is one.
	SyncStateSet []int64 `json:"syncStateSet"`
	// SyncEpoch is bumped by every change of SyncStateSet.
	SyncEpoch int32 `json:"syncStateSetEpoch"`
}

// memberState is one broker of a group.
type memberState struct {
	Addr   string `json:"addr"`
	HAAddr string `json:"haAddr"`
	Token  string `json:"token"`
}

// Command operations (the "op" of a log entry).
const (
	opRegister = "register"
	opElect    = "elect"
	opAlterSSS = "alterSyncStateSet"
)

// command is one Raft log entry's payload (see doc.go for its encoding).
// Fields are used by the operations as noted.
type command struct {
	Op      string `json:"op"`
	Group   string `json:"group"`
	Cluster string `json:"cluster,omitempty"` // register
	// ID: register: the broker id (0 = assign); elect: the new master;
	// alterSyncStateSet: the requesting master.
	ID     int64  `json:"id,omitempty"`
	Addr   string `json:"addr,omitempty"`   // register
	HAAddr string `json:"haAddr,omitempty"` // register
	Token  string `json:"token,omitempty"`  // register
	// Epoch: register: the broker's last epoch; elect: the master epoch
	// the election was decided on (applied only if still current);
	// alterSyncStateSet: the requesting master's epoch.
	Epoch     int32   `json:"epoch,omitempty"`
	SyncEpoch int32   `json:"syncEpoch,omitempty"` // alterSyncStateSet
	Set       []int64 `json:"set,omitempty"`       // alterSyncStateSet
	// Seen: elect: the highest epoch a live broker of the group reported,
	// when above the group's (a replica that lost an election: the new
	// epoch goes above it, see elect.go); 0 otherwise.
	Seen int32 `json:"seen,omitempty"`
}

// result is what applying a command returns to the proposer.
type result struct {
	Code   int32 // protocol.Success or a controller response code
	Remark string
	ID     int64 // register: the broker's id
	Group  *groupState
}

func newState() *state { return &state{Groups: map[string]*groupState{}} }

// Limits on registered strings.
const (
	maxNameLen  = 127 // broker and cluster names (topic-name rules)
	maxAddrLen  = 255
	maxTokenLen = 128
	maxMembers  = 64
)

// apply applies one command. It never fails on bad input: a refused
// command leaves the state unchanged and says why in the result.
func (s *state) apply(c *command) result {
	switch c.Op {
	case opRegister:
		return s.register(c)
	case opElect:
		return s.elect(c)
	case opAlterSSS:
		return s.alterSyncStateSet(c)
	}
	return result{Code: protocol.ControllerInvalidRequest, Remark: fmt.Sprintf("unknown operation %q", c.Op)}
}

func (s *state) register(c *command) result {
	switch {
	case c.Group == "" || len(c.Group) > maxNameLen || c.Cluster == "" || len(c.Cluster) > maxNameLen:
		return result{Code: protocol.ControllerInvalidRequest, Remark: "broker and cluster names must be 1..127 bytes"}
	case c.Addr == "" || len(c.Addr) > maxAddrLen || len(c.HAAddr) > maxAddrLen:
		return result{Code: protocol.ControllerInvalidRequest, Remark: "broker address must be 1..255 bytes"}
	case c.Token == "" || len(c.Token) > maxTokenLen:
		return result{Code: protocol.ControllerInvalidRequest, Remark: "token must be 1..128 bytes"}
	case c.ID < 0 || c.ID >= math.MaxInt32:
		return result{Code: protocol.ControllerBrokerIDInvalid, Remark: fmt.Sprintf("broker id %d out of range", c.ID)}
	case c.Epoch < 0 || c.Epoch == math.MaxInt32:
		return result{Code: protocol.ControllerInvalidRequest, Remark: fmt.Sprintf("epoch %d out of range", c.Epoch)}
	}
	g := s.Groups[c.Group]
	if g == nil {
		g = &groupState{Cluster: c.Cluster, Name: c.Group, Members: map[int64]*memberState{}, NextID: 1}
		s.Groups[c.Group] = g
	}
	if g.Cluster != c.Cluster {
		return result{Code: protocol.ControllerInvalidRequest,
			Remark: fmt.Sprintf("broker group %s belongs to cluster %s, not %s", c.Group, g.Cluster, c.Cluster)}
	}
	id := c.ID
	if id == 0 {
		for mid, m := range g.Members {
			if m.Token == c.Token {
				id = mid
				break
			}
		}
	}
	m := g.Members[id]
	if m == nil {
		if len(g.Members) >= maxMembers {
			return result{Code: protocol.ControllerBrokerIDInvalid, Remark: fmt.Sprintf("group %s has %d brokers already", c.Group, maxMembers)}
		}
		if id == 0 {
			id = g.NextID
		}
		m = &memberState{}
		g.Members[id] = m
	} else if m.Token != c.Token {
		// Same id, other data directory: whatever this broker had is gone,
		// so it cannot count as in sync (nor stay master).
		g.SyncStateSet = slices.DeleteFunc(g.SyncStateSet, func(x int64) bool { return x == id })
		if g.MasterID == id {
			g.MasterID = 0 // the next election picks from the rest of the set
		}
		g.SyncEpoch++
	}
	m.Addr, m.HAAddr, m.Token = c.Addr, c.HAAddr, c.Token
	if id >= g.NextID {
		g.NextID = id + 1
	}
	if c.Epoch > g.SeenEpoch {
		g.SeenEpoch = c.Epoch
	}
	return result{Code: protocol.Success, ID: id, Group: g}
}

func (s *state) elect(c *command) result {
	g := s.Groups[c.Group]
	switch {
	case g == nil:
		return result{Code: protocol.ControllerBrokerMetadataNotExist, Remark: fmt.Sprintf("no broker group %s", c.Group)}
	case c.Epoch != g.MasterEpoch:
		return result{Code: protocol.ControllerElectMasterFailed, Group: g,
			Remark: fmt.Sprintf("election decided at master epoch %d, group %s is at %d", c.Epoch, c.Group, g.MasterEpoch)}
	case g.Members[c.ID] == nil:
		return result{Code: protocol.ControllerInvalidReplicas, Group: g, Remark: fmt.Sprintf("broker id %d is not in group %s", c.ID, c.Group)}
	case c.Seen < 0:
		return result{Code: protocol.ControllerInvalidRequest, Group: g, Remark: fmt.Sprintf("seen epoch %d out of range", c.Seen)}
	case g.MasterEpoch >= math.MaxInt32-1 || g.SeenEpoch >= math.MaxInt32-1 || c.Seen >= math.MaxInt32-1:
		return result{Code: protocol.ControllerElectMasterFailed, Group: g, Remark: "master epoch exhausted"}
	}
	g.SeenEpoch = max(g.SeenEpoch, c.Seen)
	g.MasterID = c.ID
	g.MasterEpoch = max(g.MasterEpoch, g.SeenEpoch) + 1
	g.SyncStateSet = []int64{c.ID}
	g.SyncEpoch++
	return result{Code: protocol.Success, ID: c.ID, Group: g}
}

func (s *state) alterSyncStateSet(c *command) result {
	g := s.Groups[c.Group]
	if g == nil {
		return result{Code: protocol.ControllerBrokerMetadataNotExist, Remark: fmt.Sprintf("no broker group %s", c.Group)}
	}
	switch {
	case c.Epoch != g.MasterEpoch:
		return result{Code: protocol.ControllerFencedMasterEpoch, Group: g,
			Remark: fmt.Sprintf("master epoch %d is not the current epoch %d of group %s", c.Epoch, g.MasterEpoch, c.Group)}
	case g.MasterID == 0 || c.ID != g.MasterID:
		return result{Code: protocol.ControllerInvalidMaster, Group: g,
			Remark: fmt.Sprintf("broker %d is not the master of group %s (master is %d)", c.ID, c.Group, g.MasterID)}
	case !slices.Contains(c.Set, g.MasterID):
		return result{Code: protocol.ControllerInvalidReplicas, Group: g, Remark: "the sync state set must contain the master"}
	}
	set := slices.Clone(c.Set)
	slices.Sort(set)
	set = slices.Compact(set)
	if c.SyncEpoch != g.SyncEpoch {
		if c.SyncEpoch < g.SyncEpoch && slices.Equal(set, g.SyncStateSet) {
			// The set is already what the master asks for: a request
			// repeated after its first attempt was applied but its answer
			// lost (timeout, leader change). Answered as done.
			return result{Code: protocol.Success, Group: g}
		}
		return result{Code: protocol.ControllerFencedSyncStateSetEpoch, Group: g,
			Remark: fmt.Sprintf("sync state set epoch %d is not the current %d", c.SyncEpoch, g.SyncEpoch)}
	}
	for _, id := range set {
		if g.Members[id] == nil {
			return result{Code: protocol.ControllerInvalidReplicas, Group: g, Remark: fmt.Sprintf("broker id %d is not in group %s", id, c.Group)}
		}
	}
	if !slices.Equal(set, g.SyncStateSet) {
		g.SyncStateSet = set
		g.SyncEpoch++
	}
	return result{Code: protocol.Success, Group: g}
}

// clone returns a deep copy (snapshots, views handed out of the lock).
func (g *groupState) clone() *groupState {
	c := *g
	c.Members = make(map[int64]*memberState, len(g.Members))
	for id, m := range g.Members {
		mc := *m
		c.Members[id] = &mc
	}
	c.SyncStateSet = slices.Clone(g.SyncStateSet)
	return &c
}

// ids returns the member ids, sorted.
func (g *groupState) ids() []int64 {
	ids := make([]int64, 0, len(g.Members))
	for id := range g.Members {
		ids = append(ids, id)
	}
	slices.Sort(ids)
	return ids
}

// view is the wire form of the group; live fills the per-member heartbeat
// fields (nil leaves them zero).
func (g *groupState) view(live func(id int64) (alive bool, epoch int32, maxOffset int64)) protocol.ControllerGroup {
	v := protocol.ControllerGroup{BrokerName: g.Name, ClusterName: g.Cluster, MasterEpoch: g.MasterEpoch, MasterID: g.MasterID,
		SyncStateSet: slices.Clone(g.SyncStateSet), SyncStateSetEpoch: g.SyncEpoch, Brokers: []protocol.ControllerMember{}}
	if v.SyncStateSet == nil {
		v.SyncStateSet = []int64{}
	}
	for _, id := range g.ids() {
		m := g.Members[id]
		cm := protocol.ControllerMember{ID: id, Addr: m.Addr, HAAddr: m.HAAddr}
		if live != nil {
			cm.Alive, cm.Epoch, cm.MaxOffset = live(id)
		}
		v.Brokers = append(v.Brokers, cm)
		if id == g.MasterID {
			v.MasterAddr, v.MasterHAAddr = m.Addr, m.HAAddr
		}
	}
	return v
}

// groupNames returns the group names, sorted.
func (s *state) groupNames() []string {
	names := make([]string, 0, len(s.Groups))
	for n := range s.Groups {
		names = append(names, n)
	}
	sort.Strings(names)
	return names
}

// Entry and snapshot encodings (see doc.go). Frozen.
const (
	entryFormat    byte = 1
	snapshotFormat byte = 1
)

// encodeCommand returns the Raft log entry bytes of c.
func encodeCommand(c *command) ([]byte, error) {
	b, err := json.Marshal(c)
	if err != nil {
		return nil, fmt.Errorf("controller: encode command: %w", err)
	}
	return append([]byte{entryFormat}, b...), nil
}

// decodeCommand parses a Raft log entry.
func decodeCommand(b []byte) (*command, error) {
	if len(b) == 0 || b[0] != entryFormat {
		return nil, fmt.Errorf("%w: log entry format byte %v", ErrCorrupt, firstByte(b))
	}
	var c command
	if err := json.Unmarshal(b[1:], &c); err != nil {
		return nil, fmt.Errorf("%w: log entry: %v", ErrCorrupt, err)
	}
	return &c, nil
}

// encodeState returns the snapshot bytes of s.
func encodeState(s *state) ([]byte, error) {
	b, err := json.Marshal(s)
	if err != nil {
		return nil, fmt.Errorf("controller: encode snapshot: %w", err)
	}
	return append([]byte{snapshotFormat}, b...), nil
}

// decodeState parses a snapshot, checking that what it holds is coherent.
func decodeState(b []byte) (*state, error) {
	if len(b) == 0 || b[0] != snapshotFormat {
		return nil, fmt.Errorf("%w: snapshot format byte %v", ErrCorrupt, firstByte(b))
	}
	s := newState()
	if err := json.Unmarshal(b[1:], s); err != nil {
		return nil, fmt.Errorf("%w: snapshot: %v", ErrCorrupt, err)
	}
	if s.Groups == nil {
		s.Groups = map[string]*groupState{}
	}
	for name, g := range s.Groups {
		if g == nil || g.Name != name {
			return nil, fmt.Errorf("%w: snapshot: group %q malformed", ErrCorrupt, name)
		}
		if g.Members == nil {
			g.Members = map[int64]*memberState{}
		}
		for id, m := range g.Members {
			if m == nil || id <= 0 {
				return nil, fmt.Errorf("%w: snapshot: group %q member %d malformed", ErrCorrupt, name, id)
			}
		}
	}
	return s, nil
}

func firstByte(b []byte) any {
	if len(b) == 0 {
		return "(empty)"
	}
	return b[0]
}
