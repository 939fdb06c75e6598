package bridge

import (
	"context"
	"fmt"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// TestBridgeStartDeliversNoHistory: a node that starts (a restart, a new
// node) delivers only what is stored after its start. Brokers start a
// consumer group without offsets at 0 on a young queue, so the live
// consumer used to deliver every queue's history to the clients that
// connected right after a start.
func TestBridgeStartDeliversNoHistory(t *testing.T) {
	c := startCluster(t)
	a := startBridge(t, c, nil)
	prod := newProducer(t, c)
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	// History on every queue of the egress topic.
	send := func(body string) {
		t.Helper()
		for i := range int(DefaultTopicQueues) {
			pick := func(qs []client.MessageQueue, _ string) client.MessageQueue { return qs[i%len(qs)] }
			if _, err := prod.SendOrderly(ctx, &client.Message{Topic: DefaultEgressTopic, Body: []byte(fmt.Sprintf("%s-%d", body, i)),
				Properties: map[string]string{PropTopic: "hist/x", PropQoS: "1"}}, "", pick); err != nil {
				t.Fatal(err)
			}
		}
	}
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
			if s := string(d.msg.Payload); s[:3] != "new" {
				t.Errorf("queue %v: delivered %q from before the start", q, s)
			}
		}
	}
}
