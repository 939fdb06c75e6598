package client

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
)

// TestClientPullConsumerStartWaitsForRoute: Start of a consumer assigned
// queues of a topic whose route is missing for a moment (as right after a
// registry restart) waits for the route and then consumes; with the route
// never coming back it fails when its context ends, naming the topic.
// Before, Start asked once and failed at once.
func TestClientPullConsumerStartWaitsForRoute(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	const late = "TopicLateRoute"
	pc, err := NewPullConsumer(PullConsumerOptions{ConsumerOptions: ConsumerOptions{
		ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}, Group: "gLR", From: ConsumeFromFirst, PullSuspend: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	mq := MessageQueue{Topic: late, BrokerName: "broker-a", QueueID: 0}
	if err := pc.Assign([]MessageQueue{mq}); err != nil {
		t.Fatal(err)
	}
	started := make(chan error, 1)
	go func() { started <- pc.Start(testCtx(t, 20*time.Second)) }()
	// The route appears a moment after Start first asks for it (were it
	// earlier, the test would pass without the wait it checks, never
	// fail wrongly).
	time.Sleep(300 * time.Millisecond)
	createTopic(t, c, 1, late, 1)
	if err := <-started; err != nil {
		t.Fatalf("start with a route that comes back: %v", err)
	}
	p := newTestProducer(t, c, nil)
	sendN(t, p, late, "lr", 1)
	ctx := testCtx(t, 20*time.Second)
	for got := false; !got; {
		msgs, err := pc.Poll(ctx)
		if err != nil {
			t.Fatalf("poll: %v", err)
		}
		got = len(msgs) > 0
	}

	const never = "TopicNeverRouted"
	nc, err := NewPullConsumer(PullConsumerOptions{ConsumerOptions: ConsumerOptions{
		ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}, Group: "gNR"}})
	if err != nil {
		t.Fatal(err)
	}
	defer nc.Close()
	if err := nc.Assign([]MessageQueue{{Topic: never, BrokerName: "broker-a", QueueID: 0}}); err != nil {
		t.Fatal(err)
	}
	nctx, cancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer cancel()
	start := time.Now()
	err = nc.Start(nctx)
	took := time.Since(start)
	if err == nil || !strings.Contains(err.Error(), never) || !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("start without a route: %v, want an error naming %s", err, never)
	}
	if took < time.Second || took > 15*time.Second {
		t.Fatalf("gave up after %v, want about the context's 1.5 s", took)
	}
}
