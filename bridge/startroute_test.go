package bridge

import (
	"context"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client/admin"
)

// TestBridgeConsumerWaitsForMissingRoute: a consumer the bridge starts
// (the live and system consumers at Start, a component's tail consumer)
// waits while its topic's route is missing, as after a registry restart
// or before a broker registers again, and starts once the route comes
// back; with the route never coming back it fails when its context ends,
// naming the topic.
func TestBridgeConsumerWaitsForMissingRoute(t *testing.T) {
	c := startCluster(t)
	br := startBridge(t, c, nil)
	be := br.Backend()
	a, err := admin.New(admin.Options{Registries: c.RegistryAddrs()})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()

	const late = "LATE_ROUTE"
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	created := make(chan error, 1)
	go func() {
		// The route appears a moment after the consumer first asks
		// for it (were it earlier, the test would pass without the
		// wait it checks, never fail wrongly).
		time.Sleep(300 * time.Millisecond)
		created <- a.CreateTopic(ctx, "", admin.TopicConfig{Name: late, ReadQueues: 4, WriteQueues: 4})
	}()
	tc, err := be.NewTailConsumer(ctx, "LATE_ROUTE_TAIL", late)
	if cerr := <-created; cerr != nil {
		t.Fatalf("create %s: %v", late, cerr)
	}
	if err != nil {
		t.Fatalf("tail consumer of a topic whose route comes back: %v", err)
	}
	defer tc.Close()
	if n := len(tc.Assigned()); n != 4 {
		t.Fatalf("assigned %d queues of %s, want 4", n, late)
	}

	const never = "NEVER_ROUTED"
	nctx, ncancel := context.WithTimeout(context.Background(), 1500*time.Millisecond)
	defer ncancel()
	start := time.Now()
	nc, err := be.NewTailConsumer(nctx, "NEVER_ROUTED_TAIL", never)
	took := time.Since(start)
	if err == nil {
		nc.Close()
		t.Fatalf("tail consumer of %s started without a route", never)
	}
	if !strings.Contains(err.Error(), never) {
		t.Fatalf("error does not name the topic: %v", err)
	}
	if took < time.Second || took > 15*time.Second {
		t.Fatalf("gave up after %v, want about the context's 1.5 s", took)
	}
}
