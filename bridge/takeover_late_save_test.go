package bridge

import (
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// A node's offline save of a client's session that is stored after the
// client started clean on another node is older than that clean start:
// the client resuming on the first node gets the clean session (no
// message for the old subscription), and the other node keeps its clean
// start as the client's latest record. Without Since the late save was
// the latest record everywhere and the first node resumed its old copy.
func TestBridgeLateSaveAfterCleanStartElsewhere(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	b := startBridgeWith(t, c, nil, func(b *Bridge) {
		b.backend.testBeforeWrite = func(rec *sessionRecord) {
			if rec.ClientID == "late" && !rec.Online && !rec.Connect && !rec.Deleted {
				<-release // B's offline save waits for A's clean start
			}
		}
	})
	t.Cleanup(releaseOnce)
	prod := newProducer(t, c)
	onB, _ := persistent(t, addrOf(b), "late", true)
	onB.subscribe(1, sub("cmd/late", 1))
	onB.disconnect()
	testutil.WaitFor(t, 10*time.Second, "B holding the session offline", func() bool {
		return !b.Server().Connected("late") && b.Server().SessionInstance("late") != 0
	})
	persistent(t, addrOf(a), "late", true) // a clean start on A, B's save still on its way
	releaseOnce()
	var save sessionRecord
	testutil.WaitFor(t, 10*time.Second, "B's save stored", func() bool {
		b.backend.mu.Lock()
		defer b.backend.mu.Unlock()
		if r := b.backend.own["late"]; r != nil && !r.Online && !r.Connect {
			save = *r
			return true
		}
		return false
	})
	if save.Since == 0 {
		t.Fatalf("B's offline save names no start of its session: %+v", save)
	}
	testutil.WaitFor(t, 10*time.Second, "A's tail past B's save", func() bool {
		a.backend.mu.Lock()
		defer a.backend.mu.Unlock()
		return a.backend.sysNext[save.q] > save.off
	})
	a.backend.mu.Lock()
	cur := a.backend.sessions["late"]
	a.backend.mu.Unlock()
	if cur == nil || cur.Node != a.backend.opts.NodeID {
		t.Fatalf("A's latest record of the client after B's late save: %+v, want A's clean start", cur)
	}
	backOnB, _ := persistent(t, addrOf(b), "late", false)
	sendCmd(t, prod, "cmd/late", "old subscription")
	backOnB.nothing(time.Second) // the session started clean on A has no subscription
}
