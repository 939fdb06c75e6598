package broker

import (
	"context"
	"encoding/binary"
	"fmt"
	"runtime"
	"sort"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/record"
)

// BenchmarkBrokerProduce measures produce throughput through the broker
// over loopback (SEND_MESSAGE_V2, 32 concurrent senders on one connection)
// next to the store-only append rate of the same message in the same run:
// the ratio is the broker's overhead (remoting, header decode, checks).
func BenchmarkBrokerProduce(b *testing.B) {
	for _, size := range []int{128, 1024} {
		body := make([]byte, size)
		b.Run(fmt.Sprintf("store-only/%dB", size), func(b *testing.B) {
			so := store.DefaultOptions(b.TempDir())
			so.SegmentSize = 256 << 20
			st, err := store.Open(so)
			if err != nil {
				b.Fatal(err)
			}
			defer st.Close()
			b.SetBytes(int64(size))
			b.ReportAllocs()
			var n atomic.Int64
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				m := &record.Message{Topic: "Bench", BornHost: st.Options().StoreHost, Body: body,
					Properties: "TAGS\x01t\x02CLUSTER\x01DefaultCluster"}
				for pb.Next() {
					m.QueueID = int32(n.Add(1) % 4)
					if _, err := st.Put(context.Background(), m); err != nil {
						b.Error(err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
		b.Run(fmt.Sprintf("broker/%dB", size), func(b *testing.B) {
			br := benchBroker(b)
			c, err := remoting.NewClient(remoting.ClientOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			hdr := &protocol.SendMessageRequestHeader{ProducerGroup: "bench", Topic: "Bench", DefaultTopic: AutoCreateTopicKey,
				DefaultTopicQueueNums: 4, QueueID: -1, Properties: "TAGS\x01t"}
			v2 := hdr.V2()
			// Create the topic before timing.
			if resp, err := c.Invoke(context.Background(), br.Addr(), protocol.NewRequest(protocol.SendMessageV2, v2, body)); err != nil || resp.Code != protocol.Success {
				b.Fatalf("warm-up send: %v %v", resp, err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.SetParallelism(16)
			b.ResetTimer()
			b.RunParallel(func(pb *testing.PB) {
				for pb.Next() {
					resp, err := c.Invoke(context.Background(), br.Addr(), protocol.NewRequest(protocol.SendMessageV2, v2, body))
					if err != nil || resp.Code != protocol.Success {
						b.Errorf("send: %v %v", resp, err)
						return
					}
				}
			})
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
		// The same messages as SEND_BATCH_MESSAGE requests of 32 (what an
		// auto-batching producer sends under load); one op is one message.
		b.Run(fmt.Sprintf("broker-batch32/%dB", size), func(b *testing.B) {
			const per = 32
			br := benchBroker(b)
			c, err := remoting.NewClient(remoting.ClientOptions{})
			if err != nil {
				b.Fatal(err)
			}
			defer c.Close()
			hdr := &protocol.SendMessageRequestHeader{ProducerGroup: "bench", Topic: "Bench", DefaultTopic: AutoCreateTopicKey,
				DefaultTopicQueueNums: 4, QueueID: -1, Batch: true}
			v2 := hdr.V2()
			var batch []byte
			for range per {
				batch = record.AppendBatchItem(batch, 0, body, "TAGS\x01t")
			}
			send := func() error {
				resp, err := c.Invoke(context.Background(), br.Addr(), protocol.NewRequest(protocol.SendBatchMessage, v2, batch))
				if err != nil {
					return err
				}
				if resp.Code != protocol.Success {
					return fmt.Errorf("code %d: %s", resp.Code, resp.Remark)
				}
				var rh protocol.SendMessageResponseHeader
				if err := resp.DecodeHeader(&rh); err != nil {
					return err
				}
				if n := strings.Count(rh.MsgID, ",") + 1; n != per {
					return fmt.Errorf("batch stored %d messages, want %d", n, per)
				}
				return nil
			}
			if err := send(); err != nil { // creates the topic
				b.Fatalf("warm-up batch: %v", err)
			}
			b.SetBytes(int64(size))
			b.ReportAllocs()
			b.SetParallelism(2)
			b.ResetTimer()
			var sent atomic.Int64
			b.RunParallel(func(pb *testing.PB) {
				for {
					// One request per 32 ops.
					n := 0
					for n < per && pb.Next() {
						n++
					}
					if n == 0 {
						return
					}
					if err := send(); err != nil {
						b.Error(err)
						return
					}
					sent.Add(per)
				}
			})
			if sent.Load() < int64(b.N) {
				b.Fatalf("stored %d of %d messages", sent.Load(), b.N)
			}
			b.ReportMetric(float64(b.N)/b.Elapsed().Seconds(), "msgs/s")
		})
	}
}

func benchBroker(tb testing.TB) *Broker {
	so := store.DefaultOptions(tb.TempDir())
	so.SegmentSize = 256 << 20
	br, err := New(Options{ListenAddr: "127.0.0.1:0", AutoCreateTopic: true, AutoCreateGroup: true, LongPolling: true, Store: so})
	if err != nil {
		tb.Fatal(err)
	}
	tb.Cleanup(func() { _ = br.Close() })
	return br
}

// BenchmarkBrokerE2ELatency sends 128 B messages at a fixed moderate rate
// (2,000 msgs/s) while a consumer long-polls the queue, and reports the
// produce-to-consume latency percentiles (send time stamped in the body).
func BenchmarkBrokerE2ELatency(b *testing.B) {
	br := benchBroker(b)
	c, err := remoting.NewClient(remoting.ClientOptions{})
	if err != nil {
		b.Fatal(err)
	}
	defer c.Close()
	const rate = 2000
	send := func(i int) {
		body := make([]byte, 128)
		binary.BigEndian.PutUint64(body, uint64(time.Now().UnixNano()))
		hdr := &protocol.SendMessageRequestHeader{ProducerGroup: "bench", Topic: "Lat", DefaultTopic: AutoCreateTopicKey,
			DefaultTopicQueueNums: 1, QueueID: 0}
		resp, err := c.Invoke(context.Background(), br.Addr(), protocol.NewRequest(protocol.SendMessageV2, hdr.V2(), body))
		if err != nil || resp.Code != protocol.Success {
			b.Errorf("send %d: %v %v", i, resp, err)
		}
	}
	send(-1) // creates the topic; its message is skipped below
	var (
		mu   sync.Mutex
		lats []time.Duration
	)
	ctx, cancel := context.WithCancel(context.Background())
	done := make(chan struct{})
	go func() {
		defer close(done)
		offset := int64(1)
		for ctx.Err() == nil {
			h := &protocol.PullMessageRequestHeader{ConsumerGroup: "lat", Topic: "Lat", QueueID: 0, QueueOffset: offset, MaxMsgNums: 32,
				SysFlag: pullFlagSuspend | pullFlagSubscription, SuspendTimeoutMillis: 1000, Subscription: "*"}
			resp, err := c.Invoke(ctx, br.Addr(), protocol.NewRequest(protocol.PullMessage, h, nil))
			if err != nil {
				return
			}
			now := time.Now()
			var rh protocol.PullMessageResponseHeader
			if resp.Code != protocol.Success || resp.DecodeHeader(&rh) != nil {
				continue
			}
			body := resp.Body
			mu.Lock()
			for len(body) > 0 {
				v, err := record.Parse(body, false)
				if err != nil {
					break
				}
				lats = append(lats, now.Sub(time.Unix(0, int64(binary.BigEndian.Uint64(v.Body)))))
				body = body[v.TotalSize:]
			}
			mu.Unlock()
			offset = rh.NextBeginOffset
		}
	}()
	b.ResetTimer()
	tick := time.NewTicker(time.Second / rate)
	for i := 0; i < b.N; i++ {
		<-tick.C
		send(i)
	}
	tick.Stop()
	deadline := time.Now().Add(5 * time.Second)
	for {
		mu.Lock()
		got := len(lats)
		mu.Unlock()
		if got >= b.N || time.Now().After(deadline) {
			break
		}
		time.Sleep(time.Millisecond)
	}
	b.StopTimer()
	cancel()
	<-done
	mu.Lock()
	defer mu.Unlock()
	if len(lats) == 0 {
		b.Fatal("no message consumed")
	}
	sort.Slice(lats, func(i, j int) bool { return lats[i] < lats[j] })
	pct := func(p float64) float64 { return float64(lats[int(p*float64(len(lats)-1))].Microseconds()) }
	b.ReportMetric(pct(0.50), "p50-µs")
	b.ReportMetric(pct(0.99), "p99-µs")
	b.ReportMetric(float64(len(lats)), "consumed")
}

// BenchmarkBrokerProduceSyncFlush: 64 producers sending one message per
// request (SEND_MESSAGE_V2, 1 KiB, waiting for each answer) over 8
// connections to a sync-flush broker, next to the store-only sync put
// rate of as many goroutines in the same run. It reports the rates, and
// the goroutines of the process while the load runs ("goroutines") and
// those of them waiting inside the store for a group commit
// ("blocked-in-store").
func BenchmarkBrokerProduceSyncFlush(b *testing.B) {
	const producers, conns = 64, 8
	body := make([]byte, 1024)
	so := store.DefaultOptions(b.TempDir())
	so.SegmentSize = 256 << 20
	so.FlushMode = store.FlushSync
	st, err := store.Open(so)
	if err != nil {
		b.Fatal(err)
	}
	defer st.Close()
	base := runParallel(b, producers, b.N, func(int) error {
		m := &record.Message{Topic: "Bench", BornHost: st.Options().StoreHost, Body: body, Properties: "TAGS\x01t"}
		_, err := st.Put(context.Background(), m)
		return err
	}, nil)

	bo := store.DefaultOptions(b.TempDir())
	bo.SegmentSize = 256 << 20
	bo.FlushMode = store.FlushSync
	br, err := New(Options{ListenAddr: "127.0.0.1:0", AutoCreateTopic: true, AutoCreateGroup: true, LongPolling: true, Store: bo})
	if err != nil {
		b.Fatal(err)
	}
	defer br.Close()
	clients := make([]*remoting.Client, conns)
	for i := range clients {
		if clients[i], err = remoting.NewClient(remoting.ClientOptions{}); err != nil {
			b.Fatal(err)
		}
		defer clients[i].Close()
	}
	v2 := (&protocol.SendMessageRequestHeader{ProducerGroup: "bench", Topic: "Bench", DefaultTopic: AutoCreateTopicKey,
		DefaultTopicQueueNums: 8, QueueID: -1, Properties: "TAGS\x01t"}).V2()
	for _, c := range clients { // connect and create the topic before timing
		if resp, err := c.Invoke(context.Background(), br.Addr(), protocol.NewRequest(protocol.SendMessageV2, v2, body)); err != nil || resp.Code != protocol.Success {
			b.Fatalf("warm-up send: %v %v", resp, err)
		}
	}
	var load goroutineSample
	b.ResetTimer()
	d := runParallel(b, producers, b.N, func(g int) error {
		resp, err := clients[g%conns].Invoke(context.Background(), br.Addr(), protocol.NewRequest(protocol.SendMessageV2, v2, body))
		if err == nil && resp.Code != protocol.Success {
			err = fmt.Errorf("code %d %s", resp.Code, resp.Remark)
		}
		return err
	}, &load)
	b.StopTimer()
	b.ReportMetric(float64(b.N)/d.Seconds(), "msgs/s")
	b.ReportMetric(float64(b.N)/base.Seconds(), "store-msgs/s")
	b.ReportMetric(base.Seconds()/d.Seconds(), "ratio")
	b.ReportMetric(float64(load.total), "goroutines")
	b.ReportMetric(float64(load.inStore), "blocked-in-store")
}

// goroutineSample is the goroutines of the process at one moment under
// load, and how many of them wait in the store's group commit.
type goroutineSample struct {
	total, inStore int
}

func (s *goroutineSample) take() {
	buf := make([]byte, 8<<20)
	n := runtime.Stack(buf, true)
	stacks := string(buf[:n])
	s.total = strings.Count(stacks, "goroutine ") // one header line per goroutine
	s.inStore = strings.Count(stacks, "store.(*Store).waitFlushed(")
}

// runParallel runs n calls of fn over g goroutines and returns the time
// taken; with sample set it takes a goroutine sample once half the calls
// are done.
func runParallel(b *testing.B, g, n int, fn func(g int) error, sample *goroutineSample) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	var once sync.Once
	start := time.Now()
	for i := range g {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for {
				k := next.Add(1)
				if k > int64(n) {
					return
				}
				if sample != nil && k == int64(n/2) {
					once.Do(sample.take)
				}
				if err := fn(i); err != nil {
					b.Error(err)
					return
				}
			}
		}()
	}
	wg.Wait()
	return time.Since(start)
}
