package client

import (
	"context"
	"errors"
	"fmt"
	"runtime/debug"
	"sync"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// ConsumeResult is a handler's verdict on a batch of messages.
type ConsumeResult int

const (
	// ConsumeSuccess: the batch is done; its offsets may be committed.
	ConsumeSuccess ConsumeResult = iota
	// ConsumeRetryLater: concurrent mode sends the batch back to the
	// broker for redelivery (retry topic, then dead-letter queue); orderly
	// mode suspends the queue for SuspendOrderly and retries it locally.
	ConsumeRetryLater
)

// Handler consumes messages. ctx ends when the consumer closes. A panic
// counts as ConsumeRetryLater.
type Handler func(ctx context.Context, msgs []*MessageExt) ConsumeResult

// PushConsumer delivers the messages of its subscriptions to a handler:
// it rebalances queues among the group's members, long-polls the brokers,
// commits offsets and redelivers failed messages.
type PushConsumer struct {
	base    *consumerBase
	handler Handler
	reqs    chan consumeRequest

	mu        sync.Mutex
	started   bool // protected by mu
	closeOnce sync.Once
	closeErr  error
}

type consumeRequest struct {
	pq   *processQueue
	msgs []*MessageExt
}

// NewPushConsumer validates opts and returns a consumer that calls handler.
// Subscribe, then Start.
func NewPushConsumer(opts ConsumerOptions, handler Handler) (*PushConsumer, error) {
	if handler == nil {
		return nil, fmt.Errorf("%w: nil handler", ErrBadOptions)
	}
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill()
	b, err := newConsumerBase(opts, protocol.ConsumePassively)
	if err != nil {
		return nil, err
	}
	c := &PushConsumer{base: b, handler: handler, reqs: make(chan consumeRequest, 256)}
	b.deliver = c.deliver
	b.piggyback = true
	if opts.Orderly {
		b.onQueueStart = func(pq *processQueue) { b.core.goFunc(func() { c.orderlyLoop(pq) }) }
	}
	return c, nil
}

// ClientID returns the consumer's client id (its identity in the group).
func (c *PushConsumer) ClientID() string { return c.base.core.clientID }

// Subscribe adds (or replaces) a topic subscription with a tag expression:
// "*" or "" for all, or "TagA || TagB". Call it before Start.
func (c *PushConsumer) Subscribe(topic, expr string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return fmt.Errorf("%w: subscribe before Start", ErrBadOptions)
	}
	return c.base.subscribe(topic, expr)
}

// Start fetches routes, heartbeats to the brokers, takes its first share
// of queues and starts the background tasks. In clustering mode the group's
// retry topic is subscribed automatically.
func (c *PushConsumer) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	b := c.base
	if len(b.subscriptions()) == 0 {
		return fmt.Errorf("%w: no subscription", ErrBadOptions)
	}
	if b.core.closed.Load() {
		return ErrClosed
	}
	if b.opts.Model == Clustering && !longGroup(b.opts.Group) {
		_ = b.subscribe(retryTopic(b.opts.Group), "*")
	}
	if err := b.loadRoutes(ctx); err != nil {
		return err
	}
	if err := b.checkSubscriptions(ctx); err != nil {
		return err
	}
	if n, err := b.heartbeatCount(ctx); err != nil {
		// A group longer than MaxGroupLength is served only by brokers
		// that already keep it: when every broker refuses it, this
		// consumer would run without ever receiving; when some do, it
		// consumes from the others and says which refused.
		refused := refusedBy(err)
		switch {
		case longGroup(b.opts.Group) && len(refused) > 0 && len(refused) >= n:
			return fmt.Errorf("client: consumer group %q (%d characters, more than %d) refused: %w",
				b.opts.Group, len(b.opts.Group), MaxGroupLength, err)
		case longGroup(b.opts.Group) && len(refused) > 0:
			b.core.log.Warn("consumer group longer than the limit refused by some brokers: their queues are not consumed",
				"group", b.opts.Group, "length", len(b.opts.Group), "limit", MaxGroupLength, "refusedBy", refused, "err", err)
		default:
			b.core.log.Warn("first heartbeat failed", "err", err)
		}
	}
	c.started = true
	workers := b.opts.ConsumeGoroutines
	if b.opts.Orderly {
		workers = 0
	}
	for i := 0; i < workers; i++ {
		b.core.goFunc(c.worker)
	}
	if !b.rebalance(ctx) {
		b.wakeRebalance()
	}
	core := b.core
	core.every(b.opts.RouteRefresh, core.routeWake, core.refreshRoutes)
	core.every(b.opts.HeartbeatInterval, nil, func() { _ = b.heartbeat(core.ctx) })
	core.goFunc(b.rebalanceLoop)
	core.every(b.opts.PersistInterval, nil, func() {
		// Not cancelled by Close: an abandoned commit could land after
		// Close's final one and move the offset back.
		if err := b.persistOffsets(context.WithoutCancel(core.ctx)); err != nil {
			core.log.Debug("persist offsets", "err", err)
		}
	})
	if b.opts.Orderly && b.opts.Model == Clustering {
		core.every(b.opts.LockInterval, nil, func() { b.lockAll(core.ctx) })
	}
	return nil
}

// Assigned returns the queues this member consumes now.
func (c *PushConsumer) Assigned() []MessageQueue { return c.base.assigned() }

// Close stops pulling, waits for running handlers, commits offsets,
// unlocks orderly queues and leaves the group (the others rebalance at
// once). It is idempotent.
func (c *PushConsumer) Close() error {
	c.closeOnce.Do(func() {
		b := c.base
		b.core.closed.Store(true)
		b.core.cancel()
		b.core.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var errs []error
		c.mu.Lock()
		started := c.started
		c.mu.Unlock()
		if started {
			if err := b.persistOffsets(ctx); err != nil {
				errs = append(errs, err)
			}
			if b.opts.Orderly && b.opts.Model == Clustering {
				byBroker := map[string][]MessageQueue{}
				for _, mq := range b.assigned() {
					byBroker[mq.BrokerName] = append(byBroker[mq.BrokerName], mq)
				}
				for name, mqs := range byBroker {
					b.unlockQueues(ctx, name, mqs)
				}
			}
			b.core.unregister(ctx, "", b.opts.Group)
		}
		if err := b.core.rc.Close(); err != nil {
			errs = append(errs, err)
		}
		if err := b.closePullConns(); err != nil {
			errs = append(errs, err)
		}
		c.closeErr = errors.Join(errs...)
	})
	return c.closeErr
}

// deliver queues pulled messages for the concurrent workers (orderly mode
// is woken by the process queue's signal instead).
func (c *PushConsumer) deliver(pq *processQueue, msgs []*MessageExt) {
	if c.base.opts.Orderly {
		return
	}
	n := c.base.opts.ConsumeBatchSize
	for i := 0; i < len(msgs); i += n {
		req := consumeRequest{pq: pq, msgs: msgs[i:min(i+n, len(msgs))]}
		select {
		case c.reqs <- req:
		case <-pq.ctx.Done():
			return
		}
	}
}

// call runs the handler, turning a panic into ConsumeRetryLater.
func (c *PushConsumer) call(ctx context.Context, msgs []*MessageExt) (res ConsumeResult) {
	defer func() {
		if r := recover(); r != nil {
			c.base.core.log.Error("consume handler panicked", "panic", r, "stack", string(debug.Stack()))
			res = ConsumeRetryLater
		}
	}()
	return c.handler(ctx, msgs)
}

// worker is one goroutine of concurrent consumption.
func (c *PushConsumer) worker() {
	b := c.base
	ctx := b.core.ctx
	for {
		select {
		case <-ctx.Done():
			return
		case req := <-c.reqs:
			if req.pq.dropped.Load() {
				continue
			}
			res := c.call(ctx, req.msgs)
			if ctx.Err() != nil && res != ConsumeSuccess {
				return
			}
			c.finish(req, res)
		}
	}
}

// finish applies a concurrent batch's result: commit on success; on
// failure send the messages back (clustering) or drop them (broadcasting).
// Messages that cannot be sent back, and all of a group too long to have
// a retry topic (longGroup), are consumed again 5 s later.
func (c *PushConsumer) finish(req consumeRequest, res ConsumeResult) {
	b := c.base
	done := req.msgs
	if res != ConsumeSuccess && b.opts.Model == Clustering {
		done = done[:0:0]
		var again []*MessageExt
		for _, m := range req.msgs {
			if longGroup(b.opts.Group) { // no retry topic to send it back to
				again = append(again, m)
				continue
			}
			if err := c.sendBack(b.core.ctx, m, 0); err != nil {
				b.core.log.Debug("send back failed, consuming again later", "msgId", m.MsgID, "err", err)
				again = append(again, m)
			} else {
				done = append(done, m)
			}
		}
		if len(again) > 0 {
			pq := req.pq
			b.core.goFunc(func() {
				if sleepCtx(pq.ctx, 5*time.Second) {
					select {
					case c.reqs <- consumeRequest{pq: pq, msgs: again}:
					case <-pq.ctx.Done():
					}
				}
			})
		}
	}
	off := req.pq.remove(done)
	if off >= 0 && !req.pq.dropped.Load() {
		b.offsets.update(req.pq.mq, off, true)
	}
}

// sendBack asks the message's broker to redeliver it later
// (CONSUMER_SEND_MSG_BACK): delay 0 lets the broker choose 3+reconsumeTimes,
// a negative delay sends it straight to the dead-letter queue.
func (c *PushConsumer) sendBack(ctx context.Context, m *MessageExt, delayLevel int32) error {
	b := c.base
	addr := b.core.masterAddr(m.Queue.BrokerName)
	if addr == "" {
		addr = m.StoreHost.String()
	}
	h := &protocol.ConsumerSendMsgBackRequestHeader{Offset: m.CommitLogOffset, Group: b.opts.Group, DelayLevel: delayLevel,
		OriginMsgID: m.MsgID, OriginTopic: m.Topic, MaxReconsumeTimes: b.opts.MaxReconsumeTimes, HasMaxReconsumeTimes: true}
	cctx, cancel := b.core.callCtx(context.WithoutCancel(ctx), 0)
	defer cancel()
	_, err := b.core.invokeOK(cctx, "send back", addr, protocol.NewRequest(protocol.ConsumerSendMsgBack, h, nil))
	return err
}

// orderlyLoop consumes one queue in offset order, one batch at a time,
// while its lock is held (clustering).
func (c *PushConsumer) orderlyLoop(pq *processQueue) {
	b := c.base
	needLock := b.opts.Model == Clustering
	for {
		select {
		case <-pq.ctx.Done():
			return
		case <-pq.signal:
		}
		for pq.ctx.Err() == nil && !pq.dropped.Load() {
			if needLock && !pq.waitLock() {
				return
			}
			msgs := pq.peek(b.opts.ConsumeBatchSize)
			if len(msgs) == 0 {
				break
			}
			res := c.call(pq.ctx, msgs)
			if pq.ctx.Err() != nil && res != ConsumeSuccess {
				return
			}
			if res != ConsumeSuccess {
				exhausted := false
				for _, m := range msgs {
					if m.ReconsumeTimes+pq.attempt(m) >= b.opts.MaxReconsumeTimes {
						exhausted = true
					}
				}
				if !exhausted {
					if !sleepCtx(pq.ctx, b.opts.SuspendOrderly) {
						return
					}
					continue
				}
				// Out of attempts: park the batch in the dead-letter queue
				// so the queue can move on.
				for _, m := range msgs {
					if longGroup(b.opts.Group) {
						b.core.log.Warn("orderly: out of attempts, and the group is too long to have a dead-letter queue: skipped",
							"msgId", m.MsgID, "group", b.opts.Group)
						continue
					}
					if err := c.sendBack(pq.ctx, m, -1); err != nil {
						b.core.log.Warn("orderly: send to DLQ failed", "msgId", m.MsgID, "err", err)
					}
				}
			}
			off := pq.remove(msgs)
			if off >= 0 && !pq.dropped.Load() {
				b.offsets.update(pq.mq, off, true)
			}
		}
	}
}

// refusedBy returns the brokers whose answer (a *BrokerError) is among
// the errors joined in err.
func refusedBy(err error) []string {
	errs := []error{err}
	if j, ok := err.(interface{ Unwrap() []error }); ok {
		errs = j.Unwrap()
	}
	var out []string
	for _, e := range errs {
		var be *BrokerError
		if errors.As(e, &be) {
			out = append(out, be.Addr)
		}
	}
	return out
}
