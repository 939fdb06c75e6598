package broker

import (
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// TestStartShareGroup: START_SHARE_GROUP decides a group's start in one
// step per topic. A restart moves every queue to its end, unless another
// starter's start (until a member joins) or a member relies on the
// group's offsets: then they stay. A start that is not a restart only
// fills queues without an offset. The request and answer bytes are
// pinned (the format is in protocol/sharestart.go).
func TestStartShareGroup(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	tc := newTestClient(t, b.Addr())
	const topic, group = "ShareT", "MQTT_SHARE_g"
	put := func(n int) {
		for i := range n {
			tc.mustSend(topic, 0, fmt.Sprint("m", i), "")
		}
	}
	put(3)
	commitOffset(t, tc, group, topic, 0, 1) // the group's old offset
	start := func(starter string, restart bool) string {
		t.Helper()
		body := fmt.Sprintf(`{"group":%q,"topic":%q,"starter":%q,"restart":%t}`, group, topic, starter, restart)
		resp := tc.invoke(protocol.StartShareGroup, nil, []byte(body))
		if resp.Code != protocol.Success {
			t.Fatalf("start %s: %d %s", starter, resp.Code, resp.Remark)
		}
		return string(resp.Body)
	}
	want := func(got, want string) {
		t.Helper()
		if got != want {
			t.Fatalf("answer %s, want %s", got, want)
		}
	}

	want(start("node-a/1", true), `{"offsets":{"0":3,"1":0,"2":0,"3":0}}`)
	put(2)
	// node-a's consumer has not joined: its start stands.
	want(start("node-b/1", true), `{"offsets":{"0":3,"1":0,"2":0,"3":0}}`)
	want(start("node-b/1", false), `{"offsets":{"0":3,"1":0,"2":0,"3":0}}`)
	for q, want := range []int64{3, 0, 0, 0} { // an offset 0 is stored too
		if off, ok := b.offsets.Query(group, topic, int32(q)); !ok || off != want {
			t.Fatalf("queue %d: stored offset %d (%v), want %d", q, off, ok, want)
		}
	}

	// A member joined (the pending starts go) and left: nobody relies on
	// the group's offsets, a restart moves them.
	tc.heartbeat("member-1", group, protocol.MessageModelClustering, map[string]string{topic: "*"})
	want(start("node-c/1", true), `{"offsets":{"0":3,"1":0,"2":0,"3":0}}`) // the member is there
	if resp := tc.invoke(protocol.UnregisterClient, &protocol.UnregisterClientRequestHeader{ClientID: "member-1", ConsumerGroup: group}, nil); resp.Code != protocol.Success {
		t.Fatalf("unregister: %d %s", resp.Code, resp.Remark)
	}
	// node-c's start stands until a member joins.
	tc.heartbeat("member-2", group, protocol.MessageModelClustering, map[string]string{topic: "*"})
	if resp := tc.invoke(protocol.UnregisterClient, &protocol.UnregisterClientRequestHeader{ClientID: "member-2", ConsumerGroup: group}, nil); resp.Code != protocol.Success {
		t.Fatalf("unregister: %d %s", resp.Code, resp.Remark)
	}
	want(start("node-d/1", true), `{"offsets":{"0":5,"1":0,"2":0,"3":0}}`)
	// Its own start relies on nothing against itself (one request per
	// topic and broker share a starter).
	put(1)
	want(start("node-d/1", true), `{"offsets":{"0":6,"1":0,"2":0,"3":0}}`)

	// Bad requests get clear errors.
	for _, bad := range []struct {
		body string
		code int32
	}{
		{`{`, protocol.SystemError},
		{`{"group":"g","topic":"ShareT"}`, protocol.SystemError},
		{`{"group":"","topic":"ShareT","starter":"s"}`, protocol.SystemError},
		{`{"group":"g","topic":"NoSuchTopic","starter":"s"}`, protocol.TopicNotExist},
	} {
		if resp := tc.invoke(protocol.StartShareGroup, nil, []byte(bad.body)); resp.Code != bad.code {
			t.Errorf("%s: code %d (%s), want %d", bad.body, resp.Code, resp.Remark, bad.code)
		}
	}
}

// TestShareStartsForgetExpired: starts of groups that no member joins and
// nobody starts again are dropped once their grace passed, when later
// starts come: peers cannot grow the pending starts without bound.
func TestShareStartsForgetExpired(t *testing.T) {
	var s shareStarts
	t0 := time.Now()
	for i := range 1000 {
		s.note(fmt.Sprint("g", i), "n/1", t0)
	}
	later := t0.Add(shareStartGrace + time.Second)
	for i := range 1000 {
		s.note(fmt.Sprint("h", i), "n/1", later)
	}
	if n := len(s.pending); n > 1000+shareSweepMin {
		t.Fatalf("%d groups pending, want at most %d (the expired ones dropped)", n, 1000+shareSweepMin)
	}
	if !s.othersPending("h999", "n/2", later) || s.othersPending("g0", "n/2", later) {
		t.Fatal("a start within its grace is forgotten, or an expired one kept")
	}
}
