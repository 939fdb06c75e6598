package bridge

import (
	"fmt"
	"slices"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeSharedMemberLeavesMidFlight: the QoS 1 messages of a shared
// subscription that a member on node A received but did not acknowledge
// go to another member of the group when the member's session ends
// without them (MQTT 5 4.8.2): a session with expiry 0 whose client
// disconnects, a persistent session that expires offline, one a clean
// start of its client replaces; and when its client's connect on node B
// takes it over and it does not go on with them: a clean start there (the
// session ends), a persistent connect of a client whose session on A had
// expiry 0 (A hands on no state). Each message reaches the group's
// remaining member, on A; before, they were lost to the group (A dropped
// them and committed past them).
func TestBridgeSharedMemberLeavesMidFlight(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	prod := newProducer(t, c)
	const share = "$share/leave/jobs/#"
	queues := 4 * len(a.Backend().Topics())
	stay := connected(t, addrOf(a), packets.Version5, "stay")
	stay.subscribe(1, sub(share, 1))
	expiring := func(id string) *rawClient {
		r := dialRaw(t, addrOf(a), packets.Version5)
		cp := &packets.Connect{ClientID: id, CleanStart: true, KeepAlive: 60}
		cp.Properties.Present.Add(packets.PropSessionExpiry)
		cp.Properties.SessionExpiry = 1
		r.connect(cp)
		return r
	}
	for round, tc := range []struct {
		on  func(id string) *rawClient    // the leaving member, on A
		end func(id string, m *rawClient) // how its session ends
	}{
		{
			on:  func(id string) *rawClient { return connected(t, addrOf(a), packets.Version5, id) },
			end: func(_ string, m *rawClient) { m.nc.Close() },
		},
		{on: expiring, end: func(_ string, m *rawClient) { m.nc.Close() }},
		{
			on: func(id string) *rawClient { r, _ := persistent(t, addrOf(a), id, true); return r },
			end: func(id string, m *rawClient) {
				m.nc.Close()
				connected(t, addrOf(a), packets.Version5, id) // a clean start replaces the offline session
			},
		},
		{
			on: func(id string) *rawClient { r, _ := persistent(t, addrOf(a), id, true); return r },
			end: func(id string, m *rawClient) {
				connected(t, addrOf(b), packets.Version5, id)
				expectTakenOver(t, m)
			},
		},
		{
			on: func(id string) *rawClient { return connected(t, addrOf(a), packets.Version5, id) },
			end: func(id string, m *rawClient) {
				persistent(t, addrOf(b), id, false)
				expectTakenOver(t, m)
			},
		},
	} {
		id := fmt.Sprint("leaver", round)
		m := tc.on(id)
		want := soleHolder(t, a, prod, stay, m, share, queues, fmt.Sprint("r", round))
		tc.end(id, m)
		got := ackedPayloads(t, stay, len(want), 20*time.Second)
		slices.Sort(got)
		if !slices.Equal(got, want) {
			t.Fatalf("round %d: the remaining member got %v, want %v", round, got, want)
		}
	}
}

// soleHolder makes m, connected to a, the only member of share (stay,
// a member on a, unsubscribes meanwhile) as five QoS 1 messages are sent,
// has m receive them without acknowledging, and subscribes stay again.
// It returns their payloads, sorted.
func soleHolder(t *testing.T, a *Bridge, prod *client.Producer, stay, m *rawClient, share string, queues int, prefix string) []string {
	t.Helper()
	stay.send(&packets.Unsubscribe{PacketID: 2, Filters: []string{share}})
	if _, ok := stay.recv().(*packets.Unsuback); !ok {
		t.Fatal("want UNSUBACK")
	}
	m.subscribe(1, sub(share, 1))
	waitShareSettled(t, share, queues, a)
	const n = 5
	var want []string
	for i := range n {
		body := fmt.Sprintf("%s-%d", prefix, i)
		want = append(want, body)
		sendCmd(t, prod, fmt.Sprintf("jobs/%d", i), body)
	}
	for range n {
		m.recvPublish() // not acknowledged
	}
	stay.subscribe(3, sub(share, 1))
	return want
}

// TestBridgeSharedMemberLeavesOtherNodeTakes: a shared member on node A
// that received QoS 1 messages and leaves without acknowledging them,
// while the group's other member is on node B: A has no member to give
// them to, so it leaves them uncommitted as its consumer leaves the
// group, and B's member gets every one of them from the queues it takes
// over. Before, A committed past them and they were lost.
func TestBridgeSharedMemberLeavesOtherNodeTakes(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	prod := newProducer(t, c)
	const share = "$share/cross/jobs/#"
	queues := 4 * len(a.Backend().Topics())
	m := connected(t, addrOf(a), packets.Version5, "leaver")
	m.subscribe(1, sub(share, 1))
	waitShareSettled(t, share, queues, a)
	const n = 16
	want := map[string]bool{}
	for i := range n {
		body := fmt.Sprint("x", i)
		want[body] = true
		sendCmd(t, prod, fmt.Sprintf("jobs/%d", i), body)
	}
	for range n {
		m.recvPublish() // not acknowledged
	}
	stay := connected(t, addrOf(b), packets.Version5, "stay")
	stay.subscribe(1, sub(share, 1))
	waitShareSettled(t, share, queues, a, b)
	m.nc.Close()
	got := map[string]bool{}
	for _, body := range ackedPayloads(t, stay, n, 40*time.Second) {
		got[body] = true
	}
	for body := range want {
		if !got[body] {
			t.Errorf("B's member never got %s (got %d of %d)", body, len(got), n)
		}
	}
}

// ackedPayloads acknowledges the QoS 1 PUBLISHes r receives until n
// distinct payloads have come or d has passed, and returns every payload
// in arrival order (a redelivered one twice); any other packet fails the
// test.
func ackedPayloads(t *testing.T, r *rawClient, n int, d time.Duration) []string {
	t.Helper()
	var got []string
	distinct := map[string]bool{}
	deadline := time.Now().Add(d)
	for len(distinct) < n && time.Now().Before(deadline) {
		p, err := r.next(time.Until(deadline))
		if err != nil {
			break
		}
		pub, ok := p.(*packets.Publish)
		if !ok {
			t.Fatalf("want PUBLISH, got %T %+v", p, p)
		}
		r.send(&packets.Puback{PacketID: pub.PacketID})
		got = append(got, string(pub.Payload))
		distinct[string(pub.Payload)] = true
	}
	return got
}
