package broker

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
)

// TestStateStoreNotificationsInLogOrder sets keys with a 1 ms expiry from
// four front ends at once while a watcher on another one watches them: for
// every key the watcher's sink gets the SET's notification before the
// expiry's (the order of the changes in the log), never the DELETE first,
// which would leave it believing the key exists.
func TestStateStoreNotificationsInLogOrder(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	s := ssOpen(t, b, nil)
	defer s.Close()
	watcher := &ssSink{}
	const writers, keys = 4, 100
	for g := range writers {
		for i := range keys {
			ssInvokeLocal(t, s, watcher, "w", "KEYNOTIFY", fmt.Sprintf("o%d-%d", g, i))
		}
	}
	errs := make(chan error, writers)
	var wg sync.WaitGroup
	for g := range writers {
		sink := &ssSink{}
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := range keys {
				k := []byte(fmt.Sprintf("o%d-%d", g, i))
				req := &protocol.StateStoreRequest{Shard: int32(statestore.ShardOf(k, s.Shards())), ClientID: fmt.Sprintf("c%d", g),
					Timestamp: ssTS(), HasTimestamp: true, Payload: statestore.AppendRequest(nil, []byte("SET"), k, []byte("v"), []byte("PX"), []byte("1"))}
				if err := s.InvokeLocal(context.Background(), req, nil, sink, new(protocol.StateStoreResponse)); err != nil {
					errs <- err
					return
				}
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		t.Fatal(err)
	}
	seen := map[string][]uint8{}
	n := 0
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, g := range watcher.take() {
			seen[string(g.Key)] = append(seen[string(g.Key)], g.Op)
			n++
		}
		if n < 2*writers*keys {
			return fmt.Errorf("%d of %d notifications pushed", n, 2*writers*keys)
		}
		return nil
	})
	for k, ops := range seen {
		if len(ops) != 2 || ops[0] != uint8(statestore.OpSet) || ops[1] != uint8(statestore.OpDelete) {
			t.Errorf("key %s: ops %v, want SET then DELETE", k, ops)
		}
	}
}
