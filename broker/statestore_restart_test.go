package broker

import (
	"context"
	"os"
	"path/filepath"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
)

// TestStateStoreRestartTime measures how long a broker with a state store
// takes to come back (broker open, then OpenStateStore) as a function of
// the key count, with the shard snapshots written on Close and without
// them (full log replay). Opt in with SMARTGO_SS_RESTART=1; key counts in
// SMARTGO_SS_RESTART_KEYS (comma separated, default 100000,1000000). Each
// key is set once with a 100-byte value through StateStore.Do.
func TestStateStoreRestartTime(t *testing.T) {
	if os.Getenv("SMARTGO_SS_RESTART") == "" {
		t.Skip("set SMARTGO_SS_RESTART=1 to run the restart-time benchmark")
	}
	counts := []int{100_000, 1_000_000}
	if v := os.Getenv("SMARTGO_SS_RESTART_KEYS"); v != "" {
		counts = counts[:0]
		for _, f := range strings.Split(v, ",") {
			n, err := strconv.Atoi(strings.TrimSpace(f))
			if err != nil {
				t.Fatal(err)
			}
			counts = append(counts, n)
		}
	}
	const shards = 8
	mod := func(o *Options) {
		o.Store.SegmentSize = 64 << 20
		o.Store.CQEntriesPerFile = 300_000
	}
	val := strings.Repeat("v", 100)
	for _, n := range counts {
		dir := t.TempDir()
		b := testBroker(t, dir, mod)
		s := ssOpen(t, b, func(o *StateStoreOptions) { o.Shards = shards })
		fillStart := time.Now()
		var wg sync.WaitGroup
		errc := make(chan error, shards)
		for w := 0; w < shards; w++ {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for i := w; i < n; i += shards {
					key := []byte("key:" + strconv.Itoa(i))
					req := &protocol.StateStoreRequest{Shard: int32(statestore.ShardOf(key, shards)), ClientID: "fill",
						Timestamp: ssTS(), HasTimestamp: true, Payload: statestore.AppendRequest(nil, []byte("SET"), key, []byte(val))}
					if _, err := s.Do(context.Background(), req, nil); err != nil {
						errc <- err
						return
					}
				}
			}()
		}
		wg.Wait()
		close(errc)
		if err := <-errc; err != nil {
			t.Fatal(err)
		}
		fill := time.Since(fillStart)
		// A snapshot is written once its entries are flushed (async
		// flush here): retry until every shard has one.
		snapGlob := filepath.Join(dir, "statestore", "*.snap")
		deadline := time.Now().Add(30 * time.Second)
		for {
			if err := s.Snapshot(); err != nil {
				t.Fatal(err)
			}
			if files, _ := filepath.Glob(snapGlob); len(files) == shards {
				break
			}
			if time.Now().After(deadline) {
				t.Fatal("snapshots not written within 30 s")
			}
			time.Sleep(20 * time.Millisecond)
		}
		if err := s.Close(); err != nil {
			t.Fatal(err)
		}
		if err := b.Close(); err != nil {
			t.Fatal(err)
		}
		var snapBytes int64
		files, _ := filepath.Glob(snapGlob)
		for _, f := range files {
			if fi, err := os.Stat(f); err == nil {
				snapBytes += fi.Size()
			}
		}
		if len(files) != shards {
			t.Fatalf("%d snapshot files, want %d", len(files), shards)
		}
		restart := func(name string) {
			t0 := time.Now()
			b := testBroker(t, dir, mod)
			t1 := time.Now()
			s := ssOpen(t, b, func(o *StateStoreOptions) { o.Shards = shards })
			t2 := time.Now()
			keys := 0
			for i := 0; i < shards; i++ {
				keys += s.Engine(i).Stats().Keys
			}
			if keys != n {
				t.Fatalf("%s: %d keys after restart, want %d", name, keys, n)
			}
			t.Logf("keys=%d %s: broker open %v, state store open %v, total %v", n, name,
				t1.Sub(t0).Round(time.Millisecond), t2.Sub(t1).Round(time.Millisecond), t2.Sub(t0).Round(time.Millisecond))
			s.stop() // no new snapshot
			_ = b.Close()
		}
		t.Logf("keys=%d: filled in %v (%.0f SET/s), snapshots %d bytes", n, fill.Round(time.Millisecond),
			float64(n)/fill.Seconds(), snapBytes)
		restart("with snapshot")
		for _, f := range files {
			if err := os.Remove(f); err != nil {
				t.Fatal(err)
			}
		}
		restart("without snapshot")
	}
}

// A fresh state store makes its shards' queue files when it opens, so a
// shard's first SET does not make them in its round's dispatch; the
// shards then write from queue offset 0 and come back after a restart.
func TestStateStorePreparesShardQueues(t *testing.T) {
	dir := t.TempDir()
	b := testBroker(t, dir, nil)
	s := ssOpen(t, b, nil)
	for i := range s.Shards() {
		f := filepath.Join(dir, "consumequeue", StateStoreTopic, strconv.Itoa(i), "00000000000000000000")
		if _, err := os.Stat(f); err != nil {
			t.Fatalf("shard %d: queue file not made at open: %v", i, err)
		}
		if got := b.Store().MaxOffset(StateStoreTopic, int32(i)); got != 0 {
			t.Fatalf("shard %d: prepared queue holds %d entries", i, got)
		}
	}
	if v, _ := ssDo(t, s, "c", "SET", "k1", "v1"); string(v.Str) != "OK" {
		t.Fatalf("set: %+v", v)
	}
	sh := int32(statestore.ShardOf([]byte("k1"), s.Shards()))
	testutil.WaitFor(t, 30*time.Second, "the SET's queue entry at offset 0", func() bool {
		return b.Store().MaxOffset(StateStoreTopic, sh) == 1
	})
	if err := s.Close(); err != nil {
		t.Fatal(err)
	}
	if err := b.Close(); err != nil {
		t.Fatal(err)
	}
	b = testBroker(t, dir, nil)
	s = ssOpen(t, b, nil)
	defer s.Close()
	if v, _ := ssDo(t, s, "c", "GET", "k1"); string(v.Str) != "v1" {
		t.Fatalf("get after restart: %+v", v)
	}
}
