package client

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Auto-batching of asynchronous sends (RocketMQ 5's autoBatch, without its
// linger timer).
//
// Each topic may have AutoBatchRequests send requests in flight from this
// producer. A SendAsync that finds a free slot goes out at once, alone, as
// a plain SEND_MESSAGE_V2: a lightly loaded producer adds no delay and
// sends exactly what it would without batching. Sends that find every slot
// taken wait in the topic's pending list; each time a request completes,
// the pending sends (up to AutoBatchMaxBytes of batch body) leave as one
// SEND_BATCH_MESSAGE to one queue. Under load a request therefore carries
// many messages, which cuts the per-message cost of framing, header
// coding, syscalls and broker dispatch; the wait of a pending send is at
// most the round trip of the request ahead of it.
//
// Each message keeps its own flag, properties (tags, keys, UNIQ_KEY, user
// properties) and callback with its own SendResult (its UNIQ_KEY, its
// offset message id and queue offset inside the batch). A batch is stored
// all-or-nothing, so a failure is reported to every message of it; a
// retryable failure retries the whole batch on another broker, as a single
// send would be. Messages that cannot travel in a batch go alone: delay
// levels, compressed bodies, retry topics, topics still being auto-created.
// A batch the broker refuses as MESSAGE_ILLEGAL (its whole body over the
// broker's maxMessageSize, which may be below AutoBatchMaxBytes) stored
// nothing. The refusal's remark names the broker's limit (RocketMQ's
// text: "msg body length limit <n>B"): the producer keeps the least
// limit it was told (batchLimit) and bounds its batches by it from then
// on, so a broker whose limit is below AutoBatchMaxBytes refuses one
// batch, not every large one (each refusal used to cost the batch's
// messages a request each on top of it). The refused batch's messages
// go back to the front of the pending list, to leave in batches within
// the limit. A refusal whose remark names no limit below the batch's
// body (another cause, or a broker that does not say) sends the
// messages again, each alone, and learns nothing. The limit is the
// producer's, not a broker's: with brokers of different limits the
// least one applies to all.

// asyncItem is one pending async send.
type asyncItem struct {
	ctx context.Context
	pm  *prepared
	cb  func(*SendResult, error) // the caller's; run through finish
}

// finish runs the item's callback and ends its part of Producer.inflight.
func (p *Producer) finish(it *asyncItem, r *SendResult, err error) {
	defer p.inflight.Done()
	it.cb(r, err)
}

// topicBatcher is the auto-batching state of one topic.
type topicBatcher struct {
	topic string

	mu       sync.Mutex
	pending  []asyncItem // protected by mu
	spare    []asyncItem // an empty list for pending to reuse; protected by mu
	inflight int         // requests in flight; protected by mu
}

// batcher returns the batcher of topic, creating it.
func (p *Producer) batcher(topic string) *topicBatcher {
	p.bmu.Lock()
	defer p.bmu.Unlock()
	tb := p.batchers[topic]
	if tb == nil {
		tb = &topicBatcher{topic: topic}
		p.batchers[topic] = tb
	}
	return tb
}

// batchable reports whether an async send of m may share a request.
func (p *Producer) batchable(m *Message, pm *prepared, tr *topicRoute) bool {
	return p.opts.AutoBatchRequests > 0 && !tr.autoCreate && pm.code == protocol.SendMessageV2 &&
		pm.header.SysFlag == 0 && m.DelayLevel <= 0 && !strings.HasPrefix(m.Topic, retryPrefix)
}

// enqueue adds an async send to tb and sends what the free request slots
// allow.
func (p *Producer) enqueue(tb *topicBatcher, it asyncItem) {
	tb.mu.Lock()
	tb.pending = append(tb.pending, it)
	tb.mu.Unlock()
	p.pump(tb)
}

// pump sends pending items while tb has free request slots.
func (p *Producer) pump(tb *topicBatcher) {
	for {
		tb.mu.Lock()
		if len(tb.pending) == 0 || tb.inflight >= p.opts.AutoBatchRequests {
			tb.mu.Unlock()
			return
		}
		items := p.takeLocked(tb)
		tb.inflight++
		tb.mu.Unlock()
		p.sendItems(tb, items)
	}
}

// takeLocked removes the next batch from tb.pending: the items in order
// while the batch body stays within AutoBatchMaxBytes and the broker's
// limit once learnt (at least one).
func (p *Producer) takeLocked(tb *topicBatcher) []asyncItem {
	limit := p.opts.AutoBatchMaxBytes
	if l := p.batchLimit.Load(); l > 0 && l < int64(limit) {
		limit = int(l)
	}
	n, size := 0, 0
	for n < len(tb.pending) {
		pm := tb.pending[n].pm
		sz := batchItemSize(pm)
		if n > 0 && size+sz > limit {
			break
		}
		size += sz
		n++
	}
	if n == len(tb.pending) {
		// All of it: the list goes with the request and pending
		// continues in the spare one (see recycleLocked).
		items := tb.pending
		tb.pending, tb.spare = tb.spare, nil
		return items
	}
	items := make([]asyncItem, n)
	copy(items, tb.pending)
	clear(tb.pending[:n])
	tb.pending = tb.pending[n:]
	return items
}

// maxSpareItems bounds the item list a topic keeps for reuse.
const maxSpareItems = 4096

// recycleLocked keeps the list of a completed request as tb's spare.
func (tb *topicBatcher) recycleLocked(items []asyncItem) {
	if tb.spare == nil && cap(items) <= maxSpareItems {
		clear(items[:cap(items)])
		tb.spare = items[:0]
	}
}

// batchItemSize is the encoded size of pm as a batch item.
func batchItemSize(pm *prepared) int {
	return 20 + len(pm.body) + 2 + len(pm.header.Properties)
}

// sendItems sends items as one request (alone: a plain send) and frees
// the request slot when it completes.
func (p *Producer) sendItems(tb *topicBatcher, items []asyncItem) {
	// Items whose context ended while they waited fail now.
	all := items
	live := items[:0]
	for i := range items {
		if err := items[i].ctx.Err(); err != nil {
			p.finish(&items[i], nil, wrapCallErr("send", "", err))
			continue
		}
		live = append(live, items[i])
	}
	items = live
	done := func() {
		tb.mu.Lock()
		tb.inflight--
		tb.recycleLocked(all)
		tb.mu.Unlock()
		p.pump(tb)
	}
	if len(items) == 0 {
		done()
		return
	}
	tr, err := p.core.route(p.core.ctx, tb.topic)
	if err == nil && len(tr.publish) == 0 {
		err = fmt.Errorf("%w: %s", ErrNoRoute, tb.topic)
	}
	if err != nil {
		for i := range items {
			p.finish(&items[i], nil, err)
		}
		done()
		return
	}
	ctx := items[0].ctx
	if len(items) == 1 {
		it := items[0]
		p.sendAsyncAttempt(ctx, it.pm, tr, "", 1+p.opts.Retries, func(r *SendResult, err error) {
			p.finish(&it, r, err)
			done()
		})
		return
	}
	// The batch lives as long as its longest-lived item.
	ctx = context.WithoutCancel(ctx)
	var deadline time.Time
	for _, it := range items {
		dl, ok := it.ctx.Deadline()
		if !ok {
			deadline = time.Time{}
			break
		}
		if dl.After(deadline) {
			deadline = dl
		}
	}
	cancel := context.CancelFunc(func() {})
	if !deadline.IsZero() {
		ctx, cancel = context.WithDeadline(ctx, deadline)
	}
	pm := p.batchOf(items)
	size := len(pm.body)
	p.batches.Add(1)
	p.sendAsyncAttempt(ctx, pm, tr, "", 1+p.opts.Retries, func(r *SendResult, err error) {
		cancel()
		if pm.pool != nil {
			pm.release() // the owner's reference
		}
		if errors.Is(err, ErrBadMessage) { // the broker's MESSAGE_ILLEGAL (BrokerError.Is)
			// A broker bounds a whole batch by its maxMessageSize, which
			// may be below AutoBatchMaxBytes; nothing of the batch was
			// stored.
			if p.learnBatchLimit(err, size) {
				tb.mu.Lock()
				tb.pending = slices.Insert(tb.pending, 0, items...)
				tb.mu.Unlock()
				done()
				return
			}
			p.sendEachAlone(items, tr, done)
			return
		}
		p.splitBatchResult(items, r, err)
		done()
	})
}

// learnBatchLimit keeps the batch body limit a broker's refusal of a
// batch of size bytes names (batchLimit): true when the remark names one
// below size, the batch then refused for its size.
func (p *Producer) learnBatchLimit(err error, size int) bool {
	var be *BrokerError
	if !errors.As(err, &be) {
		return false
	}
	limit, ok := remarkBodyLimit(be.Remark)
	if !ok || limit >= int64(size) {
		return false
	}
	p.batchRefused.Add(1)
	for {
		cur := p.batchLimit.Load()
		if cur > 0 && cur <= limit {
			return true
		}
		if p.batchLimit.CompareAndSwap(cur, limit) {
			return true
		}
	}
}

// remarkBodyLimit parses the body limit a MESSAGE_ILLEGAL remark names
// ("... msg body length limit <n>B ..." from RocketMQ's broker and
// SmartGo's); false when it names none.
func remarkBodyLimit(remark string) (int64, bool) {
	const key = "body length limit "
	i := strings.Index(remark, key)
	if i < 0 {
		return 0, false
	}
	rest := remark[i+len(key):]
	j := strings.IndexByte(rest, 'B')
	if j <= 0 {
		return 0, false
	}
	n, err := strconv.ParseInt(rest[:j], 10, 64)
	if err != nil || n <= 0 {
		return 0, false
	}
	return n, true
}

// sendEachAlone sends items one request each, in parallel; done runs once
// all completed.
func (p *Producer) sendEachAlone(items []asyncItem, tr *topicRoute, done func()) {
	var left atomic.Int32
	left.Store(int32(len(items)))
	for i := range items {
		it := items[i]
		p.sendAsyncAttempt(it.ctx, it.pm, tr, "", 1+p.opts.Retries, func(r *SendResult, err error) {
			p.finish(&it, r, err)
			if left.Add(-1) == 0 {
				done()
			}
		})
	}
}

// batchOf encodes items (all of one topic) as one SEND_BATCH_MESSAGE.
func (p *Producer) batchOf(items []asyncItem) *prepared {
	size := 0
	for _, it := range items {
		size += batchItemSize(it.pm)
	}
	var pool *[]byte
	var body []byte
	if size <= maxPooledBatchBody {
		pool = batchBodies.Get().(*[]byte)
		body = slices.Grow((*pool)[:0], size)
	} else {
		body = make([]byte, 0, size)
	}
	for _, it := range items {
		body = record.AppendBatchItem(body, it.pm.header.Flag, it.pm.body, it.pm.header.Properties)
	}
	first := &items[0].pm.header
	pm := &prepared{header: protocol.SendMessageRequestHeader{
		ProducerGroup: first.ProducerGroup, Topic: first.Topic, DefaultTopic: first.DefaultTopic,
		DefaultTopicQueueNums: first.DefaultTopicQueueNums, BornTimestamp: first.BornTimestamp, Batch: true,
	}, body: body, code: protocol.SendBatchMessage, pool: pool}
	if pool != nil {
		pm.refs.Store(1)
	}
	return pm
}

// batchBodies recycles the bodies of auto-batched requests (*[]byte).
var batchBodies = sync.Pool{New: func() any { return new([]byte) }}

// maxPooledBatchBody bounds the batch bodies kept in batchBodies (the
// default AutoBatchMaxBytes fits).
const maxPooledBatchBody = 1 << 20

// splitBatchResult hands each item its part of a batch's result.
func (p *Producer) splitBatchResult(items []asyncItem, r *SendResult, err error) {
	if err != nil {
		for i := range items {
			p.finish(&items[i], nil, err)
		}
		return
	}
	// A broker that does not list one offset id per message still stored
	// them all: the ids are then left out, not the success.
	ids := r.OffsetMsgID
	if strings.Count(ids, ",") != len(items)-1 {
		ids = ""
	}
	rs := make([]SendResult, len(items)) // one allocation for the batch
	for i := range items {
		id := ids
		if j := strings.IndexByte(ids, ','); j >= 0 {
			id, ids = ids[:j], ids[j+1:]
		}
		rs[i] = SendResult{Status: r.Status, MsgID: items[i].pm.uniq, OffsetMsgID: id, Queue: r.Queue,
			QueueOffset: r.QueueOffset + int64(i)}
		p.finish(&items[i], &rs[i], nil)
	}
}
