package rocketmq

import (
	"context"
	"strconv"
	"testing"
	"time"

	"github.com/apache/rocketmq-client-go/v2/consumer"
	"github.com/apache/rocketmq-client-go/v2/primitive"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestInteropDelayedAfterLogTailLost: 20 messages of delay level 1 were
// sent, delivered after their delay and consumed; the broker stopped
// (its delay progress for level 1, 20, written out) and its commitlog lost
// its tail from the 11th delayed message on (a crash under async flush, a
// segment cut by a bad disk). Started again, it took 10 new delayed
// messages at the level's queue offsets 10-19, below the saved progress:
// each must still be delivered after its delay (they were acknowledged).
func TestInteropDelayedAfterLogTailLost(t *testing.T) {
	dir := t.TempDir()
	s, stop := runStandaloneAt(t, dir)
	const topic = "interop-delay-tail"
	createTopic(t, s.broker, topic, 1)
	p := newProducer(t, s, "delay-tail")
	cut := sendForCut(t, p, 20, 10, func(i int) *primitive.Message { // the 11th message's commitlog offset
		m := primitive.NewMessage(topic, []byte("before-"+strconv.Itoa(i)))
		m.WithDelayTimeLevel(1)
		return m
	})
	var before received
	c := newPushConsumer(t, s, "delay-tail-g1", "delay-tail-c1", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		before.add(m)
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 60*time.Second, "the 20 delayed messages consumed", func() bool { return before.distinct() == 20 })
	_ = c.Shutdown()
	_ = p.Shutdown()
	stop() // writes the delay progress out

	cutCommitlog(t, dir, cut)
	s2, _ := runStandaloneAt(t, dir)
	p2 := newProducer(t, s2, "delay-tail-2")
	for i := range 10 {
		m := primitive.NewMessage(topic, []byte("after-"+strconv.Itoa(i)))
		m.WithDelayTimeLevel(1)
		if res, err := p2.SendSync(context.Background(), m); err != nil || res.Status != primitive.SendOK {
			t.Fatalf("SendSync after the restart %d: %v %v", i, res, err)
		}
	}
	var after received
	newPushConsumer(t, s2, "delay-tail-g2", "delay-tail-c2", topic, consumer.Clustering, func(m *primitive.MessageExt) consumer.ConsumeResult {
		after.add(m)
		return consumer.ConsumeSuccess
	})
	testutil.WaitFor(t, 60*time.Second, "the 10 delayed messages sent after the restart delivered", func() bool {
		return after.prefixed("after-") == 10
	})
}
