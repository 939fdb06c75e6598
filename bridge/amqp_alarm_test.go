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

// alarmWatch records a backend's alarm calls.
type alarmWatch struct {
	mu    sync.Mutex
	calls []string
}

func (w *alarmWatch) set(reason string) {
	w.mu.Lock()
	w.calls = append(w.calls, reason)
	w.mu.Unlock()
}

func (w *alarmWatch) seen() []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	return append([]string(nil), w.calls...)
}

// on reports whether the alarm is raised after the calls so far.
func (w *alarmWatch) on() bool {
	got := w.seen()
	return len(got) > 0 && got[len(got)-1] != ""
}

// TestAMQPBackendDiskAlarmBeforeRefusal: the alarm goes on when a
// broker's disk use comes within AMQPDiskAlarmMargin of its
// store.disk_full_ratio, while the broker still takes writes (nothing
// read before the alarm is nacked), and off once its use falls again.
func TestAMQPBackendDiskAlarmBeforeRefusal(t *testing.T) {
	var usage atomic.Value
	usage.Store(0.5)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir(),
		DiskUsage: func(string) (float64, error) { return usage.Load().(float64), nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b := newAMQPBackend(t, c, 3*time.Second)
	var w alarmWatch
	defer b.WatchAlarm(w.set)()
	l := openAMQP(t, b, "/", "early")
	if r := appendWait(t, l, msg("before")); r.err != nil {
		t.Fatal(r.err)
	}
	usage.Store(0.89) // the default full mark is 0.90
	testutil.WaitFor(t, 20*time.Second, "the alarm before the disk is full", w.on)
	if r := appendWait(t, l, msg("still stored")); r.err != nil {
		t.Fatalf("a store under the alarm, below the full mark: %v", r.err)
	}
	if got := w.seen(); len(got) != 1 || got[0] != AMQPDiskAlarm {
		t.Fatalf("alarm calls: %q, want [%q]", got, AMQPDiskAlarm)
	}
	usage.Store(0.5)
	testutil.WaitFor(t, 20*time.Second, "the alarm to clear", func() bool { return !w.on() })
}

// TestAMQPBackendDiskAlarmBrokerGone: a broker low on disk that the
// registries stop listing (it stopped) keeps the alarm on: a broker that
// vanished is not one with room. Once no log of the backend is on it
// (its queue closed) the alarm clears.
func TestAMQPBackendDiskAlarmBrokerGone(t *testing.T) {
	var usage atomic.Value
	usage.Store(0.5)
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir(),
		DiskUsage: func(string) (float64, error) { return usage.Load().(float64), nil }})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { c.Close() })
	b := newAMQPBackend(t, c, 3*time.Second)
	var w alarmWatch
	defer b.WatchAlarm(w.set)()
	l := openAMQP(t, b, "/", "vanishing")
	if r := appendWait(t, l, msg("before")); r.err != nil {
		t.Fatal(r.err)
	}
	usage.Store(0.89)
	testutil.WaitFor(t, 20*time.Second, "the alarm", w.on)
	if err := c.StopBroker(0); err != nil {
		t.Fatal(err)
	}
	gone := func() bool {
		b.alarmMu.Lock()
		defer b.alarmMu.Unlock()
		d := b.disks[c.BrokerName(0)]
		return d != nil && d.gone
	}
	testutil.WaitFor(t, 30*time.Second, "the backend to see the broker unlisted", gone)
	if got := w.seen(); len(got) != 1 || got[0] != AMQPDiskAlarm {
		t.Fatalf("alarm calls once the broker is gone: %q, want [%q]", got, AMQPDiskAlarm)
	}
	l.Close()
	testutil.WaitFor(t, 20*time.Second, "the alarm to clear once no queue is on the broker", func() bool { return !w.on() })
}
