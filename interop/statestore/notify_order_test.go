package statestore

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	sscli "github.com/smartgo/smartgo/client/statestore"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/statestore"
)

// TestStateStoreMQTTSameFrontNotificationOrder: writers set watched keys
// with a 1 ms expiry through the front the watcher is connected to. For
// every key the watcher must get the SET's notification before the
// expiry's DELETE (the order of the two changes in the key's log), on the
// watcher's own front as on any other. The notices of clients on the
// requester's front used to come back in the call's response and be sent
// after the call returned, so the expiry's DELETE, pushed straight to the
// front, overtook them for about a quarter of the keys (in process); over
// remoting the broker's pushes were also served by the router's worker
// pool, in no set order.
func TestStateStoreMQTTSameFrontNotificationOrder(t *testing.T) {
	for _, tc := range []struct {
		name  string
		local bool
	}{{"local", true}, {"remote", false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnvWith(t, false, tc.local)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			const writers, keys = 4, 100
			w, err := sscli.Dial(ctx, sscli.Options{Addr: e.addr, ClientID: "watcher", Notifications: 4 * writers * keys})
			if err != nil {
				t.Fatal(err)
			}
			defer w.Close()
			key := func(g, i int) []byte { return fmt.Appendf(nil, "o%d-%d", g, i) }
			for g := range writers {
				for i := range keys {
					if err := w.KeyNotify(ctx, key(g, i), false); err != nil {
						t.Fatal(err)
					}
				}
			}
			errs := make(chan error, writers)
			var wg sync.WaitGroup
			for g := range writers {
				c := dialAt(t, e.addr, fmt.Sprintf("writer%d", g))
				wg.Add(1)
				go func() {
					defer wg.Done()
					for i := range keys {
						if _, _, err := c.Set(ctx, key(g, i), []byte("v"), sscli.SetOptions{Expiry: time.Millisecond}); err != nil {
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
			seen := map[string][]statestore.Op{}
			n := 0
			testutil.Eventually(t, 30*time.Second, func() error {
				for {
					select {
					case x := <-w.Notifications():
						seen[string(x.Key)] = append(seen[string(x.Key)], x.Op)
						n++
						continue
					default:
					}
					break
				}
				if n < 2*writers*keys {
					return fmt.Errorf("%d of %d notifications", n, 2*writers*keys)
				}
				return nil
			})
			bad := 0
			for k, ops := range seen {
				if len(ops) != 2 || ops[0] != statestore.OpSet || ops[1] != statestore.OpDelete {
					if bad++; bad <= 5 {
						t.Errorf("key %s: %v, want SET then DELETE", k, ops)
					}
				}
			}
			if bad > 0 {
				t.Errorf("%d of %d keys out of order", bad, len(seen))
			}
		})
	}
}
