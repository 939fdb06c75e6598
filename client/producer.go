package client

import (
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"net/netip"
	"os"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Producer sends messages. It is safe for concurrent use.
type Producer struct {
	opts  ProducerOptions
	core  *core
	ids   *record.UniqueIDGenerator
	fault *faultTracker
	rr    atomic.Uint32

	inflight  sync.WaitGroup // async sends whose callback has not run
	amu       sync.Mutex     // orders inflight.Add against Close
	closing   bool           // protected by amu
	closeOnce sync.Once
	closeErr  error

	bmu      sync.Mutex
	batchers map[string]*topicBatcher // protected by bmu; auto-batching by topic
	batches  atomic.Int64             // auto-batch requests sent (more than one message)
	// batchLimit is the batch body a broker was seen to accept at most
	// (learnt from its refusal, autobatch.go); 0 until one refused.
	batchLimit   atomic.Int64
	batchRefused atomic.Int64 // auto-batch requests a broker refused as too large

	rmu           sync.Mutex
	waiters       map[string]*replyWaiter // protected by rmu; requests waiting for a reply, by correlation id
	replyClusters map[string]bool         // protected by rmu; clusters whose reply topic brokers know us
}

// NewProducer validates opts and returns a producer. It starts the route
// refresh (30 s) and heartbeat (30 s) tasks; routes are fetched on the first
// send to a topic.
func NewProducer(opts ProducerOptions) (*Producer, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill()
	c, err := newCore(opts.ClientOptions)
	if err != nil {
		return nil, err
	}
	ip, _ := netip.ParseAddr(localIP())
	p := &Producer{opts: opts, core: c, ids: record.NewUniqueIDGenerator(ip, os.Getpid()), fault: newFaultTracker(),
		batchers: map[string]*topicBatcher{}, waiters: map[string]*replyWaiter{}, replyClusters: map[string]bool{}}
	c.rc.RegisterFunc(protocol.PushReplyMessageToClient, p.onReply)
	c.every(opts.RouteRefresh, c.routeWake, c.refreshRoutes)
	c.every(opts.HeartbeatInterval, nil, func() { _ = p.heartbeat(c.ctx) })
	return p, nil
}

// ClientID returns the producer's client id.
func (p *Producer) ClientID() string { return p.core.clientID }

func (p *Producer) heartbeat(ctx context.Context) error {
	hb := &protocol.HeartbeatData{ClientID: p.core.clientID, ProducerDataSet: []*protocol.ProducerData{{GroupName: p.opts.Group}}}
	_, err := p.core.sendHeartbeat(ctx, hb, true)
	return err
}

// Close waits for pending async sends, unregisters from the brokers and
// closes the connections. It is idempotent.
func (p *Producer) Close() error {
	p.closeOnce.Do(func() {
		p.amu.Lock()
		p.closing = true
		p.amu.Unlock()
		p.inflight.Wait()
		p.failWaiters(ErrClosed)
		ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
		p.core.unregister(ctx, p.opts.Group, "")
		cancel()
		p.core.closed.Store(true)
		p.closeErr = p.core.close()
	})
	return p.closeErr
}

// unwritableRouteAge is how long a producer trusts a cached route without
// writable queues.
const unwritableRouteAge = time.Second

// publishRoute returns the route to send topic's messages on, falling back
// to the TBW102 template (the broker then auto-creates the topic).
func (p *Producer) publishRoute(ctx context.Context, topic string) (*topicRoute, error) {
	tr, err := p.core.route(ctx, topic)
	if err == nil && len(tr.publish) == 0 && time.Since(tr.fetched) > unwritableRouteAge {
		// A route without writable queues (a full disk, a failover) is
		// asked again before the periodic refresh: sends resume as soon
		// as the registries know a writable queue.
		if fresh, ferr := p.core.updateRoute(ctx, topic); ferr == nil {
			tr = fresh
		}
	}
	if err == nil && len(tr.publish) > 0 {
		return tr, nil
	}
	if err == nil && masterless(tr) {
		// Writable queues on brokers without a master: a failover (or a
		// restart) is in progress; the caller waits for a new master.
		return nil, fmt.Errorf("%w: %w: topic %s", ErrBrokerUnavailable, errNoMasterAddr, topic)
	}
	if err != nil && !errors.Is(err, ErrTopicNotExist) {
		return nil, err
	}
	tmpl, terr := p.core.fetchRoute(ctx, protocol.DefaultTopic)
	if terr != nil {
		if err != nil {
			return nil, err
		}
		if disksFull(tr) {
			return nil, errDisksFull(topic)
		}
		return nil, fmt.Errorf("%w: %s", ErrNoRoute, topic)
	}
	auto := buildRoute(topic, tmpl, p.opts.DefaultTopicQueueNums)
	auto.autoCreate = true
	if len(auto.publish) == 0 && masterless(auto) {
		return nil, fmt.Errorf("%w: %w: auto-create template for topic %s", ErrBrokerUnavailable, errNoMasterAddr, topic)
	}
	if len(auto.publish) == 0 {
		// A new topic on full disks: the template's queues are marked
		// disk-full as every other topic's.
		if (tr != nil && disksFull(tr)) || disksFull(auto) {
			return nil, errDisksFull(topic)
		}
		return nil, fmt.Errorf("%w: %s (no writable queue, no auto-create template)", ErrNoRoute, topic)
	}
	p.core.storeRoute(protocol.DefaultTopic, buildRoute(protocol.DefaultTopic, tmpl, 0))
	// Not cached under topic: the next send asks again, and the periodic
	// refresh picks the real route up once the broker registered it.
	return auto, nil
}

// selectQueue picks the next queue round-robin, avoiding the broker that
// failed last and, with fault tolerance, brokers that are isolated.
func (p *Producer) selectQueue(qs []MessageQueue, lastBroker string) MessageQueue {
	n := len(qs)
	start := int(p.rr.Add(1))
	if !p.opts.DisableFaultTolerance {
		for i := 0; i < n; i++ {
			q := qs[(start+i)%n]
			if q.BrokerName != lastBroker && p.fault.available(q.BrokerName) {
				return q
			}
		}
	}
	if lastBroker != "" {
		for i := 0; i < n; i++ {
			if q := qs[(start+i)%n]; q.BrokerName != lastBroker {
				return q
			}
		}
	}
	return qs[start%n]
}

// prepared is a message encoded for the wire.
type prepared struct {
	header protocol.SendMessageRequestHeader
	body   []byte
	uniq   string
	code   int32

	// A body from batchBodies (pool != nil) goes back once its owner and
	// every request written from it let go (refs reaches 0): requests
	// hold it until remoting wrote or dropped their frame.
	pool *[]byte
	refs atomic.Int32
}

// release drops one reference to a pooled body.
func (pm *prepared) release() {
	if pm.refs.Add(-1) == 0 {
		*pm.pool = pm.body[:0]
		pm.body = nil
		batchBodies.Put(pm.pool)
	}
}

func (p *Producer) prepare(m *Message) (*prepared, error) {
	if m == nil || m.Topic == "" {
		return nil, fmt.Errorf("%w: empty topic", ErrBadMessage)
	}
	if len(m.Topic) > record.MaxTopicLen {
		return nil, fmt.Errorf("%w: topic longer than %d", ErrBadMessage, record.MaxTopicLen)
	}
	if len(m.Body) == 0 {
		return nil, fmt.Errorf("%w: empty body", ErrBadMessage)
	}
	if len(m.Body) > p.opts.MaxMessageSize {
		return nil, fmt.Errorf("%w: body of %d bytes exceeds %d", ErrBadMessage, len(m.Body), p.opts.MaxMessageSize)
	}
	props, uniq, err := m.encodeProperties(p.ids, true)
	if err != nil {
		return nil, err
	}
	body, sysFlag := m.Body, int32(0)
	if p.opts.CompressThreshold > 0 && len(body) > p.opts.CompressThreshold {
		// Kept only when smaller: zlib grows random bytes a little, which
		// can push a body at MaxMessageSize over the broker's limit.
		cb, flags, err := record.CompressBody(nil, body, record.CompressionAlgoZlib, p.opts.CompressLevel)
		if err == nil && len(cb) < len(body) {
			body, sysFlag = cb, flags
		}
	}
	code := int32(protocol.SendMessageV2)
	if m.Properties[record.PropertyMsgType] == protocol.ReplyMessageFlag {
		code = protocol.SendReplyMessageV2 // a reply (request.go)
	}
	return &prepared{header: protocol.SendMessageRequestHeader{
		ProducerGroup: p.opts.Group, Topic: m.Topic, DefaultTopic: protocol.DefaultTopic,
		DefaultTopicQueueNums: p.opts.DefaultTopicQueueNums, SysFlag: sysFlag,
		BornTimestamp: time.Now().UnixMilli(), Flag: m.Flag, Properties: props,
	}, body: body, uniq: uniq, code: code}, nil
}

func (p *Producer) request(pm *prepared, mq MessageQueue) *protocol.Command {
	h := pm.header
	h.QueueID = mq.QueueID
	h.BrokerName = mq.BrokerName
	req := protocol.NewRequest(pm.code, h.V2(), pm.body)
	if pm.pool != nil {
		pm.refs.Add(1)
		req.Release = pm.release
	}
	return req
}

// Send sends m synchronously: it returns once the broker stored it, or an
// error after trying up to 1+Retries brokers.
func (p *Producer) Send(ctx context.Context, m *Message) (*SendResult, error) {
	pm, err := p.prepare(m)
	if err != nil {
		return nil, err
	}
	return p.sendPrepared(ctx, pm, m.Topic, nil)
}

// SendOrderly sends m to the queue chosen by selector for key (by default
// hash(key) mod queue count), so that messages with one key keep their
// order. It is not retried on another queue.
func (p *Producer) SendOrderly(ctx context.Context, m *Message, key string, selector QueueSelector) (*SendResult, error) {
	pm, err := p.prepare(m)
	if err != nil {
		return nil, err
	}
	if selector == nil {
		selector = HashSelector
	}
	return p.sendPrepared(ctx, pm, m.Topic, func(qs []MessageQueue) MessageQueue { return selector(qs, key) })
}

// QueueSelector chooses a queue for a key among a topic's writable queues.
type QueueSelector func(queues []MessageQueue, key string) MessageQueue

// HashSelector picks queues[fnv32a(key) % len(queues)].
func HashSelector(queues []MessageQueue, key string) MessageQueue {
	h := fnv.New32a()
	_, _ = h.Write([]byte(key))
	return queues[int(h.Sum32()%uint32(len(queues)))]
}

func (p *Producer) sendPrepared(ctx context.Context, pm *prepared, topic string, pick func([]MessageQueue) MessageQueue) (*SendResult, error) {
	if p.core.closed.Load() {
		return nil, ErrClosed
	}
	attempts := 1 + p.opts.Retries
	if pick != nil {
		attempts = 1
	}
	// The whole send, failover waits included, fits in the time its
	// attempts would take (SendTimeout each).
	deadline := time.Now().Add(time.Duration(max(attempts, 1)) * p.opts.SendTimeout)
	if d, ok := ctx.Deadline(); ok && d.Before(deadline) {
		deadline = d
	}
	var last error
	var down error // the last attempt that found the group's master down
	lastBroker := ""
	backoff := 50 * time.Millisecond
	resend := false // an earlier attempt may have stored the message
	for used := 0; ; {
		tr, err := p.publishRoute(ctx, topic)
		if err != nil && masterDown(err) && time.Until(deadline) > backoff && ctx.Err() == nil {
			if last == nil {
				last = err
			}
			if !p.waitForMaster(ctx, topic, &backoff) {
				return nil, errors.Join(last, ctx.Err())
			}
			continue
		}
		if err != nil {
			if last != nil {
				return nil, errors.Join(last, err)
			}
			return nil, err
		}
		var mq MessageQueue
		if pick != nil {
			mq = pick(tr.publish)
		} else {
			mq = p.selectQueue(tr.publish, lastBroker)
		}
		res, err := p.sendOnce(ctx, pm, mq, deadline, resend)
		if err == nil {
			return res, nil
		}
		last = err
		resend = resend || outcomeUnknown(err)
		lastBroker = mq.BrokerName
		if !retryableErr(err) || ctx.Err() != nil {
			break
		}
		used++
		isDown := masterDown(err)
		if isDown {
			down = err
		}
		if (used >= attempts && !isDown) || time.Until(deadline) <= backoff {
			break // answer before the deadline rather than at it
		}
		if isDown {
			// The group's master is gone (failover in progress, or a
			// restart): ask the registries again until a master is back,
			// within the send's time.
			p.core.log.Debug("send failed, waiting for a master", "topic", topic, "broker", mq.BrokerName, "err", err)
			if !p.waitForMaster(ctx, topic, &backoff) {
				return nil, errors.Join(last, ctx.Err())
			}
			lastBroker = "" // the same group, once it has a master again
			continue
		}
		p.core.log.Debug("send failed, retrying on another broker", "topic", topic, "broker", mq.BrokerName, "err", err)
	}
	if down != nil && errors.Is(last, ErrTimeout) && !errors.Is(last, ErrBrokerUnavailable) && !time.Now().Before(deadline) {
		// The send's time ran out in an attempt made while waiting for
		// the master to come back (a dial cut by the deadline): what
		// failed the send is the master being down, and its time ran
		// out meanwhile.
		return nil, errors.Join(down, last)
	}
	return nil, last
}

// errNoMasterAddr: the route names no master for the queue's broker (no
// request was sent).
var errNoMasterAddr = errors.New("no master address")

// outcomeUnknown reports a failed attempt whose request may have reached
// the broker and been stored: a timeout or a connection broken after the
// request was written (not a broker's answer, not a missing address).
func outcomeUnknown(err error) bool {
	var be *BrokerError
	if errors.As(err, &be) || errors.Is(err, errNoMasterAddr) {
		return false
	}
	return errors.Is(err, ErrTimeout) || errors.Is(err, ErrBrokerUnavailable)
}

// waitForMaster sleeps backoff (doubling it up to 400 ms) and refreshes
// topic's route; false when ctx ended.
func (p *Producer) waitForMaster(ctx context.Context, topic string, backoff *time.Duration) bool {
	select {
	case <-ctx.Done():
		return false
	case <-time.After(*backoff):
	}
	*backoff = min(2**backoff, 400*time.Millisecond)
	if _, err := p.core.updateRoute(ctx, topic); err != nil {
		p.core.log.Debug("route refresh failed", "topic", topic, "err", err)
	}
	return true
}

// disksFull reports a route without writable queues whose every master
// has its queues marked protocol.PermDiskFull.
func disksFull(tr *topicRoute) bool {
	masters := masterNames(tr.data)
	full := false
	for _, qd := range tr.data.QueueDatas {
		if qd == nil || !masters[qd.BrokerName] {
			continue
		}
		if qd.Perm&protocol.PermDiskFull == 0 || qd.Perm&protocol.PermWrite != 0 {
			return false
		}
		full = true
	}
	return full
}

// errDisksFull is the error of a send to topic whose route has no
// writable queue because every master's disk is full (disksFull).
func errDisksFull(topic string) error {
	return fmt.Errorf("%w: %w: topic %s (every master's disk is full)", ErrNoRoute, ErrDiskFull, topic)
}

// masterless reports a route whose writable queues are all on brokers
// without a master address.
func masterless(tr *topicRoute) bool {
	masters := masterNames(tr.data)
	writable := false
	for _, qd := range tr.data.QueueDatas {
		if qd != nil && qd.Perm&protocol.PermWrite != 0 {
			writable = true
			if masters[qd.BrokerName] {
				return false
			}
		}
	}
	return writable
}

// masterDown reports errors that mean the group has no reachable master
// right now: no master address, a broken or refused connection, or a
// broker that is not (or no longer) master.
func masterDown(err error) bool {
	var be *BrokerError
	if errors.As(err, &be) {
		return be.Code == protocol.ServiceNotAvailable
	}
	return errors.Is(err, ErrBrokerUnavailable) && !errors.Is(err, ErrClosed)
}

// sendOnce sends to one queue and records the broker's latency.
func (p *Producer) sendOnce(ctx context.Context, pm *prepared, mq MessageQueue, deadline time.Time, resend bool) (*SendResult, error) {
	addr := p.core.masterAddr(mq.BrokerName)
	if addr == "" {
		return nil, fmt.Errorf("%w: %w for %s", ErrBrokerUnavailable, errNoMasterAddr, mq.BrokerName)
	}
	cctx, cancel := context.WithTimeout(ctx, min(p.opts.SendTimeout, max(time.Until(deadline), time.Millisecond)))
	defer cancel()
	start := time.Now()
	req := p.request(pm, mq)
	if resend && pm.uniq != "" {
		req.ExtFields[protocol.SendResendField] = "true"
	}
	resp, err := p.core.invoke(cctx, "send", addr, req)
	p.fault.update(mq.BrokerName, time.Since(start), err != nil)
	if err != nil {
		return nil, err
	}
	return p.result(addr, pm, mq, resp)
}

func (p *Producer) result(addr string, pm *prepared, mq MessageQueue, resp *protocol.Command) (*SendResult, error) {
	defer resp.Recycle() // a send response's body is not used; header fields are copies
	status := SendOK
	switch resp.Code {
	case protocol.Success:
	case protocol.FlushDiskTimeout:
		status = SendFlushDiskTimeout
	case protocol.FlushSlaveTimeout:
		status = SendFlushSlaveTimeout
	case protocol.SlaveNotAvailable:
		status = SendSlaveNotAvailable
	default:
		return nil, newBrokerError("send", addr, resp)
	}
	var h protocol.SendMessageResponseHeader
	if err := resp.DecodeHeader(&h); err != nil {
		return nil, fmt.Errorf("client: send response from %s: %w", addr, err)
	}
	mq.QueueID = h.QueueID
	return &SendResult{Status: status, MsgID: pm.uniq, OffsetMsgID: h.MsgID, Queue: mq, QueueOffset: h.QueueOffset}, nil
}

// SendAsync sends m in the background; cb runs once with the result, on a
// goroutine of the producer (retries on other brokers happen before it).
// The returned error reports a message that cannot be sent at all.
//
// Under load, sends of one topic beyond AutoBatchRequests requests in
// flight wait and then travel together in one batch request (see
// autobatch.go); the callbacks of one batch run one after another on one
// goroutine, so a callback should not block. ctx is checked again when a
// waiting send leaves.
func (p *Producer) SendAsync(ctx context.Context, m *Message, cb func(*SendResult, error)) error {
	pm, err := p.prepare(m)
	if err != nil {
		return err
	}
	if p.core.closed.Load() {
		return ErrClosed
	}
	tr, err := p.publishRoute(ctx, m.Topic)
	if err != nil && !masterDown(err) {
		return err
	}
	p.amu.Lock()
	if p.closing {
		p.amu.Unlock()
		return ErrClosed
	}
	p.inflight.Add(1)
	p.amu.Unlock()
	if err != nil {
		// No master right now: the send waits for one within its time.
		tr = &topicRoute{data: &protocol.TopicRouteData{}}
	}
	if err == nil && p.batchable(m, pm, tr) {
		p.enqueue(p.batcher(m.Topic), asyncItem{ctx: ctx, pm: pm, cb: cb})
		return nil
	}
	it := &asyncItem{ctx: ctx, pm: pm, cb: cb}
	p.sendAsyncAttempt(ctx, pm, tr, "", 1+p.opts.Retries, func(r *SendResult, err error) { p.finish(it, r, err) })
	return nil
}

// AsyncResult is what SendAsyncChan delivers.
type AsyncResult struct {
	Result *SendResult
	Err    error
}

// SendAsyncChan is SendAsync delivering the outcome on a channel (buffered,
// so nobody has to read it).
func (p *Producer) SendAsyncChan(ctx context.Context, m *Message) <-chan AsyncResult {
	ch := make(chan AsyncResult, 1)
	if err := p.SendAsync(ctx, m, func(r *SendResult, err error) { ch <- AsyncResult{r, err} }); err != nil {
		ch <- AsyncResult{nil, err}
	}
	return ch
}

func (p *Producer) sendAsyncAttempt(ctx context.Context, pm *prepared, tr *topicRoute, lastBroker string, left int, cb func(*SendResult, error)) {
	p.sendAsyncRetry(ctx, pm, tr, asyncRetry{lastBroker: lastBroker, left: left, deadline: p.sendDeadline(ctx, left),
		backoff: 50 * time.Millisecond}, cb)
}

// sendDeadline is when a send with attempts attempts gives up, failover
// waits included: the time its attempts would take (bounded by ctx).
func (p *Producer) sendDeadline(ctx context.Context, attempts int) time.Time {
	d := time.Now().Add(time.Duration(max(attempts, 1)) * p.opts.SendTimeout)
	if cd, ok := ctx.Deadline(); ok && cd.Before(d) {
		d = cd
	}
	return d
}

// asyncRetry is where an async send stands: the broker of its last
// attempt, the attempts left, when it gives up, whether an earlier attempt
// may have stored it, and the wait before it asks again for a master.
type asyncRetry struct {
	lastBroker string
	left       int
	deadline   time.Time
	resend     bool
	backoff    time.Duration
}

// sendAsyncRetry is one attempt of an async send and its retries, the way
// sendPrepared does them: another broker for a failed attempt, a wait for
// a new master (route refresh) while the group has none.
func (p *Producer) sendAsyncRetry(ctx context.Context, pm *prepared, tr *topicRoute, st asyncRetry, cb func(*SendResult, error)) {
	var mq MessageQueue
	var addr string
	if len(tr.publish) > 0 {
		mq = p.selectQueue(tr.publish, st.lastBroker)
		addr = p.core.masterAddr(mq.BrokerName)
	}
	retry := func(err error) {
		if !retryableErr(err) || ctx.Err() != nil || p.core.closed.Load() {
			cb(nil, err)
			return
		}
		next := st
		next.resend = st.resend || outcomeUnknown(err)
		next.lastBroker, next.left = mq.BrokerName, st.left-1
		if masterDown(err) && time.Until(st.deadline) > st.backoff {
			// No reachable master: the route refresh runs now, and the
			// send tries again on the refreshed route after the backoff.
			select {
			case p.core.routeWake <- struct{}{}:
			default:
			}
			next.lastBroker, next.backoff = "", min(2*st.backoff, 400*time.Millisecond)
			time.AfterFunc(st.backoff, func() {
				ntr, rerr := p.publishRoute(ctx, pm.header.Topic)
				if rerr != nil {
					ntr = tr
				}
				p.sendAsyncRetry(ctx, pm, ntr, next, cb)
			})
			return
		}
		if st.left > 1 && time.Until(st.deadline) > 0 {
			p.sendAsyncRetry(ctx, pm, tr, next, cb)
			return
		}
		cb(nil, err)
	}
	if addr == "" {
		retry(fmt.Errorf("%w: %w for %s", ErrBrokerUnavailable, errNoMasterAddr, mq.BrokerName))
		return
	}
	start := time.Now()
	timeout := min(p.opts.SendTimeout, max(time.Until(st.deadline), time.Millisecond))
	req := p.request(pm, mq)
	if st.resend && pm.uniq != "" {
		req.ExtFields[protocol.SendResendField] = "true"
	}
	err := p.core.rc.InvokeAsync(ctx, addr, req, timeout, func(resp *protocol.Command, err error) {
		p.fault.update(mq.BrokerName, time.Since(start), err != nil)
		if err != nil {
			retry(p.core.callErr("send", addr, err))
			return
		}
		res, err := p.result(addr, pm, mq, resp)
		if err != nil {
			retry(err)
			return
		}
		cb(res, nil)
	})
	if err != nil {
		p.fault.update(mq.BrokerName, time.Since(start), true)
		retry(wrapCallErr("send", addr, err))
	}
}

// SendOneway sends m without waiting for the broker (no result, no retry).
func (p *Producer) SendOneway(ctx context.Context, m *Message) error {
	pm, err := p.prepare(m)
	if err != nil {
		return err
	}
	if p.core.closed.Load() {
		return ErrClosed
	}
	tr, err := p.publishRoute(ctx, m.Topic)
	if err != nil {
		return err
	}
	mq := p.selectQueue(tr.publish, "")
	addr := p.core.masterAddr(mq.BrokerName)
	if addr == "" {
		return fmt.Errorf("%w: %w for %s", ErrBrokerUnavailable, errNoMasterAddr, mq.BrokerName)
	}
	cctx, cancel := context.WithTimeout(ctx, p.opts.SendTimeout)
	defer cancel()
	if err := p.core.rc.InvokeOneway(cctx, addr, p.request(pm, mq)); err != nil {
		return wrapCallErr("send oneway", addr, err)
	}
	return nil
}

// SendBatch sends messages of one topic in one request; they are stored
// in one queue with consecutive offsets. Batches carry no delay level and
// are not compressed.
func (p *Producer) SendBatch(ctx context.Context, msgs []*Message) (*SendResult, error) {
	pm, topic, err := p.prepareBatch(msgs)
	if err != nil {
		return nil, err
	}
	return p.sendPrepared(ctx, pm, topic, nil)
}

// SendBatchOrderly sends msgs as one batch to the queue selector picks for
// key (HashSelector when nil): the batch lands on one queue, in order, and
// after earlier orderly sends with the same key. The MQTT bridge uses it to
// store one device's messages in order with one broker round trip.
func (p *Producer) SendBatchOrderly(ctx context.Context, msgs []*Message, key string, selector QueueSelector) (*SendResult, error) {
	pm, topic, err := p.prepareBatch(msgs)
	if err != nil {
		return nil, err
	}
	if selector == nil {
		selector = HashSelector
	}
	return p.sendPrepared(ctx, pm, topic, func(qs []MessageQueue) MessageQueue { return selector(qs, key) })
}

// prepareBatch validates a batch (one topic, no delay level, not a retry
// topic, non-empty bodies, within the size limit) and encodes its body.
func (p *Producer) prepareBatch(msgs []*Message) (*prepared, string, error) {
	if len(msgs) == 0 {
		return nil, "", fmt.Errorf("%w: empty batch", ErrBadMessage)
	}
	if msgs[0] == nil {
		return nil, "", fmt.Errorf("%w: nil message in batch", ErrBadMessage)
	}
	topic := msgs[0].Topic
	// The properties first, then the body in one buffer of its final
	// size: appended item by item, it grew (and was copied) a dozen
	// times for a batch of a few hundred.
	props := make([]string, len(msgs))
	uniqs := make([]string, 0, len(msgs))
	size := 0
	for i, m := range msgs {
		if m == nil || m.Topic != topic {
			return nil, "", fmt.Errorf("%w: a batch must have one topic", ErrBadMessage)
		}
		if m.DelayLevel > 0 {
			return nil, "", fmt.Errorf("%w: batch messages cannot have a delay level", ErrBadMessage)
		}
		if strings.HasPrefix(topic, "%RETRY%") {
			return nil, "", fmt.Errorf("%w: batch to a retry topic", ErrBadMessage)
		}
		if len(m.Body) == 0 {
			return nil, "", fmt.Errorf("%w: empty body", ErrBadMessage)
		}
		pr, uniq, err := m.encodeProperties(p.ids, true)
		if err != nil {
			return nil, "", err
		}
		props[i] = pr
		size += record.BatchItemLen(len(m.Body), len(pr))
		uniqs = append(uniqs, uniq)
	}
	if size > p.opts.MaxMessageSize {
		return nil, "", fmt.Errorf("%w: batch of %d bytes exceeds %d", ErrBadMessage, size, p.opts.MaxMessageSize)
	}
	body := make([]byte, 0, size)
	for i, m := range msgs {
		body = record.AppendBatchItem(body, m.Flag, m.Body, props[i])
	}
	h := protocol.SendMessageRequestHeader{
		ProducerGroup: p.opts.Group, Topic: topic, DefaultTopic: protocol.DefaultTopic,
		DefaultTopicQueueNums: p.opts.DefaultTopicQueueNums, BornTimestamp: time.Now().UnixMilli(), Batch: true,
	}
	return &prepared{header: h, body: body, uniq: strings.Join(uniqs, ","), code: protocol.SendBatchMessage}, topic, nil
}

// faultTracker is the latency fault strategy: a broker whose last call
// failed or was slow is avoided for a while (RocketMQ's table: latency
// >= 550 ms -> 30 s, 1 s -> 60 s, 2 s -> 120 s, 3 s -> 180 s, 15 s -> 600 s;
// a failure counts as 30 s).
type faultTracker struct {
	mu    sync.Mutex
	until map[string]time.Time // protected by mu
}

func newFaultTracker() *faultTracker { return &faultTracker{until: map[string]time.Time{}} }

var (
	faultLatency  = []time.Duration{50 * time.Millisecond, 100 * time.Millisecond, 550 * time.Millisecond, time.Second, 2 * time.Second, 3 * time.Second, 15 * time.Second}
	faultIsolated = []time.Duration{0, 0, 30 * time.Second, 60 * time.Second, 120 * time.Second, 180 * time.Second, 600 * time.Second}
)

func (f *faultTracker) update(broker string, latency time.Duration, failed bool) {
	if failed {
		latency = 30 * time.Second
	}
	var d time.Duration
	for i := len(faultLatency) - 1; i >= 0; i-- {
		if latency >= faultLatency[i] {
			d = faultIsolated[i]
			break
		}
	}
	f.mu.Lock()
	defer f.mu.Unlock()
	if d == 0 {
		delete(f.until, broker)
		return
	}
	f.until[broker] = time.Now().Add(d)
}

func (f *faultTracker) available(broker string) bool {
	f.mu.Lock()
	defer f.mu.Unlock()
	u, ok := f.until[broker]
	return !ok || time.Now().After(u)
}
