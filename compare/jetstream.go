package main

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/nats-io/nats-server/v2/server"
	"github.com/nats-io/nats.go"
	"github.com/nats-io/nats.go/jetstream"
	"github.com/smartgo/smartgo/benchmark"
)

// runJetStream runs the same e2e workload as runSmartGo against an
// embedded nats-server with a file-stored JetStream stream: pubs
// publishers (one connection each) with window async publishes in flight,
// and one ordered push-style consumer without acks.
func runJetStream(size, pubs, window int, count, warmup int64, rate float64, durable bool) (result, error) {
	dir, err := os.MkdirTemp("", "compare-jetstream-")
	if err != nil {
		return result{}, err
	}
	defer os.RemoveAll(dir)
	srv, err := server.NewServer(&server.Options{Host: "127.0.0.1", Port: -1, JetStream: true, StoreDir: dir,
		SyncAlways: durable, NoLog: true, NoSigs: true})
	if err != nil {
		return result{}, err
	}
	go srv.Start()
	defer srv.Shutdown()
	if !srv.ReadyForConnections(10 * time.Second) {
		return result{}, errors.New("nats-server not ready")
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Minute)
	defer cancel()

	cnc, err := nats.Connect(srv.ClientURL())
	if err != nil {
		return result{}, err
	}
	defer cnc.Close()
	cjs, err := jetstream.New(cnc)
	if err != nil {
		return result{}, err
	}
	stream, err := cjs.CreateStream(ctx, jetstream.StreamConfig{Name: "COMPARE", Subjects: []string{"compare"}, Storage: jetstream.FileStorage})
	if err != nil {
		return result{}, err
	}
	cons, err := stream.CreateOrUpdateConsumer(ctx, jetstream.ConsumerConfig{AckPolicy: jetstream.AckNonePolicy, DeliverPolicy: jetstream.DeliverAllPolicy})
	if err != nil {
		return result{}, err
	}
	var hist benchmark.Histogram
	var received, warmed, since atomic.Int64
	done := make(chan struct{})
	var once sync.Once
	cc, err := cons.Consume(func(m jetstream.Msg) {
		b := m.Data()
		if len(b) < 8 {
			return
		}
		st := int64(binary.BigEndian.Uint64(b))
		if st < since.Load() {
			warmed.Add(1) // warm-up: not counted
			return
		}
		hist.Record(time.Duration(time.Now().UnixNano() - st))
		if received.Add(1) >= count {
			once.Do(func() { close(done) })
		}
	})
	if err != nil {
		return result{}, err
	}
	defer cc.Stop()

	var issued, acked, failed atomic.Int64
	var wg sync.WaitGroup
	// Connect the publishers before the clock starts (the SmartGo side
	// creates its producer outside the window too).
	pubJS := make([]jetstream.JetStream, pubs)
	for i := range pubJS {
		nc, err := nats.Connect(srv.ClientURL())
		if err != nil {
			return result{}, err
		}
		defer nc.Close()
		pubJS[i], err = jetstream.New(nc, jetstream.WithPublishAsyncMaxPending(window),
			jetstream.WithPublishAsyncErrHandler(func(jetstream.JetStream, *nats.Msg, error) {
				acked.Add(-1)
				failed.Add(1)
			}))
		if err != nil {
			return result{}, err
		}
	}
	// Warm-up, as on the SmartGo side: sent and consumed before the clock
	// starts, not counted.
	if warmup > 0 {
		since.Store(math.MaxInt64)
		for i := int64(0); i < warmup; i++ {
			body := make([]byte, size)
			binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
			// One loop fills every publisher's window: on a busy machine
			// a full window may take longer than nats.go's default
			// stall wait (200 ms) to drain, which must not end the run.
			if _, err := pubJS[i%int64(pubs)].PublishAsync("compare", body, jetstream.WithStallWait(time.Minute)); err != nil {
				return result{}, fmt.Errorf("warm-up publish: %w", err)
			}
		}
		for _, js := range pubJS {
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
				return result{}, ctx.Err()
			}
		}
		deadline := time.Now().Add(10 * time.Second)
		for warmed.Load() < warmup && time.Now().Before(deadline) {
			time.Sleep(5 * time.Millisecond)
		}
		acked.Store(0)
		failed.Store(0)
	}
	since.Store(time.Now().UnixNano())
	start := time.Now()
	for _, js := range pubJS {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				i := issued.Add(1)
				if i > count || ctx.Err() != nil {
					break
				}
				if rate > 0 { // publish i is due at start + (i-1)/rate
					if d := time.Until(start.Add(time.Duration(float64(i-1) / rate * float64(time.Second)))); d > 0 {
						time.Sleep(d)
					}
				}
				body := make([]byte, size)
				binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
				if _, err := js.PublishAsync("compare", body); err != nil {
					failed.Add(1)
					continue
				}
				acked.Add(1) // counted back by the error handler
			}
			select {
			case <-js.PublishAsyncComplete():
			case <-ctx.Done():
			}
		}()
	}
	wg.Wait()
	el := time.Since(start) // all publishes acknowledged (or failed)
	// Let the consumer catch up with what was stored (bounded).
	catchUp := time.NewTimer(10 * time.Second)
	defer catchUp.Stop()
	for received.Load() < acked.Load() {
		select {
		case <-done:
		case <-catchUp.C:
		case <-time.After(10 * time.Millisecond):
			continue
		}
		break
	}
	return result{rate: float64(acked.Load()) / el.Seconds(), p50: hist.Percentile(50), p99: hist.Percentile(99), errors: failed.Load(),
		lost: max(0, acked.Load()-received.Load())}, nil
}
