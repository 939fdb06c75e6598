package rocketmq

import (
	"context"
	"errors"
	"fmt"
	"sync"
	"testing"
	"time"

	rocketmq "github.com/apache/rocketmq-client-go/v2"
	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropAckedSendsSurviveKill9: rocketmq-client-go producers send to
// a `smartgo standalone` with store.flush=sync, and the process is killed
// with SIGKILL under that load. After the restart a pull consumer from the
// first offset reads every message a SendSync saw acknowledged, with its
// body (docs/durability.md: a sync-flushed send is answered after its
// fdatasync).
func TestInteropAckedSendsSurviveKill9(t *testing.T) {
	if testing.Short() {
		t.Skip("starts and kills a process")
	}
	k := startKillable(t, "store.flush=sync")
	const topic, group = "InteropKill", "interop-kill"
	createTopic(t, k.broker, topic, 4)
	createTopic(t, k.broker, "%RETRY%"+group, 1)
	var mu sync.Mutex
	acked := map[string]bool{}
	ctx, stop := context.WithCancel(context.Background())
	var wg sync.WaitGroup
	for w := range 3 {
		p := newProducer(t, &k.standalone, fmt.Sprintf("prod-kill-%d", w))
		wg.Add(1)
		go func() {
			defer wg.Done()
			for n := 0; ctx.Err() == nil; n++ {
				body := fmt.Sprintf("kill-%d-%d", w, n)
				res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte(body)))
				if err != nil || res.Status != primitive.SendOK {
					time.Sleep(10 * time.Millisecond) // the broker is down or coming back
					continue
				}
				mu.Lock()
				acked[body] = true
				mu.Unlock()
			}
		}()
	}
	testutil.WaitFor(t, 30*time.Second, "300 acknowledged sends", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(acked) >= 300
	})
	k.kill9Restart(t)
	stop()
	wg.Wait()
	mu.Lock()
	want := len(acked)
	mu.Unlock()

	read := readBackAll(t, startPullConsumer(t, k.registry, group, topic), acked, "after kill -9 and restart")
	t.Logf("%d acknowledged sends all read back after kill -9 (%d messages read)", want, read)
}

// readBackAll polls c until it has read every body of acked, and returns
// how many distinct bodies it read; it fails the test (naming when, and a
// few of the bodies missing) if some are still unread after 60 s.
func readBackAll(t *testing.T, c rocketmq.PullConsumer, acked map[string]bool, when string) int {
	t.Helper()
	got := map[string]bool{}
	missing := func() []string {
		var m []string
		for b := range acked {
			if !got[b] {
				m = append(m, b)
			}
		}
		return m
	}
	deadline := time.Now().Add(60 * time.Second)
	for m := missing(); len(m) > 0; m = missing() {
		if time.Now().After(deadline) {
			t.Fatalf("%s, %d of %d acknowledged sends not read back, e.g. %q", when, len(m), len(acked), m[:min(len(m), 10)])
		}
		cr, err := c.Poll(context.Background(), 3*time.Second)
		if errors.Is(err, consumer.ErrNoNewMsg) {
			continue
		}
		if err != nil {
			t.Fatalf("Poll: %v", err)
		}
		for _, m := range cr.GetMsgList() {
			got[string(m.Body)] = true
		}
		c.ACK(context.Background(), cr, consumer.ConsumeSuccess)
	}
	return len(got)
}
