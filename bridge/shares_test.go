package bridge

import (
	"context"
	"fmt"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// collect reads PUBLISHes (acknowledging QoS 1) until none came for quiet,
// and returns their payloads.
func (r *rawClient) collect(quiet time.Duration) []string {
	var out []string
	for {
		p, err := r.next(quiet)
		if err != nil {
			return out
		}
		pub, ok := p.(*packets.Publish)
		if !ok {
			r.t.Errorf("want PUBLISH, got %T %+v", p, p)
			return out
		}
		if pub.QoS == 1 {
			r.send(&packets.Puback{PacketID: pub.PacketID})
		}
		out = append(out, string(pub.Payload))
	}
}

// collectAll runs collect on every client at once.
func collectAll(quiet time.Duration, rs ...*rawClient) [][]string {
	out := make([][]string, len(rs))
	var wg sync.WaitGroup
	for i, r := range rs {
		wg.Go(func() { out[i] = r.collect(quiet) })
	}
	wg.Wait()
	return out
}

// waitShareSettled waits until the nodes hold disjoint sets of queues of
// share that together cover every queue of the device-facing topics.
func waitShareSettled(t *testing.T, share string, want int, nodes ...*Bridge) {
	t.Helper()
	testutil.WaitFor(t, 20*time.Second, "share queues split among "+fmt.Sprint(len(nodes))+" nodes", func() bool {
		seen := map[client.MessageQueue]bool{}
		for _, n := range nodes {
			qs := n.Backend().ShareQueues(share)
			if len(qs) == 0 {
				return false
			}
			for _, q := range qs {
				if seen[q] {
					return false
				}
				seen[q] = true
			}
		}
		return len(seen) == want
	})
}

// TestBridgeSharedAcrossNodes: $share/g/jobs/# with members on nodes A and
// B gets each message exactly once in the cluster, split between the
// nodes, while a plain subscription gets every message; when B's member
// leaves, A's member gets everything.
func TestBridgeSharedAcrossNodes(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	prod := newProducer(t, c)
	const share = "$share/g/jobs/#"
	queues := 4 * len(a.Backend().Topics())

	m1 := connected(t, addrOf(a), packets.Version5, "m1")
	m1.subscribe(1, sub(share, 1))
	m2 := connected(t, addrOf(b), packets.Version5, "m2")
	m2.subscribe(1, sub(share, 1))
	plain := connected(t, addrOf(b), packets.Version311, "plain")
	plain.subscribe(1, sub("jobs/#", 1))
	waitShareSettled(t, share, queues, a, b)

	const n = 40
	for i := range n {
		sendCmd(t, prod, fmt.Sprintf("jobs/%d", i), fmt.Sprint(i))
	}
	got := collectAll(time.Second, m1, m2, plain)
	seen := map[string]int{}
	for _, p := range append(append([]string(nil), got[0]...), got[1]...) {
		seen[p]++
	}
	for i := range n {
		if seen[fmt.Sprint(i)] != 1 {
			t.Errorf("message %d delivered %d times to the share group (A: %v, B: %v)", i, seen[fmt.Sprint(i)], got[0], got[1])
		}
	}
	if len(got[0]) < n/4 || len(got[1]) < n/4 {
		t.Errorf("unbalanced: A's member got %d, B's %d of %d", len(got[0]), len(got[1]), n)
	}
	if len(got[2]) != n {
		t.Errorf("plain subscription got %d of %d: %s", len(got[2]), n, strings.Join(got[2], ","))
	}

	// B's member leaves: B leaves the group, A takes every queue.
	m2.disconnect()
	waitShareSettled(t, share, queues, a)
	for i := range 10 {
		sendCmd(t, prod, "jobs/after", fmt.Sprint(i))
	}
	if got := m1.collect(time.Second); len(got) != 10 {
		t.Fatalf("after B left, A's member got %d of 10: %v", len(got), got)
	}
}

// TestBridgeSharedOffsetsFollowAcks: a shared subscription's group
// commits a message once its member is done with it: a QoS 1 member's
// messages stay uncommitted until it acknowledges them, a QoS 0
// member's are committed as handed over (no acknowledgement comes).
func TestBridgeSharedOffsetsFollowAcks(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	prod := newProducer(t, c)
	const acked, fire = "$share/acked/jobs/#", "$share/fire/jobs/#"
	queues := 4 * len(a.Backend().Topics())
	m1 := connected(t, addrOf(a), packets.Version5, "acker")
	m1.subscribe(1, sub(acked, 1))
	m0 := connected(t, addrOf(a), packets.Version5, "firer")
	m0.subscribe(1, sub(fire, 0))
	waitShareSettled(t, acked, queues, a)
	waitShareSettled(t, fire, queues, a)
	lag := func(share string) int64 {
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		prog, err := a.Backend().adm.GroupProgress(ctx, shareGroup(share), "")
		if err != nil || len(prog) < queues {
			return -1 // not every queue's offset committed yet
		}
		var n int64
		for _, p := range prog {
			n += p.Lag
		}
		return n
	}
	const n = 6
	for i := range n {
		sendCmd(t, prod, fmt.Sprintf("jobs/%d", i), fmt.Sprint(i))
	}
	var ids []uint16
	for range n {
		ids = append(ids, m1.recvPublish().PacketID) // not acknowledged yet
	}
	for range n {
		m0.expectPublish()
	}
	testutil.WaitFor(t, 20*time.Second, "the QoS 0 group committed", func() bool { return lag(fire) == 0 })
	testutil.WaitFor(t, 20*time.Second, "the QoS 1 group's offsets committed", func() bool { return lag(acked) >= 0 })
	if l := lag(acked); l != n {
		t.Fatalf("the QoS 1 group's lag is %d with %d messages unacknowledged", l, n)
	}
	for _, id := range ids {
		m1.send(&packets.Puback{PacketID: id})
	}
	testutil.WaitFor(t, 20*time.Second, "the QoS 1 group committed", func() bool { return lag(acked) == 0 })
}
