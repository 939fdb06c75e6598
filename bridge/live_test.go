package bridge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// sendEveryQueue sends one message for MQTT topic to each queue of the
// egress topic, with bodies body-0, body-1, ...
func sendEveryQueue(t *testing.T, prod *client.Producer, body, topic string) {
	t.Helper()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for i := range int(DefaultTopicQueues) {
		pick := func(qs []client.MessageQueue, _ string) client.MessageQueue { return qs[i%len(qs)] }
		if _, err := prod.SendOrderly(ctx, &client.Message{Topic: DefaultEgressTopic, Body: []byte(fmt.Sprintf("%s-%d", body, i)),
			Properties: map[string]string{PropTopic: topic, PropQoS: "1"}}, "", pick); err != nil {
			t.Fatal(err)
		}
	}
}

// TestBridgeStartDeliversNoHistory: a node that starts (a restart, a new
// node) delivers only what is stored after its start. Brokers start a
// consumer group without offsets at 0 on a young queue, so the live
// consumer used to deliver every queue's history to the clients that
// connected right after a start.
func TestBridgeStartDeliversNoHistory(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	prod := newProducer(t, c)
	// History on every queue of the egress topic.
	send := func(body string) { t.Helper(); sendEveryQueue(t, prod, body, "hist/x") }
	send("old")
	if err := a.Close(); err != nil {
		t.Fatal(err)
	}
	b := startBridge(t, c, nil)
	dev := connected(t, addrOf(b), packets.Version5, "hist-sub")
	dev.subscribe(1, sub("hist/#", 1))
	send("new")
	// The live consumer keeps each queue's order: once every "new" is
	// delivered, an "old" one would have come before it.
	got := map[string]bool{}
	for len(got) < int(DefaultTopicQueues) {
		p := dev.expectPublish()
		if s := string(p.Payload); s[:3] != "new" {
			t.Fatalf("history delivered after the start: %q", s)
		} else {
			got[s] = true
		}
	}
	dev.nothing(200 * time.Millisecond)
	// Nor to nobody before the client subscribed: B's deliveries (in
	// queue order, so every "old" one would be there by now).
	be := b.Backend()
	be.mu.Lock()
	defer be.mu.Unlock()
	for q, qs := range be.queues {
		for _, d := range qs.ring {
			if d.msg == nil {
				continue // the message before the start, not delivered (recheck.go's seed)
			}
			if s := string(d.msg.Payload); s[:3] != "new" {
				t.Errorf("queue %v: delivered %q from before the start", q, s)
			}
		}
	}
}

// TestBridgeNewShareGetsNoHistory: a new shared subscription gets what is
// stored after it was made. Its broker group had no offsets, and brokers
// start such a group at 0 on a young queue: the first member used to get
// the topics' whole history.
func TestBridgeNewShareGetsNoHistory(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	prod := newProducer(t, c)
	sendEveryQueue(t, prod, "old", "hist/s")
	dev := connected(t, addrOf(a), packets.Version5, "share-sub")
	dev.subscribe(1, sub("$share/fresh/hist/#", 1))
	testutil.WaitFor(t, 20*time.Second, "the share's consumer holding queues", func() bool {
		return len(a.Backend().ShareQueues("$share/fresh/hist/#")) > 0
	})
	sendEveryQueue(t, prod, "new", "hist/s")
	for range int(DefaultTopicQueues) {
		if p := dev.expectPublish(); string(p.Payload[:3]) != "new" {
			t.Fatalf("history given to a new shared subscription: %q", p.Payload)
		}
	}
	dev.nothing(200 * time.Millisecond)
}
