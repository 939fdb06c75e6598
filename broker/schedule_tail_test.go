package broker

import (
	"os"
	"path/filepath"
	"strconv"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/store/record"
)

// TestBrokerDelayProgressPastEndGoesBackByLogOffset: a delay level's
// progress past its queue's end (the log lost the tail the level had
// delivered) goes back to the first delayed message this broker stored
// since it became master, found by log offset as a pull past the end does
// (masterFrom), not by the store times of the records before its start.
// Here the records the level had delivered were stored with a clock an
// hour ahead (as a promoted slave's records carry the old master's
// clock), then the clock was put right: a bound by time (the broker's
// boot) took the ten surviving records, delivered before the cut, for
// records stored since the start, so the level went back to them, due an
// hour later, and held the messages sent after the restart behind them
// for that hour (to deliver the ten again then).
func TestBrokerDelayProgressPastEndGoesBackByLogOffset(t *testing.T) {
	const topic = "DelayTail"
	dir := t.TempDir()
	deliverThenCutTail(t, dir, topic, func(o *Options) { o.Now = func() time.Time { return time.Now().Add(time.Hour) } })
	level1 := props(record.PropertyDelayLevel, "1")

	b := testBroker(t, dir, nil)
	delivered := b.Store().MaxOffset(topic, 0) // copies the cut left
	testutil.WaitFor(t, 10*time.Second, "the level's progress moved back to its queue's end", func() bool {
		return b.delayOffsets.Get(1) == 10
	})
	if n := b.Store().MaxOffset(topic, 0); n != delivered {
		t.Fatalf("%s holds %d messages after the restart, want %d: delayed messages delivered before the cut were delivered again", topic, n, delivered)
	}
	// Delayed messages stored since the start are delivered.
	c := newTestClient(t, b.Addr())
	for i := range 5 {
		c.mustSend(topic, 0, "after-"+strconv.Itoa(i), level1)
	}
	testutil.WaitFor(t, 10*time.Second, "the 5 delayed messages sent after the restart delivered", func() bool {
		return b.delayOffsets.Get(1) == 15 && b.Store().MaxOffset(topic, 0) == delivered+5
	})
}

// deliverThenCutTail runs a broker on dir (with mod) that stores 20
// level-1 delayed messages to topic's queue 0 and delivers them, closes it
// (the delay progress, 20, written out), and cuts the commitlog at the
// 11th delayed message: the log lost the tail the level had delivered.
func deliverThenCutTail(t *testing.T, dir, topic string, mod func(*Options)) {
	t.Helper()
	b := testBroker(t, dir, mod)
	c := newTestClient(t, b.Addr())
	level1 := props(record.PropertyDelayLevel, "1")
	var cut int64 // the 11th delayed message's commitlog offset
	for i := range 20 {
		h := c.mustSend(topic, 0, "before-"+strconv.Itoa(i), level1)
		if i == 10 {
			var err error
			if cut, err = strconv.ParseInt(h.MsgID[len(h.MsgID)-16:], 16, 64); err != nil {
				t.Fatalf("offset message id %q: %v", h.MsgID, err)
			}
		}
	}
	testutil.WaitFor(t, 10*time.Second, "the 20 delayed messages delivered", func() bool {
		return b.delayOffsets.Get(1) == 20 && b.Store().MaxOffset(topic, 0) == 20
	})
	if err := b.Close(); err != nil { // writes the delay progress out
		t.Fatal(err)
	}
	if err := os.Truncate(filepath.Join(dir, "commitlog", "00000000000000000000"), cut); err != nil {
		t.Fatal(err)
	}
}
