package twin

import (
	"context"
	"errors"
	"maps"
	"slices"
	"sync"
	"testing"
	"time"

	tw "github.com/smartgo/smartgo/twin"
)

// gateBroker is a LocalBroker that keeps its watches and can hold the
// next WatchReplace before it applies it, and the next WatchAdd or
// WatchRemove after.
type gateBroker struct {
	mu          sync.Mutex
	held        map[string]bool
	replaceGate chan struct{} // the next replace waits for it (then it is cleared)
	replaceIn   chan struct{} // told when that replace arrived
	addGate     chan struct{} // the next add or remove, applied, waits for it before it answers
	addIn       chan struct{}
}

func (g *gateBroker) InvokeLocal(context.Context, int32, *tw.Request) (tw.Reply, error) {
	return tw.Reply{}, errors.New("not served here")
}

func (g *gateBroker) WatchLocal(action tw.WatchAction, keys []string, _ tw.Sink) uint64 {
	g.mu.Lock()
	if action == tw.WatchReplace && g.replaceGate != nil {
		gate := g.replaceGate
		g.replaceGate = nil
		g.mu.Unlock()
		g.replaceIn <- struct{}{}
		<-gate
		g.mu.Lock()
	}
	switch action {
	case tw.WatchReplace:
		g.held = map[string]bool{}
		for _, k := range keys {
			g.held[k] = true
		}
	case tw.WatchAdd:
		for _, k := range keys {
			g.held[k] = true
		}
	case tw.WatchRemove:
		for _, k := range keys {
			delete(g.held, k)
		}
	}
	gate := g.addGate
	if action == tw.WatchAdd || action == tw.WatchRemove {
		g.addGate = nil
	} else {
		gate = nil
	}
	g.mu.Unlock()
	if gate != nil {
		g.addIn <- struct{}{}
		<-gate
	}
	return 7
}

func (g *gateBroker) holds() []string {
	g.mu.Lock()
	defer g.mu.Unlock()
	return slices.Sorted(maps.Keys(g.held))
}

// waitHolds waits until the broker holds want (the watch loop's own
// doing: the tests set WatchCheck to an hour, so only a wake sends).
func waitHolds(t *testing.T, g *gateBroker, want []string, why string) {
	t.Helper()
	deadline := time.Now().Add(10 * time.Second)
	for !slices.Equal(g.holds(), want) {
		if time.Now().After(deadline) {
			t.Fatalf("the broker holds %v, want %v: %s", g.holds(), want, why)
		}
		time.Sleep(time.Millisecond)
	}
}

// TestTwinWatchNotUndoneByAReplace: a Watch (or Unwatch) whose request
// reaches the broker before a whole set the watch loop sent again without
// it (WatchReplace, here after a connection loss; requests run on a pool
// at the broker, so the order is not the sending order) is undone there.
// The client must not then believe the broker holds its set, and must not
// leave the key unwatched until the next check (WatchCheck, 2 s by
// default): it wakes the loop, which sends the set again at once. Before,
// the client wrote the key into the replaced set and the watch stayed
// lost (the device's desired changes and its revocation never came:
// TestHubRevokedIdentitiesDisconnected failed under load); then it waited
// for the next check.
func TestTwinWatchNotUndoneByAReplace(t *testing.T) {
	for _, tc := range []struct {
		name       string
		first      []string // watched before
		act        func(*Client, context.Context) error
		afterSwap  []string // the broker after the replace lands
		afterCheck []string
	}{
		{"watch", []string{"a"}, func(c *Client, ctx context.Context) error { return c.Watch(ctx, "b", "") },
			[]string{"a"}, []string{"a", "b"}},
		{"unwatch", []string{"a", "b"}, func(c *Client, ctx context.Context) error { return c.Unwatch(ctx, "b", "") },
			[]string{"a", "b"}, []string{"a"}},
	} {
		t.Run(tc.name, func(t *testing.T) {
			testWatchNotUndoneByAReplace(t, tc.first, tc.act, tc.afterSwap, tc.afterCheck)
		})
	}
}

func testWatchNotUndoneByAReplace(t *testing.T, first []string, act func(*Client, context.Context) error, afterSwap, afterCheck []string) {
	g := &gateBroker{held: map[string]bool{}}
	c, err := New(Options{Brokers: map[string]string{"b": "local:1"}, Local: map[string]LocalBroker{"local:1": g},
		WatchCheck: time.Hour}) // only a wake makes the loop look
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	for _, d := range first {
		if err := c.Watch(ctx, d, ""); err != nil {
			t.Fatal(err)
		}
	}
	replaceGate, addGate := make(chan struct{}), make(chan struct{})
	g.mu.Lock()
	g.replaceGate, g.replaceIn = replaceGate, make(chan struct{}, 1)
	g.addGate, g.addIn = addGate, make(chan struct{}, 1)
	g.mu.Unlock()
	c.w.mu.Lock()
	before := c.w.regs["local:1"]
	c.w.mu.Unlock()

	c.w.connLost() // the loop sends the set first again
	<-g.replaceIn
	done := make(chan error, 1)
	go func() { done <- act(c, ctx) }()
	<-g.addIn // applied at the broker, its answer not back yet
	close(replaceGate)
	// The replace lands after the request: the broker holds the set the
	// loop sent, and the client's record of it is that set.
	deadline := time.Now().Add(10 * time.Second)
	for {
		c.w.mu.Lock()
		now := c.w.regs["local:1"]
		c.w.mu.Unlock()
		if now != before {
			break
		}
		if time.Now().After(deadline) {
			t.Fatal("the replace never recorded")
		}
		time.Sleep(time.Millisecond)
	}
	if got := g.holds(); !slices.Equal(got, afterSwap) {
		t.Fatalf("the broker holds %v after the replace, want %v", got, afterSwap)
	}
	close(addGate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	waitHolds(t, g, afterCheck, "the request undone by the replace was not sent again at once")
	// A later check changes nothing.
	if err := c.resync(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got := g.holds(); !slices.Equal(got, afterCheck) {
		t.Fatalf("the broker holds %v after a check, want %v", got, afterCheck)
	}
}
