package broker

import (
	"strconv"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
)

// TestBrokerDelayGapRefilledBeforeFirstLook: the log lost the tail a
// delay level had delivered, and delayed messages sent after the restart,
// before the delay service's first look, filled the queue back up to the
// saved progress, so the progress is no longer past the queue's end. The
// first look of the mastership still takes the progress back to the
// first message stored since the broker started, and those messages are
// delivered, once each.
func TestBrokerDelayGapRefilledBeforeFirstLook(t *testing.T) {
	const topic = "DelayRefill"
	dir := t.TempDir()
	deliverThenCutTail(t, dir, topic, nil)
	level1 := props(record.PropertyDelayLevel, "1")

	start := make(chan struct{})
	b := testBroker(t, dir, func(o *Options) { o.scheduleStart = start })
	delivered := b.Store().MaxOffset(topic, 0) // copies the cut left
	c := newTestClient(t, b.Addr())
	for i := range 10 {
		c.mustSend(topic, 0, "after-"+strconv.Itoa(i), level1)
	}
	testutil.WaitFor(t, 10*time.Second, "the schedule queue back at the saved progress", func() bool {
		return b.Store().MaxOffset(ScheduleTopic, 0) == 20
	})
	if got := b.delayOffsets.Get(1); got != 20 {
		t.Fatalf("saved progress %d before the first look, want 20", got)
	}
	close(start)
	testutil.WaitFor(t, 10*time.Second, "the 10 delayed messages sent after the restart delivered", func() bool {
		return b.delayOffsets.Get(1) == 20 && b.Store().MaxOffset(topic, 0) == delivered+10
	})
	// Nothing delivered twice: the ones before the cut stay as they were.
	if n := b.Store().MaxOffset(topic, 0); n != delivered+10 {
		t.Fatalf("%s holds %d messages, want %d", topic, n, delivered+10)
	}
}
