package rocketmq

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"
	"github.com/apache/rocketmq-client-go/v2/producer"
	"github.com/apache/rocketmq-client-go/v2/rlog"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

func init() { rlog.SetLogLevel(os.Getenv("RLOG")) }

func newProducer(t *testing.T, s *standalone, instance string) rocketmq.Producer {
	t.Helper()
	p, err := rocketmq.NewProducer(
		producer.WithNsResolver(primitive.NewPassthroughResolver([]string{s.registry})),
		producer.WithGroupName("interop-pg-"+instance), producer.WithInstanceName(instance), producer.WithRetry(2),
		producer.WithSendMsgTimeout(5*time.Second))
	if err != nil {
		t.Fatal(err)
	}
	if err := p.Start(); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Shutdown() })
	return p
}

type received struct {
	mu   sync.Mutex
	msgs map[string]*primitive.MessageExt // by body; protected by mu
	at   map[queueOffset]delivered        // protected by mu
	n    atomic.Int64
}

// queueOffset is where a message was stored: a body a producer sent twice
// (a retry after a timeout) is at two.
type queueOffset struct {
	topic string
	queue int
	off   int64
}

// delivered counts the deliveries of the message at a queueOffset.
type delivered struct {
	n      int
	stored int64 // its store timestamp, unix ms
}

func (r *received) add(m *primitive.MessageExt) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.msgs == nil {
		r.msgs = map[string]*primitive.MessageExt{}
		r.at = map[queueOffset]delivered{}
	}
	r.msgs[string(m.Body)] = m
	k := queueOffset{m.Topic, -1, m.QueueOffset}
	if m.Queue != nil {
		k.queue = m.Queue.QueueId
	}
	d := r.at[k]
	r.at[k] = delivered{n: d.n + 1, stored: m.StoreTimestamp}
	r.n.Add(1)
}

// storedSince returns the deliveries so far of each queue offset at which
// a message stored at or after ts (unix ms) was delivered.
func (r *received) storedSince(ts int64) map[queueOffset]int {
	r.mu.Lock()
	defer r.mu.Unlock()
	out := map[queueOffset]int{}
	for k, d := range r.at {
		if d.stored >= ts {
			out[k] = d.n
		}
	}
	return out
}

// deliveries returns how often the message at k was delivered.
func (r *received) deliveries(k queueOffset) int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.at[k].n
}

func (r *received) get(body string) *primitive.MessageExt {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.msgs[body]
}

func (r *received) distinct() int {
	r.mu.Lock()
	defer r.mu.Unlock()
	return len(r.msgs)
}

func newPushConsumer(t *testing.T, s *standalone, group, instance, topic string, model consumer.MessageModel,
	handle func(*primitive.MessageExt) consumer.ConsumeResult) rocketmq.PushConsumer {
	t.Helper()
	return newTagConsumer(t, s, group, instance, topic, "*", model, handle)
}

// newTagConsumer is newPushConsumer with a tag expression ("TagA",
// "TagA || TagB").
func newTagConsumer(t *testing.T, s *standalone, group, instance, topic, expr string, model consumer.MessageModel,
	handle func(*primitive.MessageExt) consumer.ConsumeResult) rocketmq.PushConsumer {
	t.Helper()
	return newSelectorConsumer(t, s, group, instance, topic, consumer.MessageSelector{Type: consumer.TAG, Expression: expr}, model, handle)
}

// newSelectorConsumer starts a push consumer subscribed with sel (a tag
// expression or a SQL92 selector).
func newSelectorConsumer(t *testing.T, s *standalone, group, instance, topic string, sel consumer.MessageSelector,
	model consumer.MessageModel, handle func(*primitive.MessageExt) consumer.ConsumeResult) rocketmq.PushConsumer {
	t.Helper()
	return makePushConsumer(t, s, group, instance, topic, sel, true, handle,
		consumer.WithConsumerModel(model), consumer.WithConsumeFromWhere(consumer.ConsumeFromFirstOffset))
}

// makePushConsumer makes a push consumer of group on topic subscribed
// with sel, with opts after its registry, group and instance, that hands
// each message to handle; start starts it. Cleanup shuts it down.
func makePushConsumer(t *testing.T, s *standalone, group, instance, topic string, sel consumer.MessageSelector, start bool,
	handle func(*primitive.MessageExt) consumer.ConsumeResult, opts ...consumer.Option) rocketmq.PushConsumer {
	t.Helper()
	c, err := rocketmq.NewPushConsumer(append([]consumer.Option{
		consumer.WithNsResolver(primitive.NewPassthroughResolver([]string{s.registry})),
		consumer.WithGroupName(group), consumer.WithInstance(instance)}, opts...)...)
	if err != nil {
		t.Fatal(err)
	}
	err = c.Subscribe(topic, sel,
		func(ctx context.Context, msgs ...*primitive.MessageExt) (consumer.ConsumeResult, error) {
			for _, m := range msgs {
				if r := handle(m); r != consumer.ConsumeSuccess {
					return r, nil
				}
			}
			return consumer.ConsumeSuccess, nil
		})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Shutdown() })
	if start {
		if err := c.Start(); err != nil {
			t.Fatal(err)
		}
	}
	return c
}

// produceAll sends n single messages sync, n async and one batch of 3,
// each with a tag, keys and a user property, and returns the bodies sent.
func produceAll(t *testing.T, p rocketmq.Producer, topic string, n int) []string {
	t.Helper()
	ctx := context.Background()
	var bodies []string
	mk := func(body, tag string) *primitive.Message {
		m := primitive.NewMessage(topic, []byte(body))
		m.WithTag(tag)
		m.WithKeys([]string{"key-" + body, "shared"})
		m.WithProperty("origin", "interop")
		return m
	}
	for i := 0; i < n; i++ {
		body := "sync-" + strconv.Itoa(i)
		res, err := p.SendSync(ctx, mk(body, "TagSync"))
		if err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendSync %d: %v %v", i, res, err)
		}
		if res.MsgID == "" || res.OffsetMsgID == "" {
			t.Fatalf("SendSync result without ids: %+v", res)
		}
		bodies = append(bodies, body)
	}
	var wg sync.WaitGroup
	var failed atomic.Int64
	for i := 0; i < n; i++ {
		body := "async-" + strconv.Itoa(i)
		bodies = append(bodies, body)
		wg.Add(1)
		err := p.SendAsync(ctx, func(ctx context.Context, res *primitive.SendResult, err error) {
			defer wg.Done()
			if err != nil || res.Status != primitive.SendOK {
				failed.Add(1)
			}
		}, mk(body, "TagAsync"))
		if err != nil {
			t.Fatalf("SendAsync %d: %v", i, err)
		}
	}
	wg.Wait()
	if failed.Load() > 0 {
		t.Fatalf("%d async sends failed", failed.Load())
	}
	batch := []*primitive.Message{mk("batch-0", "TagBatch"), mk("batch-1", "TagBatch"), mk("batch-2", "TagBatch")}
	res, err := p.SendSync(ctx, batch...)
	if err != nil || res.Status != primitive.SendOK {
		t.Fatalf("batch send: %v %v", res, err)
	}
	return append(bodies, "batch-0", "batch-1", "batch-2")
}

func checkIntact(t *testing.T, m *primitive.MessageExt, topic, body string) {
	t.Helper()
	wantTag := map[byte]string{'s': "TagSync", 'a': "TagAsync", 'b': "TagBatch"}[body[0]]
	if m.Topic != topic || m.GetTags() != wantTag || m.GetKeys() != "key-"+body+" shared" || m.GetProperty("origin") != "interop" {
		t.Errorf("%s arrived with topic %q tags %q keys %q origin %q", body, m.Topic, m.GetTags(), m.GetKeys(), m.GetProperty("origin"))
	}
	if m.MsgId == "" || m.StoreTimestamp == 0 {
		t.Errorf("%s arrived without msgId/storeTimestamp: %+v", body, m)
	}
}

// The Go client's producer (sync, async, batch) and push consumer
// (clustering) against `smartgo standalone`.
func TestInteropProducerAndClusteringConsumer(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropOrders"
	p := newProducer(t, s, "prod-clustering")
	bodies := produceAll(t, p, topic, 20)
	var got received
	newPushConsumer(t, s, "interop-cg", "cons-clustering", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		got.add(m)
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 60*time.Second, fmt.Sprintf("%d messages", len(bodies)), func() bool { return got.distinct() == len(bodies) })
	for _, b := range bodies {
		checkIntact(t, got.get(b), topic, b)
	}
	// Produce more while the consumer is live: long polling delivers them.
	more := produceAll(t, p, topic, 5)
	testutil.WaitFor(t, 30*time.Second, "messages produced while consuming", func() bool {
		for _, b := range more {
			if got.get(b) == nil {
				return false
			}
		}
		return true
	})
	if n := got.n.Load(); n != int64(got.distinct()) {
		t.Logf("note: %d deliveries for %d distinct messages (at-least-once)", n, got.distinct())
	}
}

// Two broadcasting consumers of one group each get every message.
func TestInteropBroadcastingConsumers(t *testing.T) {
	s := startStandalone(t)
	const topic = "InteropNews"
	p := newProducer(t, s, "prod-broadcast")
	bodies := produceAll(t, p, topic, 5)
	// The Go client keeps broadcasting offsets in
	// ~/.rocketmq_client_go/<group>/<clientID>: a group name of its own per
	// run keeps an earlier run's offsets out, and the files are removed.
	group := fmt.Sprintf("interop-bc-%d", time.Now().UnixNano())
	if home, err := os.UserHomeDir(); err == nil {
		t.Cleanup(func() { _ = os.RemoveAll(filepath.Join(home, ".rocketmq_client_go", group)) })
	}
	var a, b received
	newPushConsumer(t, s, group, "cons-bc-a", topic, consumer.BroadCasting, func(m *primitive.MessageExt) consumer.ConsumeResult {
		a.add(m)
		return consumer.ConsumeSuccess
	})
	newPushConsumer(t, s, group, "cons-bc-b", topic, consumer.BroadCasting, func(m *primitive.MessageExt) consumer.ConsumeResult {
		b.add(m)
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 60*time.Second, "both broadcasting consumers to get everything", func() bool {
		return a.distinct() == len(bodies) && b.distinct() == len(bodies)
	})
}

// A consumer that asks for a retry gets the message again through the
// retry topic, with its reconsume count raised.
func TestInteropConsumerRetry(t *testing.T) {
	s := startStandalone(t, "-set", "broker.delay_levels=1s 1s 1s 1s 1s 1s 1s 1s")
	const topic = "InteropRetry"
	p := newProducer(t, s, "prod-retry")
	m := primitive.NewMessage(topic, []byte("retry-me"))
	m.WithTag("TagR")
	if _, err := p.SendSync(context.Background(), m); err != nil {
		t.Fatal(err)
	}
	// The Go client fetches the route of %RETRY%<group> when it starts,
	// before its first heartbeat makes the broker create that topic; it
	// would only see the retry queue at its next 30 s route refresh. Create
	// the retry topic first, as an operator deploying a new group would.
	createTopic(t, s.broker, "%RETRY%interop-retry", 1)
	var attempts atomic.Int64
	var second atomic.Pointer[primitive.MessageExt]
	newPushConsumer(t, s, "interop-retry", "cons-retry", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		if string(m.Body) != "retry-me" {
			return consumer.ConsumeSuccess
		}
		if attempts.Add(1) == 1 {
			return consumer.ConsumeRetryLater
		}
		second.CompareAndSwap(nil, m)
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 90*time.Second, "the retried message", func() bool { return second.Load() != nil })
	r := second.Load()
	if r.ReconsumeTimes < 1 || r.Topic != topic || r.GetTags() != "TagR" {
		t.Fatalf("retried message: topic %q reconsume %d tags %q", r.Topic, r.ReconsumeTimes, r.GetTags())
	}
}

// createTopic creates a topic on a SmartGo broker with SmartGo's own
// remoting client (UPDATE_AND_CREATE_TOPIC, read/write, 1 queue).
func createTopic(t *testing.T, brokerAddr, name string, queues int32) {
	t.Helper()
	c := newRemotingClient(t)
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	resp, err := c.Invoke(ctx, brokerAddr, protocol.NewRequest(protocol.UpdateAndCreateTopic, &protocol.CreateTopicRequestHeader{
		Topic: name, DefaultTopic: "TBW102", ReadQueueNums: queues, WriteQueueNums: queues, Perm: 6, TopicFilterType: protocol.TopicFilterSingleTag}, nil))
	if err != nil || resp.Code != protocol.Success {
		t.Fatalf("create topic %s: %v %v", name, resp, err)
	}
}
