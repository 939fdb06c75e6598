package bridge

import (
	"context"
	"errors"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
	"github.com/smartgo/smartgo/internal/testutil"
)

// TestAMQPBackendDiskAlarm: a store refused for a full disk raises the
// backend's alarm (amqp.AlarmSource) with RabbitMQ's reason; once the
// broker's disk has room again the alarm clears by itself, with no
// store needed to notice, and stores succeed again. A stopped watcher
// is not called.
func TestAMQPBackendDiskAlarm(t *testing.T) {
	var usage atomic.Value
	usage.Store(0.1)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir(),
		DiskUsage: func(string) (float64, error) { return usage.Load().(float64), nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b := newAMQPBackend(t, c, 3*time.Second)
	var mu sync.Mutex
	var calls []string
	stop := b.WatchAlarm(func(reason string) {
		mu.Lock()
		calls = append(calls, reason)
		mu.Unlock()
	})
	seen := func() []string {
		mu.Lock()
		defer mu.Unlock()
		return append([]string(nil), calls...)
	}
	l := openAMQP(t, b, "/", "alarmed")
	if r := appendWait(t, l, msg("before")); r.err != nil {
		t.Fatal(r.err)
	}
	if got := seen(); len(got) != 0 {
		t.Fatalf("alarm calls before the disk filled: %q", got)
	}

	usage.Store(0.99)
	testutil.Eventually(t, 20*time.Second, func() error {
		if r := appendWait(t, l, msg("full")); r.err == nil {
			return errors.New("still stored")
		}
		return nil
	})
	if got := seen(); len(got) != 1 || got[0] != AMQPDiskAlarm {
		t.Fatalf("alarm calls after a refused store: %q, want [%q]", got, AMQPDiskAlarm)
	}

	usage.Store(0.1)
	testutil.WaitFor(t, 30*time.Second, "the alarm to clear", func() bool { return len(seen()) == 2 })
	if got := seen(); got[1] != "" {
		t.Fatalf("alarm calls: %q, want the alarm then its clearing", got)
	}
	if r := appendWait(t, l, msg("after")); r.err != nil {
		t.Fatalf("store after the alarm cleared: %v", r.err)
	}

	stop()
	usage.Store(0.99)
	testutil.Eventually(t, 20*time.Second, func() error {
		if r := appendWait(t, l, msg("full again")); r.err == nil {
			return errors.New("still stored")
		}
		return nil
	})
	if got := seen(); len(got) != 2 {
		t.Fatalf("a stopped watcher was called: %q", got)
	}
}
