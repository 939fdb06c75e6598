package client

import (
	"bytes"
	"context"
	"errors"
	"fmt"
	"net"
	"os"
	"path/filepath"
	"reflect"
	"runtime"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

func queues(n int) []MessageQueue {
	out := make([]MessageQueue, n)
	for i := range out {
		out[i] = MessageQueue{Topic: "T", BrokerName: "b", QueueID: int32(i)}
	}
	return out
}

func ids(mqs []MessageQueue) []int32 {
	out := []int32{}
	for _, q := range mqs {
		out = append(out, q.QueueID)
	}
	return out
}

func TestClientAllocateAveragely(t *testing.T) {
	cids := []string{"c0", "c1", "c2"}
	want := [][]int32{{0, 1, 2}, {3, 4, 5}, {6, 7}}
	for i, cid := range cids {
		if got := ids(AllocateAveragely{}.Allocate(cid, queues(8), cids)); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("%s: %v, want %v", cid, got, want[i])
		}
	}
	// More consumers than queues: the extra ones get nothing.
	cids = []string{"a", "b", "c", "d"}
	got := [][]int32{}
	for _, cid := range cids {
		got = append(got, ids(AllocateAveragely{}.Allocate(cid, queues(2), cids)))
	}
	if !reflect.DeepEqual(got, [][]int32{{0}, {1}, {}, {}}) {
		t.Errorf("2 queues, 4 consumers: %v", got)
	}
	if r := (AllocateAveragely{}).Allocate("zz", queues(4), cids); r != nil {
		t.Errorf("absent client got %v", r)
	}
	// 10 queues, 4 consumers: 3,3,2,2.
	cids = []string{"a", "b", "c", "d"}
	want = [][]int32{{0, 1, 2}, {3, 4, 5}, {6, 7}, {8, 9}}
	for i, cid := range cids {
		if got := ids(AllocateAveragely{}.Allocate(cid, queues(10), cids)); !reflect.DeepEqual(got, want[i]) {
			t.Errorf("10/4 %s: %v, want %v", cid, got, want[i])
		}
	}
}

func TestClientAllocateStrategiesPartition(t *testing.T) {
	for _, s := range []AllocateStrategy{AllocateAveragely{}, AllocateCircle{}, AllocateConsistentHash{}} {
		for _, nc := range []int{1, 2, 3, 5, 9} {
			cids := []string{}
			for i := 0; i < nc; i++ {
				cids = append(cids, fmt.Sprintf("10.0.0.1@%d", i))
			}
			seen := map[MessageQueue]int{}
			for _, cid := range cids {
				for _, q := range s.Allocate(cid, queues(8), cids) {
					seen[q]++
				}
			}
			if len(seen) != 8 {
				t.Errorf("%s with %d consumers covers %d of 8 queues", s.Name(), nc, len(seen))
			}
			for q, n := range seen {
				if n != 1 {
					t.Errorf("%s: queue %v given %d times", s.Name(), q, n)
				}
			}
		}
	}
	if got := ids(AllocateCircle{}.Allocate("b", queues(5), []string{"a", "b"})); !reflect.DeepEqual(got, []int32{1, 3}) {
		t.Errorf("circle: %v", got)
	}
}

func TestClientParseSubscription(t *testing.T) {
	s := parseSubscription("T", " TagA || TagB ||  || TagA")
	if s.expr != "TagA || TagB ||  || TagA" || len(s.tags) != 2 || !s.match("TagB") || s.match("TagC") || len(s.codes) != 2 {
		t.Fatalf("bad parse: %+v", s)
	}
	for _, e := range []string{"", "*", " * "} {
		if s := parseSubscription("T", e); s.tags != nil || s.expr != "*" || !s.match("x") {
			t.Errorf("%q: %+v", e, s)
		}
	}
}

func TestClientLocalOffsetFileFormat(t *testing.T) {
	dir := t.TempDir()
	lo, err := newLocalOffsets(dir, "g1")
	if err != nil {
		t.Fatal(err)
	}
	lo.update(MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 1}, 42, false)
	lo.update(MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 0}, 7, false)
	lo.update(MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 0}, 5, true) // not lower
	if err := lo.persist(context.Background(), nil); err != nil {
		t.Fatal(err)
	}
	data, err := os.ReadFile(filepath.Join(dir, "g1", "offsets.json"))
	if err != nil {
		t.Fatal(err)
	}
	const want = `{"offsetTable":{"T@broker-a@0":7,"T@broker-a@1":42}}`
	if string(data) != want {
		t.Fatalf("file = %s, want %s", data, want)
	}
	again, err := newLocalOffsets(dir, "g1")
	if err != nil {
		t.Fatal(err)
	}
	if off, _ := again.read(context.Background(), MessageQueue{Topic: "T", BrokerName: "broker-a", QueueID: 1}, true); off != 42 {
		t.Fatalf("reloaded offset %d", off)
	}
	if off, _ := again.read(context.Background(), MessageQueue{Topic: "U", BrokerName: "broker-a", QueueID: 1}, true); off != -1 {
		t.Fatalf("missing offset %d", off)
	}
}

// A broadcasting consumer's offsets file cut anywhere, or holding
// something else than the object it writes, is refused with ErrOffsetFile
// naming the file: it used to load as no offsets ("null", an unknown key)
// and the consumer started over from its first-start position.
func TestClientLocalOffsetFileDamageRefused(t *testing.T) {
	full := []byte(`{"offsetTable":{"T@broker-a@0":7,"T@broker-a@1":42}}`)
	bad := []string{"null", "[]", "0", `{"offsetTable":{"T-broker-a-0":7}}`}
	for n := range len(full) {
		bad = append(bad, string(full[:n]))
	}
	dir := t.TempDir()
	path := filepath.Join(dir, "g1", "offsets.json")
	if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
		t.Fatal(err)
	}
	for _, b := range bad {
		if err := os.WriteFile(path, []byte(b), 0o644); err != nil {
			t.Fatal(err)
		}
		if _, err := newLocalOffsets(dir, "g1"); !errors.Is(err, ErrOffsetFile) || !strings.Contains(err.Error(), path) {
			t.Fatalf("offsets file holding %q: %v, want ErrOffsetFile naming the file", b, err)
		}
	}
}

// FuzzClientLocalOffsets: any bytes in a broadcasting consumer's offsets
// file are refused with ErrOffsetFile or load, and what loads persists
// and loads again with the same offsets.
func FuzzClientLocalOffsets(f *testing.F) {
	f.Add([]byte(`{"offsetTable":{"T@broker-a@0":7,"T@broker-a@1":42}}`))
	f.Add([]byte(`{"offsetTable":{"T@b@x":7}}`))
	f.Add([]byte(`null`))
	f.Fuzz(func(t *testing.T, data []byte) {
		dir := t.TempDir()
		path := filepath.Join(dir, "g", "offsets.json")
		if err := os.MkdirAll(filepath.Dir(path), 0o755); err != nil {
			t.Fatal(err)
		}
		if err := os.WriteFile(path, data, 0o644); err != nil {
			t.Fatal(err)
		}
		lo, err := newLocalOffsets(dir, "g")
		if err != nil {
			if !errors.Is(err, ErrOffsetFile) {
				t.Fatalf("%q: %v, want ErrOffsetFile", data, err)
			}
			return
		}
		if err := lo.persist(context.Background(), nil); err != nil {
			t.Fatal(err)
		}
		again, err := newLocalOffsets(dir, "g")
		if err != nil {
			t.Fatalf("%q loaded, persisted, then refused: %v", data, err)
		}
		for mq, off := range lo.offsets {
			if got, _ := again.read(context.Background(), mq, true); got != off {
				t.Fatalf("%q: %v at %d, %d after a persist", data, mq, off, got)
			}
		}
	})
}

func TestClientProcessQueueCommitOffset(t *testing.T) {
	pq := newProcessQueue(context.Background(), MessageQueue{}, parseSubscription("T", "*"), 0)
	var ms []*MessageExt
	for i := int64(10); i < 15; i++ {
		ms = append(ms, &MessageExt{QueueOffset: i, Message: Message{Body: []byte("x")}})
	}
	pq.add(ms)
	if got := pq.remove([]*MessageExt{ms[1], ms[3]}); got != 10 {
		t.Fatalf("commit after removing 11,13 = %d, want 10", got)
	}
	if got := pq.remove([]*MessageExt{ms[0]}); got != 12 {
		t.Fatalf("commit = %d, want 12", got)
	}
	if got := pq.remove([]*MessageExt{ms[2], ms[4]}); got != 15 {
		t.Fatalf("commit = %d, want 15", got)
	}
	if pq.count.Load() != 0 || pq.bytes.Load() != 0 {
		t.Fatalf("count %d bytes %d", pq.count.Load(), pq.bytes.Load())
	}
}

func TestClientOptionsValidate(t *testing.T) {
	if _, err := NewProducer(ProducerOptions{}); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("no registries: %v", err)
	}
	if _, err := NewPushConsumer(ConsumerOptions{ClientOptions: ClientOptions{Registries: []string{"x:1"}}}, func(context.Context, []*MessageExt) ConsumeResult { return 0 }); !errors.Is(err, ErrBadOptions) {
		t.Fatalf("no group: %v", err)
	}
}

// Several consumers of one group share the queues, each message reaches
// one of them once, and the queues of a leaving member are taken over.
func TestClientClusteringRebalance(t *testing.T) {
	c := startCluster(t, cluster.Options{Brokers: 2})
	createTopic(t, c, 2, "TopicR", 4)
	p := newTestProducer(t, c, nil)
	col := newCollector()
	var cons []*PushConsumer
	for i := 0; i < 3; i++ {
		cons = append(cons, newTestPush(t, c, "gR", "TopicR", "*", col.handler, nil))
	}
	settled := func(cs []*PushConsumer) error {
		seen := map[MessageQueue]int{}
		for _, pc := range cs {
			for _, q := range pc.Assigned() {
				if q.Topic == "TopicR" {
					seen[q]++
				}
			}
		}
		if len(seen) != 8 {
			return fmt.Errorf("%d of 8 queues assigned", len(seen))
		}
		for q, n := range seen {
			if n != 1 {
				return fmt.Errorf("queue %v held by %d", q, n)
			}
		}
		return nil
	}
	testutil.Eventually(t, 20*time.Second, func() error { return settled(cons) })
	sendN(t, p, "TopicR", "a", 120)
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := col.total(); n < 120 {
			return fmt.Errorf("received %d", n)
		}
		return nil
	})
	for i := 0; i < 120; i++ {
		if n := col.count(fmt.Sprintf("a-%d", i)); n != 1 {
			t.Fatalf("a-%d received %d times", i, n)
		}
	}
	if err := cons[0].Close(); err != nil {
		t.Fatal(err)
	}
	testutil.Eventually(t, 20*time.Second, func() error { return settled(cons[1:]) })
	sendN(t, p, "TopicR", "b", 80)
	testutil.Eventually(t, 20*time.Second, func() error {
		for i := 0; i < 80; i++ {
			if n := col.count(fmt.Sprintf("b-%d", i)); n != 1 {
				return fmt.Errorf("b-%d received %d times", i, n)
			}
		}
		return nil
	})
}

func TestClientBroadcasting(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "TopicB", 4)
	p := newTestProducer(t, c, nil)
	cols := []*collector{newCollector(), newCollector()}
	var cons []*PushConsumer
	for i, col := range cols {
		dir := t.TempDir()
		cons = append(cons, newTestPush(t, c, "gB", "TopicB", "*", col.handler, func(o *ConsumerOptions) {
			o.Model, o.OffsetDir, o.InstanceName = Broadcasting, dir, fmt.Sprintf("b%d", i)
		}))
	}
	for _, pc := range cons {
		testutil.Eventually(t, 10*time.Second, func() error {
			if n := len(pc.Assigned()); n != 4 {
				return fmt.Errorf("%d queues", n)
			}
			return nil
		})
	}
	sendN(t, p, "TopicB", "m", 40)
	for _, col := range cols {
		testutil.Eventually(t, 20*time.Second, func() error {
			for i := 0; i < 40; i++ {
				if col.count(fmt.Sprintf("m-%d", i)) != 1 {
					return fmt.Errorf("m-%d: %d", i, col.count(fmt.Sprintf("m-%d", i)))
				}
			}
			return nil
		})
	}
	if err := cons[0].Close(); err != nil {
		t.Fatal(err)
	}
	if _, err := os.Stat(filepath.Join(cons[0].base.opts.OffsetDir, "gB", "offsets.json")); err != nil {
		t.Fatalf("broadcast offsets not persisted: %v", err)
	}
}

func TestClientOrderlyPerKey(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "TopicO", 4)
	p := newTestProducer(t, c, nil)
	var mu sync.Mutex
	got := map[string][]int{}
	var failedOnce atomic.Bool
	h := func(ctx context.Context, msgs []*MessageExt) ConsumeResult {
		m := msgs[0]
		// The first time key k1's message 5 arrives, ask for a retry: the
		// queue must stall and redeliver it before anything later.
		if m.Keys[0] == "k1" && string(m.Body) == "k1-5" && failedOnce.CompareAndSwap(false, true) {
			return ConsumeRetryLater
		}
		var n int
		fmt.Sscanf(strings.TrimPrefix(string(m.Body), m.Keys[0]+"-"), "%d", &n)
		mu.Lock()
		got[m.Keys[0]] = append(got[m.Keys[0]], n)
		mu.Unlock()
		return ConsumeSuccess
	}
	newTestPush(t, c, "gO", "TopicO", "*", h, func(o *ConsumerOptions) { o.Orderly = true; o.SuspendOrderly = 100 * time.Millisecond })
	ctx := testCtx(t, 30*time.Second)
	for i := 0; i < 20; i++ {
		for k := 0; k < 3; k++ {
			key := fmt.Sprintf("k%d", k)
			if _, err := p.SendOrderly(ctx, &Message{Topic: "TopicO", Keys: []string{key}, Body: []byte(fmt.Sprintf("%s-%d", key, i))}, key, nil); err != nil {
				t.Fatal(err)
			}
		}
	}
	testutil.Eventually(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		for k := 0; k < 3; k++ {
			if n := len(got[fmt.Sprintf("k%d", k)]); n != 20 {
				return fmt.Errorf("k%d: %d messages", k, n)
			}
		}
		return nil
	})
	mu.Lock()
	defer mu.Unlock()
	for k, seq := range got {
		for i, n := range seq {
			if n != i {
				t.Fatalf("%s out of order: %v", k, seq)
			}
		}
	}
	if !failedOnce.Load() {
		t.Fatal("the retry path was not exercised")
	}
}

func TestClientRetryThenDLQ(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "TopicD", 2)
	p := newTestProducer(t, c, nil)
	var mu sync.Mutex
	var attempts []int32
	var topics []string
	h := func(ctx context.Context, msgs []*MessageExt) ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		for _, m := range msgs {
			attempts = append(attempts, m.ReconsumeTimes)
			topics = append(topics, m.Topic)
		}
		return ConsumeRetryLater
	}
	newTestPush(t, c, "gD", "TopicD", "*", h, func(o *ConsumerOptions) { o.MaxReconsumeTimes = 2 })
	res := sendN(t, p, "TopicD", "dead", 1)
	testutil.Eventually(t, 20*time.Second, func() error {
		mu.Lock()
		defer mu.Unlock()
		if len(attempts) < 3 {
			return fmt.Errorf("attempts %v", attempts)
		}
		return nil
	})
	// Then it lands in the DLQ: read it with a pull consumer.
	pc, err := NewPullConsumer(PullConsumerOptions{ConsumerOptions: ConsumerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()},
		Group: "dlqReader", From: ConsumeFromFirst, PullSuspend: time.Second}})
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	var qs []MessageQueue
	testutil.Eventually(t, 10*time.Second, func() error {
		var err error
		qs, err = pc.Queues(testCtx(t, 3*time.Second), "%DLQ%gD")
		return err
	})
	if err := pc.Assign(qs); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	msgs, err := pc.Poll(testCtx(t, 10*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if string(msgs[0].Body) != "dead-0" || msgs[0].MsgID != res[0].MsgID {
		t.Fatalf("DLQ message %q id %s, want id %s", msgs[0].Body, msgs[0].MsgID, res[0].MsgID)
	}
	time.Sleep(300 * time.Millisecond) // a 4th delivery would show up here
	mu.Lock()
	defer mu.Unlock()
	if !reflect.DeepEqual(attempts, []int32{0, 1, 2}) {
		t.Fatalf("reconsume times %v, want [0 1 2]", attempts)
	}
	for _, tp := range topics {
		if tp != "TopicD" {
			t.Fatalf("retried message topic %q, want the original", tp)
		}
	}
}

func TestClientConsumerResumesFromCommittedOffset(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "TopicC", 2)
	p := newTestProducer(t, c, nil)
	col := newCollector()
	pc := newTestPush(t, c, "gC", "TopicC", "*", col.handler, nil)
	sendN(t, p, "TopicC", "first", 20)
	testutil.Eventually(t, 10*time.Second, func() error {
		if col.total() < 20 {
			return fmt.Errorf("got %d", col.total())
		}
		return nil
	})
	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	sendN(t, p, "TopicC", "second", 20)
	col2 := newCollector()
	newTestPush(t, c, "gC", "TopicC", "*", col2.handler, nil)
	testutil.Eventually(t, 10*time.Second, func() error {
		if col2.total() < 20 {
			return fmt.Errorf("got %d", col2.total())
		}
		return nil
	})
	time.Sleep(200 * time.Millisecond)
	if n := col2.total(); n != 20 {
		for _, m := range col2.order {
			t.Logf("%s q%d off %d", m.Body, m.Queue.QueueID, m.QueueOffset)
		}
		t.Fatalf("restarted consumer got %d messages, want the 20 new ones", n)
	}
	for i := 0; i < 20; i++ {
		if col2.count(fmt.Sprintf("second-%d", i)) != 1 {
			t.Fatalf("second-%d missing", i)
		}
	}
}

func TestClientProducerModes(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	p := newTestProducer(t, c, nil)
	ctx := testCtx(t, 30*time.Second)
	// Auto-created through TBW102.
	r, err := p.Send(ctx, &Message{Topic: "TopicAuto", Body: []byte("hello"), Properties: map[string]string{"color": "red"}})
	if err != nil {
		t.Fatal(err)
	}
	if r.Status != SendOK || len(r.MsgID) != 32 || len(r.OffsetMsgID) != 32 {
		t.Fatalf("result %+v", r)
	}
	big := bytes.Repeat([]byte("0123456789"), 1000) // compressed
	if _, err := p.Send(ctx, &Message{Topic: "TopicAuto", Body: big, Tags: "Big"}); err != nil {
		t.Fatal(err)
	}
	var wg sync.WaitGroup
	var asyncErr atomic.Value
	for i := 0; i < 20; i++ {
		wg.Add(1)
		if err := p.SendAsync(ctx, &Message{Topic: "TopicAuto", Body: []byte(fmt.Sprintf("async-%d", i))}, func(r *SendResult, err error) {
			defer wg.Done()
			if err != nil {
				asyncErr.Store(err)
			}
		}); err != nil {
			t.Fatal(err)
		}
	}
	wg.Wait()
	if e := asyncErr.Load(); e != nil {
		t.Fatal(e)
	}
	if res := <-p.SendAsyncChan(ctx, &Message{Topic: "TopicAuto", Body: []byte("chan")}); res.Err != nil {
		t.Fatal(res.Err)
	}
	if err := p.SendOneway(ctx, &Message{Topic: "TopicAuto", Body: []byte("oneway")}); err != nil {
		t.Fatal(err)
	}
	var batch []*Message
	for i := 0; i < 10; i++ {
		batch = append(batch, &Message{Topic: "TopicAuto", Body: []byte(fmt.Sprintf("batch-%d", i)), Tags: "B"})
	}
	br, err := p.SendBatch(ctx, batch)
	if err != nil {
		t.Fatal(err)
	}
	if strings.Count(br.MsgID, ",") != 9 {
		t.Fatalf("batch ids %q", br.MsgID)
	}
	if _, err := p.Send(ctx, &Message{Topic: "", Body: []byte("x")}); !errors.Is(err, ErrBadMessage) {
		t.Fatalf("empty topic: %v", err)
	}
	// Consume everything back with a tag filter and check bodies.
	col := newCollector()
	newTestPush(t, c, "gModes", "TopicAuto", "Big || B", col.handler, func(o *ConsumerOptions) { o.From = ConsumeFromFirst })
	testutil.Eventually(t, 20*time.Second, func() error {
		if n := col.total(); n != 11 {
			return fmt.Errorf("got %d of 11", n)
		}
		return nil
	})
	if col.count(string(big)) != 1 {
		t.Fatal("compressed body did not round-trip")
	}
	for _, m := range col.order {
		if m.Tags != "Big" && m.Tags != "B" {
			t.Fatalf("tag filter let %q through", m.Tags)
		}
	}
}

func TestClientPullConsumerAssignCommitSeek(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "TopicP", 1)
	p := newTestProducer(t, c, nil)
	sendN(t, p, "TopicP", "p", 10)
	opts := PullConsumerOptions{ConsumerOptions: ConsumerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()},
		Group: "gP", From: ConsumeFromFirst, PullSuspend: time.Second, PullBatchSize: 4}}
	pc, err := NewPullConsumer(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	if _, err := pc.Poll(testCtx(t, time.Second)); !errors.Is(err, ErrNotStarted) {
		t.Fatalf("poll before start: %v", err)
	}
	qs := assignAndStart(t, pc, "TopicP")
	var got []string
	for len(got) < 10 {
		msgs, err := pc.Poll(testCtx(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		for _, m := range msgs {
			got = append(got, string(m.Body))
		}
	}
	if got[0] != "p-0" || got[9] != "p-9" {
		t.Fatalf("polled %v", got)
	}
	if err := pc.Commit(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if off, err := pc.Committed(testCtx(t, 5*time.Second), qs[0]); err != nil || off != 10 {
		t.Fatalf("committed %d %v", off, err)
	}
	if _, err := pc.Poll(testCtx(t, 300*time.Millisecond)); !errors.Is(err, ErrTimeout) {
		t.Fatalf("empty poll: %v", err)
	}
	if err := pc.Seek(qs[0], 7); err != nil {
		t.Fatal(err)
	}
	msgs, err := pc.Poll(testCtx(t, 10*time.Second))
	if err != nil || string(msgs[0].Body) != "p-7" {
		t.Fatalf("after seek: %v %v", msgs, err)
	}
}

// assignAndStart assigns the one queue of topic to pc and starts it.
func assignAndStart(t *testing.T, pc *PullConsumer, topic string) []MessageQueue {
	t.Helper()
	qs, err := pc.Queues(testCtx(t, 5*time.Second), topic)
	if err != nil || len(qs) != 1 {
		t.Fatalf("queues %v %v", qs, err)
	}
	if err := pc.Assign(qs); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	return qs
}

// With ManualOffsets, polling commits nothing: only what MarkConsumed
// marked (never moving back) reaches the broker.
func TestClientPullConsumerManualOffsets(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "TopicM", 1)
	p := newTestProducer(t, c, nil)
	sendN(t, p, "TopicM", "m", 6)
	opts := PullConsumerOptions{ManualOffsets: true, ConsumerOptions: ConsumerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()},
		Group: "gM", From: ConsumeFromFirst, PullSuspend: time.Second}}
	pc, err := NewPullConsumer(opts)
	if err != nil {
		t.Fatal(err)
	}
	defer pc.Close()
	qs := assignAndStart(t, pc, "TopicM")
	for n := 0; n < 6; {
		msgs, err := pc.Poll(testCtx(t, 10*time.Second))
		if err != nil {
			t.Fatal(err)
		}
		n += len(msgs)
	}
	if err := pc.Commit(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if off, err := pc.Committed(testCtx(t, 5*time.Second), qs[0]); err != nil || off > 0 {
		t.Fatalf("committed %d %v after polling only", off, err)
	}
	pc.MarkConsumed(qs[0], 4)
	pc.MarkConsumed(qs[0], 2) // never back
	if err := pc.Commit(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	if off, err := pc.Committed(testCtx(t, 5*time.Second), qs[0]); err != nil || off != 4 {
		t.Fatalf("committed %d %v, want 4", off, err)
	}
}

func TestClientRegistryFailover(t *testing.T) {
	c := startCluster(t, cluster.Options{Registries: 2})
	if err := c.StopRegistry(0); err != nil {
		t.Fatal(err)
	}
	p := newTestProducer(t, c, nil)
	ctx := testCtx(t, 20*time.Second)
	if _, err := p.Send(ctx, &Message{Topic: "TopicF", Body: []byte("x")}); err != nil {
		t.Fatalf("send with one registry down: %v", err)
	}
	if p.core.regNext.Load() != 1 {
		t.Fatalf("registry index %d, want 1", p.core.regNext.Load())
	}
}

// With sync flush, every acknowledged message survives a broker restart
// in the middle of a stream of sends.
func TestClientBrokerRestartLosesNoAckedMessage(t *testing.T) {
	c := startCluster(t, cluster.Options{SyncFlush: true})
	createTopic(t, c, 1, "TopicS", 2)
	p := newTestProducer(t, c, func(o *ProducerOptions) { o.SendTimeout = time.Second; o.DisableFaultTolerance = true })
	var acked []string
	ctx := testCtx(t, 60*time.Second)
	for i := 0; i < 200; i++ {
		if i == 100 {
			if err := c.StopBroker(0); err != nil {
				t.Fatal(err)
			}
			if err := c.StartBroker(0); err != nil {
				t.Fatal(err)
			}
		}
		body := fmt.Sprintf("s-%d", i)
		if _, err := p.Send(ctx, &Message{Topic: "TopicS", Body: []byte(body)}); err == nil {
			acked = append(acked, body)
		}
	}
	if len(acked) < 150 {
		t.Fatalf("only %d of 200 sends acknowledged", len(acked))
	}
	col := newCollector()
	newTestPush(t, c, "gS", "TopicS", "*", col.handler, func(o *ConsumerOptions) { o.From = ConsumeFromFirst })
	testutil.Eventually(t, 20*time.Second, func() error {
		for _, b := range acked {
			if col.count(b) == 0 {
				return fmt.Errorf("acknowledged %s missing", b)
			}
		}
		return nil
	})
}

func TestClientTypedErrors(t *testing.T) {
	// No registry listening.
	ln, _ := net.Listen("tcp", "127.0.0.1:0")
	dead := ln.Addr().String()
	ln.Close()
	p, err := NewProducer(ProducerOptions{ClientOptions: ClientOptions{Registries: []string{dead}}})
	if err != nil {
		t.Fatal(err)
	}
	ctx, cancel := context.WithTimeout(context.Background(), 2*time.Second)
	deadline, _ := ctx.Deadline()
	_, err = p.Send(ctx, &Message{Topic: "T", Body: []byte("x")})
	cancel()
	if !errors.Is(err, ErrRegistryUnavailable) {
		t.Fatalf("dead registry: %v", err)
	}
	endedByDeadline(t, "dead registry", deadline)
	p.Close()
	if _, err := p.Send(context.Background(), &Message{Topic: "T", Body: []byte("x")}); !errors.Is(err, ErrClosed) {
		t.Fatalf("closed producer: %v", err)
	}

	// Unknown topic without auto-creation.
	c := startCluster(t, cluster.Options{NoAutoCreateTopic: true})
	p2 := newTestProducer(t, c, nil)
	_, err = p2.Send(testCtx(t, 5*time.Second), &Message{Topic: "NoSuchTopic", Body: []byte("x")})
	if !errors.Is(err, ErrTopicNotExist) {
		t.Fatalf("unknown topic: %v", err)
	}

	// A broker that accepts but never answers: the call ends at its deadline.
	silent, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer silent.Close()
	go func() {
		for {
			conn, err := silent.Accept()
			if err != nil {
				return
			}
			defer conn.Close()
		}
	}()
	cctx, ccancel := context.WithTimeout(context.Background(), 300*time.Millisecond)
	deadline, _ = cctx.Deadline()
	_, err = p2.core.invoke(cctx, "ping", silent.Addr().String(), heartbeatPing())
	ccancel()
	if !errors.Is(err, ErrTimeout) {
		t.Fatalf("silent broker: %v", err)
	}
	endedByDeadline(t, "silent broker", deadline)

	// The broker dies mid-stream: the next send fails typed, in time.
	createTopic(t, c, 1, "TopicE", 2)
	if _, err := p2.Send(testCtx(t, 5*time.Second), &Message{Topic: "TopicE", Body: []byte("x")}); err != nil {
		t.Fatal(err)
	}
	if err := c.StopBroker(0); err != nil {
		t.Fatal(err)
	}
	// The send waits for a master to come back until its deadline; when
	// that cuts its last attempt (a dial), the error still says why.
	ctx = testCtx(t, 2*time.Second)
	deadline, _ = ctx.Deadline()
	_, err = p2.Send(ctx, &Message{Topic: "TopicE", Body: []byte("y")})
	if !errors.Is(err, ErrBrokerUnavailable) {
		t.Fatalf("dead broker: %v", err)
	}
	endedByDeadline(t, "dead broker", deadline)
}

// endedByDeadline fails the test if a call given a context with deadline
// returned well after it. A call that keeps its context returns before
// the deadline or at it: a call that retries until then is cut by it and
// returns as soon as its goroutine runs again, which on a loaded machine
// may be some milliseconds late. lateMax tells that from a call that does
// not keep its context: it would go on until one of the client's own
// bounds, SendTimeout (3 s) per attempt or more.
func endedByDeadline(t *testing.T, what string, deadline time.Time) {
	t.Helper()
	const lateMax = time.Second
	if late := time.Since(deadline); late > lateMax {
		t.Fatalf("%s: returned %v after its context's deadline", what, late)
	}
}

func TestClientCloseLeavesNoGoroutines(t *testing.T) {
	c := startCluster(t, cluster.Options{})
	createTopic(t, c, 1, "TopicG", 2)
	time.Sleep(100 * time.Millisecond)
	base := runtime.NumGoroutine()
	p, err := NewProducer(ProducerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}})
	if err != nil {
		t.Fatal(err)
	}
	col := newCollector()
	pc, err := NewPushConsumer(ConsumerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}, Group: "gG", PullSuspend: 5 * time.Second}, col.handler)
	if err != nil {
		t.Fatal(err)
	}
	_ = pc.Subscribe("TopicG", "*")
	if err := pc.Start(testCtx(t, 5*time.Second)); err != nil {
		t.Fatal(err)
	}
	sendN(t, p, "TopicG", "g", 10)
	testutil.Eventually(t, 10*time.Second, func() error {
		if col.total() < 10 {
			return fmt.Errorf("got %d", col.total())
		}
		return nil
	})
	if err := pc.Close(); err != nil {
		t.Fatal(err)
	}
	if err := p.Close(); err != nil {
		t.Fatal(err)
	}
	_ = p.Close() // idempotent
	waitGoroutines(t, base)
}

func heartbeatPing() *protocol.Command {
	return protocol.NewRequest(protocol.HeartBeat, nil, []byte(`{"clientID":"x"}`))
}
