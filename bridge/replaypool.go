package bridge

import (
	"context"
	"slices"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smartgo/smartgo/client"
)

// Session resumes come in storms (a node restarted, a network came
// back), and starting a replay consumer (connections, route and offset
// queries) was most of a resume's cost. A node keeps a few started
// consumers per set of queues and resumes on those queues take turns on
// them.
const (
	// replayIdle is how long an unused replay consumer stays started.
	replayIdle = 3 * time.Second
	// replayPerQueues bounds the replay consumers of one set of queues:
	// a resume beyond it waits for one to be free (a replay on a
	// started consumer takes a few round trips).
	replayPerQueues = 8
)

// replayPool keeps started replay consumers by the queues they hold
// (replayKey). A consumer is used by one replay at a time.
type replayPool struct {
	mu     sync.Mutex
	keys   map[string]*replaySet
	armed  bool // a reap is scheduled
	closed bool
	wg     sync.WaitGroup // reaps running
}

// replaySet is one set of queues' consumers.
type replaySet struct {
	idle    []pooledReplay
	total   int                         // idle, in use and being started
	waiters []chan *client.PullConsumer // nil sent: start one yourself
}

type pooledReplay struct {
	c     *client.PullConsumer
	since time.Time
}

// popWaiter removes and returns the longest waiting resume's channel
// (nil: none).
func (s *replaySet) popWaiter() chan *client.PullConsumer {
	if len(s.waiters) == 0 {
		return nil
	}
	ch := s.waiters[0]
	s.waiters = s.waiters[1:]
	return ch
}

// replayKey names a set of queues.
func replayKey(qs []client.MessageQueue) string {
	keys := make([]string, len(qs))
	for i, q := range qs {
		keys[i] = q.Topic + "\x00" + q.BrokerName + "\x00" + strconv.Itoa(int(q.QueueID))
	}
	slices.Sort(keys)
	return strings.Join(keys, "\x01")
}

func (p *replayPool) setLocked(key string) *replaySet {
	if p.keys == nil {
		p.keys = map[string]*replaySet{}
	}
	s := p.keys[key]
	if s == nil {
		s = &replaySet{}
		p.keys[key] = s
	}
	return s
}

// get returns an idle consumer of key's queues, or nil when the caller
// is to start one (and hand it to put or drop); when replayPerQueues are
// in use it waits for one until ctx ends.
func (p *replayPool) get(ctx context.Context, key string) (*client.PullConsumer, error) {
	p.mu.Lock()
	s := p.setLocked(key)
	if n := len(s.idle); n > 0 {
		c := s.idle[n-1].c
		s.idle = s.idle[:n-1]
		p.mu.Unlock()
		return c, nil
	}
	if s.total < replayPerQueues || p.closed {
		s.total++
		p.mu.Unlock()
		return nil, nil
	}
	ch := make(chan *client.PullConsumer, 1)
	s.waiters = append(s.waiters, ch)
	p.mu.Unlock()
	select {
	case c := <-ch:
		return c, nil
	case <-ctx.Done():
	}
	p.mu.Lock()
	i := slices.Index(s.waiters, ch)
	if i >= 0 {
		s.waiters = slices.Delete(s.waiters, i, i+1)
		p.mu.Unlock()
		return nil, ctx.Err()
	}
	p.mu.Unlock()
	// Handed over meanwhile: pass it on.
	if c := <-ch; c != nil {
		p.put(key, c)
	} else {
		p.drop(key)
	}
	return nil, ctx.Err()
}

// put gives back a consumer a replay used without error: to a waiting
// resume, or idle until replayIdle has passed.
func (p *replayPool) put(key string, c *client.PullConsumer) {
	p.mu.Lock()
	s := p.setLocked(key)
	if ch := s.popWaiter(); ch != nil {
		p.mu.Unlock()
		ch <- c
		return
	}
	if p.closed {
		s.total--
		p.mu.Unlock()
		c.Close()
		return
	}
	s.idle = append(s.idle, pooledReplay{c: c, since: time.Now()})
	arm := !p.armed
	p.armed = true
	p.mu.Unlock()
	if arm {
		time.AfterFunc(replayIdle, p.reap)
	}
}

// drop accounts for a consumer of key's that was closed (or never
// started): a waiting resume starts its own.
func (p *replayPool) drop(key string) {
	p.mu.Lock()
	s := p.setLocked(key)
	if ch := s.popWaiter(); ch != nil {
		p.mu.Unlock()
		ch <- nil
		return
	}
	s.total--
	if s.total == 0 {
		delete(p.keys, key)
	}
	p.mu.Unlock()
}

// reap closes the consumers idle for replayIdle and schedules itself
// again while any are left.
func (p *replayPool) reap() {
	p.mu.Lock()
	if p.closed {
		p.armed = false
		p.mu.Unlock()
		return
	}
	var old []*client.PullConsumer
	cutoff := time.Now().Add(-replayIdle)
	next := time.Duration(0)
	for key, s := range p.keys {
		keep := s.idle[:0]
		for _, e := range s.idle {
			if e.since.After(cutoff) {
				keep = append(keep, e)
				if d := e.since.Sub(cutoff); next == 0 || d < next {
					next = d
				}
			} else {
				old = append(old, e.c)
				s.total--
			}
		}
		clear(s.idle[len(keep):])
		s.idle = keep
		if s.total == 0 {
			delete(p.keys, key)
		}
	}
	p.armed = next > 0
	p.wg.Add(1)
	p.mu.Unlock()
	defer p.wg.Done()
	if next > 0 {
		time.AfterFunc(next, p.reap)
	}
	for _, c := range old {
		c.Close()
	}
}

// close closes every idle consumer and waits for running reaps; from
// then on, resumes start their own and put closes them.
func (p *replayPool) close() {
	p.mu.Lock()
	p.closed = true
	var idle []*client.PullConsumer
	for _, s := range p.keys {
		for _, e := range s.idle {
			idle = append(idle, e.c)
		}
		s.total -= len(s.idle)
		s.idle = nil
	}
	p.mu.Unlock()
	for _, c := range idle {
		c.Close()
	}
	p.wg.Wait()
}
