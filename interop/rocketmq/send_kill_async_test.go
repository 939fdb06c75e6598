package rocketmq

import (
	"context"
	"fmt"
	"sync"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropAckedAsyncFlushSendsSurviveKill9: under the default async
// flush a broker's single send is written behind (store/writebehind.go)
// and a batch goes with one pwrite; either is answered once its record is
// in the page cache, which a SIGKILL of the process does not lose.
// rocketmq-client-go producers send with SendSync and batches of 4 while
// the standalone is killed with SIGKILL twice; after the last restart a
// pull consumer reads back every body a send saw acknowledged. (SendAsync
// is left out: v2.1.2's callback dereferences a nil response when its
// connection is reset, and panics the test process.)
func TestInteropAckedAsyncFlushSendsSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a process")
	}
	k := startKillable(t)
	const topic, group = "InteropKillAsync", "interop-kill-async"
	createTopic(t, k.broker, topic, 4)
	createTopic(t, k.broker, "%RETRY%"+group, 1)
	var mu sync.Mutex
	acked := map[string]bool{}
	ack := func(bodies ...string) {
		mu.Lock()
		defer mu.Unlock()
		for _, b := range bodies {
			acked[b] = true
		}
	}
	count := func() int {
		mu.Lock()
		defer mu.Unlock()
		return len(acked)
	}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	run := func(f func(n int)) {
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				f(n)
			}
		}()
	}
	backOff := func() { time.Sleep(10 * time.Millisecond) } // the broker is down or coming back
	ps := newProducer(t, &k.standalone, "prod-kill-async-sync")
	run(func(n int) {
		body := fmt.Sprintf("sync-%d", n)
		if res, err := ps.SendSync(ctx, primitive.NewMessage(topic, []byte(body))); err == nil && res.Status == primitive.SendOK {
			ack(body)
			return
		}
		backOff()
	})
	pb := newProducer(t, &k.standalone, "prod-kill-async-batch")
	run(func(n int) {
		var msgs []*primitive.Message
		var bodies []string
		for i := range 4 {
			body := fmt.Sprintf("batch-%d-%d", n, i)
			bodies = append(bodies, body)
			msgs = append(msgs, primitive.NewMessage(topic, []byte(body)))
		}
		if res, err := pb.SendSync(ctx, msgs...); err == nil && res.Status == primitive.SendOK {
			ack(bodies...)
			return
		}
		backOff()
	})
	for round := 1; round <= 2; round++ {
		before := count()
		testutil.WaitFor(t, 60*time.Second, "300 more acknowledged sends", func() bool { return count() >= before+300 })
		k.kill9Restart(t)
	}
	testutil.WaitFor(t, 60*time.Second, "sends acknowledged after the last restart", func() bool { return count() >= 900 })
	stop()
	wg.Wait()
	want := count()

	read := readBackAll(t, startPullConsumer(t, k.registry, group, topic), acked, "after kill -9 and restart")
	t.Logf("%d acknowledged sends all read back after two kill -9 (%d messages read)", want, read)
}
