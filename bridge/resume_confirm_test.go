package bridge

import (
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestBridgeInMemoryResumeConfirmed: a client's persistent session goes
// offline on node B, which holds it in memory; the client starts clean on
// node A and, still connected there, resumes (clean start 0) on B before
// B's tail has applied A's clean-start record (the test holds B's tail
// back until B asks the cluster). B asks the cluster before resuming from
// memory: it finds A's newer session, takes it over from A (A's
// connection gets DISCONNECT 0x8E) and resumes that one, without the
// subscription of the old session. (B used to resume its old copy, with
// the old subscription, until its tail applied A's record.)
func TestBridgeInMemoryResumeConfirmed(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	aNode := a.backend.opts.NodeID
	release := make(chan struct{})
	releaseOnce := sync.OnceFunc(func() { close(release) })
	var asked sync.Once
	b := startBridgeWith(t, c, nil, func(b *Bridge) {
		b.backend.testBeforeApply = func(rec *sessionRecord) {
			if rec.ClientID == "hop" && rec.Node == aNode {
				<-release // B's tail holds A's records of the client
			}
		}
		b.backend.testBeforeConfirm = func(clientID string) {
			if clientID == "hop" {
				asked.Do(releaseOnce)
			}
		}
	})
	t.Cleanup(releaseOnce) // before B closes (cleanups run last first)
	if aNode == b.backend.opts.NodeID {
		t.Fatalf("both nodes are %q", aNode)
	}
	prod := newProducer(t, c)

	onB, _ := persistent(t, addrOf(b), "hop", true)
	onB.subscribe(1, sub("cmd/hop", 1))
	sendCmd(t, prod, "cmd/hop", "before")
	if pub := onB.expectPublish(); string(pub.Payload) != "before" {
		t.Fatalf("on B: %q", pub.Payload)
	}
	onB.disconnect()
	testutil.WaitFor(t, 10*time.Second, "B holding the session offline", func() bool {
		return !b.Server().Connected("hop") && b.Server().SessionInstance("hop") != 0
	})
	// B stores the session's offline record after the connection is
	// gone: the clean start on A comes after it. (Stored after A's
	// announcement, as a loaded machine made it once in ~10 runs, the
	// save is the client's latest record in the session topic and B
	// resumes its own copy: not the case this test is about.)
	testutil.WaitFor(t, 10*time.Second, "B's offline record of the session stored", func() bool {
		b.backend.mu.Lock()
		defer b.backend.mu.Unlock()
		r := b.backend.sessions["hop"]
		return r != nil && r.Node == b.backend.opts.NodeID && !r.Online && !r.Connect && !r.Deleted
	})

	onA, _ := persistent(t, addrOf(a), "hop", true) // a new session on A
	backOnB, ack := persistent(t, addrOf(b), "hop", false)
	if !ack.SessionPresent {
		t.Fatal("A's session not present on B")
	}
	sendCmd(t, prod, "cmd/hop", "old subscription")
	backOnB.nothing(500 * time.Millisecond) // B resumed A's session, not its old copy
	expectTakenOver(t, onA)
	backOnB.subscribe(2, sub("cmd/hop/new", 1))
	sendCmd(t, prod, "cmd/hop/new", "after")
	if pub := backOnB.expectPublish(); string(pub.Payload) != "after" {
		t.Fatalf("on B after the resume: %s %q", pub.Topic, pub.Payload)
	}
}
