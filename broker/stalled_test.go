package broker

import (
	"fmt"
	"net"
	"slices"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// stalledRun is one run of the stalled-consumer scenario: producers write
// n messages to topic T (4 queues) while 4 healthy consumers long-poll
// them; with stall, a consumer that stopped reading holds 200 pulls on
// topic S, which receives 64 messages of 4 KiB in one batch just before:
// the answers to its woken pulls (128 KiB each) are far more than its
// socket and write queue take. It returns how long the healthy consumers
// took to receive everything.
func stalledRun(tb testing.TB, stall bool, n int) time.Duration {
	tb.Helper()
	t, ok := tb.(*testing.T)
	if !ok {
		t = &testing.T{}
	}
	b := testBroker(t, tb.TempDir(), func(o *Options) { o.Remoting.MaxWriteQueue = 64 << 10 })
	prod := newTestClient(t, b.Addr())
	prod.mustSend("S", 0, "first", "")
	for q := range int32(4) {
		prod.mustSend("T", q, "first", "")
	}
	if stall {
		nc, err := net.Dial("tcp", b.Addr())
		if err != nil {
			tb.Fatal(err)
		}
		defer nc.Close()
		for i := 1; i <= 200; i++ {
			h := &protocol.PullMessageRequestHeader{ConsumerGroup: "stalled", Topic: "S", QueueID: 0, QueueOffset: 1,
				MaxMsgNums: 32, SysFlag: (pullFlagSuspend | pullFlagSubscription), SuspendTimeoutMillis: 30_000, Subscription: "*", ExpressionType: "TAG"}
			req := protocol.NewRequest(protocol.PullMessage, h, nil)
			req.Opaque = int32(i)
			frame, err := protocol.EncodeFrame(req)
			if err != nil {
				tb.Fatal(err)
			}
			if _, err := nc.Write(frame); err != nil {
				tb.Fatal(err)
			}
		}
		testutil.WaitFor(t, 10*time.Second, "", func() bool { return b.hold.Len() >= 200 })
		// One batch, so that every woken pull finds 32 messages (128 KiB):
		// 200 such answers are far more than the socket buffers take.
		var batch []byte
		for range 64 {
			batch = record.AppendBatchItem(batch, 0, []byte(strings.Repeat("x", 4<<10)), "")
		}
		h := &protocol.SendMessageRequestHeader{ProducerGroup: "pg", Topic: "S", DefaultTopic: AutoCreateTopicKey,
			DefaultTopicQueueNums: 4, QueueID: 0, Batch: true}
		if resp := prod.invoke(protocol.SendBatchMessage, h.V2(), batch); resp.Code != protocol.Success {
			tb.Fatalf("batch to S: %d %s", resp.Code, resp.Remark)
		}
		// Every stalled pull was woken and answered (into a socket nobody
		// reads) before the clock starts.
		testutil.WaitFor(t, 10*time.Second, "", func() bool { return b.hold.Len() == 0 })
	}
	var got atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	done := make(chan struct{})
	for q := range int32(4) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			c := newTestClient(t, b.Addr())
			off := int64(1)
			for got.Load() < int64(n) {
				select {
				case <-done:
					return
				default:
				}
				r := c.pull("healthy", "T", q, off, (pullFlagSuspend | pullFlagSubscription), 20*time.Second, "*")
				got.Add(int64(len(r.msgs)))
				if r.code == protocol.Success {
					off = r.hdr.NextBeginOffset
				}
			}
		}()
	}
	var pwg sync.WaitGroup
	for p := range 4 {
		pwg.Add(1)
		go func() {
			defer pwg.Done()
			c := newTestClient(t, b.Addr())
			for i := p; i < n; i += 4 {
				c.mustSend("T", int32(i%4), fmt.Sprint("m", i), "")
			}
		}()
	}
	pwg.Wait()
	deadline := time.Now().Add(15 * time.Second)
	for got.Load() < int64(n) && time.Now().Before(deadline) {
		time.Sleep(2 * time.Millisecond)
	}
	took := time.Since(start)
	close(done)
	if got.Load() < int64(n) {
		tb.Fatalf("healthy consumers received %d of %d messages in %v (stalled consumer: %v)", got.Load(), n, took, stall)
	}
	// Unblock the healthy consumers' last held pulls.
	for q := range int32(4) {
		prod.mustSend("T", q, "last", "")
	}
	wg.Wait()
	return took
}

// TestBrokerStalledConsumerCostsOthersNothing: a consumer that stops
// reading while its held pulls are woken does not hold up the other
// consumers: they still receive every message at once (their pulls are
// held for 20 s, so any stall would show), and the broker keeps serving.
func TestBrokerStalledConsumerCostsOthersNothing(t *testing.T) {
	with := stalledRun(t, true, 400)
	without := stalledRun(t, false, 400)
	t.Logf("healthy consumers received 400 messages in %v with a stalled consumer, %v without", with, without)
}

// BenchmarkBrokerStalledConsumer reports the healthy consumers' rate with
// a stalled consumer next to the rate without one, in the same run: five
// pairs of runs, the order alternating, and "ratio" the median of the
// pairs' with/without rate ratios (the target is within noise of 1).
func BenchmarkBrokerStalledConsumer(b *testing.B) {
	n := max(b.N, 400)
	var with, without time.Duration
	var ratios []float64
	for i := range 5 {
		var w, wo time.Duration
		if i%2 == 0 {
			wo = stalledRun(b, false, n)
			w = stalledRun(b, true, n)
		} else {
			w = stalledRun(b, true, n)
			wo = stalledRun(b, false, n)
		}
		with += w
		without += wo
		ratios = append(ratios, wo.Seconds()/w.Seconds())
	}
	slices.Sort(ratios)
	b.ReportMetric(5*float64(n)/with.Seconds(), "msgs/s-stalled")
	b.ReportMetric(5*float64(n)/without.Seconds(), "msgs/s-alone")
	b.ReportMetric(ratios[2], "ratio")
}
