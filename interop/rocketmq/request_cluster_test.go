package rocketmq

import (
	"context"
	"fmt"
	"path/filepath"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// procCluster is a `smartgo registry` process and master brokers of one
// cluster ("DefaultCluster"), each a `smartgo broker` process.
type procCluster struct {
	registry string
	brokers  []string // remoting addresses, broker-0, broker-1, ...
}

// startProcCluster starts a registry and n master brokers on free
// loopback ports, each broker registered before it returns.
func startProcCluster(t *testing.T, n int) *procCluster {
	t.Helper()
	dir := t.TempDir()
	ports := freePorts(t, n+1)
	c := &procCluster{registry: fmt.Sprintf("127.0.0.1:%d", ports[0])}
	runSmartgo(t, filepath.Join(dir, "registry.log"), "registry: started", "registry",
		"-set", "registry.listen="+c.registry, "-set", "registry.kv_config_path="+filepath.Join(dir, "kv.json"),
		"-set", "log.level="+logLevel())
	for i := range n {
		addr := fmt.Sprintf("127.0.0.1:%d", ports[i+1])
		name := fmt.Sprintf("broker-%d", i)
		runSmartgo(t, filepath.Join(dir, name+".log"), "registered with registry", "broker",
			"-listen", addr, "-data", filepath.Join(dir, name), "-registries", c.registry,
			"-set", "broker.name="+name, "-set", "broker.advertise_ip=127.0.0.1",
			"-set", "store.segment_size=64MiB", "-set", "log.level="+logLevel())
		c.brokers = append(c.brokers, addr)
	}
	return c
}

// clients is the registry address in the shape the client helpers take.
func (c *procCluster) clients() *standalone {
	return &standalone{registry: c.registry, broker: c.brokers[0]}
}

// handlerGate keeps a push consumer's handler from using a producer that
// is shutting down. rocketmq-client-go v2.1.2's push consumer Shutdown
// does not wait for the handlers in flight, and its producer's Shutdown
// races (-race) with a send in flight. Made right after the producer (so
// its cleanup runs after the consumer's shutdown and before the
// producer's), the gate waits for the handlers in flight and makes later
// ones return at once.
type handlerGate struct {
	mu     sync.RWMutex
	closed bool // protected by mu
}

func newHandlerGate(t *testing.T) *handlerGate {
	g := &handlerGate{}
	t.Cleanup(func() {
		g.mu.Lock()
		g.closed = true
		g.mu.Unlock()
	})
	return g
}

// enter reports whether a handler may go on; if so it must call leave.
func (g *handlerGate) enter() bool {
	g.mu.RLock()
	if g.closed {
		g.mu.RUnlock()
		return false
	}
	return true
}

func (g *handlerGate) leave() { g.mu.RUnlock() }

// startResponder runs a responder of topic: a push consumer (group
// "interop-"+name) that answers each request with "re:<body>" through its
// own producer (name+"-replier"), handed to send with the request it
// answers; a handler gate keeps it off the producer once the test ends.
func startResponder(t *testing.T, s *standalone, name, topic string, send func(p rocketmq.Producer, m *primitive.MessageExt, reply *primitive.Message)) {
	t.Helper()
	replier := newProducer(t, s, name+"-replier")
	gate := newHandlerGate(t)
	newPushConsumer(t, s, "interop-"+name, name+"-cons", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		if !gate.enter() {
			return consumer.ConsumeSuccess
		}
		defer gate.leave()
		reply, err := consumer.CreateReplyMessage(m, nil)
		if err != nil {
			t.Errorf("CreateReplyMessage: %v", err)
			return consumer.ConsumeSuccess
		}
		reply.Body = []byte("re:" + string(m.Body))
		send(replier, m, reply)
		return consumer.ConsumeSuccess
	})
}

// storedBodies counts the bodies of the messages stored in queue 0 of
// topic on each named broker.
func storedBodies(t *testing.T, registry, topic string, brokers ...string) map[string]int {
	t.Helper()
	a, err := admin.New(admin.Options{Registries: []string{registry}})
	if err != nil {
		t.Fatal(err)
	}
	defer a.Close()
	ctx, cancel := context.WithTimeout(context.Background(), 20*time.Second)
	defer cancel()
	bodies := map[string]int{}
	for _, name := range brokers {
		for off := int64(0); ; {
			msgs, next, _, maxOff, err := a.BrowseMessages(ctx, topic, name, 0, off, 64)
			if err != nil {
				t.Fatalf("browse %s on %s: %v", topic, name, err)
			}
			for _, m := range msgs {
				bodies[string(m.Body)]++
			}
			if next >= maxOff || next <= off {
				break
			}
			off = next
		}
	}
	return bodies
}

// In a cluster of three master brokers, a fresh rocketmq-client-go v2.1.2
// requester gets the replies to its very first requests, each once and
// at once. The request topic lives on broker-1 only, so the requester
// talks to broker-1 and never to broker-0 or broker-2 (v2.1.2 heartbeats
// only the brokers of the routes it has fetched, and never fetches the
// reply topic's route). The responder sends each reply to the cluster's
// reply topic, which every broker hosts, its producer going round the
// three: a reply that lands on broker-0 or broker-2 names a requester that
// broker has never seen. It hands the reply to the other masters in turn
// (broker-2 asks broker-0 first, which does not have the requester
// either) until broker-1 pushes it to the requester. Before, the broker
// refused it ("not connected"): a reply sent with SendAsync (the client
// does not retry it) was lost and its request timed out; one sent with
// SendSync was sent again by the client's retry to another broker, and
// so stored twice or more.
func TestInteropRequestReplyAcrossBrokers(t *testing.T) {
	c := startProcCluster(t, 3)
	s := c.clients()
	const topic = "InteropRpcCluster"
	createTopic(t, c.brokers[1], topic, 2)
	replyTopic := protocol.ReplyTopic("DefaultCluster")
	ctx := context.Background()

	// The responder answers "re:<body>": bodies starting with "async"
	// with SendAsync, the others with SendSync.
	// Replies to the warm-up's requests (some answered after their
	// requester gave up) are not counted.
	var replyErrs atomic.Int64
	startResponder(t, s, "rpc-cluster", topic, func(replier rocketmq.Producer, m *primitive.MessageExt, reply *primitive.Message) {
		counted := string(m.Body) != "warm"
		var err error
		if strings.HasPrefix(string(m.Body), "async") {
			err = replier.SendAsync(context.Background(), func(_ context.Context, _ *primitive.SendResult, err error) {
				if err != nil && counted {
					replyErrs.Add(1)
					t.Logf("reply to %s: %v", m.Body, err)
				}
			}, reply)
		} else {
			_, err = replier.SendSync(context.Background(), reply)
		}
		if err != nil && counted {
			replyErrs.Add(1)
			t.Logf("reply to %s: %v", m.Body, err)
		}
	})
	// The responder is ready once a warm requester (retrying) is answered.
	warm := newProducer(t, s, "rpc-cluster-warm")
	testutil.WaitFor(t, 60*time.Second, "the responder", func() bool {
		_, err := warm.Request(ctx, 5*time.Second, primitive.NewMessage(topic, []byte("warm")))
		return err == nil
	})
	// Fresh requesters ask at once; every request is answered well within
	// its timeout (a reply pushed through the other broker takes one more
	// loopback round trip).
	const requesters, each = 3, 6
	for i := range requesters {
		p := newProducer(t, s, fmt.Sprintf("rpc-cluster-%d", i))
		for j := range each {
			body := fmt.Sprintf("sync-%d-%d", i, j)
			if j%2 == 1 {
				body = "async" + body[len("sync"):]
			}
			start := time.Now()
			reply, err := p.Request(ctx, 5*time.Second, primitive.NewMessage(topic, []byte(body)))
			if err != nil {
				t.Fatalf("fresh requester %d, request %s, after %v: %v", i, body, time.Since(start), err)
			}
			if string(reply.Body) != "re:"+body {
				t.Fatalf("request %s: reply %q", body, reply.Body)
			}
		}
	}
	if n := replyErrs.Load(); n != 0 {
		t.Fatalf("%d replies refused", n)
	}
	// Each reply is stored once, on the broker it was sent to, and some
	// went to broker-0 and to broker-2 (the paths under test were taken).
	bodies := make([]string, 0, requesters*each)
	for i := range requesters {
		for j := range each {
			if j%2 == 1 {
				bodies = append(bodies, fmt.Sprintf("re:async-%d-%d", i, j))
			} else {
				bodies = append(bodies, fmt.Sprintf("re:sync-%d-%d", i, j))
			}
		}
	}
	// A queue lists what the store's dispatcher has indexed, which may
	// trail the last answers.
	var all map[string]int
	testutil.WaitFor(t, 20*time.Second, "every reply in the reply topic's queues", func() bool {
		all = storedBodies(t, c.registry, replyTopic, "broker-0", "broker-1", "broker-2")
		for _, body := range bodies {
			if all[body] == 0 {
				return false
			}
		}
		return true
	})
	for _, body := range bodies {
		if all[body] != 1 {
			t.Errorf("reply %s stored %d times", body, all[body])
		}
	}
	for _, name := range []string{"broker-0", "broker-2"} {
		on := storedBodies(t, c.registry, replyTopic, name)
		crossed := 0
		for _, body := range bodies {
			crossed += on[body]
		}
		if crossed == 0 {
			t.Errorf("no reply of %d went to %s", len(bodies), name)
		}
		t.Logf("%d of %d replies went to %s", crossed, len(bodies), name)
	}
}
