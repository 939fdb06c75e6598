package bridge

import (
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestBridgeResumesTakeTurnsOnReplayConsumer: resumes on one node replay
// on a consumer kept from the previous resume (a storm's main cost): the
// second session, offline since earlier, is read back from further back
// than where the first resume left the consumer, and gets every message
// it is owed, in order; the node keeps one consumer for both, not two.
func TestBridgeResumesTakeTurnsOnReplayConsumer(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	b := startBridge(t, c, nil)
	prod := newProducer(t, c)
	early, _ := persistent(t, addrOf(a), "early", true)
	early.subscribe(1, sub("cmd/all/#", 1))
	late, _ := persistent(t, addrOf(a), "late", true)
	late.subscribe(1, sub("cmd/all/#", 1))
	offline := func(id string) {
		testutil.WaitFor(t, 10*time.Second, id+" offline on node B", func() bool {
			b.Backend().mu.Lock()
			defer b.Backend().mu.Unlock()
			r := b.Backend().sessions[id]
			return r != nil && !r.Online && len(r.Subscriptions) == 1
		})
	}
	early.disconnect()
	offline("early")
	for i := range 5 {
		sendCmd(t, prod, "cmd/all/x", fmt.Sprint(i))
	}
	for range 5 {
		late.expectPublish()
	}
	late.disconnect()
	offline("late")
	for i := 5; i < 10; i++ {
		sendCmd(t, prod, "cmd/all/x", fmt.Sprint(i))
	}
	resume := func(id string, from int) {
		t.Helper()
		r, ack := persistent(t, addrOf(b), id, false)
		if !ack.SessionPresent {
			t.Fatalf("%s: session not present", id)
		}
		for i := from; i < 10; i++ {
			if pub := r.expectPublish(); string(pub.Payload) != fmt.Sprint(i) {
				t.Fatalf("%s: message %d is %q", id, i, pub.Payload)
			}
		}
		r.nothing(200 * time.Millisecond)
	}
	resume("late", 5)
	resume("early", 0)
	p := &b.Backend().replays
	p.mu.Lock()
	n := 0
	for _, s := range p.keys {
		n += s.total
	}
	p.mu.Unlock()
	if n > 1 { // 0 once an idle consumer was closed (a very slow machine)
		t.Fatalf("%d replay consumers kept, want 1", n)
	}
}
