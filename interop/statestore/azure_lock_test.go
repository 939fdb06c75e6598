package statestore

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"testing"
	"time"

	"github.com/Azure/iot-operations-sdks/go/services/leasedlock"
	"github.com/Azure/iot-operations-sdks/go/services/statestore"
	ssErrors "github.com/Azure/iot-operations-sdks/go/services/statestore/errors"
)

// TestStateStoreAzureLeasedLock drives the Azure IoT Operations Go SDK's
// leasedlock package (services v0.4.1) unmodified: it is built on SET NEX
// PX, VDEL, KEYNOTIFY and the DELETE notifications of releases and
// expiries, and uses the lock's version as a fencing token.
func TestStateStoreAzureLeasedLock(t *testing.T) {
	e := startEnv(t, false)
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	// Contention: editors on their own connections increment one counter
	// under one lock; Edit writes with the lock's fencing token. No
	// increment may be lost or applied twice.
	const editors, edits = 4, 5
	var wg sync.WaitGroup
	errs := make(chan error, editors*edits)
	for i := range editors {
		l := leasedlock.NewLock(azureClient(t, e, fmt.Sprintf("editor-%d", i)), "counter-lock")
		wg.Add(1)
		go func() {
			defer wg.Done()
			for range edits {
				errs <- l.Edit(ctx, "counter", 30*time.Second, func(_ context.Context, v string, ok bool) (string, bool, error) {
					n := 0
					if ok {
						var err error
						if n, err = strconv.Atoi(v); err != nil {
							return "", false, err
						}
					}
					return strconv.Itoa(n + 1), true, nil
				})
			}
		}()
	}
	wg.Wait()
	close(errs)
	for err := range errs {
		if err != nil {
			t.Fatalf("edit: %v", err)
		}
	}
	reader := azureClient(t, e, "lock-reader")
	if g, err := reader.Get(ctx, "counter"); err != nil || g.Value != strconv.Itoa(editors*edits) {
		t.Fatalf("counter %+v %v, want %d", g, err, editors*edits)
	}
	// The counter is fenced by the lock's versions: a write without a
	// token is refused.
	if _, err := reader.Set(ctx, "counter", "0"); !errors.Is(err, ssErrors.MissingFencingToken) {
		t.Fatalf("unfenced write of the counter: %v", err)
	}
	if holder, held, err := leasedlock.NewLease(reader, "counter-lock").Holder(ctx); err != nil || held {
		t.Fatalf("lock still held by %q after the edits (%v)", holder, err)
	}

	// Expiry: a holder that never releases loses the lock when its lease
	// runs out; a waiter in Lock is woken by the expiry's DELETE. The
	// old holder's token is then stale.
	a := leasedlock.NewLock(azureClient(t, e, "holder-a"), "lease-lock")
	b := leasedlock.NewLock(azureClient(t, e, "holder-b"), "lease-lock")
	if err := a.Lock(ctx, 500*time.Millisecond); err != nil {
		t.Fatal(err)
	}
	aTok, err := a.Token(ctx)
	if err != nil {
		t.Fatal(err)
	}
	if _, err := reader.Set(ctx, "res", "a", statestore.WithFencingToken(aTok)); err != nil {
		t.Fatalf("write with a's token: %v", err)
	}
	if err := b.Lock(ctx, 30*time.Second, leasedlock.WithTimeout(30*time.Second)); err != nil {
		t.Fatalf("b waiting for a's lease to expire: %v", err)
	}
	if holder, held, err := b.Holder(ctx); err != nil || !held || holder != "holder-b" {
		t.Fatalf("holder %q %v %v, want holder-b", holder, held, err)
	}
	bTok, err := b.Token(ctx)
	if err != nil || bTok.Compare(aTok) <= 0 {
		t.Fatalf("b's token %v (%v) not newer than a's %v", bTok, err, aTok)
	}
	if _, err := reader.Set(ctx, "res", "b", statestore.WithFencingToken(bTok)); err != nil {
		t.Fatalf("write with b's token: %v", err)
	}
	if _, err := reader.Set(ctx, "res", "late a", statestore.WithFencingToken(aTok)); !errors.Is(err, ssErrors.FencingTokenLowerVersion) {
		t.Fatalf("write with a's expired token: %v", err)
	}
	if err := b.Unlock(ctx); err != nil {
		t.Fatal(err)
	}

	// Renewal: a lease renewed more often than it lasts stays held. The
	// renewals are SETs of the same holder, seen by a watcher.
	wc := azureClient(t, e, "lease-watcher")
	ch, stop := wc.Notify("renewed")
	defer stop()
	if err := wc.KeyNotify(ctx, "renewed"); err != nil {
		t.Fatal(err)
	}
	lease := leasedlock.NewLease(azureClient(t, e, "renewer"), "renewed")
	if ok, err := lease.Acquire(ctx, 5*time.Second, leasedlock.WithRenew(200*time.Millisecond)); err != nil || !ok {
		t.Fatalf("acquire: %v %v", ok, err)
	}
	for i := range 4 { // the acquisition and three renewals
		select {
		case n := <-ch:
			if n.Operation != "SET" || n.Value != "renewer" {
				t.Fatalf("notification %d: %+v", i, n)
			}
		case <-ctx.Done():
			t.Fatalf("renewal %d not seen", i)
		}
	}
	if holder, held, err := lease.Holder(ctx); err != nil || !held || holder != "renewer" {
		t.Fatalf("holder %q %v %v, want renewer", holder, held, err)
	}
	if err := lease.Release(ctx); err != nil {
		t.Fatal(err)
	}
	for {
		select {
		case n := <-ch:
			if n.Operation == "SET" {
				continue // a renewal sent before the release
			}
			if _, held, err := lease.Holder(ctx); err != nil || held {
				t.Fatalf("held after release: %v", err)
			}
			return
		case <-ctx.Done():
			t.Fatal("no DELETE notification for the release")
		}
	}
}
