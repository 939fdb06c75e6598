package bridge

import (
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeCrashReplaysWhatWasNotAcknowledged: a persistent session
// connected to a node that crashes resumes on another node with what its
// client had not acknowledged and what came after, not with everything
// since it connected. The node used to keep the resume points of the
// connect (and move them to "now" on a SUBSCRIBE, past unacknowledged
// messages): after a crash the client got every message of its
// connection again, and with more of them than max_offline_messages, the
// ones it had never seen were the ones dropped.
func TestBridgeCrashReplaysWhatWasNotAcknowledged(t *testing.T) {
	c := startCluster(t)
	opts := func(_ *mqtt.Options, bo *Options) {
		bo.HandoffTimeout = 300 * time.Millisecond
		bo.CheckpointInterval = 100 * time.Millisecond
		bo.MaxOfflineMessages = 3
	}
	a := startBridge(t, c, opts)
	b := startBridge(t, c, opts)
	prod := newProducer(t, c)

	dev, _ := persistent(t, addrOf(a), "ck", true)
	dev.subscribe(1, sub("cmd/ck/#", 1))
	for i := range 5 {
		sendCmd(t, prod, "cmd/ck/seen", fmt.Sprint(i))
		if pub := dev.expectPublish(); string(pub.Payload) != fmt.Sprint(i) { // acknowledged
			t.Fatalf("live %d: %q", i, pub.Payload)
		}
	}
	sendCmd(t, prod, "cmd/ck/unacked", "not acknowledged")
	pub, ok := dev.recv().(*packets.Publish)
	if !ok || string(pub.Payload) != "not acknowledged" {
		t.Fatalf("want the unacknowledged PUBLISH, got %+v", pub)
	}
	// A subscription change writes a record while it is unacknowledged.
	dev.subscribe(2, sub("other/ck", 1))
	testutil.WaitFor(t, 10*time.Second, "a record of A keeping only the unacknowledged message", func() bool {
		r := ownRecord(a, "ck")
		if r == nil || !r.Online || len(r.Subscriptions) != 2 {
			return false
		}
		n := 0
		for _, rp := range r.Resume {
			n += len(rp.Pending)
		}
		return n == 1
	})
	crash(t, a)
	sendCmd(t, prod, "cmd/ck/later", "while away")

	dev2, ack := persistent(t, addrOf(b), "ck", false)
	if !ack.SessionPresent {
		t.Fatal("session lost with the node")
	}
	first := dev2.expectPublish()
	if string(first.Payload) != "not acknowledged" || !first.Dup {
		t.Fatalf("first after the crash: %s %q dup=%v", first.Topic, first.Payload, first.Dup)
	}
	if p := dev2.expectPublish(); string(p.Payload) != "while away" {
		t.Fatalf("second after the crash: %s %q", p.Topic, p.Payload)
	}
	dev2.nothing(300 * time.Millisecond)
}
