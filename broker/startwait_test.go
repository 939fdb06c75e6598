package broker

import (
	"context"
	"errors"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/store/record"
)

// The state store's and the twins' opening waits for the consume queues
// to cover the commitlog (up to openWait, 30 s). When the broker's start
// context ends during that wait (the process got SIGTERM), the wait ends
// at once: OpenStateStore and OpenTwins return without loading their
// shards, their requests are refused as unavailable saying the broker
// is stopping, and Close works. Here the dispatcher is held behind the
// log's end by a dispatch limit, so the wait cannot end by itself. (Each
// open used to wait its full 30 s, signal or not.)
func TestBrokerStartWaitEndsWithStartContext(t *testing.T) {
	ctx, cancel := context.WithCancel(context.Background())
	defer cancel()
	b, err := NewContext(ctx, testBrokerOptions(t.TempDir(), nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	st := b.Store()
	st.SetDispatchLimit(st.MaxPhysicalOffset())
	if _, err := st.Put(context.Background(), &record.Message{Topic: "Held", Body: []byte("behind"), BornHost: st.Options().StoreHost}); err != nil {
		t.Fatal(err)
	}
	if st.DispatchedPhysicalOffset() >= st.MaxPhysicalOffset() {
		t.Fatal("the dispatch limit did not hold the dispatcher")
	}
	stop := time.AfterFunc(300*time.Millisecond, cancel) // the signal, while the open waits
	defer stop.Stop()
	start := time.Now()
	s, err := OpenStateStore(b, StateStoreOptions{Shards: 2, SnapshotInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer s.Close()
	tw, err := OpenTwins(b, TwinOptions{Shards: 2, SnapshotInterval: time.Hour})
	if err != nil {
		t.Fatal(err)
	}
	defer tw.Close()
	if took := time.Since(start); took > 10*time.Second {
		t.Fatalf("the opens took %v after the start context ended, want well under openWait (%v)", took, openWait)
	}
	for name, err := range map[string]error{"state store": s.Err(), "twins": tw.Err()} {
		if err == nil || !strings.Contains(err.Error(), "stopping") {
			t.Fatalf("%s after the start context ended: %v, want not open, stopping", name, err)
		}
	}
	if !errors.Is(s.Err(), ErrStateStoreUnavailable) {
		t.Fatalf("state store error %v, want ErrStateStoreUnavailable", s.Err())
	}
	// The broker's own life is not the start context's.
	if refused, why := b.WritesRefused(); refused {
		t.Fatalf("writes refused after the start context ended: %s", why)
	}
}

// A promotion in controller mode reads the transactions after waiting
// for the dispatcher to reach the log's end (up to prepareWait, 10 s).
// That wait ends with the controller loop's context, so that Close (which
// cancels it and waits for the loop) is not held by a promotion under
// way. (It used to wait on a background context: Close took the whole
// prepareWait.) The dispatcher is held behind the end by a dispatch limit.
func TestBrokerPromotionWaitEndsWithContext(t *testing.T) {
	b, err := New(testBrokerOptions(t.TempDir(), nil))
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = b.Close() })
	st := b.Store()
	st.SetDispatchLimit(st.MaxPhysicalOffset())
	if _, err := st.Put(context.Background(), &record.Message{Topic: "Held", Body: []byte("behind"), BornHost: st.Options().StoreHost}); err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	stop := time.AfterFunc(300*time.Millisecond, cancel) // Close, while the promotion waits
	defer stop.Stop()
	start := time.Now()
	if err := b.tx.becameMaster(ctx); err != nil {
		t.Fatal(err)
	}
	if took := time.Since(start); took > prepareWait/2 {
		t.Fatalf("the promotion took %v after its context ended, want well under prepareWait (%v)", took, prepareWait)
	}
}
