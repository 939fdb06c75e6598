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
// next WatchReplace before it applies it, and the next WatchAdd after.
type gateBroker struct {
	mu          sync.Mutex
	held        map[string]bool
	replaceGate chan struct{} // the next replace waits for it (then it is cleared)
	replaceIn   chan struct{} // told when that replace arrived
	addGate     chan struct{} // the next add, applied, waits for it before it answers
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
	if action == tw.WatchAdd {
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

// TestTwinWatchNotUndoneByAReplace: a Watch whose WatchAdd reaches the
// broker before a whole set the watch loop sent again without it
// (WatchReplace, here after a connection loss; requests run on a pool at
// the broker, so the order is not the sending order) is undone there.
// The client must not then believe the broker holds it: the next check
// sends the set again with it. Before, the client wrote the key into the
// replaced set and the watch stayed lost (the device's desired changes
// and its revocation never came: TestHubRevokedIdentitiesDisconnected
// failed under load).
func TestTwinWatchNotUndoneByAReplace(t *testing.T) {
	g := &gateBroker{held: map[string]bool{}}
	c, err := New(Options{Brokers: map[string]string{"b": "local:1"}, Local: map[string]LocalBroker{"local:1": g},
		WatchCheck: time.Hour}) // the test runs the checks itself
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 30*time.Second)
	defer cancel()
	if err := c.Watch(ctx, "a", ""); err != nil {
		t.Fatal(err)
	}
	replaceGate, addGate := make(chan struct{}), make(chan struct{})
	g.mu.Lock()
	g.replaceGate, g.replaceIn = replaceGate, make(chan struct{}, 1)
	g.addGate, g.addIn = addGate, make(chan struct{}, 1)
	g.mu.Unlock()
	c.w.mu.Lock()
	before := c.w.regs["local:1"]
	c.w.mu.Unlock()

	c.w.connLost() // the loop sends the set ["a"] again
	<-g.replaceIn
	done := make(chan error, 1)
	go func() { done <- c.Watch(ctx, "b", "") }()
	<-g.addIn // "b" is held at the broker, its answer not back yet
	close(replaceGate)
	// The replace lands after the add: the broker holds ["a"], and the
	// client's record of it is the set it sent.
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
	if got := g.holds(); !slices.Equal(got, []string{"a"}) {
		t.Fatalf("the broker holds %v after the replace", got)
	}
	close(addGate)
	if err := <-done; err != nil {
		t.Fatal(err)
	}
	// The loop's next check (WatchCheck) sends the set again.
	if err := c.resync(ctx, true); err != nil {
		t.Fatal(err)
	}
	if got := g.holds(); !slices.Equal(got, []string{"a", "b"}) {
		t.Fatalf("the broker holds %v after a check, want [a b]: the watch of b is lost", got)
	}
}
