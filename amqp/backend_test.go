package amqp

import (
	"context"
	"errors"
	"sync"
)

// memBackend is an in-memory Backend for the engine's tests: what it
// holds survives a Server, so a second Server on it shows recovery.
type memBackend struct {
	mu        sync.Mutex
	defs      Definitions
	saves     int
	logs      map[string]*memLog
	failAfter int // Appends after this many messages fail; <0 never
	async     bool
	hold      bool          // done calls wait for release
	held      []func()      // held done calls
	gate      chan struct{} // when set, Append waits until it is closed
	wg        sync.WaitGroup
}

func newMemBackend() *memBackend {
	return &memBackend{logs: map[string]*memLog{}, failAfter: -1}
}

func (b *memBackend) LoadDefinitions(context.Context) (Definitions, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.defs, nil
}

func (b *memBackend) SaveDefinitions(_ context.Context, d Definitions) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	b.defs = d
	b.saves++
	return nil
}

func (b *memBackend) OpenQueue(_ context.Context, vhost, name string) (QueueLog, error) {
	b.mu.Lock()
	defer b.mu.Unlock()
	k := vhost + "/" + name
	l := b.logs[k]
	if l == nil {
		l = &memLog{b: b}
		b.logs[k] = l
	}
	l.closed = false
	return l, nil
}

func (b *memBackend) DeleteQueue(_ context.Context, vhost, name string) error {
	b.mu.Lock()
	defer b.mu.Unlock()
	delete(b.logs, vhost+"/"+name)
	return nil
}

func (b *memBackend) log(vhost, name string) *memLog {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.logs[vhost+"/"+name]
}

var errStoreFailed = errors.New("test store failed")

type memLog struct {
	b         *memBackend
	msgs      []StoredMessage
	committed uint64
	commits   int
	closed    bool
	hidden    int // Read leaves out the last hidden messages (not indexed yet)
}

func (l *memLog) Append(msgs []StoredMessage, done func(uint64, error)) {
	b := l.b
	b.mu.Lock()
	if gate := b.gate; gate != nil {
		b.mu.Unlock()
		<-gate
		b.mu.Lock()
	}
	var err error
	first := uint64(len(l.msgs))
	if l.closed {
		err = errors.New("append to a closed log")
	} else if b.failAfter >= 0 && b.failAfter < len(msgs) {
		err = errStoreFailed
	} else {
		if b.failAfter >= 0 {
			b.failAfter -= len(msgs)
		}
		for _, m := range msgs {
			m.Body = append([]byte(nil), m.Body...)
			m.Properties = append([]byte(nil), m.Properties...)
			l.msgs = append(l.msgs, m)
		}
	}
	async := b.async
	if b.hold {
		b.held = append(b.held, func() { done(first, err) })
		b.mu.Unlock()
		return
	}
	b.mu.Unlock()
	if async {
		b.wg.Add(1)
		go func() {
			defer b.wg.Done()
			done(first, err)
		}()
		return
	}
	done(first, err)
}

func (l *memLog) Read(_ context.Context, from uint64, max int) ([]StoredMessage, error) {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	var out []StoredMessage
	for i := from; i < uint64(len(l.msgs)-l.hidden) && len(out) < max; i++ {
		m := l.msgs[i]
		m.Offset = i
		out = append(out, m)
	}
	return out, nil
}

func (l *memLog) Committed(context.Context) (uint64, error) {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	return l.committed, nil
}

func (l *memLog) Commit(_ context.Context, off uint64) error {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	if off > l.committed {
		l.committed = off
	}
	l.commits++
	return nil
}

// release runs the held done calls.
func (b *memBackend) release() {
	b.mu.Lock()
	held := b.held
	b.held, b.hold = nil, false
	b.mu.Unlock()
	for _, f := range held {
		f()
	}
}

func (l *memLog) Close() error {
	l.b.wg.Wait()
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	l.closed = true
	return nil
}

func (l *memLog) state() (n int, committed uint64) {
	l.b.mu.Lock()
	defer l.b.mu.Unlock()
	return len(l.msgs), l.committed
}
