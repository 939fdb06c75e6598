package store

import (
	"context"
	"fmt"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
)

// Under async flush the logic flush is a round of the commitlog flusher:
// each one makes the commitlog durable too, so the checkpoint records the
// commitlog's newest record even when FlushInterval alone would not have
// synced it yet, and it advances without Close.
//
// Each put gets a store time of its own (the clock moves a millisecond
// before each): with one time for all, the checkpoint already showed it
// for both once a round had synced the first record (seen on a fresh CI
// run: the commitlog was flushed to that record only).
func TestFlushRoundTakesCommitlogWithLogic(t *testing.T) {
	root := t.TempDir()
	ts := time.Now().Add(-time.Minute).Truncate(time.Millisecond)
	var clock atomic.Int64 // ms after ts
	s := openTest(t, root, func(o *Options) {
		o.FlushMode = FlushAsync
		o.FlushInterval = time.Hour
		o.LogicFlushInterval = 20 * time.Millisecond
		o.Now = func() time.Time { return ts.Add(time.Duration(clock.Load()) * time.Millisecond) }
	})
	var last PutResult
	for i := range 50 {
		clock.Add(1)
		last = mustPut(t, s, msgSpec{topic: "T", qid: 2, body: fmt.Sprintf("round %d", i)})
	}
	want, end := ts.Add(50*time.Millisecond).UnixMilli(), last.PhysicalOffset+int64(last.WroteBytes)
	if last.StoreTimestamp != want {
		t.Fatalf("the last put's store time is %d, want %d", last.StoreTimestamp, want)
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		cp, ok, err := readCheckpoint(root)
		if err != nil {
			return err
		}
		if !ok || cp.Physic != want || cp.Logics != want {
			return fmt.Errorf("checkpoint %+v (found %v), want commitlog and queues at %d", cp, ok, want)
		}
		return nil
	})
	// The checkpoint never claims more than was synced.
	if f := s.cl.flushed.Load(); f < end {
		t.Fatalf("checkpoint at the last record, commitlog flushed to %d, records end at %d", f, end)
	}
}

// A logic round falls on a commitlog round's tick (both on the shared
// clock, LogicFlushInterval a multiple of FlushInterval): that tick makes
// one commitlog flush, not one for each ticker. Under steady writes the
// commitlog is then synced once a FlushInterval, not half as often again.
func TestFlushRoundMergesLogicTick(t *testing.T) {
	const every = 20 * time.Millisecond
	s := openTest(t, t.TempDir(), func(o *Options) {
		o.FlushMode = FlushAsync
		o.FlushInterval = every
		o.LogicFlushInterval = 2 * every
	})
	stop := make(chan struct{})
	wrote := make(chan struct{})
	go func() {
		defer close(wrote)
		pace := time.NewTicker(every / 100) // a record every 200 µs
		defer pace.Stop()
		for {
			select {
			case <-stop:
				return
			case <-pace.C:
			}
			if _, err := s.Put(context.Background(), &record.Message{Topic: "T", QueueID: 1, Body: []byte("steady"), BornHost: bornHost}); err != nil {
				t.Error(err)
				return
			}
		}
	}()
	began, before := time.Now(), s.stats.flushes.Load()
	time.Sleep(40 * every)
	flushes, elapsed := s.stats.flushes.Load()-before, time.Since(began)
	close(stop)
	<-wrote
	ticks := int64(elapsed/every) + 1 // the commitlog rounds there were room for
	if flushes > ticks+2 {
		t.Fatalf("%d commitlog flushes in %v, %d rounds of %v", flushes, elapsed, ticks, every)
	}
	t.Logf("%d commitlog flushes in %v, %d rounds of %v", flushes, elapsed, ticks, every)
}
