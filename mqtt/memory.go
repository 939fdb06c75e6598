package mqtt

import (
	"context"
	"sync"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// MemoryBackend is a Backend that keeps everything in process memory:
// Publish delivers synchronously to the bound server, retained messages and
// sessions live in maps. It is the standalone mode's backend and the one
// the tests use. Sessions survive a Server restart on the same
// MemoryBackend, not a process restart.
type MemoryBackend struct {
	mu       sync.Mutex
	closed   bool                     // protected by mu
	deliver  []Deliverer              // protected by mu
	retained map[string]*Message      // protected by mu
	sessions map[string]*SessionState // protected by mu
}

// NewMemoryBackend returns an empty in-memory backend. One MemoryBackend may
// serve several servers (each Start adds a deliverer), which then behave as
// nodes of one cluster.
func NewMemoryBackend() *MemoryBackend {
	return &MemoryBackend{retained: map[string]*Message{}, sessions: map[string]*SessionState{}}
}

// Start implements Backend.
func (b *MemoryBackend) Start(_ context.Context, d Deliverer) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return ErrClosed
	}
	b.deliver = append(b.deliver, d)
	return nil
}

// Detach removes a deliverer (a stopped server).
func (b *MemoryBackend) Detach(d Deliverer) {
	b.mu.Lock()
	defer b.mu.Unlock()
	for i, x := range b.deliver {
		if x == d {
			b.deliver = append(b.deliver[:i:i], b.deliver[i+1:]...)
			return
		}
	}
}

// Publish implements Backend. Deliveries are synchronous; under the
// context a server worker passes, they are held by the worker's unit of
// work and written once per subscriber when it ends (batch.go).
func (b *MemoryBackend) Publish(ctx context.Context, msg *Message) error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return ErrClosed
	}
	if msg.Retain {
		if len(msg.Payload) == 0 {
			delete(b.retained, msg.Topic)
		} else {
			b.retained[msg.Topic] = msg
		}
	}
	ds := b.deliver
	b.mu.Unlock()
	for _, d := range ds {
		if cd, ok := d.(contextDeliverer); ok {
			cd.deliverContext(ctx, msg)
		} else {
			d.Deliver(msg)
		}
	}
	return nil
}

// Retained implements Backend.
func (b *MemoryBackend) Retained(_ context.Context, filter string) ([]*Message, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	now := time.Now()
	var out []*Message
	for topic, m := range b.retained {
		if m.expired(now) {
			delete(b.retained, topic)
			continue
		}
		if packets.Match(filter, topic) {
			out = append(out, m)
		}
	}
	return out, nil
}

// RetainedCount implements RetainedCounter.
func (b *MemoryBackend) RetainedCount() int {
	b.mu.Lock()
	defer b.mu.Unlock()
	return len(b.retained)
}

// LoadSession implements Backend.
func (b *MemoryBackend) LoadSession(_ context.Context, clientID string) (*SessionState, bool, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	s, ok := b.sessions[clientID]
	if ok && !s.DisconnectedAt.IsZero() && s.Expiry != maxExpiry && time.Since(s.DisconnectedAt) >= s.Expiry {
		delete(b.sessions, clientID)
		return nil, false, nil
	}
	return s, ok, nil
}

// SaveSession implements Backend.
func (b *MemoryBackend) SaveSession(_ context.Context, s *SessionState) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.sessions[s.ClientID] = s
	return nil
}

// DeleteSession implements Backend.
func (b *MemoryBackend) DeleteSession(_ context.Context, clientID string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.sessions, clientID)
	return nil
}

// Close implements Backend.
func (b *MemoryBackend) Close() error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.closed = true
	b.deliver = nil
	return nil
}

// PublishAsync implements AsyncBackend: the store is immediate, so done
// runs before PublishAsync returns.
func (b *MemoryBackend) PublishAsync(ctx context.Context, msg *Message, done func(error)) {
	done(b.Publish(ctx, msg))
}
