package protocol

import (
	"testing"
)

// TestControllerBodiesPinned pins the JSON of the controller protocol's
// bodies (controller.go): key names and order are the wire format.
func TestControllerBodiesPinned(t *testing.T) {
	cases := []struct {
		v    any
		want string
	}{
		{ControllerRegister{BrokerAddr: "10.0.0.2:10911", BrokerID: 0, BrokerName: "broker-a", ClusterName: "C", Epoch: 3,
			HAAddr: "10.0.0.2:10912", MaxOffset: 4096, Token: "ab12"},
			`{"brokerAddr":"10.0.0.2:10911","brokerId":0,"brokerName":"broker-a","clusterName":"C","epoch":3,"haAddr":"10.0.0.2:10912","maxOffset":4096,"token":"ab12"}`},
		{ControllerRegisterResponse{BrokerID: 2, Group: ControllerGroup{BrokerName: "broker-a", Brokers: []ControllerMember{
			{Addr: "a:1", Alive: true, Epoch: 3, HAAddr: "a:2", ID: 2, MaxOffset: 9}}, ClusterName: "C", MasterAddr: "a:1",
			MasterEpoch: 3, MasterHAAddr: "a:2", MasterID: 2, SyncStateSet: []int64{2}, SyncStateSetEpoch: 4},
			HeartbeatIntervalMillis: 500, HeartbeatTimeoutMillis: 3000, LeaseMillis: 2000},
			`{"brokerId":2,"group":{"brokerName":"broker-a","brokers":[{"addr":"a:1","alive":true,"epoch":3,"haAddr":"a:2","id":2,"maxOffset":9}],` +
				`"clusterName":"C","masterAddr":"a:1","masterEpoch":3,"masterHaAddr":"a:2","masterId":2,"syncStateSet":[2],"syncStateSetEpoch":4},` +
				`"heartbeatIntervalMillis":500,"heartbeatTimeoutMillis":3000,"leaseMillis":2000}`},
		{ControllerHeartbeat{BrokerAddr: "a:1", BrokerID: 2, BrokerName: "broker-a", ClusterName: "C", Epoch: 3, Master: true, MaxOffset: 77},
			`{"brokerAddr":"a:1","brokerId":2,"brokerName":"broker-a","clusterName":"C","epoch":3,"master":true,"maxOffset":77}`},
		{ControllerHeartbeatResponse{Group: ControllerGroup{BrokerName: "g", Brokers: []ControllerMember{}, SyncStateSet: []int64{}}, Leader: "c:1"},
			`{"group":{"brokerName":"g","brokers":[],"clusterName":"","masterAddr":"","masterEpoch":0,"masterHaAddr":"","masterId":0,` +
				`"syncStateSet":[],"syncStateSetEpoch":0},"leader":"c:1"}`},
		{ControllerAlterSyncState{BrokerName: "g", MasterEpoch: 3, MasterID: 2, SyncStateSet: []int64{1, 2}, SyncStateSetEpoch: 5},
			`{"brokerName":"g","masterEpoch":3,"masterId":2,"syncStateSet":[1,2],"syncStateSetEpoch":5}`},
		{ControllerElect{BrokerID: 3, BrokerName: "g", Unclean: true}, `{"brokerId":3,"brokerName":"g","unclean":true}`},
		{ControllerMetadata{Groups: []ControllerGroup{}, LastContactMillis: -1, Leader: "", Peers: []ControllerPeer{{Addr: "c:1", Leader: false, RaftAddr: "c:2"}},
			Self: "c:1", State: "Candidate", Term: 7, Warning: "no leader"},
			`{"groups":[],"lastContactMillis":-1,"leader":"","peers":[{"addr":"c:1","leader":false,"raftAddr":"c:2"}],"self":"c:1",` +
				`"state":"Candidate","term":7,"warning":"no leader"}`},
	}
	for _, c := range cases {
		b, err := EncodeJSON(c.v)
		if err != nil {
			t.Fatal(err)
		}
		if string(b) != c.want {
			t.Errorf("%T\n got %s\nwant %s", c.v, b, c.want)
		}
	}
	var g ControllerGroup
	if err := DecodeControllerBody(nil, &g); err == nil {
		t.Fatal("empty body accepted")
	}
}

// FuzzControllerBodies: the controller bodies' decoder never panics, and
// what it accepts encodes again.
func FuzzControllerBodies(f *testing.F) {
	f.Add([]byte(`{"brokerAddr":"a:1","brokerId":2,"brokerName":"g","clusterName":"C","epoch":3,"master":true,"maxOffset":77}`))
	f.Add([]byte(`{"group":{"brokerName":"g","brokers":[{"id":1}],"syncStateSet":[1]},"leader":"c:1"}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		var hb ControllerHeartbeat
		if DecodeControllerBody(b, &hb) == nil {
			if _, err := EncodeJSON(hb); err != nil {
				t.Fatal(err)
			}
		}
		var r ControllerHeartbeatResponse
		if DecodeControllerBody(b, &r) == nil {
			_ = r.Group.InSync(1)
			if _, ok := r.Group.Member(1); ok && len(r.Group.Brokers) == 0 {
				t.Fatal("member found in no brokers")
			}
		}
	})
}
