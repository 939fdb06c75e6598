package bridge

import (
	"sync"

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
// is reading up to 2*ringSize messages a queue again, dropped unsent. A
// cut older than the ring's oldest delivery is not seen: the messages at
// the reused offsets below it are taken for delivered ones.

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
		type seek struct {
			q   client.MessageQueue
			off int64
		}
		var seeks []seek
		b.mu.Lock()
		for q, qs := range b.queues {
			if names[q.BrokerName] && len(qs.ring) > 0 && qs.ring[0].offset < qs.next {
				seeks = append(seeks, seek{q, qs.ring[0].offset})
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
