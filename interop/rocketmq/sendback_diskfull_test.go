package rocketmq

import (
	"context"
	"sync"
	"syscall"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropSendBackOnFullDiskNotLost: a rocketmq-client-go consumer
// asks for a message again (ConsumeRetryLater) while the broker's disk is
// full, so the broker cannot store the retry copy. The message comes
// again all the same: the broker leaves the send-back unanswered and the
// client, whose call times out, consumes it again itself. When the
// broker answered the refusal with an error, the client took the answer
// as done and the message was never delivered again.
func TestInteropSendBackOnFullDiskNotLost(t *testing.T) {
	dir := t.TempDir()
	const topic = "SendBackDiskFull"
	s, stop := runStandaloneAt(t, dir)
	createTopic(t, s.broker, topic, 1)
	p := newProducer(t, s, "sendback-diskfull")
	ctx, cancel := context.WithTimeout(context.Background(), 90*time.Second)
	defer cancel()
	if res, err := p.SendSync(ctx, primitive.NewMessage(topic, []byte("again"))); err != nil || res.Status != primitive.SendOK {
		t.Fatalf("send: %v %v", res, err)
	}
	stop()

	// The same data, the disk's marks at their lowest (10 %), below what
	// the disk uses.
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if used := 1 - float64(st.Bavail)/float64(st.Blocks); used < 0.12 {
		t.Skipf("the disk under %s is only %.0f%% used; the lowest full mark is 10%%", dir, used*100)
	}
	s, _ = runStandaloneAt(t, dir, "-set", "store.disk_max_used_ratio=10", "-set", "store.disk_force_clean_ratio=10",
		"-set", "store.disk_full_ratio=10")
	var mu sync.Mutex
	var seen []int32
	newPushConsumer(t, s, "sendback-diskfull-g", "sbdf", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		mu.Lock()
		defer mu.Unlock()
		seen = append(seen, m.ReconsumeTimes)
		if len(seen) == 1 {
			return consumer.ConsumeRetryLater
		}
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 80*time.Second, "the message consumed again after its send-back was refused", func() bool {
		mu.Lock()
		defer mu.Unlock()
		return len(seen) >= 2
	})
	if !s.logContains("send-back refused") {
		t.Error("the broker did not log the refused send-back")
	}
}
