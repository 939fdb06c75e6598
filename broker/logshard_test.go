package broker

import (
	"context"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// TestStateStoreSetsWrittenBehind: under async flush a shard's entries
// are written behind and drained by the goroutine that serves the request
// (logShard.put). SETs on every shard from several goroutines, while
// producer puts written behind keep the store's own drains and dispatch
// rounds busy, are each answered once the entry's record is in the page
// cache (the store's committed offset covers it), none is lost or
// answered twice, and a restart that replays the whole log (no snapshot)
// rebuilds the same tables.
func TestStateStoreSetsWrittenBehind(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, nil)
	if b.opts.Store.FlushMode != store.FlushAsync {
		t.Fatalf("flush mode %v, want async", b.opts.Store.FlushMode)
	}
	const shards, workers, perWorker = 4, 6, 150
	s := ssOpen(t, b, func(o *StateStoreOptions) { o.Shards = shards })
	st := b.Store()

	// Producer puts written behind, answered by the dispatcher or a drain.
	stop := make(chan struct{})
	var sends, answered atomic.Int64
	var prod sync.WaitGroup
	prod.Add(1)
	go func() {
		defer prod.Done()
		for {
			select {
			case <-stop:
				return
			default:
			}
			m := &record.Message{Topic: "WB", Body: []byte("producer"), BornHost: st.Options().StoreHost}
			sends.Add(1)
			_, pending, err := st.PutAsync(m, false, func(store.PutResult, error) { answered.Add(1) })
			if err != nil || !pending {
				answered.Add(1)
			}
		}
	}()

	var wg sync.WaitGroup
	errc := make(chan error, workers)
	for w := 0; w < workers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for i := 0; i < perWorker; i++ {
				key := []byte(fmt.Sprintf("k-%d-%d", w, i))
				shard := statestore.ShardOf(key, shards)
				req := &protocol.StateStoreRequest{Shard: int32(shard), ClientID: "c", Timestamp: ssTS(), HasTimestamp: true,
					Payload: statestore.AppendRequest(nil, []byte("SET"), key, []byte("v"+strconv.Itoa(i)))}
				resp, err := s.Do(context.Background(), req, nil)
				if err != nil {
					errc <- err
					return
				}
				if string(resp.Reply) != "+OK\r\n" {
					errc <- fmt.Errorf("SET %s: reply %q", key, resp.Reply)
					return
				}
				if end, committed := s.shards[shard].applied.Load(), st.MaxPhysicalOffset(); committed < end {
					errc <- fmt.Errorf("SET %s answered with its record at %d not written (committed %d)", key, end, committed)
					return
				}
			}
		}()
	}
	wg.Wait()
	close(stop)
	prod.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	testutil.WaitFor(t, 10*time.Second, "producer puts answered", func() bool { return answered.Load() == sends.Load() })
	keys := 0
	for i := 0; i < shards; i++ {
		keys += s.Engine(i).Stats().Keys
	}
	if keys != workers*perWorker {
		t.Fatalf("%d keys, want %d", keys, workers*perWorker)
	}
	want := ssSnapshots(t, s)

	// A crash after the answers: no snapshot, the whole log replayed.
	s.stop()
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b2 := testBroker(t, dir, nil)
	s2 := ssOpen(t, b2, func(o *StateStoreOptions) { o.Shards = shards })
	defer s2.Close()
	got := ssSnapshots(t, s2)
	for i := range want {
		if string(got[i]) != string(want[i]) {
			t.Fatalf("shard %d after replay differs from before the restart", i)
		}
	}
	if v, _ := ssDo(t, s2, "c", "GET", "k-3-149"); string(v.Str) != "v149" {
		t.Fatalf("GET after restart: %v", v)
	}
}
