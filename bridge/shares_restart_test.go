package bridge

import (
	"fmt"
	"slices"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeSharedConsumerRestartKeepsInFlight: the node's consumer of a
// shared subscription stops and starts again (its walk found the group
// without members just before a new member subscribed) while that member
// holds QoS 1 messages it has not acknowledged. The new consumer reads
// the queues again from the group's committed offset, the first message
// a member is not done with; the member must not get those messages a
// second time as new ones (a new packet id, no DUP) while its first copy
// is in flight. Once it leaves, they go to the group's other member.
//
// The share loop's stop is held (the "stop" step) until the new member
// received its messages, the window that load opens rarely
// (TestBridgeSharedMemberLeavesMidFlight failed that way once).
func TestBridgeSharedConsumerRestartKeepsInFlight(t *testing.T) {
	c := startCluster(t)
	const share = "$share/restart/jobs/#"
	var armed atomic.Bool
	stopping := make(chan struct{})
	release := make(chan struct{})
	a := startBridgeWith(t, c, func(_ *mqtt.Options, o *Options) {
		o.ShareRefresh = 50 * time.Millisecond
	}, func(b *Bridge) {
		b.Backend().testShareHook = func(step, s string) {
			if step == "stop" && s == share && armed.CompareAndSwap(true, false) {
				close(stopping)
				select { // bounded, so a test that failed does not hang
				case <-release:
				case <-time.After(20 * time.Second):
				}
			}
		}
	})
	prod := newProducer(t, c)
	queues := 4 * len(a.Backend().Topics())
	consumer := func() *client.PullConsumer {
		a.Backend().mu.Lock()
		defer a.Backend().mu.Unlock()
		return a.Backend().shares[share]
	}

	first := connected(t, addrOf(a), packets.Version5, "first")
	first.subscribe(1, sub(share, 1))
	waitShareSettled(t, share, queues, a)
	old := consumer()
	armed.Store(true)
	first.send(&packets.Unsubscribe{PacketID: 2, Filters: []string{share}})
	if _, ok := first.recv().(*packets.Unsuback); !ok {
		t.Fatal("want UNSUBACK")
	}
	select {
	case <-stopping:
	case <-time.After(20 * time.Second):
		t.Fatal("the share loop never stopped the consumer of the group without members")
	}

	// The consumer still runs: the member's SUBSCRIBE finds it, and it
	// hands the member what is published now.
	m := connected(t, addrOf(a), packets.Version5, "member")
	m.subscribe(1, sub(share, 1))
	const n = 8
	var want []string
	for i := range n {
		body := fmt.Sprint("held-", i)
		want = append(want, body)
		sendCmd(t, prod, fmt.Sprintf("jobs/%d", i), body)
	}
	ids := map[uint16]string{}
	for range n {
		pub := m.recvPublish() // not acknowledged
		ids[pub.PacketID] = string(pub.Payload)
	}
	close(release)
	testutil.WaitFor(t, 20*time.Second, "the group's consumer started again", func() bool {
		sc := consumer()
		return sc != nil && sc != old
	})
	waitShareSettled(t, share, queues, a)

	// Messages published after the restart reach the member; a message
	// it holds must not come again before them (each queue is read in
	// order).
	var after []string
	for i := range 2 * queues {
		body := fmt.Sprint("after-", i)
		after = append(after, body)
		sendCmd(t, prod, fmt.Sprintf("jobs/%d", i), body)
	}
	var got []string
	deadline := time.Now().Add(20 * time.Second)
	for len(got) < len(after) {
		p, err := m.next(time.Until(deadline))
		if err != nil {
			t.Fatalf("the member got %d of %d messages published after the restart: %v", len(got), len(after), err)
		}
		pub, ok := p.(*packets.Publish)
		if !ok {
			t.Fatalf("want PUBLISH, got %T %+v", p, p)
		}
		body := string(pub.Payload)
		if !strings.HasPrefix(body, "after-") {
			t.Fatalf("the member got %q again (packet id %d, dup %v) while its first copy (packet id %d) was unacknowledged",
				body, pub.PacketID, pub.Dup, packetIDOf(ids, body))
		}
		m.send(&packets.Puback{PacketID: pub.PacketID})
		got = append(got, body)
	}
	m.nothing(300 * time.Millisecond)

	// The member leaves without acknowledging: its messages go to the
	// group's other member, across the restart.
	stay := connected(t, addrOf(a), packets.Version5, "stay")
	stay.subscribe(1, sub(share, 1))
	m.nc.Close()
	back := ackedPayloads(t, stay, n, 20*time.Second)
	slices.Sort(back)
	if !slices.Equal(slices.Compact(back), want) {
		t.Fatalf("the other member got %v, want %v", back, want)
	}
}

func packetIDOf(ids map[uint16]string, body string) uint16 {
	for id, b := range ids {
		if b == body {
			return id
		}
	}
	return 0
}
