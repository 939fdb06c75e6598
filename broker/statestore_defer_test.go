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

// Deferred mutations from several batching goroutines at once, on the
// same shards: each batch's Complete finds its shard's puts answered by
// its own drain or by another goroutine's drain or dispatch round under
// way (then it waits for the answers; a goroutine that drains the store
// all along makes that frequent), every mutation is applied once and
// in put order (each key ends with its last round's value), and GETs
// served meanwhile through InvokeLocal see only whole rounds.
func TestStateStoreDeferredConcurrentBatches(t *testing.T) {
	b := testBroker(t, t.TempDir(), nil)
	s := ssOpen(t, b, nil)
	defer s.Close()
	const workers, rounds, batch = 4, 60, 8
	ctx := context.Background()
	var wg sync.WaitGroup
	errc := make(chan error, workers+1)
	for w := range workers {
		wg.Add(1)
		go func() {
			defer wg.Done()
			var resp protocol.StateStoreResponse
			pend := make([]*StateStorePending, 0, batch)
			for r := range rounds {
				for k := range batch {
					key := []byte(fmt.Sprintf("w%d-k%d", w, k))
					req := &protocol.StateStoreRequest{Shard: int32(statestore.ShardOf(key, s.Shards())), ClientID: fmt.Sprintf("c%d", w),
						Timestamp: ssTS(), HasTimestamp: true, Payload: statestore.AppendRequest(nil, []byte("SET"), key, []byte(fmt.Sprintf("r%d", r)))}
					cmd, err := statestore.ParseCommand(req.Payload)
					if err != nil {
						errc <- err
						return
					}
					p, err := s.InvokeDeferred(ctx, time.Time{}, req, &cmd, nil, &resp)
					if err != nil || p == nil {
						errc <- fmt.Errorf("SET %s round %d: pending %v, err %v, reply %q", key, r, p, err, resp.Reply)
						return
					}
					pend = append(pend, p)
				}
				for _, p := range pend {
					if err := p.Complete(&resp); err != nil || string(resp.Reply) != "+OK\r\n" {
						errc <- fmt.Errorf("complete round %d: %v %q", r, err, resp.Reply)
						return
					}
				}
				pend = pend[:0]
			}
		}()
	}
	done := make(chan struct{})
	var rg sync.WaitGroup
	rg.Add(2)
	go func() { // drains of another goroutine: they answer batches' puts
		defer rg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			b.Store().Drain()
		}
	}()
	go func() { // readers meanwhile: a key holds no value or a round's
		defer rg.Done()
		for {
			select {
			case <-done:
				return
			default:
			}
			resp := ssInvokeLocal(t, s, nil, "reader", "GET", "w0-k0")
			v, err := statestore.DecodeReply(resp.Reply)
			if err != nil || (v.Kind != statestore.KindNull && (v.Kind != statestore.KindBulk || v.Str[0] != 'r')) {
				errc <- fmt.Errorf("GET meanwhile: %q %v", resp.Reply, err)
				return
			}
		}
	}()
	wg.Wait()
	close(done)
	rg.Wait()
	close(errc)
	for err := range errc {
		t.Fatal(err)
	}
	for w := range workers {
		for k := range batch {
			key := fmt.Sprintf("w%d-k%d", w, k)
			if v, _ := ssDo(t, s, "check", "GET", key); string(v.Str) != fmt.Sprintf("r%d", rounds-1) {
				t.Fatalf("%s = %q, want r%d", key, v.Str, rounds-1)
			}
		}
	}
}

// A deferred mutation takes its store-side clock from the caller's
// reading when the broker's clock is the wall clock: the entry's version
// (issued from that clock when it is ahead of the client's timestamp)
// carries the reading's millisecond. A broker with a clock of its own
// (Options.Now) goes by that clock, whatever the caller read.
func TestStateStoreDeferredCallersClock(t *testing.T) {
	const skewed = -48 * time.Hour // the fake clock's offset
	for _, tc := range []struct {
		name string
		mod  func(*Options)
	}{
		{"wall clock", nil},
		{"own clock", func(o *Options) { o.Now = func() time.Time { return time.Now().Add(skewed) } }},
	} {
		t.Run(tc.name, func(t *testing.T) {
			b := testBroker(t, t.TempDir(), tc.mod)
			s := ssOpen(t, b, nil)
			defer s.Close()
			// Two seconds old, so that neither the version's wall part nor
			// the record's store time (not held at the store's previous
			// put's, a second or more later) can come from the clock.
			reading := time.Now().Add(-2 * time.Second)
			key := []byte("clocked")
			ts := statestore.HLC{Wall: time.Now().Add(3 * skewed).UnixMilli(), Node: "client"}.String()
			req := &protocol.StateStoreRequest{Shard: int32(statestore.ShardOf(key, s.Shards())), ClientID: "c",
				Timestamp: ts, HasTimestamp: true, Payload: statestore.AppendRequest(nil, []byte("SET"), key, []byte("v"))}
			cmd, err := statestore.ParseCommand(req.Payload)
			if err != nil {
				t.Fatal(err)
			}
			var resp protocol.StateStoreResponse
			before := b.now()
			p, err := s.InvokeDeferred(context.Background(), reading, req, &cmd, nil, &resp)
			if err != nil || p == nil {
				t.Fatalf("SET: pending %v, err %v, reply %q", p, err, resp.Reply)
			}
			// Drain answers the put (PutDone) unless the store's own
			// dispatcher holds the buffer at that moment; then that
			// dispatcher answers it, so wait for the answer before
			// reading its result.
			testutil.WaitFor(t, 10*time.Second, "the put's answer", func() bool {
				b.Store().Drain()
				return p.sh.pend.answered.Load() > 0
			})
			stored := p.res.StoreTimestamp
			if err := p.Complete(&resp); err != nil || string(resp.Reply) != "+OK\r\n" {
				t.Fatalf("complete: %v %q", err, resp.Reply)
			}
			after := b.now()
			v, err := statestore.ParseHLC(resp.Version)
			if err != nil {
				t.Fatalf("version %q: %v", resp.Version, err)
			}
			if tc.mod == nil {
				if v.Wall != reading.UnixMilli() {
					t.Fatalf("version %s: wall %d, want the caller's reading %d", resp.Version, v.Wall, reading.UnixMilli())
				}
				// The store's time follows the reading by the monotonic
				// clock: the same millisecond, or the next after rounding.
				if d := stored - reading.UnixMilli(); d < 0 || d > 1 {
					t.Fatalf("record stored at %d, want the caller's reading %d", stored, reading.UnixMilli())
				}
				return
			}
			if stored < before.UnixMilli() || stored > after.UnixMilli() {
				t.Fatalf("record stored at %d, want the broker's clock in [%d, %d]", stored, before.UnixMilli(), after.UnixMilli())
			}
			if v.Wall < before.UnixMilli() || v.Wall > after.UnixMilli() {
				t.Fatalf("version %s: wall %d, want the broker's clock in [%d, %d] (the caller read %d)",
					resp.Version, v.Wall, before.UnixMilli(), after.UnixMilli(), reading.UnixMilli())
			}
		})
	}
}
