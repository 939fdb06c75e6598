package client

import (
	"context"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/internal/wake"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// subscription is one topic subscription with its parsed tag expression,
// or a SQL92 selector the brokers evaluate (exprType SQL92, tags nil).
type subscription struct {
	topic    string
	expr     string
	exprType string          // protocol.ExpressionTypeTag or ExpressionTypeSQL92
	tags     map[string]bool // nil = every message
	codes    []int32
	version  int64
}

// parseSubscription parses a tag expression: "" or "*" subscribes to
// everything; otherwise tags separated by "||" (blanks trimmed, empties
// dropped), as RocketMQ's FilterAPI does.
func parseSubscription(topic, expr string) *subscription {
	s := &subscription{topic: topic, expr: strings.TrimSpace(expr), exprType: protocol.ExpressionTypeTag, version: time.Now().UnixNano() / 1e6}
	if s.expr == "" || s.expr == protocol.SubscriptionAll {
		s.expr = protocol.SubscriptionAll
		return s
	}
	for _, t := range strings.Split(s.expr, "||") {
		if t = strings.TrimSpace(t); t != "" {
			if s.tags == nil {
				s.tags = map[string]bool{}
			}
			if !s.tags[t] {
				s.tags[t] = true
				s.codes = append(s.codes, int32(record.TagsHash(t)))
			}
		}
	}
	if s.tags == nil {
		s.expr = protocol.SubscriptionAll
	}
	return s
}

// sqlSubscription is a SQL92 subscription: the broker filters, every
// message pulled matches.
func sqlSubscription(topic, selector string) *subscription {
	return &subscription{topic: topic, expr: strings.TrimSpace(selector), exprType: protocol.ExpressionTypeSQL92,
		version: time.Now().UnixNano() / 1e6}
}

func (s *subscription) data() *protocol.SubscriptionData {
	sd := &protocol.SubscriptionData{Topic: s.topic, SubString: s.expr, ExpressionType: s.exprType,
		SubVersion: s.version, TagsSet: []string{}, CodeSet: []int32{}}
	for t := range s.tags {
		sd.TagsSet = append(sd.TagsSet, t)
	}
	sd.CodeSet = append(sd.CodeSet, s.codes...)
	return sd
}

func (s *subscription) match(tag string) bool {
	return s.tags == nil || s.tags[tag]
}

// processQueue caches the messages pulled from one queue until they are
// consumed; its first unconsumed offset is what gets committed.
type processQueue struct {
	mq     MessageQueue
	sub    *subscription
	ctx    context.Context
	cancel context.CancelFunc

	dropped  atomic.Bool
	brokerID atomic.Int64 // broker id to pull from (suggestWhichBrokerId)
	locked   atomic.Bool  // orderly: lock held on the broker
	lockedAt atomic.Int64 // unix ns of the last successful lock
	count    atomic.Int64 // cached messages
	bytes    atomic.Int64 // cached body bytes
	signal   chan struct{}
	room     wake.Notifier // consumed messages left the cache (flow control)
	lockWake wake.Notifier // the orderly lock was taken or renewed

	mu      sync.Mutex
	order   []int64               // protected by mu; queue offsets still cached, ascending
	msgs    map[int64]*MessageExt // protected by mu
	highest int64                 // protected by mu; highest offset added, -1 if none
	retries map[int64]int32       // protected by mu; orderly local attempts

	nextOffset int64 // next offset to pull; owned by the pull goroutine
}

func newProcessQueue(parent context.Context, mq MessageQueue, sub *subscription, next int64) *processQueue {
	ctx, cancel := context.WithCancel(parent)
	return &processQueue{mq: mq, sub: sub, ctx: ctx, cancel: cancel, signal: make(chan struct{}, 1),
		msgs: map[int64]*MessageExt{}, highest: -1, retries: map[int64]int32{}, nextOffset: next}
}

func (pq *processQueue) drop() {
	pq.dropped.Store(true)
	pq.cancel()
}

func (pq *processQueue) add(msgs []*MessageExt) {
	pq.mu.Lock()
	for _, m := range msgs {
		if _, dup := pq.msgs[m.QueueOffset]; dup || m.QueueOffset <= pq.highest {
			continue
		}
		pq.msgs[m.QueueOffset] = m
		pq.order = append(pq.order, m.QueueOffset)
		pq.highest = m.QueueOffset
		pq.count.Add(1)
		pq.bytes.Add(int64(len(m.Body)))
	}
	pq.mu.Unlock()
	select {
	case pq.signal <- struct{}{}:
	default:
	}
}

// remove drops consumed messages and returns the offset to commit: the
// first still cached, or one past the highest added; -1 if none was added.
func (pq *processQueue) remove(msgs []*MessageExt) int64 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	for _, m := range msgs {
		if cm, ok := pq.msgs[m.QueueOffset]; ok && cm == m {
			delete(pq.msgs, m.QueueOffset)
			delete(pq.retries, m.QueueOffset)
			pq.count.Add(-1)
			pq.bytes.Add(-int64(len(m.Body)))
		}
	}
	pq.room.Notify()
	for len(pq.order) > 0 {
		if _, ok := pq.msgs[pq.order[0]]; ok {
			break
		}
		pq.order = pq.order[1:]
	}
	if len(pq.order) > 0 {
		return pq.order[0]
	}
	if pq.highest < 0 {
		return -1
	}
	return pq.highest + 1
}

// peek returns up to n of the first cached messages, in offset order.
func (pq *processQueue) peek(n int) []*MessageExt {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	out := make([]*MessageExt, 0, n)
	for _, off := range pq.order {
		if m, ok := pq.msgs[off]; ok {
			out = append(out, m)
			if len(out) == n {
				break
			}
		}
	}
	return out
}

// attempt counts an orderly local retry of m and returns the total.
func (pq *processQueue) attempt(m *MessageExt) int32 {
	pq.mu.Lock()
	defer pq.mu.Unlock()
	pq.retries[m.QueueOffset]++
	return pq.retries[m.QueueOffset]
}

// lockValid reports an orderly lock renewed within 30 s.
func (pq *processQueue) lockValid() bool {
	return pq.locked.Load() && time.Since(time.Unix(0, pq.lockedAt.Load())) < 30*time.Second
}

// setLocked records that the orderly lock was taken (or renewed) at now
// and wakes the loops waiting for it.
func (pq *processQueue) setLocked(now int64) {
	pq.lockedAt.Store(now)
	pq.locked.Store(true)
	pq.lockWake.Notify()
}

// waitLock waits until the orderly lock is valid; it reports false when
// the queue is dropped first. The lock is renewed every LockInterval
// (20 s by default), so a queue whose lock another member holds waits for
// a renewal, with no polling in between.
func (pq *processQueue) waitLock() bool {
	for {
		ch := pq.lockWake.Wait()
		if pq.lockValid() {
			return true
		}
		select {
		case <-pq.ctx.Done():
			return false
		case <-ch:
		}
	}
}

// waitRoom waits until the cache is below the flow-control limits; it
// reports false when the queue is dropped first.
func (pq *processQueue) waitRoom(maxMsgs int, maxBytes int64) bool {
	for {
		ch := pq.room.Wait()
		if pq.count.Load() < int64(maxMsgs) && pq.bytes.Load() < maxBytes {
			return true
		}
		select {
		case <-pq.ctx.Done():
			return false
		case <-ch:
		}
	}
}

// sleepCtx waits d or until ctx ends; it reports whether ctx is still live.
func sleepCtx(ctx context.Context, d time.Duration) bool {
	t := time.NewTimer(d)
	defer t.Stop()
	select {
	case <-ctx.Done():
		return false
	case <-t.C:
		return true
	}
}
