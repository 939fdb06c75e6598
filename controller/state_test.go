package controller

import (
	"errors"
	"math"
	"slices"
	"testing"

	"github.com/smartgo/smartgo/remoting/protocol"
)

func reg(s *state, t *testing.T, id int64, addr, token string, epoch int32) result {
	t.Helper()
	return s.apply(&command{Op: opRegister, Group: "g", Cluster: "c", ID: id, Addr: addr, HAAddr: addr + "h", Token: token, Epoch: epoch})
}

func mustCode(t *testing.T, r result, code int32) {
	t.Helper()
	if r.Code != code {
		t.Fatalf("code %d (%s), want %d", r.Code, r.Remark, code)
	}
}

func TestControllerStateRegister(t *testing.T) {
	s := newState()
	r := reg(s, t, 0, "a:1", "ta", 0)
	mustCode(t, r, protocol.Success)
	if r.ID != 1 {
		t.Fatalf("first id %d", r.ID)
	}
	if r = reg(s, t, 0, "b:1", "tb", 0); r.ID != 2 {
		t.Fatalf("second id %d", r.ID)
	}
	// The same data directory gets its id back, with its new address.
	if r = reg(s, t, 0, "a:2", "ta", 0); r.ID != 1 || s.Groups["g"].Members[1].Addr != "a:2" {
		t.Fatalf("re-registration %+v %+v", r, s.Groups["g"].Members[1])
	}
	// A configured id above the counter moves it.
	if r = reg(s, t, 7, "x:1", "tx", 0); r.ID != 7 || s.Groups["g"].NextID != 8 {
		t.Fatalf("configured id %+v next %d", r, s.Groups["g"].NextID)
	}
	mustCode(t, s.apply(&command{Op: opRegister, Group: "g", Cluster: "other", Addr: "y:1", Token: "ty"}), protocol.ControllerInvalidRequest)
	for _, bad := range []*command{
		{Op: opRegister, Group: "", Cluster: "c", Addr: "a", Token: "t"},
		{Op: opRegister, Group: "g", Cluster: "c", Addr: "", Token: "t"},
		{Op: opRegister, Group: "g", Cluster: "c", Addr: "a", Token: ""},
		{Op: opRegister, Group: "g", Cluster: "c", Addr: "a", Token: "t", ID: -1},
		{Op: opRegister, Group: "g", Cluster: "c", Addr: "a", Token: "t", Epoch: -3},
		{Op: "nonsense", Group: "g"},
	} {
		if r := s.apply(bad); r.Code == protocol.Success {
			t.Fatalf("%+v accepted", bad)
		}
	}
	if len(s.Groups["g"].Members) != 3 {
		t.Fatalf("refused commands changed the members: %v", s.Groups["g"].ids())
	}
}

func TestControllerStateElectAndAlter(t *testing.T) {
	s := newState()
	for i, tok := range []string{"t1", "t2", "t3"} {
		mustCode(t, reg(s, t, 0, string(rune('a'+i))+":1", tok, 0), protocol.Success)
	}
	g := s.Groups["g"]
	r := s.apply(&command{Op: opElect, Group: "g", ID: 1, Epoch: 0})
	mustCode(t, r, protocol.Success)
	if g.MasterID != 1 || g.MasterEpoch != 1 || !slices.Equal(g.SyncStateSet, []int64{1}) || g.SyncEpoch != 1 {
		t.Fatalf("after election %+v", g)
	}
	// A decision made on an old epoch changes nothing.
	mustCode(t, s.apply(&command{Op: opElect, Group: "g", ID: 2, Epoch: 0}), protocol.ControllerElectMasterFailed)
	mustCode(t, s.apply(&command{Op: opElect, Group: "g", ID: 9, Epoch: 1}), protocol.ControllerInvalidReplicas)
	mustCode(t, s.apply(&command{Op: opElect, Group: "nope", ID: 1}), protocol.ControllerBrokerMetadataNotExist)

	alter := func(master int64, epoch, sepoch int32, set ...int64) result {
		return s.apply(&command{Op: opAlterSSS, Group: "g", ID: master, Epoch: epoch, SyncEpoch: sepoch, Set: set})
	}
	mustCode(t, alter(1, 1, 1, 3, 1, 2, 2), protocol.Success)
	if !slices.Equal(g.SyncStateSet, []int64{1, 2, 3}) || g.SyncEpoch != 2 {
		t.Fatalf("expanded %v epoch %d", g.SyncStateSet, g.SyncEpoch)
	}
	mustCode(t, alter(1, 0, 2, 1), protocol.ControllerFencedMasterEpoch)
	mustCode(t, alter(2, 1, 2, 1, 2), protocol.ControllerInvalidMaster)
	mustCode(t, alter(1, 1, 1, 1), protocol.ControllerFencedSyncStateSetEpoch)
	mustCode(t, alter(1, 1, 2, 2, 3), protocol.ControllerInvalidReplicas)
	mustCode(t, alter(1, 1, 2, 1, 5), protocol.ControllerInvalidReplicas)
	if !slices.Equal(g.SyncStateSet, []int64{1, 2, 3}) || g.SyncEpoch != 2 {
		t.Fatalf("refused changes altered the set: %v epoch %d", g.SyncStateSet, g.SyncEpoch)
	}
	// The same set again is accepted and changes nothing.
	mustCode(t, alter(1, 1, 2, 1, 2, 3), protocol.Success)
	if g.SyncEpoch != 2 {
		t.Fatalf("no-op change bumped the epoch to %d", g.SyncEpoch)
	}
	// A repeat of the applied expansion (its answer was lost) is answered
	// as done; a stale request for another set is still fenced.
	mustCode(t, alter(1, 1, 1, 3, 1, 2), protocol.Success)
	mustCode(t, alter(1, 1, 1, 1, 2), protocol.ControllerFencedSyncStateSetEpoch)
	mustCode(t, alter(1, 1, 3, 1, 2, 3), protocol.ControllerFencedSyncStateSetEpoch)
	if !slices.Equal(g.SyncStateSet, []int64{1, 2, 3}) || g.SyncEpoch != 2 {
		t.Fatalf("repeated changes altered the set: %v epoch %d", g.SyncStateSet, g.SyncEpoch)
	}
	// Failover to 3: epoch 2, the set is just the new master.
	mustCode(t, s.apply(&command{Op: opElect, Group: "g", ID: 3, Epoch: 1}), protocol.Success)
	if g.MasterID != 3 || g.MasterEpoch != 2 || !slices.Equal(g.SyncStateSet, []int64{3}) {
		t.Fatalf("after failover %+v", g)
	}
	// The deposed master's change is fenced.
	mustCode(t, alter(1, 1, g.SyncEpoch, 1, 2), protocol.ControllerFencedMasterEpoch)
}

func TestControllerStateTokenChange(t *testing.T) {
	s := newState()
	mustCode(t, reg(s, t, 0, "a:1", "t1", 0), protocol.Success)
	mustCode(t, reg(s, t, 0, "b:1", "t2", 0), protocol.Success)
	g := s.Groups["g"]
	mustCode(t, s.apply(&command{Op: opElect, Group: "g", ID: 1}), protocol.Success)
	mustCode(t, s.apply(&command{Op: opAlterSSS, Group: "g", ID: 1, Epoch: 1, SyncEpoch: 1, Set: []int64{1, 2}}), protocol.Success)
	// Broker 2 comes back with an empty data directory under its id.
	mustCode(t, reg(s, t, 2, "b:1", "t2-new", 0), protocol.Success)
	if !slices.Equal(g.SyncStateSet, []int64{1}) {
		t.Fatalf("a broker that lost its data stays in sync: %v", g.SyncStateSet)
	}
	// The master loses its data: no master, the rest of the set remains.
	mustCode(t, s.apply(&command{Op: opAlterSSS, Group: "g", ID: 1, Epoch: 1, SyncEpoch: g.SyncEpoch, Set: []int64{1, 2}}), protocol.Success)
	mustCode(t, reg(s, t, 1, "a:1", "t1-new", 0), protocol.Success)
	if g.MasterID != 0 || !slices.Equal(g.SyncStateSet, []int64{2}) {
		t.Fatalf("master lost its data: master %d set %v", g.MasterID, g.SyncStateSet)
	}
}

func TestControllerStateSeenEpoch(t *testing.T) {
	// A controller that lost its state learns the brokers' epochs and
	// elects above them.
	s := newState()
	mustCode(t, reg(s, t, 0, "a:1", "t1", 41), protocol.Success)
	mustCode(t, reg(s, t, 0, "b:1", "t2", 40), protocol.Success)
	mustCode(t, s.apply(&command{Op: opElect, Group: "g", ID: 1}), protocol.Success)
	if e := s.Groups["g"].MasterEpoch; e != 42 {
		t.Fatalf("epoch %d, want 42", e)
	}
}

// TestControllerEntryBytesPinned pins the log entry and snapshot
// encodings (frozen formats, see doc.go).
func TestControllerEntryBytesPinned(t *testing.T) {
	b, err := encodeCommand(&command{Op: opRegister, Group: "broker-a", Cluster: "C", ID: 2, Addr: "127.0.0.1:10911",
		HAAddr: "127.0.0.1:10912", Token: "tok", Epoch: 3})
	if err != nil {
		t.Fatal(err)
	}
	want := "\x01" + `{"op":"register","group":"broker-a","cluster":"C","id":2,"addr":"127.0.0.1:10911","haAddr":"127.0.0.1:10912","token":"tok","epoch":3}`
	if string(b) != want {
		t.Fatalf("register entry\n%q\nwant\n%q", b, want)
	}
	b, _ = encodeCommand(&command{Op: opAlterSSS, Group: "broker-a", ID: 1, Epoch: 2, SyncEpoch: 5, Set: []int64{1, 3}})
	want = "\x01" + `{"op":"alterSyncStateSet","group":"broker-a","id":1,"epoch":2,"syncEpoch":5,"set":[1,3]}`
	if string(b) != want {
		t.Fatalf("alter entry\n%q\nwant\n%q", b, want)
	}
	b, _ = encodeCommand(&command{Op: opElect, Group: "broker-a", ID: 2, Epoch: 1, Seen: 3})
	want = "\x01" + `{"op":"elect","group":"broker-a","id":2,"epoch":1,"seen":3}`
	if string(b) != want {
		t.Fatalf("elect entry\n%q\nwant\n%q", b, want)
	}
	s := newState()
	mustCode(t, reg(s, t, 0, "a:1", "t1", 0), protocol.Success)
	mustCode(t, s.apply(&command{Op: opElect, Group: "g", ID: 1}), protocol.Success)
	b, err = encodeState(s)
	if err != nil {
		t.Fatal(err)
	}
	want = "\x01" + `{"groups":{"g":{"cluster":"c","name":"g","members":{"1":{"addr":"a:1","haAddr":"a:1h","token":"t1"}},` +
		`"nextId":2,"masterId":1,"masterEpoch":1,"seenEpoch":0,"syncStateSet":[1],"syncStateSetEpoch":1}}}`
	if string(b) != want {
		t.Fatalf("snapshot\n%q\nwant\n%q", b, want)
	}
	back, err := decodeState(b)
	if err != nil {
		t.Fatal(err)
	}
	if b2, _ := encodeState(back); string(b2) != string(b) {
		t.Fatalf("snapshot round trip\n%s\n%s", b2, b)
	}
	for _, bad := range []string{"", "\x02{}", "\x01{", "\x01{\"groups\":{\"g\":null}}", "\x01{\"groups\":{\"g\":{\"name\":\"h\"}}}",
		"\x01{\"groups\":{\"g\":{\"name\":\"g\",\"members\":{\"0\":{}}}}}"} {
		if _, err := decodeState([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeState(%q) = %v, want ErrCorrupt", bad, err)
		}
	}
	for _, bad := range []string{"", "\x00{}", "\x01[", "\x01"} {
		if _, err := decodeCommand([]byte(bad)); !errors.Is(err, ErrCorrupt) {
			t.Fatalf("decodeCommand(%q) = %v, want ErrCorrupt", bad, err)
		}
	}
}

// FuzzControllerCommand: any entry bytes decode to an error or a command
// the state machine applies without panicking; its snapshot round-trips.
func FuzzControllerCommand(f *testing.F) {
	f.Add([]byte("\x01" + `{"op":"register","group":"g","cluster":"c","addr":"a","token":"t"}`))
	f.Add([]byte("\x01" + `{"op":"elect","group":"g","id":1}`))
	f.Add([]byte("\x01" + `{"op":"alterSyncStateSet","group":"g","id":1,"epoch":1,"syncEpoch":1,"set":[1,2]}`))
	f.Fuzz(func(t *testing.T, b []byte) {
		s := newState()
		s.apply(&command{Op: opRegister, Group: "g", Cluster: "c", Addr: "a", Token: "t"})
		s.apply(&command{Op: opElect, Group: "g", ID: 1})
		c, err := decodeCommand(b)
		if err != nil {
			return
		}
		s.apply(c)
		snap, err := encodeState(s)
		if err != nil {
			t.Fatal(err)
		}
		if _, err := decodeState(snap); err != nil {
			t.Fatalf("own snapshot refused: %v", err)
		}
	})
}

// An election that names the highest epoch a live broker reported
// (Seen: the replica lost an election) takes the group above it, and a
// bad one is refused.
func TestControllerElectAboveSeenEpoch(t *testing.T) {
	s := newState()
	mustCode(t, reg(s, t, 0, "a:1", "t1", 0), protocol.Success)
	mustCode(t, reg(s, t, 0, "a:2", "t2", 0), protocol.Success)
	mustCode(t, s.apply(&command{Op: opElect, Group: "g", ID: 1}), protocol.Success)
	mustCode(t, s.apply(&command{Op: opElect, Group: "g", ID: 2, Epoch: 1, Seen: -1}), protocol.ControllerInvalidRequest)
	mustCode(t, s.apply(&command{Op: opElect, Group: "g", ID: 2, Epoch: 1, Seen: math.MaxInt32 - 1}), protocol.ControllerElectMasterFailed)
	r := s.apply(&command{Op: opElect, Group: "g", ID: 2, Epoch: 1, Seen: 5})
	mustCode(t, r, protocol.Success)
	if g := r.Group; g.MasterID != 2 || g.MasterEpoch != 6 || g.SeenEpoch != 5 {
		t.Fatalf("after an election above seen epoch 5: master %d epoch %d seen %d", g.MasterID, g.MasterEpoch, g.SeenEpoch)
	}
	// A later election without Seen still goes up from there.
	r = s.apply(&command{Op: opElect, Group: "g", ID: 1, Epoch: 6})
	mustCode(t, r, protocol.Success)
	if r.Group.MasterEpoch != 7 {
		t.Fatalf("next election at epoch %d, want 7", r.Group.MasterEpoch)
	}
}
