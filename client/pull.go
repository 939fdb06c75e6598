package client

import (
	"context"
	"errors"
	"fmt"
	"maps"
	"sync"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// PullConsumer lets the application poll messages itself, from queues it
// assigns explicitly or that the group's rebalancing gives it (Subscribe).
// Background goroutines long-poll each queue into a bounded buffer; Poll
// takes from it. Offsets advance as Poll returns messages and reach the
// brokers on Commit (and every PersistInterval with AutoCommit).
type PullConsumer struct {
	base       *consumerBase
	autoCommit bool
	manual     bool
	buf        chan consumeRequest

	mu        sync.Mutex
	started   bool                           // protected by mu
	assign    bool                           // protected by mu; Assign mode
	fixed     map[MessageQueue]*subscription // protected by mu; assigned queues
	closeOnce sync.Once
	closeErr  error
	startAt   map[MessageQueue]int64 // PullConsumerOptions.StartOffsets; read-only
}

// PullConsumerOptions configure a PullConsumer.
type PullConsumerOptions struct {
	ConsumerOptions
	// AutoCommit commits the offsets of polled messages every
	// PersistInterval and at Close.
	AutoCommit bool
	// ManualOffsets: Poll does not advance the offsets, MarkConsumed
	// does; what AutoCommit, Commit and a queue's release commit is then
	// only what the application marked (a crash between Poll and the
	// messages' processing loses none of them).
	ManualOffsets bool
	// StartOffsets, when not empty, are written as the group's offsets of
	// these queues by Start before the consumer takes any queue (before it
	// joins the group's rebalancing), replacing what the group had stored:
	// whichever member is assigned one of them, at Start or later (a
	// rebalance that failed, a member that left, another client of the
	// group), starts there, not at an older committed offset or at
	// ConsumeFrom's position. Start fails when one cannot be written. Each
	// queue's topic must be subscribed (or assigned).
	StartOffsets map[MessageQueue]int64
	// OnBrokerConnClose, when set, is called with a broker's name each
	// time one of the consumer's connections to that broker closes (the
	// broker stopped, restarted, or the network broke; connections to
	// registries are not reported). A broker that restarted may have lost
	// its log's tail and given the lost offsets to new messages: a caller
	// that keeps what it read can look again from an earlier offset
	// (Seek). It runs on the closing connection's goroutine: it must not
	// block.
	OnBrokerConnClose func(brokerName string)
}

// NewPullConsumer validates opts and returns a pull consumer. Assign or
// Subscribe, then Start.
func NewPullConsumer(opts PullConsumerOptions) (*PullConsumer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	for mq, off := range opts.StartOffsets {
		if off < 0 {
			return nil, fmt.Errorf("%w: negative start offset %d of %v", ErrBadOptions, off, mq)
		}
	}
	opts.fill()
	b, err := newConsumerBase(opts.ConsumerOptions, protocol.ConsumeActively)
	if err != nil {
		return nil, err
	}
	if fn := opts.OnBrokerConnClose; fn != nil {
		for _, rc := range append([]*remoting.Client{b.core.rc}, b.pullRCs...) {
			rc.OnAddrClose(func(addr string, _ error) {
				if name := b.core.brokerNameOf(addr); name != "" {
					fn(name)
				}
			})
		}
	}
	c := &PullConsumer{base: b, autoCommit: opts.AutoCommit, manual: opts.ManualOffsets, buf: make(chan consumeRequest, 64), fixed: map[MessageQueue]*subscription{},
		startAt: maps.Clone(opts.StartOffsets)}
	b.deliver = func(pq *processQueue, msgs []*MessageExt) {
		select {
		case c.buf <- consumeRequest{pq: pq, msgs: msgs}:
		case <-pq.ctx.Done():
		}
	}
	return c, nil
}

// Subscribe joins the group's rebalancing for topic with a tag expression.
func (c *PullConsumer) Subscribe(topic, expr string) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || c.assign {
		return fmt.Errorf("%w: Subscribe before Start and not with Assign", ErrBadOptions)
	}
	return c.base.subscribe(topic, expr)
}

// Assign consumes exactly these queues (no rebalancing), all messages.
func (c *PullConsumer) Assign(queues []MessageQueue) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started || len(c.base.subscriptions()) > 0 {
		return fmt.Errorf("%w: Assign before Start and not with Subscribe", ErrBadOptions)
	}
	c.assign = true
	for _, mq := range queues {
		c.fixed[mq] = parseSubscription(mq.Topic, "*")
	}
	return nil
}

// Queues returns the readable queues of a topic (for Assign).
func (c *PullConsumer) Queues(ctx context.Context, topic string) ([]MessageQueue, error) {
	tr, err := c.base.core.updateRoute(ctx, topic)
	if err != nil {
		return nil, err
	}
	if len(tr.read) == 0 {
		return nil, fmt.Errorf("%w: %s has no readable queue", ErrNoRoute, topic)
	}
	out := append([]MessageQueue(nil), tr.read...)
	sortQueues(out)
	return out, nil
}

// Start begins pulling.
func (c *PullConsumer) Start(ctx context.Context) error {
	c.mu.Lock()
	defer c.mu.Unlock()
	if c.started {
		return nil
	}
	b := c.base
	core := b.core
	if c.assign {
		topics := map[string]bool{}
		for mq := range c.fixed {
			topics[mq.Topic] = true
		}
		for t := range topics {
			if err := core.startRoute(ctx, t); err != nil {
				return err
			}
		}
		if err := c.writeStartOffsets(ctx, topics); err != nil {
			return err
		}
		for mq, sub := range c.fixed {
			off, err := b.startOffset(ctx, mq)
			if err != nil {
				return err
			}
			c.startQueueAt(mq, sub, off)
		}
	} else {
		if len(b.subscriptions()) == 0 {
			return fmt.Errorf("%w: neither Assign nor Subscribe", ErrBadOptions)
		}
		if err := b.loadRoutes(ctx); err != nil {
			return err
		}
		if err := b.checkSubscriptions(ctx); err != nil {
			return err
		}
		topics := map[string]bool{}
		for _, s := range b.subscriptions() {
			topics[s.topic] = true
		}
		if err := c.writeStartOffsets(ctx, topics); err != nil {
			return err
		}
		_ = b.heartbeat(ctx) // the group's members learn of this one from here
		if !b.rebalance(ctx) {
			b.wakeRebalance()
		}
		core.every(b.opts.HeartbeatInterval, nil, func() { _ = b.heartbeat(core.ctx) })
		core.goFunc(b.rebalanceLoop)
	}
	core.every(b.opts.RouteRefresh, core.routeWake, core.refreshRoutes)
	if c.autoCommit {
		core.every(b.opts.PersistInterval, nil, func() { _ = b.persistOffsets(context.WithoutCancel(core.ctx)) })
	}
	c.started = true
	return nil
}

// startRoute fetches topic's route for Start. A route can be missing for
// a moment (a registry that just restarted, a broker not registered
// again), also right after Queues found it: it tries again with a backoff
// from 50 ms to 1 s until ctx ends (without a deadline: after the request
// timeout), and then fails with the last error: the last answer's when
// the context ended during a query (a timeout says less than the
// registry's "topic does not exist" before it).
func (c *core) startRoute(ctx context.Context, topic string) error {
	if _, ok := ctx.Deadline(); !ok {
		var cancel context.CancelFunc
		ctx, cancel = c.callCtx(ctx, 0)
		defer cancel()
	}
	wait := 50 * time.Millisecond
	var last error
	for {
		_, err := c.updateRoute(ctx, topic)
		if err == nil {
			return nil
		}
		if last == nil || ctx.Err() == nil {
			last = err
		}
		select {
		case <-ctx.Done():
			return fmt.Errorf("client: route of %s at start: %w", topic, last)
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// writeStartOffsets stores StartOffsets as the group's offsets (Start,
// before any queue is taken); topics are those consumed.
func (c *PullConsumer) writeStartOffsets(ctx context.Context, topics map[string]bool) error {
	if len(c.startAt) == 0 {
		return nil
	}
	mqs := make([]MessageQueue, 0, len(c.startAt))
	for mq := range c.startAt {
		if !topics[mq.Topic] {
			return fmt.Errorf("%w: start offset of %v: its topic is not consumed", ErrBadOptions, mq)
		}
		mqs = append(mqs, mq)
	}
	sortQueues(mqs)
	o := c.base.offsets
	for _, mq := range mqs {
		o.update(mq, c.startAt[mq], false)
	}
	err := o.persist(ctx, mqs)
	for _, mq := range mqs {
		o.remove(mq) // a queue taken later reads it back from the store
	}
	if err != nil {
		return fmt.Errorf("client: start offsets of %s: %w", c.base.opts.Group, err)
	}
	return nil
}

func (c *PullConsumer) startQueueAt(mq MessageQueue, sub *subscription, off int64) {
	c.base.restartQueueAt(mq, sub, off)
}

// Poll returns the next pulled messages, waiting until some arrive or ctx
// ends (then it returns ctx's error, wrapped in ErrTimeout for a deadline).
func (c *PullConsumer) Poll(ctx context.Context) ([]*MessageExt, error) {
	c.mu.Lock()
	started := c.started
	c.mu.Unlock()
	if !started {
		return nil, ErrNotStarted
	}
	for {
		select {
		case <-ctx.Done():
			if errors.Is(ctx.Err(), context.DeadlineExceeded) {
				return nil, fmt.Errorf("%w: poll: %w", ErrTimeout, ctx.Err())
			}
			return nil, ctx.Err()
		case <-c.base.core.ctx.Done():
			return nil, ErrClosed
		case req := <-c.buf:
			if req.pq.dropped.Load() {
				continue // the queue was sought or released meanwhile
			}
			if off := req.pq.remove(req.msgs); off >= 0 && !c.manual {
				c.base.offsets.update(req.pq.mq, off, false)
			}
			return req.msgs, nil
		}
	}
}

// Commit writes the offsets of everything polled so far to the brokers
// (or the local file when broadcasting).
func (c *PullConsumer) Commit(ctx context.Context) error {
	return c.base.persistOffsets(ctx)
}

// MarkConsumed (ManualOffsets) records that the messages of mq before
// next are processed: the offset to commit moves up to next, never down.
func (c *PullConsumer) MarkConsumed(mq MessageQueue, next int64) {
	c.base.offsets.update(mq, next, true)
}

// Seek makes the next Poll of mq start at offset (messages of mq already
// buffered are discarded). mq must be held.
func (c *PullConsumer) Seek(mq MessageQueue, offset int64) error {
	b := c.base
	if b.core.closed.Load() {
		return ErrClosed
	}
	b.qmu.Lock()
	pq := b.queues[mq]
	b.qmu.Unlock()
	if pq == nil {
		return fmt.Errorf("%w: queue %v is not assigned", ErrBadOptions, mq)
	}
	b.offsets.update(mq, offset, false)
	c.startQueueAt(mq, pq.sub, offset)
	return nil
}

// Committed returns the group's committed offset of mq as its broker
// stores it (-1 when none).
func (c *PullConsumer) Committed(ctx context.Context, mq MessageQueue) (int64, error) {
	return queryConsumerOffset(ctx, c.base.core, c.base.opts.Group, mq)
}

// Assigned returns the queues held now.
func (c *PullConsumer) Assigned() []MessageQueue { return c.base.assigned() }

// Close stops pulling, commits (with AutoCommit) and leaves the group.
// It is idempotent.
func (c *PullConsumer) Close() error {
	c.closeOnce.Do(func() {
		b := c.base
		b.core.closed.Store(true)
		b.core.cancel()
		b.core.wg.Wait()
		ctx, cancel := context.WithTimeout(context.Background(), 5*time.Second)
		defer cancel()
		var errs []error
		c.mu.Lock()
		started, assign := c.started, c.assign
		c.mu.Unlock()
		if started && c.autoCommit {
			if err := b.persistOffsets(ctx); err != nil {
				errs = append(errs, err)
			}
		}
		if started && !assign {
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
