package bridge

import (
	"context"
	"sync"
	"time"

	"github.com/smartgo/smartgo/client"
)

// Reused offsets that come back in order.
//
// A broker that lost its commit log's tail (a crash under async flush, a
// damaged record cut at recovery) gives the lost queue offsets again to
// the next messages. The live consumer (deliverLoop) pulls each queue at
// the offset after its last delivery. When that pull reaches the broker
// while the queue is still shorter, the broker moves it back and the
// messages at the reused offsets arrive below the queue's next:
// rewindLocked tells them from the ones delivered by their identity and
// delivers them. When the queue is back at that offset before the
// consumer's first pull (steady traffic refills the lost range within
// milliseconds, and the consumer reconnects with a backoff), nothing is
// moved and the reused offsets would be skipped.
//
// So every time a connection of the live consumer to a broker closes
// (the broker stopped, restarted or the network broke: the only ways it
// can have lost anything), recheckLoop seeks that broker's queues back to
// the oldest delivery their ring remembers. The pulls read what the ring
// holds again: messages with the identity delivered there are dropped as
// before (deliverLoop's old), and the first one that differs rewinds the
// queue from its offset, so the messages stored at the reused offsets
// are delivered. The cost of a connection that closed without a lost tail
// is reading up to 2*ringSize messages a queue again, dropped unsent.
//
// When even the ring's oldest delivery was given again, the reused
// offsets may start below it: the queue goes back to the first message
// its broker stored after that delivery (seekStoredAfter), as a resume
// point does (sessions_reused.go). And a queue with no delivery since
// the node's start has its ring seeded (seedRings) with the message
// before its start position, read from its broker once at Start: a
// broker that lost its tail before the node's first delivery there is
// seen the same way.

// queueAt is an offset of a queue.
type queueAt struct {
	q   client.MessageQueue
	off int64
}

// lostBrokers are the brokers whose connection of the live consumer
// closed since recheckLoop last looked.
type lostBrokers struct {
	mu    sync.Mutex
	names map[string]bool // protected by mu
	wake  chan struct{}   // capacity 1
	// wg is recheckLoop's: Close waits for it before it closes the live
	// consumer the loop seeks.
	wg sync.WaitGroup
}

func newLostBrokers() *lostBrokers {
	return &lostBrokers{names: map[string]bool{}, wake: make(chan struct{}, 1)}
}

// note records that a connection to broker name closed
// (client.PullConsumerOptions.OnBrokerConnClose: it must not block).
func (l *lostBrokers) note(name string) {
	l.mu.Lock()
	l.names[name] = true
	l.mu.Unlock()
	select {
	case l.wake <- struct{}{}:
	default:
	}
}

// take returns the brokers noted and forgets them.
func (l *lostBrokers) take() map[string]bool {
	l.mu.Lock()
	defer l.mu.Unlock()
	names := l.names
	l.names = map[string]bool{}
	return names
}

// recheckLoop seeks the live consumer's queues of each broker whose
// connection closed back to the oldest delivery their ring holds (see
// above).
func (b *Backend) recheckLoop(live *client.PullConsumer) {
	defer b.lost.wg.Done()
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-b.lost.wake:
		}
		names := b.lost.take()
		var seeks []queueAt
		b.mu.Lock()
		for q, qs := range b.queues {
			if names[q.BrokerName] && len(qs.ring) > 0 && qs.ring[0].offset < qs.next {
				seeks = append(seeks, queueAt{q, qs.ring[0].offset})
			}
		}
		b.mu.Unlock()
		for _, s := range seeks {
			if err := live.Seek(s.q, s.off); err != nil {
				b.log.Warn("bridge: reading a queue again after its broker's connection closed", "queue", s.q, "err", err)
				continue
			}
			b.log.Info("bridge: broker connection closed: reading the queue again from its oldest delivery remembered",
				"queue", s.q, "offset", s.off)
		}
	}
}

// seekStoredAfter seeks live's queue q back to the first message its
// broker stored after the delivery oldest, found at off again (another
// message there), and returns that offset; off when it is not below off
// or cannot be found.
func (b *Backend) seekStoredAfter(live *client.PullConsumer, q client.MessageQueue, oldest storedID, off int64) int64 {
	ctx, cancel := context.WithTimeout(b.ctx, b.opts.SendTimeout)
	defer cancel()
	first, err := b.adm.OffsetByTime(ctx, q, time.UnixMilli(oldest.store+1))
	if err != nil {
		b.log.Warn("bridge: first queue offset given again not found; delivering from the oldest remembered",
			"queue", q, "offset", off, "err", err)
		return off
	}
	if first >= off {
		return off
	}
	if err := live.Seek(q, first); err != nil {
		b.log.Warn("bridge: reading a queue again from its first offset given again", "queue", q, "err", err)
		return off
	}
	return first
}

// seedRings puts in the ring of each queue with nothing delivered yet
// the message before its position (read from its broker), so that a
// recheck sees a broker that lost its tail before this node's first
// delivery on the queue. A queue whose message cannot be read stays
// unseeded.
func (b *Backend) seedRings(ctx context.Context) {
	var seeds []queueAt
	b.mu.Lock()
	for q, qs := range b.queues {
		if len(qs.ring) == 0 && qs.next > 0 {
			seeds = append(seeds, queueAt{q, qs.next - 1})
		}
	}
	b.mu.Unlock()
	ids := make([]*storedID, len(seeds))
	var wg sync.WaitGroup
	for i, s := range seeds {
		wg.Add(1)
		go func() {
			defer wg.Done()
			ctx, cancel := context.WithTimeout(ctx, b.opts.SendTimeout)
			defer cancel()
			msgs, _, _, _, err := b.adm.BrowseMessages(ctx, s.q.Topic, s.q.BrokerName, s.q.QueueID, s.off, 1)
			if err != nil || len(msgs) == 0 || msgs[0].QueueOffset != s.off {
				b.log.Debug("bridge: queue's last message not read at start", "queue", s.q, "offset", s.off, "err", err)
				return
			}
			id := storedIDOf(msgs[0])
			ids[i] = &id
		}()
	}
	wg.Wait()
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, s := range seeds {
		if qs := b.queues[s.q]; ids[i] != nil && qs != nil && len(qs.ring) == 0 && qs.next == s.off+1 {
			qs.ring = append(qs.ring, delivery{offset: s.off, id: *ids[i]})
		}
	}
}
