package client

import (
	"context"
	"errors"
	"fmt"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

const retryPrefix = "%RETRY%"

func retryTopic(group string) string { return retryPrefix + group }

// consumerBase is what push and pull consumers share: subscriptions,
// rebalancing, the process queues and their pull loops, offsets.
type consumerBase struct {
	opts        ConsumerOptions
	core        *core
	consumeType string
	offsets     offsetStore
	// deliver hands pulled messages on (push: consume service; pull: poll
	// buffer). It may block until ctx ends.
	deliver func(pq *processQueue, msgs []*MessageExt)
	// onQueueStart runs for each new process queue (push orderly starts
	// its consume goroutine there).
	onQueueStart func(pq *processQueue)

	smu  sync.RWMutex
	subs map[string]*subscription // protected by smu

	qmu    sync.Mutex
	queues map[MessageQueue]*processQueue // protected by qmu

	rebalanceWake chan struct{}
	// piggyback commits offsets on pulls (PullSysFlag COMMIT_OFFSET), as
	// push consumers do; pull consumers commit only on Commit.
	piggyback bool
	// readAheads counts read-ahead pulls whose result was used.
	readAheads atomic.Int64
	// pullRCs are the extra pull connections (PullConnections-1 clients;
	// the core's client is the first).
	pullRCs []*remoting.Client
}

func newConsumerBase(opts ConsumerOptions, consumeType string) (*consumerBase, error) {
	c, err := newCore(opts.ClientOptions)
	if err != nil {
		return nil, err
	}
	b := &consumerBase{opts: opts, core: c, consumeType: consumeType, subs: map[string]*subscription{},
		queues: map[MessageQueue]*processQueue{}, rebalanceWake: make(chan struct{}, 1)}
	for i := 1; i < opts.PullConnections; i++ {
		rc, err := remoting.NewClient(remoting.ClientOptions{
			ConnOptions: remoting.ConnOptions{RequestTimeout: opts.RequestTimeout},
			Logger:      opts.Logger,
		})
		if err != nil {
			_ = b.closePullConns()
			_ = c.close()
			return nil, fmt.Errorf("client: %w", err)
		}
		b.pullRCs = append(b.pullRCs, rc)
	}
	c.extraRCs = b.pullRCs
	if opts.Model == Broadcasting {
		lo, err := newLocalOffsets(opts.OffsetDir, opts.Group)
		if err != nil {
			_ = b.closePullConns()
			_ = c.close()
			return nil, err
		}
		b.offsets = lo
	} else {
		b.offsets = newRemoteOffsets(c, opts.Group)
	}
	c.rc.RegisterFunc(protocol.NotifyConsumerIDsChanged, func(_ *remoting.Conn, _ *protocol.Command) (*protocol.Command, error) {
		b.wakeRebalance()
		return nil, nil
	})
	c.rc.RegisterFunc(protocol.ResetConsumerClientOffset, b.onResetOffset)
	return b, nil
}

func (b *consumerBase) wakeRebalance() {
	select {
	case b.rebalanceWake <- struct{}{}:
	default:
	}
}

func (b *consumerBase) subscribe(topic, expr string) error {
	if topic == "" {
		return fmt.Errorf("%w: empty topic", ErrBadOptions)
	}
	b.smu.Lock()
	b.subs[topic] = parseSubscription(topic, expr)
	b.smu.Unlock()
	return nil
}

func (b *consumerBase) subscriptions() []*subscription {
	b.smu.RLock()
	defer b.smu.RUnlock()
	out := make([]*subscription, 0, len(b.subs))
	for _, s := range b.subs {
		out = append(out, s)
	}
	return out
}

func (b *consumerBase) heartbeatData() *protocol.HeartbeatData {
	cd := &protocol.ConsumerData{GroupName: b.opts.Group, ConsumeType: b.consumeType, MessageModel: b.opts.Model.String(),
		ConsumeFromWhere: b.opts.From.String()}
	for _, s := range b.subscriptions() {
		cd.SubscriptionDataSet = append(cd.SubscriptionDataSet, s.data())
	}
	return &protocol.HeartbeatData{ClientID: b.core.clientID, ConsumerDataSet: []*protocol.ConsumerData{cd},
		ProducerDataSet: []*protocol.ProducerData{}}
}

func (b *consumerBase) heartbeat(ctx context.Context) error {
	_, err := b.heartbeatCount(ctx)
	return err
}

// heartbeatCount is heartbeat that also returns how many brokers it sent
// to.
func (b *consumerBase) heartbeatCount(ctx context.Context) (int, error) {
	b.core.newBrokers.Store(false)
	return b.core.sendHeartbeat(ctx, b.heartbeatData(), false)
}

// loadRoutes fetches the route of every subscription. A topic the
// registries do not know is tolerated (rebalancing retries it); any other
// failure is returned.
func (b *consumerBase) loadRoutes(ctx context.Context) error {
	for _, s := range b.subscriptions() {
		if _, err := b.core.updateRoute(ctx, s.topic); err != nil && !errors.Is(err, ErrTopicNotExist) {
			return err
		}
	}
	return nil
}

// assigned returns the queues currently held.
func (b *consumerBase) assigned() []MessageQueue {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	out := make([]MessageQueue, 0, len(b.queues))
	for mq := range b.queues {
		out = append(out, mq)
	}
	sortQueues(out)
	return out
}

func (b *consumerBase) processQueues() []*processQueue {
	b.qmu.Lock()
	defer b.qmu.Unlock()
	out := make([]*processQueue, 0, len(b.queues))
	for _, pq := range b.queues {
		out = append(out, pq)
	}
	return out
}

// consumerIDs asks a broker of the topic for the group's members.
func (b *consumerBase) consumerIDs(ctx context.Context, tr *topicRoute) ([]string, error) {
	var errs []error
	for _, bd := range tr.data.BrokerDatas {
		addr := b.core.brokerAddr(bd.BrokerName, protocol.MasterID)
		if addr == "" {
			continue
		}
		cctx, cancel := b.core.callCtx(ctx, 0)
		resp, err := b.core.invokeOK(cctx, "consumer list", addr, protocol.NewRequest(protocol.GetConsumerListByGroup,
			&protocol.ConsumerGroupHeader{ConsumerGroup: b.opts.Group}, nil))
		cancel()
		if err != nil {
			errs = append(errs, err)
			continue
		}
		var l protocol.ConsumerIDList
		if err := protocol.DecodeJSON(resp.Body, &l); err != nil {
			errs = append(errs, fmt.Errorf("client: consumer list: %w", err))
			continue
		}
		return l.ConsumerIDList, nil
	}
	if len(errs) == 0 {
		return nil, fmt.Errorf("%w: no broker for the group's topic", ErrNoRoute)
	}
	return nil, errors.Join(errs...)
}

// rebalanceLoop rebalances every RebalanceInterval and when woken (a
// NOTIFY_CONSUMER_IDS_CHANGED); after an incomplete round (a topic without
// route or member list yet) it tries again after a second.
func (b *consumerBase) rebalanceLoop() {
	ctx := b.core.ctx
	complete := true
	for {
		wait := b.opts.RebalanceInterval
		if !complete {
			wait = min(wait, time.Second)
		}
		t := time.NewTimer(wait)
		select {
		case <-ctx.Done():
			t.Stop()
			return
		case <-t.C:
		case <-b.rebalanceWake:
			t.Stop()
		}
		complete = b.rebalance(ctx)
	}
}

// rebalance recomputes the queues this member holds for every subscribed
// topic and starts or stops their pull loops. It reports whether every
// topic could be balanced.
func (b *consumerBase) rebalance(ctx context.Context) bool {
	complete := true
	for _, s := range b.subscriptions() {
		tr, err := b.core.route(ctx, s.topic)
		if err != nil {
			b.core.log.Debug("rebalance: no route", "topic", s.topic, "err", err)
			complete = false
			continue
		}
		if b.core.newBrokers.Swap(false) {
			_ = b.heartbeat(ctx)
		}
		mqAll := append([]MessageQueue(nil), tr.read...)
		sortQueues(mqAll)
		var alloc []MessageQueue
		if b.opts.Model == Broadcasting {
			alloc = mqAll
		} else {
			cids, err := b.consumerIDs(ctx, tr)
			if err != nil {
				b.core.log.Debug("rebalance: consumer list", "topic", s.topic, "err", err)
				complete = false
				continue
			}
			cids = append([]string(nil), cids...)
			sortStrings(cids)
			alloc = b.opts.Strategy.Allocate(b.core.clientID, mqAll, cids)
		}
		if !b.updateQueues(ctx, s, alloc) {
			complete = false
		}
	}
	return complete
}

// updateQueues makes the held queues of s.topic equal to alloc; it
// reports false when some queue could not be taken yet.
func (b *consumerBase) updateQueues(ctx context.Context, s *subscription, alloc []MessageQueue) bool {
	complete := true
	want := make(map[MessageQueue]bool, len(alloc))
	for _, mq := range alloc {
		want[mq] = true
	}
	var removed []*processQueue
	b.qmu.Lock()
	for mq, pq := range b.queues {
		if mq.Topic == s.topic && (!want[mq] || pq.sub != s) {
			delete(b.queues, mq)
			removed = append(removed, pq)
		}
	}
	var added []MessageQueue
	for _, mq := range alloc {
		if _, ok := b.queues[mq]; !ok {
			added = append(added, mq)
		}
	}
	b.qmu.Unlock()

	for _, pq := range removed {
		b.releaseQueue(ctx, pq)
	}
	for _, mq := range added {
		if ctx.Err() != nil {
			return false
		}
		orderlyLock := b.opts.Orderly && b.opts.Model == Clustering
		if orderlyLock {
			if locked := b.lockQueues(ctx, mq.BrokerName, []MessageQueue{mq}); len(locked) == 0 {
				complete = false
				continue // another member still holds it; retry soon
			}
		}
		b.offsets.remove(mq)
		off, err := b.startOffset(ctx, mq)
		if err != nil {
			b.core.log.Debug("rebalance: start offset", "queue", mq, "err", err)
			complete = false
			continue
		}
		pq := newProcessQueue(b.core.ctx, mq, s, off)
		if orderlyLock {
			pq.setLocked(time.Now().UnixNano())
		}
		b.qmu.Lock()
		if _, ok := b.queues[mq]; ok {
			b.qmu.Unlock()
			continue
		}
		b.queues[mq] = pq
		b.qmu.Unlock()
		b.core.log.Debug("queue assigned", "queue", mq, "offset", off)
		b.startQueue(pq)
	}
	return complete
}

// releaseQueue stops a queue's loops, commits its offset and, for
// orderly clustering, unlocks it.
func (b *consumerBase) releaseQueue(ctx context.Context, pq *processQueue) {
	pq.drop()
	cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), b.opts.RequestTimeout)
	defer cancel()
	if err := b.offsets.persist(cctx, []MessageQueue{pq.mq}); err != nil {
		b.core.log.Debug("persist offset of released queue", "queue", pq.mq, "err", err)
	}
	b.offsets.remove(pq.mq)
	if b.opts.Orderly && b.opts.Model == Clustering {
		b.unlockQueues(cctx, pq.mq.BrokerName, []MessageQueue{pq.mq})
	}
}

// startOffset computes where a newly assigned queue starts (protocol
// section 2.4): the committed offset, else per ConsumeFrom the max offset
// (0 for retry topics), 0, or the offset at ConsumeTimestamp.
func (b *consumerBase) startOffset(ctx context.Context, mq MessageQueue) (int64, error) {
	off, err := b.offsets.read(ctx, mq, false)
	if err != nil {
		return 0, err
	}
	if off >= 0 {
		return off, nil
	}
	isRetry := strings.HasPrefix(mq.Topic, retryPrefix)
	switch b.opts.From {
	case ConsumeFromFirst:
		return 0, nil
	case ConsumeFromTimestamp:
		if isRetry {
			return queueOffset(ctx, b.core, protocol.GetMaxOffset, mq, 0)
		}
		return queueOffset(ctx, b.core, protocol.SearchOffsetByTimestamp, mq, b.opts.ConsumeTimestamp.UnixMilli())
	default:
		if isRetry {
			return 0, nil
		}
		return queueOffset(ctx, b.core, protocol.GetMaxOffset, mq, 0)
	}
}

// queueOffset asks a queue's master for its max/min offset, or the offset
// at a timestamp (SEARCH_OFFSET_BY_TIMESTAMP).
func queueOffset(ctx context.Context, c *core, code int32, mq MessageQueue, ts int64) (int64, error) {
	// The master, else a slave of the group (it serves reads while the
	// master is down).
	addr := c.brokerAddr(mq.BrokerName, protocol.MasterID)
	if addr == "" {
		if _, err := c.updateRoute(ctx, mq.Topic); err == nil {
			addr = c.brokerAddr(mq.BrokerName, protocol.MasterID)
		}
		if addr == "" {
			return 0, fmt.Errorf("%w: no broker for %s", ErrBrokerUnavailable, mq.BrokerName)
		}
	}
	var hdr protocol.HeaderEncoder = &protocol.TopicQueueHeader{Topic: mq.Topic, QueueID: mq.QueueID}
	if code == protocol.SearchOffsetByTimestamp {
		hdr = &protocol.SearchOffsetRequestHeader{Topic: mq.Topic, QueueID: mq.QueueID, Timestamp: ts}
	}
	cctx, cancel := c.callCtx(ctx, 0)
	defer cancel()
	resp, err := c.invokeOK(cctx, "queue offset", addr, protocol.NewRequest(code, hdr, nil))
	if err != nil {
		return 0, err
	}
	var h protocol.OffsetResponseHeader
	if err := resp.DecodeHeader(&h); err != nil {
		return 0, fmt.Errorf("client: offset response: %w", err)
	}
	return h.Offset, nil
}

// lockQueues locks queues of one broker for this client (LOCK_BATCH_MQ)
// and returns the ones it holds.
func (b *consumerBase) lockQueues(ctx context.Context, brokerName string, mqs []MessageQueue) []MessageQueue {
	addr := b.core.masterAddr(brokerName)
	if addr == "" {
		return nil
	}
	body := protocol.LockBatchRequestBody{ConsumerGroup: b.opts.Group, ClientID: b.core.clientID}
	for i := range mqs {
		body.MQSet = append(body.MQSet, &mqs[i])
	}
	data, err := protocol.EncodeJSON(body)
	if err != nil {
		return nil
	}
	cctx, cancel := b.core.callCtx(ctx, 0)
	defer cancel()
	resp, err := b.core.invokeOK(cctx, "lock", addr, protocol.NewRequest(protocol.LockBatchMQ, nil, data))
	if err != nil {
		b.core.log.Debug("lock queues", "broker", addr, "err", err)
		return nil
	}
	var out protocol.LockBatchResponseBody
	if err := protocol.DecodeJSON(resp.Body, &out); err != nil {
		return nil
	}
	locked := make([]MessageQueue, 0, len(out.LockOKMQSet))
	for _, q := range out.LockOKMQSet {
		if q != nil {
			locked = append(locked, *q)
		}
	}
	return locked
}

func (b *consumerBase) unlockQueues(ctx context.Context, brokerName string, mqs []MessageQueue) {
	addr := b.core.masterAddr(brokerName)
	if addr == "" {
		return
	}
	body := protocol.UnlockBatchRequestBody{ConsumerGroup: b.opts.Group, ClientID: b.core.clientID}
	for i := range mqs {
		body.MQSet = append(body.MQSet, &mqs[i])
	}
	data, err := protocol.EncodeJSON(body)
	if err != nil {
		return
	}
	cctx, cancel := b.core.callCtx(ctx, 0)
	defer cancel()
	_, _ = b.core.invoke(cctx, "unlock", addr, protocol.NewRequest(protocol.UnlockBatchMQ, nil, data))
}

// lockAll renews the locks of every held queue (orderly, every 20 s).
func (b *consumerBase) lockAll(ctx context.Context) {
	byBroker := map[string][]*processQueue{}
	for _, pq := range b.processQueues() {
		byBroker[pq.mq.BrokerName] = append(byBroker[pq.mq.BrokerName], pq)
	}
	for name, pqs := range byBroker {
		mqs := make([]MessageQueue, len(pqs))
		for i, pq := range pqs {
			mqs[i] = pq.mq
		}
		locked := map[MessageQueue]bool{}
		for _, mq := range b.lockQueues(ctx, name, mqs) {
			locked[mq] = true
		}
		now := time.Now().UnixNano()
		for _, pq := range pqs {
			if locked[pq.mq] {
				pq.setLocked(now)
			} else {
				pq.locked.Store(false)
			}
		}
	}
}

// persistOffsets commits the offsets of the held queues.
func (b *consumerBase) persistOffsets(ctx context.Context) error {
	return b.offsets.persist(ctx, b.assigned())
}

// pullResult is one PULL_MESSAGE outcome.
type pullResult struct {
	code                 int32
	next, minOff, maxOff int64
	suggest              int64
	msgs                 []*MessageExt
	raw                  int // messages in the response before the client-side tag match
}

// pull runs one PULL_MESSAGE for pq at offset; suspend > 0 allows the
// broker to hold it (long polling).
func (b *consumerBase) pull(ctx context.Context, mq MessageQueue, sub *subscription, offset int64, brokerID int64, suspend time.Duration, commitOffset int64) (*pullResult, error) {
	addr := b.core.brokerAddr(mq.BrokerName, brokerID)
	if addr == "" {
		return nil, fmt.Errorf("%w: no address for %s", ErrBrokerUnavailable, mq.BrokerName)
	}
	flag := protocol.PullFlagSubscription
	if suspend > 0 {
		flag |= protocol.PullFlagSuspend
	}
	if commitOffset > 0 && brokerID == protocol.MasterID {
		flag |= protocol.PullFlagCommitOffset
	}
	h := &protocol.PullMessageRequestHeader{ConsumerGroup: b.opts.Group, Topic: mq.Topic, QueueID: mq.QueueID, QueueOffset: offset,
		MaxMsgNums: b.opts.PullBatchSize, SysFlag: flag, CommitOffset: commitOffset, SuspendTimeoutMillis: suspend.Milliseconds(),
		Subscription: sub.expr, SubVersion: sub.version, ExpressionType: sub.exprType}
	cctx, cancel := context.WithTimeout(ctx, suspend+b.opts.RequestTimeout+15*time.Second)
	defer cancel()
	req := protocol.NewRequest(protocol.PullMessage, h, nil)
	var resp *protocol.Command
	var err error
	if i := int(mq.QueueID) % (len(b.pullRCs) + 1); i > 0 {
		if resp, err = b.pullRCs[i-1].Invoke(cctx, addr, req); err != nil {
			err = b.core.callErr("pull", addr, err) // a timeout refreshes routes, as on the main connection
		}
	} else {
		resp, err = b.core.invoke(cctx, "pull", addr, req)
	}
	if err != nil {
		return nil, err
	}
	// decodeMessages copies every byte a message keeps out of the body, so
	// the receive buffer is free for reuse once this returns.
	defer resp.Recycle()
	switch resp.Code {
	case protocol.Success, protocol.PullNotFound, protocol.PullRetryImmediately, protocol.PullOffsetMoved:
	default:
		return nil, newBrokerError("pull", addr, resp)
	}
	var rh protocol.PullMessageResponseHeader
	if err := resp.DecodeHeader(&rh); err != nil {
		return nil, fmt.Errorf("client: pull response from %s: %w", addr, err)
	}
	r := &pullResult{code: resp.Code, next: rh.NextBeginOffset, minOff: rh.MinOffset, maxOff: rh.MaxOffset, suggest: rh.SuggestWhichBrokerID}
	if resp.Code != protocol.Success {
		return r, nil
	}
	msgs, err := decodeMessages(resp.Body, mq.BrokerName)
	if err != nil {
		return nil, err
	}
	r.raw = len(msgs)
	r.msgs = msgs[:0] // the matching messages, in place
	for _, m := range msgs {
		if !sub.match(m.Tags) {
			continue
		}
		m.Queue = mq
		if strings.HasPrefix(mq.Topic, retryPrefix) {
			if orig := m.Property("RETRY_TOPIC"); orig != "" {
				m.Topic = orig
			}
		}
		r.msgs = append(r.msgs, m)
	}
	clear(msgs[len(r.msgs):])
	return r, nil
}

// startQueue launches pq's pull loop (and its consume loop for orderly).
func (b *consumerBase) startQueue(pq *processQueue) {
	b.core.goFunc(func() { b.pullLoop(pq) })
	if b.onQueueStart != nil {
		b.onQueueStart(pq)
	}
}

// pullLoop pulls pq until it is dropped: flow control first, then a
// long-polling pull, then delivery.
//
// Read-ahead: while the broker reports a backlog of full pulls, the loop
// keeps up to maxReadAhead more pulls in flight, each at the offset where
// the one before is expected to end (its start plus the step of the last
// full pull), so that a queue's pulls do not wait for each other's round
// trips. The guess is exact for queues read without a tag filter (a pull
// returns consecutive offsets); read-aheads whose start turns out not to
// be where the current pull ended are discarded unread. With a tag filter
// the loop pulls one at a time.
func (b *consumerBase) pullLoop(pq *processQueue) {
	ctx := pq.ctx
	orderlyLock := b.opts.Orderly && b.opts.Model == Clustering
	var aheads []*pullCall // read-ahead pulls in flight, by offset
	drain := func() {
		for _, pc := range aheads {
			<-pc.done
		}
		aheads = aheads[:0]
	}
	defer drain()
	for ctx.Err() == nil && !pq.dropped.Load() {
		// Flow control: wait (without polling) until consumed messages
		// make room, and for the orderly lock.
		if !pq.waitRoom(b.opts.QueueMaxMessages, b.opts.QueueMaxBytes) {
			return
		}
		if orderlyLock && !pq.waitLock() {
			return
		}
		commit := int64(0)
		if b.piggyback && b.opts.Model == Clustering {
			if off, ok := b.offsets.memory(pq.mq); ok {
				commit = off
			}
		}
		offset := pq.nextOffset
		var r *pullResult
		var err error
		if len(aheads) > 0 && aheads[0].offset == offset && aheads[0].brokerID == pq.brokerID.Load() {
			cur := aheads[0]
			aheads = append(aheads[:0], aheads[1:]...)
			b.readAheads.Add(1)
			<-cur.done
			r, err = cur.r, cur.err
		} else {
			drain() // wrong guesses: drop them unread
			r, err = b.pull(ctx, pq.mq, pq.sub, offset, pq.brokerID.Load(), b.opts.PullSuspend, commit)
		}
		if err != nil {
			if ctx.Err() != nil {
				return
			}
			delay := 3 * time.Second
			var be *BrokerError
			if errors.As(err, &be) {
				switch be.Code {
				case protocol.FlowControl, protocol.SystemBusy:
					delay = 20 * time.Millisecond
				case protocol.SubscriptionNotExist, protocol.SubscriptionNotLatest:
					_ = b.heartbeat(ctx)
					delay = 100 * time.Millisecond
				}
			}
			if pq.brokerID.Load() != protocol.MasterID {
				pq.brokerID.Store(protocol.MasterID)
			}
			b.core.log.Debug("pull failed", "queue", pq.mq, "err", err)
			if !sleepCtx(ctx, delay) {
				return
			}
			continue
		}
		if r.suggest != pq.brokerID.Load() {
			pq.brokerID.Store(r.suggest)
		}
		switch r.code {
		case protocol.Success:
			pq.nextOffset = r.next
			// Read ahead while the backlog holds full pulls and the
			// queue is read without a filter.
			if n := r.next - offset; n > 0 && n == int64(r.raw) && pq.sub.tags == nil {
				at := r.next + n*int64(len(aheads))
				for len(aheads) < maxReadAhead && at+n <= r.maxOff {
					aheads = append(aheads, b.startPull(ctx, pq, at))
					at += n
				}
			}
			if len(r.msgs) > 0 {
				pq.add(r.msgs)
				b.deliver(pq, r.msgs)
			}
		case protocol.PullNotFound, protocol.PullRetryImmediately:
			pq.nextOffset = r.next
		case protocol.PullOffsetMoved:
			b.core.log.Info("pull offset moved", "queue", pq.mq, "from", pq.nextOffset, "to", r.next)
			pq.nextOffset = r.next
			if pq.count.Load() == 0 {
				b.offsets.update(pq.mq, r.next, false)
			}
		}
	}
}

// closePullConns closes the extra pull connections.
func (b *consumerBase) closePullConns() error {
	var errs []error
	for _, rc := range b.pullRCs {
		if err := rc.Close(); err != nil {
			errs = append(errs, err)
		}
	}
	return errors.Join(errs...)
}

// maxReadAhead is the most read-ahead pulls a queue keeps in flight.
const maxReadAhead = 3

// pullCall is a read-ahead pull running on its own goroutine.
type pullCall struct {
	offset   int64
	brokerID int64
	done     chan struct{} // closed when r, err are set
	r        *pullResult
	err      error
}

// startPull starts a pull of pq at offset without long polling (the
// broker reported the messages there) and without an offset commit; the
// caller must wait on its done channel.
func (b *consumerBase) startPull(ctx context.Context, pq *processQueue, offset int64) *pullCall {
	pc := &pullCall{offset: offset, brokerID: pq.brokerID.Load(), done: make(chan struct{})}
	go func() {
		defer close(pc.done)
		pc.r, pc.err = b.pull(ctx, pq.mq, pq.sub, offset, pc.brokerID, 0, 0)
	}()
	return pc
}

func sortStrings(s []string) {
	for i := 1; i < len(s); i++ {
		for j := i; j > 0 && s[j] < s[j-1]; j-- {
			s[j], s[j-1] = s[j-1], s[j]
		}
	}
}
