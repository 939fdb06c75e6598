package rocketmq

import (
	"context"
	"fmt"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropRequestReplyAcrossKill9: rocketmq-client-go requesters ask
// a responder through a `smartgo standalone` that is killed with SIGKILL
// and restarted; the same clients' requests are answered again, each with
// its own reply, 20-35 s after the restart: v2.1.2 does not fail a pull in flight when its
// connection breaks, so the responder's push consumer waits out its pull
// timeout. No request is in flight at the kill: v2.1.2's Request
// sends asynchronously, and its async send dereferences a nil response
// when the connection fails (producer.go:406, a missing return), which
// crashes the client process.
func TestInteropRequestReplyAcrossKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a process")
	}
	k := startKillable(t)
	const topic = "InteropRpcKill"
	createTopic(t, k.broker, topic, 2)
	startResponder(t, &k.standalone, "rpck", topic, func(p rocketmq.Producer, _ *primitive.MessageExt, reply *primitive.Message) {
		_, _ = p.SendSync(context.Background(), reply) // fails while the broker is down
	})
	var answered, wrong, failed atomic.Int64
	var lastAnswer atomic.Int64 // unix nanos
	var requesters []rocketmq.Producer
	for w := range 2 {
		requesters = append(requesters, newProducer(t, &k.standalone, fmt.Sprintf("rpck-req-%d", w)))
	}
	// The requests' context is never cancelled: v2.1.2 crashes the same
	// way when the context of a request whose send is unanswered ends.
	var wg sync.WaitGroup
	var halt atomic.Bool
	phase := 0
	ask := func() {
		halt.Store(false)
		phase++
		for w, p := range requesters {
			wg.Add(1)
			go func() {
				defer wg.Done()
				for n := 0; !halt.Load(); n++ {
					body := fmt.Sprintf("q%d-%d-%d", phase, w, n)
					r, err := p.Request(context.Background(), 3*time.Second, primitive.NewMessage(topic, []byte(body)))
					switch {
					case err != nil:
						failed.Add(1)
						time.Sleep(50 * time.Millisecond)
					case string(r.Body) != "re:"+body:
						wrong.Add(1)
					default:
						answered.Add(1)
						lastAnswer.Store(time.Now().UnixNano())
					}
				}
			}()
		}
	}
	stop := func() { halt.Store(true); wg.Wait() }
	t.Cleanup(stop)
	ask()
	testutil.WaitFor(t, 60*time.Second, "50 answered requests", func() bool { return answered.Load() >= 50 })
	stop()
	k.kill9Restart(t)
	restarted := time.Now()
	before := answered.Load()
	ask()
	testutil.WaitFor(t, 120*time.Second, "50 requests answered after the restart", func() bool { return answered.Load() >= before+50 })
	t.Logf("requests answered again %v after the restart (%d answered, %d failed)",
		time.Unix(0, lastAnswer.Load()).Sub(restarted).Round(time.Millisecond), answered.Load(), failed.Load())
	stop()
	if n := wrong.Load(); n > 0 {
		t.Errorf("%d requests got another request's reply", n)
	}
}
