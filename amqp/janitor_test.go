package amqp

import (
	"testing"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// The janitor (TTLs, x-expires) sleeps while no queue has a TTL or an
// x-expires: an idle server does not wake every janitorTick. Declaring a
// queue with x-message-ttl wakes it, and its messages expire. (It used to
// tick every 25 ms from the start.)
func TestJanitorSleepsUntilAQueueIsTimed(t *testing.T) {
	s, addr := startServer(t, Options{})
	c := dial(t, addr)
	c.openChannel(1)
	c.declareQueue(1, "plain", nil)
	// Ten ticks' worth of an idle server, with a queue that has no TTL.
	deadline := time.Now().Add(10 * janitorTick)
	for time.Now().Before(deadline) {
		if n := s.janitorRounds.Load(); n != 0 {
			t.Fatalf("the janitor ran %d rounds with no timed queue", n)
		}
		time.Sleep(janitorTick / 5)
	}
	c.declareQueue(1, "timed", wire.Table{"x-message-ttl": int32(1000)})
	c.publish(1, "", "timed", "soon gone")
	waitFor(t, "the janitor to run", func() bool { return s.janitorRounds.Load() > 0 })
	if n := call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "timed", Passive: true}).MessageCount; n != 1 {
		t.Fatalf("timed queue holds %d messages after the publish, want 1", n)
	}
	waitFor(t, "the message to expire", func() bool {
		return call[*wire.QueueDeclareOk](c, 1, &wire.QueueDeclare{Queue: "timed", Passive: true}).MessageCount == 0
	})
}
