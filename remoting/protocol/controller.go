package protocol

import (
	"fmt"
	"slices"
)

// Controller protocol: brokers in controller mode and admin tools talk to
// the controller (package controller) with these requests. The request and
// response codes reuse RocketMQ 5's numbers for the same roles; the bodies
// are SmartGo's own JSON objects (keys in the order written below, the
// encoding EncodeJSON produces), pinned by TestControllerBodiesPinned.
// Requests carry no header fields; every request and every SUCCESS response
// has a JSON body. A failed request is answered by one of the controller
// response codes below (or SYSTEM_ERROR) with a remark; a replica that is
// not the Raft leader answers ControllerNotLeader with the leader's
// remoting address in the extFields key "leaderAddr" ("" when it knows
// none).
//
//	code  name                         body                      answer body
//	 904  BROKER_HEARTBEAT             ControllerHeartbeat       ControllerHeartbeatResponse (any replica)
//	1001  CONTROLLER_ALTER_SYNC_STATE  ControllerAlterSyncState  ControllerGroup (leader)
//	1002  CONTROLLER_ELECT_MASTER      ControllerElect           ControllerGroup (leader)
//	1003  CONTROLLER_REGISTER_BROKER   ControllerRegister        ControllerRegisterResponse (leader)
//	1005  CONTROLLER_GET_METADATA      (none)                    ControllerMetadata (any replica)
//	1008  NOTIFY_BROKER_ROLE_CHANGED   ControllerGroup           (none; controller -> broker)
const (
	BrokerHeartbeat             RequestCode = 904
	ControllerAlterSyncStateSet RequestCode = 1001
	ControllerElectMaster       RequestCode = 1002
	ControllerRegisterBroker    RequestCode = 1003
	ControllerGetMetadata       RequestCode = 1005
	NotifyBrokerRoleChanged     RequestCode = 1008
)

// Controller response codes (RocketMQ 5 values). Frozen wire values.
const (
	// ControllerFencedMasterEpoch: the request names a master epoch older
	// than the controller's (a deposed master).
	ControllerFencedMasterEpoch ResponseCode = 2000
	// ControllerFencedSyncStateSetEpoch: the request's sync state set
	// epoch is not the controller's (a concurrent change won).
	ControllerFencedSyncStateSetEpoch ResponseCode = 2001
	// ControllerInvalidMaster: the requester is not the group's master.
	ControllerInvalidMaster ResponseCode = 2002
	// ControllerInvalidReplicas: a sync state set names an unknown broker
	// or leaves the master out.
	ControllerInvalidReplicas ResponseCode = 2003
	// ControllerMasterNotAvailable: no broker may become master (none
	// alive in the sync state set, unclean election off).
	ControllerMasterNotAvailable ResponseCode = 2004
	// ControllerInvalidRequest: a malformed or contradictory request.
	ControllerInvalidRequest ResponseCode = 2005
	// ControllerBrokerNotAlive: the named broker sends no heartbeats.
	ControllerBrokerNotAlive ResponseCode = 2006
	// ControllerNotLeader: this replica is not the Raft leader (see
	// extFields "leaderAddr").
	ControllerNotLeader ResponseCode = 2007
	// ControllerBrokerMetadataNotExist: no such broker group.
	ControllerBrokerMetadataNotExist ResponseCode = 2008
	// ControllerBrokerNeedToBeRegistered: heartbeat from a broker the
	// controller does not know; it should register.
	ControllerBrokerNeedToBeRegistered ResponseCode = 2010
	// ControllerMasterStillExist: an election found the master alive and
	// left it in place.
	ControllerMasterStillExist ResponseCode = 2011
	// ControllerElectMasterFailed: the election could not be applied.
	ControllerElectMasterFailed ResponseCode = 2012
	// ControllerBrokerIDInvalid: the broker id is taken by another
	// broker's data or out of range.
	ControllerBrokerIDInvalid ResponseCode = 2014
)

// ControllerLeaderField is the extFields key of a ControllerNotLeader
// response naming the leader's remoting address.
const ControllerLeaderField = "leaderAddr"

// ControllerMember is one broker of a group as the controller knows it.
// ID is the controller-wide broker id (>= 1, stable for the broker's data
// directory); Addr its remoting address; HAAddr its replication address.
// Alive, Epoch and MaxOffset are the answering replica's view of the
// broker's last heartbeat (Alive false when it never heard from it or it
// timed out); they are not part of the replicated state.
type ControllerMember struct {
	Addr      string `json:"addr"`
	Alive     bool   `json:"alive"`
	Epoch     int32  `json:"epoch"`
	HAAddr    string `json:"haAddr"`
	ID        int64  `json:"id"`
	MaxOffset int64  `json:"maxOffset"`
}

// ControllerGroup is one broker group (the brokers sharing a broker name):
// its members sorted by id, its master (MasterID 0 = none yet), the master
// epoch (bumped by every election), and the sync state set (the ids whose
// logs hold every acknowledged message, sorted, always including the
// master) with its own epoch (bumped by every change).
type ControllerGroup struct {
	BrokerName        string             `json:"brokerName"`
	Brokers           []ControllerMember `json:"brokers"`
	ClusterName       string             `json:"clusterName"`
	MasterAddr        string             `json:"masterAddr"`
	MasterEpoch       int32              `json:"masterEpoch"`
	MasterHAAddr      string             `json:"masterHaAddr"`
	MasterID          int64              `json:"masterId"`
	SyncStateSet      []int64            `json:"syncStateSet"`
	SyncStateSetEpoch int32              `json:"syncStateSetEpoch"`
}

// Member returns the member with id.
func (g *ControllerGroup) Member(id int64) (ControllerMember, bool) {
	for _, m := range g.Brokers {
		if m.ID == id {
			return m, true
		}
	}
	return ControllerMember{}, false
}

// InSync reports whether id is in the sync state set.
func (g *ControllerGroup) InSync(id int64) bool { return slices.Contains(g.SyncStateSet, id) }

// ControllerRegister (1003) registers a broker with its group, creating
// the group on first use. BrokerID 0 asks the controller to assign an id
// (or to return the one it assigned to Token before). Token identifies the
// broker's data directory: a known id arriving with another token lost its
// data and leaves the sync state set. Epoch and MaxOffset are the last
// epoch in the broker's epoch file and its commitlog end.
type ControllerRegister struct {
	BrokerAddr  string `json:"brokerAddr"`
	BrokerID    int64  `json:"brokerId"`
	BrokerName  string `json:"brokerName"`
	ClusterName string `json:"clusterName"`
	Epoch       int32  `json:"epoch"`
	HAAddr      string `json:"haAddr"`
	MaxOffset   int64  `json:"maxOffset"`
	Token       string `json:"token"`
}

// ControllerRegisterResponse answers ControllerRegister: the broker's id,
// its group, the heartbeat period and timeout the controller applies, and
// the master lease (a master that heard from no replica for this long
// stops acknowledging writes; shorter than the timeout, so it stops before
// a new master is elected), all in milliseconds.
type ControllerRegisterResponse struct {
	BrokerID                int64           `json:"brokerId"`
	Group                   ControllerGroup `json:"group"`
	HeartbeatIntervalMillis int64           `json:"heartbeatIntervalMillis"`
	HeartbeatTimeoutMillis  int64           `json:"heartbeatTimeoutMillis"`
	LeaseMillis             int64           `json:"leaseMillis"`
}

// ControllerHeartbeat (904) is a broker's periodic report, sent to every
// controller replica: who it is, the master epoch it follows or leads,
// its commitlog end, and whether it acts as master.
type ControllerHeartbeat struct {
	BrokerAddr  string `json:"brokerAddr"`
	BrokerID    int64  `json:"brokerId"`
	BrokerName  string `json:"brokerName"`
	ClusterName string `json:"clusterName"`
	Epoch       int32  `json:"epoch"`
	Master      bool   `json:"master"`
	MaxOffset   int64  `json:"maxOffset"`
}

// ControllerHeartbeatResponse answers a heartbeat with the replica's view:
// the group's state as committed on this replica, and the leader's
// remoting address ("" while there is none).
type ControllerHeartbeatResponse struct {
	Group  ControllerGroup `json:"group"`
	Leader string          `json:"leader"`
}

// ControllerAlterSyncState (1001) is a master's request to change its
// group's sync state set: it names itself and its epoch, the set epoch it
// saw, and the new set (which must contain the master).
type ControllerAlterSyncState struct {
	BrokerName        string  `json:"brokerName"`
	MasterEpoch       int32   `json:"masterEpoch"`
	MasterID          int64   `json:"masterId"`
	SyncStateSet      []int64 `json:"syncStateSet"`
	SyncStateSetEpoch int32   `json:"syncStateSetEpoch"`
}

// ControllerElect (1002) asks for an election in a group: BrokerID 0 lets
// the controller pick (the current master stays if alive); a BrokerID
// names the broker that must become master (an operator's hand-over; it
// must be alive and in the sync state set unless Unclean).
type ControllerElect struct {
	BrokerID   int64  `json:"brokerId"`
	BrokerName string `json:"brokerName"`
	Unclean    bool   `json:"unclean"`
}

// ControllerPeer is one controller replica.
type ControllerPeer struct {
	Addr     string `json:"addr"`
	Leader   bool   `json:"leader"`
	RaftAddr string `json:"raftAddr"`
}

// ControllerMetadata (answer to 1005) is what the answering replica knows:
// the replicas, the leader ("" none), this replica's address and Raft
// state, the milliseconds since it last heard from a leader (-1 never; 0
// on the leader), a warning when elections are suspended (no majority),
// and every group.
type ControllerMetadata struct {
	Groups            []ControllerGroup `json:"groups"`
	LastContactMillis int64             `json:"lastContactMillis"`
	Leader            string            `json:"leader"`
	Peers             []ControllerPeer  `json:"peers"`
	Self              string            `json:"self"`
	State             string            `json:"state"`
	Term              uint64            `json:"term"`
	Warning           string            `json:"warning"`
}

// DecodeControllerBody decodes a controller body into v, checking that
// there is one.
func DecodeControllerBody(b []byte, v any) error {
	if len(b) == 0 {
		return fmt.Errorf("%w: %T: empty body", ErrBadBody, v)
	}
	return DecodeJSON(b, v)
}
