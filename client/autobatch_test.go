package client

import (
	"context"
	"fmt"
	"runtime"
	"strconv"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
)

// Async sends that queue up behind the request in flight leave as batch
// requests; every message still gets its own result (unique ids, its own
// queue offset) and arrives once with its tag, keys and user properties.
//
// With several batch requests in flight their (pooled) bodies are
// recycled while others are on the wire: a body reused too early would
// show as a corrupted message.
func TestClientAutoBatchAsync(t *testing.T) {
	for _, reqs := range []int{1, 4} {
		t.Run(fmt.Sprint("requests=", reqs), func(t *testing.T) { testAutoBatchAsync(t, reqs) })
	}
}

func testAutoBatchAsync(t *testing.T, reqs int) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "AutoBatch", 2)
	p := newTestProducer(t, c, func(o *ProducerOptions) { o.AutoBatchRequests = reqs })
	ctx := testCtx(t, 30*time.Second)
	const n = 600
	var (
		wg      sync.WaitGroup
		mu      sync.Mutex
		results = map[string]*SendResult{} // by body
		errs    []error
	)
	for i := 0; i < n; i++ {
		body := "ab-" + strconv.Itoa(i) + "-" + strings.Repeat(strconv.Itoa(i%10), i%200)
		m := &Message{Topic: "AutoBatch", Body: []byte(body), Tags: "T" + strconv.Itoa(i%3), Keys: []string{"k" + strconv.Itoa(i)},
			Flag: int32(i), Properties: map[string]string{"seq": strconv.Itoa(i)}}
		wg.Add(1)
		if err := p.SendAsync(ctx, m, func(r *SendResult, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
				return
			}
			results[body] = r
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if len(errs) > 0 {
		t.Fatalf("%d sends failed, first: %v", len(errs), errs[0])
	}
	if got := p.batches.Load(); got == 0 {
		t.Fatal("no batch request was sent")
	}
	ids, offIDs := map[string]bool{}, map[string]bool{}
	slots := map[MessageQueue]map[int64]bool{}
	for body, r := range results {
		if r.Status != SendOK || len(r.MsgID) != 32 || len(r.OffsetMsgID) != 32 {
			t.Fatalf("%s: result %+v", body, r)
		}
		if ids[r.MsgID] || offIDs[r.OffsetMsgID] {
			t.Fatalf("%s: duplicate id in %+v", body, r)
		}
		ids[r.MsgID], offIDs[r.OffsetMsgID] = true, true
		if slots[r.Queue] == nil {
			slots[r.Queue] = map[int64]bool{}
		}
		if slots[r.Queue][r.QueueOffset] {
			t.Fatalf("%s: queue offset %v@%d given twice", body, r.Queue, r.QueueOffset)
		}
		slots[r.Queue][r.QueueOffset] = true
	}
	// Every queue's offsets are 0..k-1: the results name the real slots.
	total := 0
	for q, offs := range slots {
		for i := range int64(len(offs)) {
			if !offs[i] {
				t.Fatalf("queue %v: offset %d missing from the results", q, i)
			}
		}
		total += len(offs)
	}
	if total != n {
		t.Fatalf("%d results", total)
	}

	col := newCollector()
	newTestPush(t, c, "gAutoBatch", "AutoBatch", "*", col.handler, func(o *ConsumerOptions) { o.From = ConsumeFromFirst })
	testutil.Eventually(t, 20*time.Second, func() error {
		if got := col.total(); got < n {
			return fmt.Errorf("received %d of %d", got, n)
		}
		return nil
	})
	col.mu.Lock()
	defer col.mu.Unlock()
	for _, m := range col.order {
		body := string(m.Body)
		r := results[body]
		if r == nil || col.seen[body] != 1 {
			t.Fatalf("%s received %d times (result %v)", body, col.seen[body], r)
		}
		i, _ := strconv.Atoi(strings.Split(body, "-")[1])
		if m.MsgID != r.MsgID || m.Tags != "T"+strconv.Itoa(i%3) || len(m.Keys) != 1 || m.Keys[0] != "k"+strconv.Itoa(i) ||
			m.Flag != int32(i) || m.Property("seq") != strconv.Itoa(i) || m.QueueOffset != r.QueueOffset || m.Queue.QueueID != r.Queue.QueueID {
			t.Fatalf("%s arrived as %+v (sent %+v)", body, m, r)
		}
	}
}

// A producer that waits for each async send before the next never
// batches: at low load the requests are what they were without batching.
func TestClientAutoBatchIdleSendsAlone(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "AutoBatchIdle", 2)
	p := newTestProducer(t, c, nil)
	ctx := testCtx(t, 30*time.Second)
	for i := 0; i < 20; i++ {
		res := <-p.SendAsyncChan(ctx, &Message{Topic: "AutoBatchIdle", Body: []byte("x")})
		if res.Err != nil {
			t.Fatal(res.Err)
		}
	}
	if got := p.batches.Load(); got != 0 {
		t.Fatalf("%d batch requests for sends one at a time", got)
	}
}

// A pending async send whose context ends before its batch leaves fails
// with its context's error; the others are sent.
func TestClientAutoBatchExpiredPending(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "AutoBatchCtx", 1)
	p := newTestProducer(t, c, func(o *ProducerOptions) { o.AutoBatchRequests = 1 })
	ctx := testCtx(t, 30*time.Second)
	dead, cancel := context.WithCancel(ctx)
	cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	var ok, failed int
	for i := 0; i < 200; i++ {
		sctx := ctx
		if i%2 == 1 {
			sctx = dead
		}
		wg.Add(1)
		if err := p.SendAsync(sctx, &Message{Topic: "AutoBatchCtx", Body: []byte("x")}, func(_ *SendResult, err error) {
			defer wg.Done()
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				failed++
			} else {
				ok++
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if ok != 100 || failed != 100 {
		t.Fatalf("%d sent, %d failed; want 100 and 100", ok, failed)
	}
}

// A backlog is read with pulls kept in flight ahead of the one being
// handled; every message arrives exactly once, none is skipped.
func TestClientPushReadAhead(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "ReadAhead", 2)
	p := newTestProducer(t, c, nil)
	ctx := testCtx(t, 30*time.Second)
	const n = 3000
	for i := 0; i < n; i += 100 {
		var batch []*Message
		for j := i; j < i+100; j++ {
			batch = append(batch, &Message{Topic: "ReadAhead", Body: []byte("ra-" + strconv.Itoa(j))})
		}
		if _, err := p.SendBatch(ctx, batch); err != nil {
			t.Fatal(err)
		}
	}
	time.Sleep(100 * time.Millisecond)
	base := runtime.NumGoroutine()
	col := newCollector()
	// Three pull connections: the two queues' pulls travel on different
	// ones; Close must close them all.
	pc, err := NewPushConsumer(ConsumerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}, Group: "gReadAhead",
		From: ConsumeFromFirst, ConsumeBatchSize: 16, PullConnections: 3, PullSuspend: 2 * time.Second}, col.handler)
	if err != nil {
		t.Fatal(err)
	}
	if len(pc.base.pullRCs) != 2 {
		t.Fatalf("%d extra pull clients, want 2", len(pc.base.pullRCs))
	}
	if err := pc.Subscribe("ReadAhead", "*"); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(ctx); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		if got := col.total(); got < n {
			return fmt.Errorf("received %d of %d", got, n)
		}
		return nil
	})
	for i := 0; i < n; i++ {
		if got := col.count("ra-" + strconv.Itoa(i)); got != 1 {
			t.Fatalf("ra-%d received %d times", i, got)
		}
	}
	if pc.base.readAheads.Load() == 0 {
		t.Fatal("the backlog was read without read-ahead")
	}
	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	waitGoroutines(t, base)
}
