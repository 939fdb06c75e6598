package statestore

import (
	"context"
	"fmt"
	"slices"
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
	eachFront(t, func(t *testing.T, ctx context.Context, e *env) {
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

// eachFront runs fn with a front in process (local) and one over
// remoting (remote).
func eachFront(t *testing.T, fn func(t *testing.T, ctx context.Context, e *env)) {
	for _, tc := range []struct {
		name  string
		local bool
	}{{"local", true}, {"remote", false}} {
		t.Run(tc.name, func(t *testing.T) {
			e := startEnvWith(t, false, tc.local)
			ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
			defer cancel()
			fn(t, ctx, e)
		})
	}
}

// TestStateStoreMQTTSinceBacklogOrder: a watcher registers KEYNOTIFY
// <key> SINCE <version> while a writer keeps setting the key. It must get
// every change after <version> once, in log order: the backlog (the
// changes before its registration) before the changes made after it. The
// backlog used to come back in the registration's response, delivered
// after the call returned, so a concurrent SET's notification, pushed
// straight to the front, could reach the watcher before it.
func TestStateStoreMQTTSinceBacklogOrder(t *testing.T) {
	eachFront(t, func(t *testing.T, ctx context.Context, e *env) {
		const watchers, rounds, before = 3, 20, 8
		errs := make(chan error, watchers)
		var wg sync.WaitGroup
		for g := range watchers {
			wc := dialAt(t, e.addr, fmt.Sprintf("since-w%d", g))
			wr := dialAt(t, e.addr, fmt.Sprintf("since-s%d", g))
			wg.Add(1)
			go func() {
				defer wg.Done()
				errs <- sinceRounds(ctx, wc, wr, g, rounds, before)
			}()
		}
		wg.Wait()
		close(errs)
		for err := range errs {
			if err != nil {
				t.Error(err)
			}
		}
	})
}

// sinceRounds runs rounds of TestStateStoreMQTTSinceBacklogOrder with
// watcher w and writer c, each on a key of its own: before SETs, then a
// registration SINCE the first one's version while c keeps setting the
// key; the watcher must get every version after the first, in order.
func sinceRounds(ctx context.Context, w, c *sscli.Client, g, rounds, before int) error {
	for r := range rounds {
		key := fmt.Appendf(nil, "since%d-%d", g, r)
		var want []statestore.HLC // versions the watcher must get, in order
		since := statestore.HLC{}
		for i := range before {
			_, v, err := c.Set(ctx, key, fmt.Appendf(nil, "b%d", i), sscli.SetOptions{})
			if err != nil {
				return err
			}
			if i == 0 {
				since = v
			} else {
				want = append(want, v)
			}
		}
		registered := make(chan struct{})
		live := make(chan []statestore.HLC, 1)
		go func() {
			var vs []statestore.HLC
			defer func() { live <- vs }()
			for i := 0; ; i++ {
				_, v, err := c.Set(ctx, key, fmt.Appendf(nil, "l%d", i), sscli.SetOptions{})
				if err != nil {
					return
				}
				vs = append(vs, v)
				select {
				case <-registered:
					if i >= 3 {
						return
					}
				default:
				}
			}
		}()
		_, err := w.Do(ctx, statestore.HLC{}, []byte("KEYNOTIFY"), key, []byte("SINCE"), []byte(since.String()))
		close(registered)
		vs := <-live
		if err != nil {
			return err
		}
		want = append(want, vs...)
		var got []statestore.HLC
		for len(got) < len(want) {
			select {
			case x := <-w.Notifications():
				if string(x.Key) != string(key) {
					return fmt.Errorf("watcher %d: notification of %s while watching %s", g, x.Key, key)
				}
				got = append(got, x.Version)
			case <-ctx.Done():
				return fmt.Errorf("watcher %d, key %s: got %d of %d notifications", g, key, len(got), len(want))
			}
		}
		// A change made before the registration and not in the backlog
		// was not notified; a live one made after it was, in order.
		for i := 1; i < len(got); i++ {
			if got[i].Compare(got[i-1]) <= 0 {
				return fmt.Errorf("watcher %d, key %s: notification %d (%s) not after %d (%s): %v", g, key, i, got[i], i-1, got[i-1], got)
			}
		}
		if !slices.EqualFunc(got, want, func(a, b statestore.HLC) bool { return a.Compare(b) == 0 }) {
			return fmt.Errorf("watcher %d, key %s: got versions %v, want %v", g, key, got, want)
		}
		if _, err := w.Do(ctx, statestore.HLC{}, []byte("KEYNOTIFY"), key, []byte("STOP")); err != nil {
			return err
		}
	}
	return nil
}
