package client

import (
	"context"
	"errors"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
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

// TestClientPullConsumerStartRouteCutByDeadline: when Start's context
// ends during a route query, the error is the last answer the registry
// gave (the topic does not exist), not the cut query's timeout. A
// registry that answers TOPIC_NOT_EXIST once and then never answers
// makes the cut certain; a loaded machine made it by chance before.
func TestClientPullConsumerStartRouteCutByDeadline(t *testing.T) {
	srv, err := remoting.NewServer(remoting.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	hang := make(chan struct{})
	var queries atomic.Int32
	srv.RegisterFunc(protocol.GetRouteInfoByTopic, remoting.PoolDefault, func(_ *remoting.Conn, _ *protocol.Command) (*protocol.Command, error) {
		if queries.Add(1) > 1 {
			<-hang
		}
		return protocol.NewResponse(protocol.TopicNotExist, "no route info of this topic"), nil
	})
	if err := srv.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { srv.Close() })
	t.Cleanup(func() { close(hang) })

	const topic = "TopicCutRoute"
	pc, err := NewPullConsumer(PullConsumerOptions{ConsumerOptions: ConsumerOptions{
		ClientOptions: ClientOptions{Registries: []string{srv.Addr().String()}}, Group: "gCR"}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if err := pc.Assign([]MessageQueue{{Topic: topic, BrokerName: "broker-a", QueueID: 0}}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), time.Second)
	defer cancel()
	err = pc.Start(ctx)
	if err == nil || !strings.Contains(err.Error(), topic) || !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("start cut during a route query: %v, want the registry's last answer naming %s", err, topic)
	}
	if n := queries.Load(); n < 2 {
		t.Fatalf("%d route queries, want the cut second one too", n)
	}
}
