package client

import (
	"context"
	"fmt"
	"runtime"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

func startCluster(t *testing.T, opts cluster.Options) *cluster.Cluster {
	t.Helper()
	opts.Dir = t.TempDir()
	if opts.DelayLevels == nil {
		opts.DelayLevels = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 150 * time.Millisecond, 200 * time.Millisecond, 250 * time.Millisecond}
	}
	c, err := cluster.Start(context.Background(), opts)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = c.Close() })
	return c
}

func testCtx(t *testing.T, d time.Duration) context.Context {
	ctx, cancel := context.WithTimeout(context.Background(), d)
	t.Cleanup(cancel)
	return ctx
}

// createTopic creates topic with n queues on every broker and waits for
// its route.
func createTopic(t *testing.T, c *cluster.Cluster, brokers int, topic string, n int32) {
	t.Helper()
	ctx := testCtx(t, 10*time.Second)
	core, err := newCore(ClientOptions{Registries: c.RegistryAddrs(), RequestTimeout: 3 * time.Second})
	if err != nil {
		t.Fatal(err)
	}
	defer core.close()
	for i := 0; i < brokers; i++ {
		h := &protocol.CreateTopicRequestHeader{Topic: topic, DefaultTopic: protocol.DefaultTopic, ReadQueueNums: n, WriteQueueNums: n,
			Perm: protocol.PermRead | protocol.PermWrite, TopicFilterType: protocol.TopicFilterSingleTag}
		if _, err := core.invokeOK(ctx, "create", c.BrokerAddr(i), protocol.NewRequest(protocol.UpdateAndCreateTopic, h, nil)); err != nil {
			t.Fatal(err)
		}
	}
	testutil.Eventually(t, 10*time.Second, func() error {
		rd, err := core.fetchRoute(ctx, topic)
		if err != nil {
			return err
		}
		if len(rd.QueueDatas) < brokers {
			return fmt.Errorf("route has %d brokers", len(rd.QueueDatas))
		}
		return nil
	})
}

func newTestProducer(t *testing.T, c *cluster.Cluster, mod func(*ProducerOptions)) *Producer {
	t.Helper()
	o := ProducerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}, Group: "pg"}
	if mod != nil {
		mod(&o)
	}
	p, err := NewProducer(o)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = p.Close() })
	return p
}

// collector records received messages by body.
type collector struct {
	mu    sync.Mutex
	seen  map[string]int
	order []*MessageExt
}

func newCollector() *collector { return &collector{seen: map[string]int{}} }

func (c *collector) handler(ctx context.Context, msgs []*MessageExt) ConsumeResult {
	c.mu.Lock()
	defer c.mu.Unlock()
	for _, m := range msgs {
		c.seen[string(m.Body)]++
		c.order = append(c.order, m)
	}
	return ConsumeSuccess
}

func (c *collector) count(body string) int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return c.seen[body]
}

func (c *collector) total() int {
	c.mu.Lock()
	defer c.mu.Unlock()
	return len(c.order)
}

func newTestPush(t *testing.T, c *cluster.Cluster, group, topic, expr string, h Handler, mod func(*ConsumerOptions)) *PushConsumer {
	t.Helper()
	o := ConsumerOptions{ClientOptions: ClientOptions{Registries: c.RegistryAddrs()}, Group: group, OffsetDir: t.TempDir(),
		PersistInterval: 200 * time.Millisecond, PullSuspend: 2 * time.Second}
	if mod != nil {
		mod(&o)
	}
	pc, err := NewPushConsumer(o, h)
	if err != nil {
		t.Fatal(err)
	}
	if err := pc.Subscribe(topic, expr); err != nil {
		t.Fatal(err)
	}
	if err := pc.Start(testCtx(t, 10*time.Second)); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { _ = pc.Close() })
	return pc
}

// waitGoroutines polls until the goroutine count is at most base.
func waitGoroutines(t *testing.T, base int) {
	t.Helper()
	testutil.Eventually(t, 10*time.Second, func() error {
		if n := runtime.NumGoroutine(); n > base {
			buf := make([]byte, 1<<20)
			return fmt.Errorf("goroutines: %d > %d\n%s", n, base, buf[:runtime.Stack(buf, true)])
		}
		return nil
	})
}

func sendN(t *testing.T, p *Producer, topic, prefix string, n int) []*SendResult {
	t.Helper()
	ctx := testCtx(t, 30*time.Second)
	out := make([]*SendResult, 0, n)
	for i := 0; i < n; i++ {
		r, err := p.Send(ctx, &Message{Topic: topic, Body: []byte(fmt.Sprintf("%s-%d", prefix, i)), Tags: "A", Keys: []string{fmt.Sprintf("k%d", i)}})
		if err != nil {
			t.Fatalf("send %d: %v", i, err)
		}
		out = append(out, r)
	}
	return out
}
