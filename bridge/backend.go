package bridge

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/internal/ratelog"
	"github.com/smartgo/smartgo/internal/wake"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// Consumer groups of the bridge. None of them ever commits an offset: the
// live consumer always starts at the end of the device-facing topics, the
// system consumer always replays its topics from the start.
const (
	groupLive   = "MQTT_BRIDGE_LIVE"
	groupSys    = "MQTT_BRIDGE_SYS"
	groupReplay = "MQTT_BRIDGE_REPLAY"
)

// ringSize is how many recent deliveries per queue are at least
// remembered (once that many happened; at most twice as many) to find a
// session's resume point (and the log position of its pending messages).
const ringSize = 2048

// delivery is one message handed to the server by the live consumer.
type delivery struct {
	offset int64
	end    time.Time // when Deliver returned
	msg    *mqtt.Message
	id     storedID
}

// storedID tells a stored message from another one stored at the same
// queue offset: a pull of the same record again gives the same storedID,
// a new message at an offset the queue gave again (its broker lost its
// log's tail and reused the offsets) gives another one. uniq is the
// producer's UNIQ_KEY ("" without one); the store and born times (ms)
// and the body's length tell records apart without it.
type storedID struct {
	uniq        string
	store, born int64
	size        int
}

func storedIDOf(x *client.MessageExt) storedID {
	id := storedID{store: x.StoreTimestamp, born: x.BornTimestamp, size: len(x.Body)}
	if x.MsgID != x.OffsetMsgID { // MsgID is UNIQ_KEY, else OffsetMsgID
		id.uniq = x.MsgID
	}
	return id
}

// rewindLocked reports whether the message id at off, below q's next,
// is new: the ring holds another message at off, so the queue's broker
// gave off again (it lost its log's tail). The deliveries from off on are
// then forgotten and next goes back to off, so that the messages stored
// at the reused offsets are delivered; it also returns off's index in
// the ring (0: the oldest delivery remembered was given again too, and
// the reused offsets may start below it: recheck.go). A message at an
// offset the ring does not hold (older than the ring, or read before
// this node's start) stays a duplicate.
func (qs *queueState) rewindLocked(off int64, id storedID) (int, bool) {
	i := sort.Search(len(qs.ring), func(i int) bool { return qs.ring[i].offset >= off })
	if i == len(qs.ring) || qs.ring[i].offset != off || qs.ring[i].id == id {
		return 0, false
	}
	clear(qs.ring[i:])
	qs.ring = qs.ring[:i]
	qs.next = off
	return i, true
}

// queueState is the live consumer's progress on one queue.
type queueState struct {
	next int64 // offset after the last delivered message
	// ring are the recent deliveries, oldest first, ringSize to
	// 2*ringSize-1 once trimmed; before the first, the message before
	// the start position, without msg or end (seedRings).
	ring []delivery
	// trimmed is set once older deliveries were dropped from ring.
	trimmed bool
}

// Backend implements mqtt.Backend on SmartGo brokers (see doc.go).
type Backend struct {
	opts   Options
	log    *slog.Logger
	prod   *client.Producer
	adm    *admin.Admin
	topics []string // device-facing broker topics, consumed live

	// replays keeps the consumers of session resumes for the next ones.
	replays replayPool
	// checks are the recent checks of resume points against their
	// queues (sessions_reused.go).
	checks pointChecks

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	// gate pauses live delivery while a resumed session is replayed
	// (write side) so that no message falls between replay and restore.
	// Concurrent resumes share one pause (pauses counts them).
	gate    sync.RWMutex
	pauseMu sync.Mutex
	pauses  int // protected by pauseMu

	mu        sync.Mutex
	started   bool                                // protected by mu
	closed    bool                                // protected by mu
	d         mqtt.Deliverer                      // protected by mu
	srv       clusterServer                       // protected by mu; d, when it is one
	shares    map[string]*client.PullConsumer     // protected by mu; running share consumers (shares.go)
	shareWake chan struct{}                       // wakes the share loop (capacity 1)
	lost      *lostBrokers                        // brokers whose connection closed (recheck.go)
	shareFrom map[string]shareMark                // protected by mu; start offsets of shares not yet running, taken before their SUBACK (shares.go)
	held      map[string]heldShares               // protected by mu; shares each local session held before its latest SUBSCRIBE (shares.go)
	live      *client.PullConsumer                // protected by mu
	sys       *client.PullConsumer                // protected by mu
	queues    map[client.MessageQueue]*queueState // protected by mu
	sysNext   map[client.MessageQueue]int64       // protected by mu; system topic progress
	retained  map[string]*retainedEntry           // protected by mu
	copies    sessionCopies                       // protected by mu; compaction of the session topic (compact.go)
	sessions  map[string]*sessionRecord           // protected by mu; latest live record per client (state.go)
	own       map[string]*sessionRecord           // protected by mu; last record this node wrote, while it matters
	writing   map[string]int                      // protected by mu; session writes in flight per client
	deferred  map[string][]*sessionRecord         // protected by mu; other nodes' records waiting for them
	vouches   map[string]vouch                    // protected by mu; the record standing for each local session
	// ownerTag, when set (SetOwnerTag), names the owner of a client id
	// that each record of a connection carries ("owner").
	ownerTag atomic.Pointer[func(clientID string) string]
	// writers serialises each client's session writes (writeSession);
	// taken numbers the records in the order their state was taken.
	writersMu sync.Mutex
	writers   map[string]*clientWriter // protected by writersMu
	taken     atomic.Uint64
	// testBeforeWrite, when set (tests), sees each record before it is
	// sent, with the client's writer held.
	testBeforeWrite func(*sessionRecord)
	// testBeforeSave, when set (tests), is called as SaveSession starts;
	// SaveSession calls what it returns when it ends.
	testBeforeSave func(clientID string) func()
	// testShareHook, when set (tests, before Start), sees the steps of
	// shared subscriptions: "mark" (PrepareShares, before it looks at
	// share), "start" (the share loop, before it starts share's consumer),
	// "marked" (that start, once it took share's mark), "stop" (the share
	// loop, before it stops the consumer of a share it found without
	// members) and "walked" (the
	// end of each pass of the share loop; share is "").
	testShareHook func(step, share string)
	// testWillHook, when set (tests, before Start), is asked before this
	// process publishes a will its claim holds; false: it does not, as if
	// it died there.
	testWillHook func(clientID string) bool
	// testFiringHook, when set (tests, before Start), is called as the
	// goroutine that publishes a will this process's claim holds starts
	// (a test makes it start late).
	testFiringHook func(clientID string)
	// testMarkerHook, when set (tests, before Start), replaces the send of
	// a will-done marker or claim rec: send stores it (as many times as
	// the hook calls it) and the hook's error is writeMarker's.
	testMarkerHook func(rec *sessionRecord, send func() error) error
	// testPublishHook, when set (tests, before Start), is asked before
	// Publish stores m; an error fails the publish.
	testPublishHook func(m *mqtt.Message) error
	// testNodesHook, when set (tests, before Start), filters the bridge
	// nodes the wills' look at the registries found.
	testNodesHook func(nodes []string) []string
	// testClaimGrace, when set (tests, before Start), replaces the wait
	// of a claim on another node's will before its publish (claimGrace).
	testClaimGrace time.Duration
	// testBeforeApply, when set (tests, before Start), is called as the
	// tail is about to apply a session topic record (a test holds the
	// tail back).
	testBeforeApply func(rec *sessionRecord)
	// testBeforeConfirm, when set (tests, before Start), is called as
	// SessionCurrent begins.
	testBeforeConfirm func(clientID string)

	qos2      keyedRuns[func()]                            // QoS 2 records waited for, by client (RecordQoS2)
	sysQueues map[client.MessageQueue]*client.MessageQueue // protected by mu; interned session topic queues
	// connectPrev holds, per connect request of this node the tail
	// applied, the client's record before it (protected by mu).
	connectPrev map[sysPos]*sessionRecord
	waits       map[string][]*handoffWait // protected by mu; connects in progress per client
	// applied wakes the goroutines waiting for the system tail (connects,
	// catchUpSys): notified after every record it applied.
	applied wake.Notifier

	// overflows are the sessions that overflowed under live delivery
	// (overflow.go), protected by mu; curQ and curOff are the message
	// deliverLoop is delivering (only its goroutine uses them).
	overflows  map[string]*overflowState
	curQ       client.MessageQueue
	curOff     int64
	overflowFn func(clientID string, inst uint64) // onOverflow, bound once
	// delivering is the message deliverLoop is handing to the server and
	// its log position (protected by mu): a session may hold it before it
	// is in its queue's ring and the queue's next moves past it, and a
	// record taken then must know where it is (recordAt).
	delivering    *mqtt.Message
	deliveringPos ringPos
	// testAfterDeliver, when set (tests), runs after each live delivery,
	// before the queue's progress is noted.
	testAfterDeliver func(*mqtt.Message)

	metrics *backendMetrics
	ready   atomic.Bool // Start finished (metrics.go)

	wills willState // stored wills of connected clients (will.go)

	// Pipelined ingress (ingress.go).
	chains    keyedRuns[ingressItem]                                              // messages to store, by ordering key
	sendBatch func(ctx context.Context, msgs []*client.Message, key string) error // nil: no ordered batch send
}

// NewBackend validates opts and connects a producer; Start (called by the
// mqtt server) does the rest.
func NewBackend(opts Options) (*Backend, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill()
	po := client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: opts.Registries,
		Logger: opts.Logger.With("component", "bridge-producer")}, Group: "MQTT_BRIDGE", SendTimeout: opts.SendTimeout,
		Retries: -1, DefaultTopicQueueNums: opts.TopicQueues}
	prod, err := client.NewProducer(po)
	if err != nil {
		return nil, fmt.Errorf("bridge: producer: %w", err)
	}
	adm, err := admin.New(admin.Options{Registries: opts.Registries, Logger: opts.Logger})
	if err != nil {
		prod.Close()
		return nil, fmt.Errorf("bridge: admin: %w", err)
	}
	if opts.NodeID == "" {
		opts.NodeID = prod.ClientID()
	}
	// Most lines are driven by MQTT clients (sessions, takeovers) or
	// repeat every poll while a broker is away: rate-limited per reason.
	b := &Backend{opts: opts, log: ratelog.Wrap(opts.Logger, 0), prod: prod, adm: adm,
		queues: map[client.MessageQueue]*queueState{}, sysNext: map[client.MessageQueue]int64{},
		retained: map[string]*retainedEntry{}, sessions: map[string]*sessionRecord{}, own: map[string]*sessionRecord{},
		copies:  newSessionCopies(),
		writing: map[string]int{}, deferred: map[string][]*sessionRecord{}, vouches: map[string]vouch{},
		held:        map[string]heldShares{},
		sysQueues:   map[client.MessageQueue]*client.MessageQueue{},
		connectPrev: map[sysPos]*sessionRecord{}, waits: map[string][]*handoffWait{},
		overflows: map[string]*overflowState{}, wills: newWillState(),
		shareWake: make(chan struct{}, 1), lost: newLostBrokers(), metrics: newBackendMetrics()}
	b.overflowFn = b.onOverflow
	if bs, ok := any(prod).(orderedBatchSender); ok {
		b.sendBatch = func(ctx context.Context, msgs []*client.Message, key string) error {
			_, err := bs.SendBatchOrderly(ctx, msgs, key, client.HashSelector)
			return err
		}
	}
	for _, r := range opts.Routes {
		if !r.IngressOnly && !slices.Contains(b.topics, r.Topic) {
			b.topics = append(b.topics, r.Topic)
		}
	}
	for _, t := range []string{opts.DefaultTopic, opts.EgressTopic} {
		if !slices.Contains(b.topics, t) {
			b.topics = append(b.topics, t)
		}
	}
	b.ctx, b.cancel = context.WithCancel(context.Background())
	return b, nil
}

// waitLogEvery spaces the log lines of a start-up that waits for the
// registries.
const waitLogEvery = 10 * time.Second

// NodeID returns the name this node writes into session records.
func (b *Backend) NodeID() string { return b.opts.NodeID }

// SetOwnerTag has fn name the owner of a client id that each session
// record of a connection carries (the IoT hub: the generation id of the
// device identity the connection authenticated as; "": unknown), so that
// PrepareSessionReplacing tells an earlier owner's session by its tag
// rather than by when it ended. fn is called as records are written,
// on the goroutines that write them: it must be quick and must not call
// into the backend. nil: no tag.
func (b *Backend) SetOwnerTag(fn func(clientID string) string) {
	if fn == nil {
		b.ownerTag.Store(nil)
		return
	}
	b.ownerTag.Store(&fn)
}

// OwnerTag implements mqtt.OwnerTagger with SetOwnerTag's function: a
// connect whose client id's session this node holds in memory, last
// attached for another owner, starts a new session, as LoadSession's
// check does for a stored one.
func (b *Backend) OwnerTag(clientID string) string { return b.ownerOf(clientID) }

// SessionOwner is the owner that clientID's latest session record names,
// judged once this node has read every record stored so far (one the
// client's connection wrote on another node just before may not have
// been read yet): the SetOwnerTag tag of the connection that wrote it,
// else the tag it was prepared with (PrepareSessionReplacing); "" when
// it names neither, or the client has no session. The IoT hub ends the
// session of a deleted identity that names one (EndSession).
func (b *Backend) SessionOwner(ctx context.Context, clientID string) (string, error) {
	if b.isClosed() {
		return "", ErrClosed
	}
	if err := b.catchUpSys(ctx, b.opts.SessionTopic); err != nil {
		return "", fmt.Errorf("bridge: owner of %q's session: read the session records: %w", clientID, err)
	}
	b.mu.Lock()
	defer b.mu.Unlock()
	if rec := b.sessions[clientID]; rec != nil && !rec.Deleted {
		return ownerOfRecord(rec), nil
	}
	return "", nil
}

// ownerOf is SetOwnerTag's tag of clientID ("" without one).
func (b *Backend) ownerOf(clientID string) string {
	if fn := b.ownerTag.Load(); fn != nil {
		return (*fn)(clientID)
	}
	return ""
}

// Topics returns the device-facing broker topics this node consumes.
func (b *Backend) Topics() []string { return slices.Clone(b.topics) }

// RouteOf returns the broker topic for an MQTT topic: the first matching
// route, else the default topic.
func (b *Backend) RouteOf(mqttTopic string) string {
	for _, r := range b.opts.Routes {
		if packets.Match(r.Filter, mqttTopic) {
			return r.Topic
		}
	}
	return b.opts.DefaultTopic
}

// Start implements mqtt.Backend: it creates missing topics, replays the
// session and retained topics, and starts consuming the device-facing
// topics from their end.
func (b *Backend) Start(ctx context.Context, d mqtt.Deliverer) error {
	b.mu.Lock()
	if b.closed || b.started {
		b.mu.Unlock()
		return fmt.Errorf("%w: started twice or closed", ErrClosed)
	}
	b.started, b.d = true, d
	b.srv, _ = d.(clusterServer)
	b.wills.started = time.Now()
	b.mu.Unlock()
	sctx, cancel := context.WithTimeout(ctx, b.opts.StartTimeout)
	defer cancel()
	all := append(slices.Clone(b.topics), b.opts.SessionTopic, b.opts.RetainedTopic)
	for _, r := range b.opts.Routes {
		if !slices.Contains(all, r.Topic) {
			all = append(all, r.Topic) // ingress-only topics are created too
		}
	}
	for _, t := range all {
		if err := b.ensureTopic(sctx, t); err != nil {
			return err
		}
	}
	sys, err := b.newConsumer(sctx, groupSys, client.ConsumeFromFirst, []string{b.opts.SessionTopic, b.opts.RetainedTopic})
	if err != nil {
		return err
	}
	b.mu.Lock()
	b.sys = sys
	b.mu.Unlock()
	b.wg.Add(1)
	go b.tailSys(sys)
	if err := b.catchUpSys(sctx, b.opts.SessionTopic, b.opts.RetainedTopic); err != nil {
		return fmt.Errorf("bridge: replay system topics: %w", err)
	}

	// Positions before the live consumer starts: a message stored in
	// between may be replayed twice into a resumed session, never lost.
	for _, t := range b.topics {
		var stats []admin.QueueStat
		err := b.retryRoute(sctx, t, func() (err error) {
			stats, err = b.adm.TopicStats(sctx, t)
			return err
		})
		if err != nil {
			return fmt.Errorf("bridge: offsets of %s: %w", t, err)
		}
		b.mu.Lock()
		for _, s := range stats {
			b.queues[s.Queue] = &queueState{next: s.MaxOffset}
		}
		b.mu.Unlock()
	}
	b.seedRings(sctx)
	live, err := b.newConsumer(sctx, groupLive, client.ConsumeFromLast, b.topics)
	if err != nil {
		return err
	}
	// The live group commits nothing, and brokers start a group without
	// offsets at 0 on a young queue (RocketMQ's rule): ConsumeFromLast
	// would then deliver the queue's whole history to the connected
	// clients at every start. Start at the positions taken above instead;
	// deliverLoop drops whatever was read before the seek.
	for _, q := range live.Assigned() {
		b.mu.Lock()
		qs := b.queues[q]
		b.mu.Unlock()
		if qs == nil {
			continue
		}
		if err := live.Seek(q, qs.next); err != nil {
			live.Close()
			return fmt.Errorf("bridge: live consumer start: %w", err)
		}
	}
	b.mu.Lock()
	b.live = live
	b.mu.Unlock()
	b.wg.Add(1)
	go b.deliverLoop(live)
	b.lost.wg.Add(1)
	go b.recheckLoop(live)
	if b.srv != nil {
		b.wg.Add(1)
		go b.shareLoop(b.srv)
	}
	b.wg.Add(1)
	go b.checkpointLoop()
	b.wg.Add(1)
	go b.refreshLoop()
	b.ready.Store(true)
	// The wills of this node's earlier process without delay go before
	// its clients can connect again; the loop does the rest.
	b.fireOrphans(sctx, nil)
	b.wg.Add(1)
	go b.willLoop()
	b.log.Info("bridge backend started", "node", b.opts.NodeID, "topics", b.topics,
		"sessions", len(b.sessions), "retained", len(b.retained))
	return nil
}

// ensureTopic creates topic on every master when no registry knows it.
// While the registries or brokers do not answer it waits (until ctx
// ends), saying so in the log every waitLogEvery.
func (b *Backend) ensureTopic(ctx context.Context, topic string) error {
	created := false
	var last error
	start, logged := time.Now(), time.Time{}
	for {
		rd, err := b.adm.TopicRoute(ctx, topic)
		if err == nil && len(rd.QueueDatas) > 0 {
			if !logged.IsZero() {
				b.log.Info("registries answer; start-up goes on", "topic", topic, "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return nil
		}
		if err == nil {
			err = last
		}
		if now := time.Now(); err != nil && now.Sub(start) >= time.Second && now.Sub(logged) >= waitLogEvery {
			logged = now
			b.log.Warn("waiting for the registries and brokers", "registries", b.opts.Registries, "topic", topic,
				"waited", now.Sub(start).Round(time.Second).String(), "err", err)
		}
		if !created {
			// Retried: right after start the broker may not have
			// registered yet (standalone).
			last = b.adm.CreateTopic(ctx, "", admin.TopicConfig{Name: topic, ReadQueues: b.opts.TopicQueues,
				WriteQueues: b.opts.TopicQueues})
			created = last == nil
		}
		select {
		case <-ctx.Done():
			if last == nil {
				last = ctx.Err()
			}
			return fmt.Errorf("bridge: create topic %s: %w", topic, last)
		case <-time.After(50 * time.Millisecond):
		}
	}
}

// retryRoute runs fn, which needs topic's route, until it succeeds or
// ctx ends, with a backoff from 50 ms up to a second: right after a
// registry restarts, or before a broker registers again, a route is
// missing for a moment, and a start-up should wait for it (up to the
// start timeout) rather than give up. It returns fn's last error.
func (b *Backend) retryRoute(ctx context.Context, topic string, fn func() error) error {
	wait := 50 * time.Millisecond
	start, logged := time.Now(), time.Time{}
	for {
		err := fn()
		if err == nil {
			if !logged.IsZero() {
				b.log.Info("route back; start-up goes on", "topic", topic, "waited", time.Since(start).Round(time.Millisecond).String())
			}
			return nil
		}
		if now := time.Now(); now.Sub(start) >= time.Second && now.Sub(logged) >= waitLogEvery {
			logged = now
			b.log.Warn("waiting for the route", "topic", topic, "waited", now.Sub(start).Round(time.Second).String(), "err", err)
		}
		select {
		case <-ctx.Done():
			return err
		case <-time.After(wait):
		}
		wait = min(2*wait, time.Second)
	}
}

// newConsumer starts a pull consumer assigned every queue of topics. Its
// pulls are held by the broker for the client's default (15 s): a held
// pull is answered as soon as a message arrives, so the hold bounds only
// how often an idle queue is asked again. With 2 s, the sys and live
// consumers' 32 queues (4 topics of 8) cost about 16 pulls a second of
// an idle node, request and answer over the remoting connection, about a
// quarter of an idle standalone's CPU.
func (b *Backend) newConsumer(ctx context.Context, group string, from client.ConsumeFrom, topics []string) (*client.PullConsumer, error) {
	co := client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{
		ClientOptions: client.ClientOptions{Registries: b.opts.Registries, Logger: b.log.With("component", "bridge-consumer")},
		Group:         group, From: from}}
	if group == groupLive {
		co.OnBrokerConnClose = b.lost.note
	}
	c, err := client.NewPullConsumer(co)
	if err != nil {
		return nil, fmt.Errorf("bridge: consumer: %w", err)
	}
	var qs []client.MessageQueue
	for _, t := range topics {
		var q []client.MessageQueue
		err := b.retryRoute(ctx, t, func() (err error) {
			q, err = c.Queues(ctx, t)
			return err
		})
		if err != nil {
			c.Close()
			return nil, fmt.Errorf("bridge: queues of %s: %w", t, err)
		}
		qs = append(qs, q...)
	}
	if err := c.Assign(qs); err != nil {
		c.Close()
		return nil, fmt.Errorf("bridge: assign: %w", err)
	}
	if err := c.Start(ctx); err != nil {
		c.Close()
		return nil, fmt.Errorf("bridge: start consumer %s: %w", group, err)
	}
	return c, nil
}

// deliverLoop hands every consumed device-facing message to the server.
func (b *Backend) deliverLoop(c *client.PullConsumer) {
	defer b.wg.Done()
	// seeked are the queues of the batch sought back to reused offsets
	// below the batch's: the rest of it comes again.
	seeked := map[client.MessageQueue]bool{}
	for {
		msgs, err := c.Poll(b.ctx)
		if err != nil {
			if b.ctx.Err() != nil || errors.Is(err, client.ErrClosed) {
				return
			}
			b.log.Warn("bridge: poll", "err", err)
			continue
		}
		b.mu.Lock()
		d, srv := b.d, b.srv
		b.mu.Unlock()
		b.gate.RLock()
		clear(seeked)
		for _, x := range msgs {
			if seeked[x.Queue] {
				continue // read again from where the queue was sought
			}
			m, dropped := fromBrokerNoting(x)
			if dropped != "" {
				b.log.Warn("bridge: message properties MQTT cannot carry left out", "properties", dropped,
					"topic", m.Topic, "queue", x.Queue, "offset", x.QueueOffset)
			}
			id := storedIDOf(x)
			b.mu.Lock()
			qs := b.queues[x.Queue]
			old := qs != nil && x.QueueOffset < qs.next
			if old {
				var oldest storedID
				if len(qs.ring) > 0 {
					oldest = qs.ring[0].id
				}
				if i, ok := qs.rewindLocked(x.QueueOffset, id); ok {
					old = false
					from := x.QueueOffset
					if i == 0 {
						// Even the oldest delivery remembered was given
						// again: the reused offsets may start below it.
						b.mu.Unlock()
						from = b.seekStoredAfter(c, x.Queue, oldest, x.QueueOffset)
						b.mu.Lock()
						if from < x.QueueOffset {
							qs.next = from
							seeked[x.Queue] = true
						}
					}
					b.rewindOverflowsLocked(x.Queue, from)
					b.log.Warn("bridge: queue offsets given again (the broker lost its log's tail): delivering from there",
						"queue", x.Queue, "offset", from)
					if seeked[x.Queue] {
						b.mu.Unlock()
						continue
					}
				}
			}
			if !old {
				b.delivering, b.deliveringPos = m, ringPos{x.Queue, x.QueueOffset}
			}
			b.mu.Unlock()
			if old {
				continue // before this node's start, or delivered already
			}
			if packets.ValidTopicName(m.Topic) {
				b.curQ, b.curOff = x.Queue, x.QueueOffset
				b.deliverLive(d, srv, m)
				if b.testAfterDeliver != nil {
					b.testAfterDeliver(m)
				}
			} else {
				b.log.Warn("bridge: message with an invalid MQTT topic not delivered", "topic", m.Topic,
					"queue", x.Queue, "offset", x.QueueOffset)
			}
			now := time.Now()
			b.mu.Lock()
			qs = b.queues[x.Queue]
			if qs == nil {
				qs = &queueState{}
				b.queues[x.Queue] = qs
			}
			qs.next = max(qs.next, x.QueueOffset+1)
			if len(qs.ring) == 2*ringSize {
				// Drop the older half at once (amortized O(1) per delivery).
				n := copy(qs.ring, qs.ring[ringSize:])
				clear(qs.ring[n:])
				qs.ring = qs.ring[:n]
				qs.trimmed = true
			}
			qs.ring = append(qs.ring, delivery{offset: x.QueueOffset, end: now, msg: m, id: id})
			b.delivering = nil
			b.mu.Unlock()
		}
		b.gate.RUnlock()
	}
}

// Publish implements mqtt.Backend: the message is stored in its routed
// broker topic, on the queue picked by the publisher's client id (so one
// client's messages keep their order), and returns once the broker
// acknowledged the store. A retained message also writes a record to the
// retained topic.
func (b *Backend) Publish(ctx context.Context, m *mqtt.Message) error {
	if b.isClosed() {
		return ErrClosed
	}
	if b.testPublishHook != nil {
		if err := b.testPublishHook(m); err != nil {
			return err
		}
	}
	cm, err := b.ingressMessage(m, b.RouteOf(m.Topic))
	if err != nil {
		return err
	}
	key := m.ClientID
	if key == "" {
		key = m.Topic
	}
	start := time.Now()
	_, err = b.prod.SendOrderly(ctx, cm, key, client.HashSelector)
	b.metrics.observe(start, 1, err)
	if err != nil {
		return storeFailed(m.Topic, err)
	}
	if m.Retain {
		rm, _ := toBroker(m, b.opts.RetainedTopic)
		res, err := b.prod.SendOrderly(ctx, rm, m.Topic, client.HashSelector)
		if err != nil {
			return storeFailed("retained "+m.Topic, err)
		}
		b.applyRetained(m, res.Queue, res.QueueOffset, res.QueueOffset, time.Now().UnixMilli())
	}
	return nil
}

// PublishTo stores m in the broker topic topic with the bridge's message
// properties (doc.go), on the queue picked by key (messages of one key
// keep their order; "" uses m's client id, else its MQTT topic), and
// returns once the broker acknowledged the store. Components that send to
// devices use it with EgressTopic: every node then delivers m to the
// matching sessions, and offline persistent sessions get it when they
// resume. It bypasses routes and IngressProps.
func (b *Backend) PublishTo(ctx context.Context, topic, key string, m *mqtt.Message) error {
	if b.isClosed() {
		return ErrClosed
	}
	cm, err := toBroker(m, topic)
	if err != nil {
		return err
	}
	if key == "" {
		key = orderKey(m)
	}
	if _, err := b.prod.SendOrderly(ctx, cm, key, client.HashSelector); err != nil {
		return storeFailed(m.Topic+" in "+topic, err)
	}
	return nil
}

// EnsureTopic creates topic on every master unless the registries know
// it (with the bridge's queue count), waiting for them until ctx ends:
// for components that keep their own topics beside the bridge's.
func (b *Backend) EnsureTopic(ctx context.Context, topic string) error {
	return b.ensureTopic(ctx, topic)
}

// NewTailConsumer starts a pull consumer of group assigned every queue of
// topics from their end, never committing: each node that runs one sees
// every message stored after it started (the bridge's live delivery uses
// the same). The caller polls and closes it.
func (b *Backend) NewTailConsumer(ctx context.Context, group string, topics ...string) (*client.PullConsumer, error) {
	return b.newConsumer(ctx, group, client.ConsumeFromLast, topics)
}

// EgressTopic returns the broker topic back ends send device messages to.
func (b *Backend) EgressTopic() string { return b.opts.EgressTopic }

// ingressMessage converts a client's message for the broker topic topic,
// with the properties of Options.IngressProps.
func (b *Backend) ingressMessage(m *mqtt.Message, topic string) (*client.Message, error) {
	cm, err := toBroker(m, topic)
	if err != nil || b.opts.IngressProps == nil || m.ClientID == "" {
		return cm, err
	}
	extra, err := b.opts.IngressProps(m)
	if err != nil {
		return nil, err
	}
	for k, v := range extra {
		if _, own := cm.Properties[k]; own || k == "" || v == "" || !encodable(k) || !encodable(v) {
			return nil, fmt.Errorf("%w: property %q=%q", ErrUnencodable, k, v)
		}
		cm.Properties[k] = v
	}
	return cm, nil
}

func (b *Backend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// goOwned runs fn on a goroutine Close waits for; false (fn not run) once
// the backend is closed.
func (b *Backend) goOwned(fn func()) bool {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return false
	}
	b.wg.Add(1)
	b.mu.Unlock()
	go func() {
		defer b.wg.Done()
		fn()
	}()
	return true
}

// Close implements mqtt.Backend. It is idempotent.
func (b *Backend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	live, sys := b.live, b.sys
	b.mu.Unlock()
	b.cancel()
	b.lost.wg.Wait() // it seeks live: done before live closes
	var errs []error
	for _, c := range []*client.PullConsumer{live, sys} {
		if c != nil {
			errs = append(errs, c.Close())
		}
	}
	b.wg.Wait()
	b.replays.close()
	errs = append(errs, b.prod.Close(), b.adm.Close())
	return errors.Join(errs...)
}
