package broker

import (
	"time"

	"github.com/smartgo/smartgo/store"
)

// sendTally counts the sends of a written-behind round of the store
// (store.PutTally): the topic's put counters (Stats.AddPut) and the
// runtime put times (runtimeStats.observePut) get one add per counter
// for the round's run of puts to one topic, not four and three atomics
// per put on lines both readers' CPUs write. The store calls it with its
// answering lock held, one round at a time, before it answers any put of
// the round: a sender finds its put counted once answered, as before.
// Sends it counted are marked (pendingSend.counted) and do not count
// themselves again in PutDone. A send that PutDone answers at once (one
// that waits for no slave) is also counted out of sendsInFlight by the
// round (pendingSend.released), one add for the round instead of one a
// send on the line every reader's acceptAsync writes: the count drops
// right before the round's answers are written, not after each.
type sendTally struct {
	b        *Broker
	topic    string // the run's topic; "" before the first send of a round
	msgs     int64
	bytes    int64
	times    putTimes
	released int64 // sends counted out of sendsInFlight this round
}

// Count implements store.PutTally: a stored send counts into the run of
// its topic; other puts (not a pendingSend) count themselves.
func (t *sendTally) Count(done store.PutDone, latency time.Duration) {
	a, ok := done.(*pendingSend)
	if !ok {
		return
	}
	a.counted = true
	if !a.waitsForSlave() {
		a.released = true
		t.released++
	}
	if a.msg.Topic != t.topic {
		t.flushTopic()
		t.topic = a.msg.Topic
	}
	t.msgs++
	t.bytes += int64(len(a.msg.Body))
	t.times.add(latency)
}

// Flush implements store.PutTally.
func (t *sendTally) Flush() {
	t.flushTopic()
	t.topic = "" // the round's messages are recycled once answered
	t.b.rt.observePuts(&t.times)
	if t.released > 0 {
		t.b.sendsInFlight.Add(-t.released)
		t.released = 0
	}
}

func (t *sendTally) flushTopic() {
	if t.msgs > 0 {
		// A counted send is one message (batches count
		// themselves): as many requests as messages.
		t.b.stats.AddPuts(t.topic, t.msgs, t.msgs, t.bytes)
		t.msgs, t.bytes = 0, 0
	}
}
