package broker

import (
	"reflect"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

type testChan struct{ name string }

func consumerData(group string, topics ...string) *protocol.ConsumerData {
	cd := &protocol.ConsumerData{GroupName: group, ConsumeType: protocol.ConsumePassively, MessageModel: protocol.MessageModelClustering, ConsumeFromWhere: protocol.ConsumeFromLastOffset}
	for i, t := range topics {
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, &protocol.SubscriptionData{Topic: t, SubString: "*", ExpressionType: "TAG", SubVersion: int64(100 + i)})
	}
	return cd
}

func TestBrokerConsumerMembership(t *testing.T) {
	m := NewConsumerManager()
	now := time.Unix(1000, 0)
	ch1, ch2 := &testChan{"1"}, &testChan{"2"}
	members, subs := m.Register(ClientInfo{ClientID: "10.0.0.1@1", Channel: ch1, LastUpdate: now}, consumerData("cg", "T", "%RETRY%cg"))
	if !members || !subs {
		t.Fatalf("first heartbeat: members %v subs %v", members, subs)
	}
	// The same heartbeat again changes nothing.
	if members, subs := m.Register(ClientInfo{ClientID: "10.0.0.1@1", Channel: ch1, LastUpdate: now}, consumerData("cg", "T", "%RETRY%cg")); members || subs {
		t.Fatalf("repeat heartbeat: members %v subs %v", members, subs)
	}
	if members, _ := m.Register(ClientInfo{ClientID: "10.0.0.2@1", Channel: ch2, LastUpdate: now.Add(50 * time.Second)}, consumerData("cg", "T", "%RETRY%cg")); !members {
		t.Fatal("second member not reported")
	}
	if ids := m.ClientIDs("cg"); !reflect.DeepEqual(ids, []string{"10.0.0.1@1", "10.0.0.2@1"}) {
		t.Fatalf("ids = %v", ids)
	}
	if s, ok := m.Subscription("cg", "T"); !ok || s.SubString != "*" {
		t.Fatalf("subscription %+v %v", s, ok)
	}
	if g := m.GroupsSubscribing("T"); !reflect.DeepEqual(g, []string{"cg"}) {
		t.Fatalf("groups subscribing %v", g)
	}
	// A subscription change: T now filtered by tags, %RETRY% dropped.
	cd := consumerData("cg", "T")
	cd.SubscriptionDataSet[0].SubString = "TagA || TagB"
	cd.SubscriptionDataSet[0].TagsSet = []string{"TagA", "TagB"}
	if _, subs := m.Register(ClientInfo{ClientID: "10.0.0.2@1", Channel: ch2, LastUpdate: now.Add(50 * time.Second)}, cd); !subs {
		t.Fatal("subscription change not reported")
	}
	cd.SubscriptionDataSet[0].TagsSet[0] = "mutated" // the manager keeps its own copy
	if s, _ := m.Subscription("cg", "T"); s.TagsSet[0] != "TagA" {
		t.Fatalf("manager shares the caller's slice: %v", s.TagsSet)
	}
	// The first client still lists %RETRY%cg: the group subscribes it
	// while a member does.
	if _, ok := m.Subscription("cg", "%RETRY%cg"); !ok {
		t.Fatal("a subscription a member still lists was dropped")
	}
	// Expiry removes only the silent client, and its subscriptions.
	if changed := m.ScanExpired(now.Add(10 * time.Second)); !reflect.DeepEqual(changed, []string{"cg"}) {
		t.Fatalf("expired groups %v", changed)
	}
	if _, ok := m.Subscription("cg", "%RETRY%cg"); ok {
		t.Fatal("dropped subscription remains")
	}
	if s, _ := m.Subscription("cg", "T"); s.SubString != "TagA || TagB" {
		t.Fatalf("subscription after expiry %+v", s)
	}
	if ids := m.ClientIDs("cg"); !reflect.DeepEqual(ids, []string{"10.0.0.2@1"}) {
		t.Fatalf("after expiry ids = %v", ids)
	}
	// A closed connection removes its clients and, with the last one, the group.
	if changed := m.ChannelClosed(ch2); !reflect.DeepEqual(changed, []string{"cg"}) {
		t.Fatalf("closed groups %v", changed)
	}
	if _, ok := m.Group("cg"); ok || len(m.Groups()) != 0 {
		t.Fatal("empty group remains")
	}
	if m.Unregister("cg", "10.0.0.2@1") {
		t.Fatal("unregistered an absent client")
	}
}

// A rolling change of a group's subscription: a member with a newer
// subscription version joins a member with the old one. The group's
// subscription is the newer one from its first heartbeat on, and the old
// member's later heartbeats do not take it back (they used to, so the
// group's filter went back and forth with the heartbeats, and after the
// old member left its filter stayed until the new one's next heartbeat);
// when the member holding the newest leaves, the newest of the others'
// takes over at once.
func TestBrokerConsumerSubscriptionRollingChange(t *testing.T) {
	m := NewConsumerManager()
	now := time.Unix(3000, 0)
	sql := func(expr string, version int64) *protocol.ConsumerData {
		cd := consumerData("cg", "T")
		cd.SubscriptionDataSet[0].SubString, cd.SubscriptionDataSet[0].ExpressionType = expr, protocol.ExpressionTypeSQL92
		cd.SubscriptionDataSet[0].SubVersion = version
		return cd
	}
	old, fresh := ClientInfo{ClientID: "old", Channel: &testChan{}, LastUpdate: now}, ClientInfo{ClientID: "new", Channel: &testChan{}, LastUpdate: now}
	want := func(expr string) {
		t.Helper()
		if s, ok := m.Subscription("cg", "T"); !ok || s.SubString != expr {
			t.Fatalf("group subscription %q (%v), want %q", s.SubString, ok, expr)
		}
	}
	m.Register(old, sql("kind = 'a'", 100))
	want("kind = 'a'")
	if _, subs := m.Register(fresh, sql("kind = 'b'", 200)); !subs {
		t.Fatal("the newer subscription not reported")
	}
	want("kind = 'b'")
	if _, subs := m.Register(old, sql("kind = 'a'", 100)); subs {
		t.Fatal("the old member's heartbeat changed the subscription")
	}
	want("kind = 'b'")
	// The old member restarts with the old filter at a newer version: it
	// is the newest now (a group's members should agree).
	m.Register(old, sql("kind = 'a'", 300))
	want("kind = 'a'")
	if !m.Unregister("cg", "old") {
		t.Fatal("unregister")
	}
	want("kind = 'b'")
	m.Register(old, sql("kind = 'a'", 50))
	if changed := m.ChannelClosed(fresh.Channel); len(changed) != 1 {
		t.Fatalf("closed groups %v", changed)
	}
	want("kind = 'a'")
}

func TestBrokerConsumerGroupSnapshot(t *testing.T) {
	m := NewConsumerManager()
	now := time.Unix(2000, 0)
	m.Register(ClientInfo{ClientID: "b", Channel: &testChan{}, LastUpdate: now}, consumerData("g", "T"))
	m.Register(ClientInfo{ClientID: "a", Channel: &testChan{}, LastUpdate: now}, consumerData("g", "T"))
	info, ok := m.Group("g")
	if !ok || len(info.Clients) != 2 || info.Clients[0].ClientID != "a" || info.MessageModel != protocol.MessageModelClustering {
		t.Fatalf("snapshot %+v", info)
	}
	if len(m.Channels("g")) != 2 {
		t.Fatal("channels")
	}
	if !m.Unregister("g", "a") || len(m.ClientIDs("g")) != 1 {
		t.Fatal("unregister")
	}
}

func TestBrokerProducers(t *testing.T) {
	m := NewProducerManager()
	now := time.Unix(1000, 0)
	ch := &testChan{}
	m.Register("pg", ClientInfo{ClientID: "p1", Channel: ch, LastUpdate: now})
	m.Register("pg", ClientInfo{ClientID: "p2", Channel: &testChan{}, LastUpdate: now.Add(time.Minute)})
	if c := m.Clients("pg"); len(c) != 2 || c[0].ClientID != "p1" {
		t.Fatalf("clients %+v", c)
	}
	m.ChannelClosed(ch)
	if c := m.Clients("pg"); len(c) != 1 || c[0].ClientID != "p2" {
		t.Fatalf("after close %+v", c)
	}
	m.ScanExpired(now.Add(2 * time.Minute))
	if len(m.Groups()) != 0 {
		t.Fatal("expired producer remains")
	}
}

func TestBrokerQueueLocks(t *testing.T) {
	m := NewLockManager(time.Minute)
	now := time.Unix(1000, 0)
	q := func(id int32) protocol.MessageQueue {
		return protocol.MessageQueue{Topic: "T", BrokerName: "b", QueueID: id}
	}
	got := m.TryLock("g", "c1", []protocol.MessageQueue{q(0), q(1)}, now)
	if len(got) != 2 {
		t.Fatalf("c1 locked %v", got)
	}
	// c2 gets only the free queue.
	got = m.TryLock("g", "c2", []protocol.MessageQueue{q(1), q(2)}, now.Add(time.Second))
	if !reflect.DeepEqual(got, []protocol.MessageQueue{q(2)}) {
		t.Fatalf("c2 locked %v", got)
	}
	// Another group is independent.
	if got := m.TryLock("g2", "c2", []protocol.MessageQueue{q(1)}, now); len(got) != 1 {
		t.Fatal("groups are not independent")
	}
	// c1 renews; after expiry without renewal c2 may take q(0).
	m.TryLock("g", "c1", []protocol.MessageQueue{q(1)}, now.Add(50*time.Second))
	got = m.TryLock("g", "c2", []protocol.MessageQueue{q(0), q(1)}, now.Add(90*time.Second))
	if !reflect.DeepEqual(got, []protocol.MessageQueue{q(0)}) {
		t.Fatalf("after expiry c2 locked %v", got)
	}
	if !m.IsLocked("g", "c1", q(1), now.Add(90*time.Second)) || m.IsLocked("g", "c1", q(0), now.Add(90*time.Second)) {
		t.Fatal("IsLocked wrong")
	}
	// Only the holder can unlock.
	m.Unlock("g", "c1", []protocol.MessageQueue{q(0)})
	if !m.IsLocked("g", "c2", q(0), now.Add(91*time.Second)) {
		t.Fatal("non-holder unlocked")
	}
	m.Unlock("g", "c2", []protocol.MessageQueue{q(0), q(2)})
	if got := m.TryLock("g", "c3", []protocol.MessageQueue{q(0)}, now.Add(92*time.Second)); len(got) != 1 {
		t.Fatal("unlocked queue not free")
	}
}

// A group's members may heartbeat with different message models (a
// deployment switching from clustering to broadcasting): MessageModel
// answers for the member on the connection, and the group's last
// heartbeat's model for a connection no member heartbeats on.
func TestBrokerConsumerMessageModelByConnection(t *testing.T) {
	m := NewConsumerManager()
	now := time.Unix(4000, 0)
	chC, chB, other := &testChan{"c"}, &testChan{"b"}, &testChan{"other"}
	bc := consumerData("g", "T")
	bc.MessageModel = protocol.MessageModelBroadcasting
	m.Register(ClientInfo{ClientID: "b", Channel: chB, LastUpdate: now}, bc)
	m.Register(ClientInfo{ClientID: "c", Channel: chC, LastUpdate: now}, consumerData("g", "T"))
	for _, c := range []struct {
		ch   Channel
		want string
	}{{chB, protocol.MessageModelBroadcasting}, {chC, protocol.MessageModelClustering}, {other, protocol.MessageModelClustering}} {
		if got := m.MessageModel("g", c.ch); got != c.want {
			t.Errorf("model on %v: %q, want %q", c.ch, got, c.want)
		}
	}
	m.Register(ClientInfo{ClientID: "b", Channel: chB, LastUpdate: now}, bc)
	if got := m.MessageModel("g", chC); got != protocol.MessageModelClustering {
		t.Errorf("the clustering member's model after a broadcasting heartbeat: %q", got)
	}
	if got := m.MessageModel("none", chC); got != "" {
		t.Errorf("model of a group not online: %q", got)
	}
}
