package rocketmq

import (
	"context"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// Messages sent by rocketmq-client-go; the broker stopped; one queue's
// oldest consume-queue file damaged in place (entries overwritten with
// garbage, one entry's log offset flipped), another queue's oldest file
// cut mid-entry (what a bad disk, a torn copy or fsck leaves); the broker
// started again on the same data: a rocketmq-client-go push consumer
// receives every message once, each at its own queue offset (the damaged
// entries are rebuilt from the commitlog when the pull meets them). Those
// messages used to be skipped: never consumed.
func TestInteropConsumeAfterCQDamage(t *testing.T) {
	dir := t.TempDir()
	// 64 entries a file: each queue has 4 files, the oldest of which a
	// clean start does not re-check (store.recover_segments=3).
	small := []string{"-set", "store.cq_entries_per_file=64"}
	s, stop := runStandaloneAt(t, dir, small...)
	const topic = "interop-cq-damage"
	createTopic(t, s.broker, topic, 2)
	p := newProducer(t, s, "cq-damage")
	const n = 400
	for i := range n {
		m := primitive.NewMessage(topic, []byte("body-"+strconv.Itoa(i)))
		if res, err := p.SendSync(context.Background(), m); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendSync %d: %v %v", i, res, err)
		}
	}
	_ = p.Shutdown()
	stop()

	qdir := func(q int) string { return filepath.Join(dir, "data", "store", "consumequeue", topic, strconv.Itoa(q)) }
	file0 := func(q int) string { return filepath.Join(qdir(q), fmt.Sprintf("%020d", 0)) }
	for q := range 2 {
		if files, err := os.ReadDir(qdir(q)); err != nil || len(files) < 4 {
			t.Fatalf("queue %d: %d files, %v", q, len(files), err)
		}
	}
	b, err := os.ReadFile(file0(0))
	if err != nil {
		t.Fatal(err)
	}
	for i := 5 * 20; i < 15*20; i++ {
		b[i] = byte(i*13 + 7)
	}
	b[30*20+6] ^= 0x40 // entry 30's log offset
	if err := os.WriteFile(file0(0), b, 0o644); err != nil {
		t.Fatal(err)
	}
	if err := os.Truncate(file0(1), 20*20+9); err != nil {
		t.Fatal(err)
	}

	s2, _ := runStandaloneAt(t, dir, small...)
	var got received
	newPushConsumer(t, s2, "interop-cq-damage-g", "cq-damage-c", topic, consumer.Clustering,
		func(m *primitive.MessageExt) consumer.ConsumeResult {
			got.add(m)
			return consumer.ConsumeSuccess
		})
	testutil.WaitFor(t, 60*time.Second, "every message consumed", func() bool { return got.distinct() == n })
	got.mu.Lock()
	defer got.mu.Unlock()
	for k, d := range got.at {
		if d.n != 1 {
			t.Errorf("queue %d offset %d delivered %d times", k.queue, k.off, d.n)
		}
	}
	for i := range n {
		m := got.msgs["body-"+strconv.Itoa(i)]
		if m == nil {
			t.Fatalf("body-%d not consumed", i)
		}
		if got.at[queueOffset{topic, m.Queue.QueueId, m.QueueOffset}].n != 1 {
			t.Errorf("body-%d at queue %d offset %d", i, m.Queue.QueueId, m.QueueOffset)
		}
	}
	if len(got.at) != n {
		t.Errorf("%d queue offsets delivered, want %d", len(got.at), n)
	}
	if !s2.logContains("consume-queue entries rebuilt") {
		t.Error("the rebuild was not logged")
	}
}
