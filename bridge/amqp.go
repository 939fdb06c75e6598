package bridge

import (
	"context"
	"crypto/sha256"
	"encoding/binary"
	"errors"
	"fmt"
	"log/slog"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/client/admin"
)

// AMQPOptions configure an AMQPBackend.
type AMQPOptions struct {
	// Registries are the registry addresses (required).
	Registries []string
	// RequestTimeout bounds each broker request (a send, a read, an
	// offset) and the wait for a new topic's route (five times it).
	// Default 3 s.
	RequestTimeout time.Duration
	Logger         *slog.Logger
}

// DefaultAMQPRequestTimeout is AMQPOptions.RequestTimeout's default.
const DefaultAMQPRequestTimeout = 3 * time.Second

// AMQPBackend implements amqp.Backend on SmartGo brokers: the durable
// definitions are snapshots in AMQPDefinitionsTopic, each durable queue's
// messages a topic of its own (AMQPQueueTopic) with one queue, and its
// committed offset AMQPOffsetGroup's offset there (see doc.go, "AMQP").
type AMQPBackend struct {
	opts AMQPOptions
	log  *slog.Logger
	prod *client.Producer
	adm  *admin.Admin

	ctx    context.Context // ends at Close: cuts sends in flight
	cancel context.CancelFunc
	wg     sync.WaitGroup // the refresh loop

	// refreshEvery: a definitions snapshot older than this is appended
	// again (amqpDefsRefresh; tests shorten it).
	refreshEvery time.Duration

	defsMu sync.Mutex // serialises SaveDefinitions
	defs   *amqpLog   // protected by defsMu; nil until the first save
	// defsSeen is set once a snapshot was loaded or saved: until then
	// the refresh loop asks the brokers nothing (AMQP unused).
	defsSeen atomic.Bool

	mu     sync.Mutex
	closed bool                // protected by mu
	logs   map[*amqpLog]string // protected by mu; open queue logs

	// The resource alarm (amqp_alarm.go).
	alarmMu   sync.Mutex
	alarmSet  func(reason string)    // protected by alarmMu; the watcher
	disks     map[string]*brokerDisk // protected by alarmMu; what is known of the disks of the brokers the logs are on
	alarmOn   bool                   // protected by alarmMu; the alarm is raised
	alarmKick chan struct{}          // wakes alarmLoop (capacity 1)
}

var _ amqp.Backend = (*AMQPBackend)(nil)

// NewAMQPBackend returns a backend on the brokers the registries know.
// It connects lazily: a broker that is down makes the calls fail, not
// NewAMQPBackend.
func NewAMQPBackend(opts AMQPOptions) (*AMQPBackend, error) {
	return newAMQPBackendEvery(opts, amqpDefsRefresh)
}

func newAMQPBackendEvery(opts AMQPOptions, refreshEvery time.Duration) (*AMQPBackend, error) {
	if len(opts.Registries) == 0 {
		return nil, fmt.Errorf("%w: AMQP backend: no registry address", ErrInvalidOptions)
	}
	if opts.RequestTimeout < 0 {
		return nil, fmt.Errorf("%w: AMQP backend: negative request timeout", ErrInvalidOptions)
	}
	if opts.RequestTimeout == 0 {
		opts.RequestTimeout = DefaultAMQPRequestTimeout
	}
	if opts.Logger == nil {
		opts.Logger = slog.Default()
	}
	po := client.DefaultProducerOptions(opts.Registries...)
	po.Group = "AMQP_PRODUCER"
	po.SendTimeout = opts.RequestTimeout
	po.RequestTimeout = opts.RequestTimeout
	po.Logger = opts.Logger
	po.MaxMessageSize = amqpMaxRecord // the broker's limit decides
	prod, err := client.NewProducer(po)
	if err != nil {
		return nil, fmt.Errorf("bridge: AMQP backend: %w", err)
	}
	adm, err := admin.New(admin.Options{Registries: opts.Registries, RequestTimeout: opts.RequestTimeout, Logger: opts.Logger})
	if err != nil {
		prod.Close()
		return nil, fmt.Errorf("bridge: AMQP backend: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	b := &AMQPBackend{opts: opts, log: opts.Logger, prod: prod, adm: adm, ctx: ctx, cancel: cancel,
		logs: map[*amqpLog]string{}, refreshEvery: refreshEvery, alarmKick: make(chan struct{}, 1)}
	b.wg.Add(2)
	go b.refreshLoop()
	go b.alarmLoop()
	return b, nil
}

// amqpDefsRefresh: a definitions snapshot older than this is appended
// again, so that the brokers' retention (store.file_reserved_time, 72 h
// by default) never removes the newest one while no definition changes.
const amqpDefsRefresh = 6 * time.Hour

// refreshLoop appends the newest definitions snapshot again once it is
// older than refreshEvery. It copies the snapshot the topic holds (not
// one this node remembers), so it never brings back older definitions.
func (b *AMQPBackend) refreshLoop() {
	defer b.wg.Done()
	every := b.refreshEvery
	for {
		select {
		case <-b.ctx.Done():
			return
		case <-time.After(min(every, time.Minute)):
		}
		if err := b.refresh(every); err != nil && b.ctx.Err() == nil {
			b.log.Warn("AMQP backend could not refresh the definitions snapshot; tries again", "err", err)
		}
	}
}

func (b *AMQPBackend) refresh(every time.Duration) error {
	if !b.defsSeen.Load() {
		return nil
	}
	b.defsMu.Lock()
	defer b.defsMu.Unlock()
	ctx, cancel := context.WithTimeout(b.ctx, 5*b.opts.RequestTimeout)
	defer cancel()
	newest, err := b.newestSnapshot(ctx)
	if err != nil || newest == nil || time.Since(time.UnixMilli(newest.StoreTimestamp)) < every {
		return err
	}
	return b.appendSnapshotLocked(ctx, newest.Body) // it decodes: newestSnapshot checked
}

// amqpMaxRecord is the largest record the producer lets through (the
// broker's store.max_message_size bounds it further).
const amqpMaxRecord = 128 << 20

// Close closes the open queue logs (waiting for their appends) and the
// connections. It is idempotent.
func (b *AMQPBackend) Close() error {
	b.mu.Lock()
	if b.closed {
		b.mu.Unlock()
		return nil
	}
	b.closed = true
	logs := make([]*amqpLog, 0, len(b.logs))
	for l := range b.logs {
		logs = append(logs, l)
	}
	b.mu.Unlock()
	for _, l := range logs {
		l.Close()
	}
	b.cancel() // ends the refresh and alarm loops (and cuts their requests)
	b.wg.Wait()
	b.defsMu.Lock()
	if b.defs != nil {
		b.defs.Close()
	}
	b.defsMu.Unlock()
	return errors.Join(b.prod.Close(), b.adm.Close())
}

func (b *AMQPBackend) isClosed() bool {
	b.mu.Lock()
	defer b.mu.Unlock()
	return b.closed
}

// LoadDefinitions reads the newest snapshot of AMQPDefinitionsTopic;
// empty definitions when the topic does not exist or holds none.
func (b *AMQPBackend) LoadDefinitions(ctx context.Context) (amqp.Definitions, error) {
	if b.isClosed() {
		return amqp.Definitions{}, ErrClosed
	}
	newest, err := b.newestSnapshot(ctx)
	if err != nil {
		return amqp.Definitions{}, fmt.Errorf("bridge: load AMQP definitions: %w", err)
	}
	if newest == nil {
		return amqp.Definitions{}, nil
	}
	b.defsSeen.Store(true)
	return newest.defs, nil
}

// amqpSnapshot is a definitions snapshot read back and decoded.
type amqpSnapshot struct {
	*client.MessageExt
	defs amqp.Definitions
}

// amqpSnapshotTries bounds how many snapshots, newest first, a load
// tries before it gives up.
const amqpSnapshotTries = 100

// newestSnapshot reads the newest snapshot of AMQPDefinitionsTopic that
// the broker serves and that decodes; nil when the topic does not exist
// or holds none. A newer one that is damaged (the broker does not serve a
// record that fails verification) or does not decode is passed over,
// logged at ERROR: the definitions then lack the changes it held, but
// the queues and messages of the older snapshot are served. When none of
// the newest amqpSnapshotTries can be read it fails.
func (b *AMQPBackend) newestSnapshot(ctx context.Context) (*amqpSnapshot, error) {
	broker, err := b.findTopic(ctx, AMQPDefinitionsTopic)
	if errors.Is(err, errAMQPNoTopic) {
		return nil, nil
	}
	if err != nil {
		return nil, err
	}
	if err := b.waitIndexed(ctx, AMQPDefinitionsTopic, broker); err != nil {
		return nil, err
	}
	cctx, cancel := context.WithTimeout(ctx, b.opts.RequestTimeout)
	_, _, minOff, maxOff, err := b.adm.BrowseMessages(cctx, AMQPDefinitionsTopic, broker, 0, 0, 1)
	cancel()
	if err != nil {
		return nil, err
	}
	if maxOff <= minOff {
		return nil, nil
	}
	for off := maxOff - 1; off >= max(minOff, maxOff-amqpSnapshotTries); off-- {
		cctx, cancel := context.WithTimeout(ctx, b.opts.RequestTimeout)
		msgs, _, _, _, err := b.adm.BrowseMessages(cctx, AMQPDefinitionsTopic, broker, 0, off, 1)
		cancel()
		if err != nil {
			return nil, err
		}
		var why error
		switch {
		case len(msgs) == 0 || msgs[0].QueueOffset != off:
			why = errors.New("the broker does not serve it (damaged)")
		default:
			d, err := decodeAMQPDefinitions(msgs[0].Body)
			if err == nil {
				return &amqpSnapshot{MessageExt: msgs[0], defs: d}, nil
			}
			why = err
		}
		b.log.Error("AMQP definitions snapshot cannot be read; the one before it is used, without the changes it held",
			"topic", AMQPDefinitionsTopic, "broker", broker, "offset", off, "err", why)
	}
	return nil, fmt.Errorf("none of the newest %d definitions snapshots of %s/%s (offsets %d..%d) can be read",
		amqpSnapshotTries, AMQPDefinitionsTopic, broker, max(minOff, maxOff-amqpSnapshotTries), maxOff-1)
}

// waitIndexed waits (up to the request timeout) until the broker that
// serves topic's log on broker has indexed every message it had stored,
// so that a read finds them all. A broker restarted after a crash on a
// full disk indexes its last records only once space frees: a queue
// loaded before then would lack messages confirmed before the crash
// (nobody would get them until a new message was stored past them), and
// the definitions would be an older snapshot. The error then matches
// admin.ErrNotIndexed: the AMQP server's start fails and is tried again.
func (b *AMQPBackend) waitIndexed(ctx context.Context, topic, broker string) error {
	cctx, cancel := context.WithTimeout(ctx, b.opts.RequestTimeout)
	defer cancel()
	if err := b.adm.WaitIndexed(cctx, topic, broker); err != nil {
		return fmt.Errorf("messages of %s stored but not indexed by broker %s: %w", topic, broker, err)
	}
	return nil
}

// SaveDefinitions appends a snapshot of d to AMQPDefinitionsTopic and
// returns once the broker stored it. Saves run one at a time.
func (b *AMQPBackend) SaveDefinitions(ctx context.Context, d amqp.Definitions) error {
	b.defsMu.Lock()
	defer b.defsMu.Unlock()
	if b.isClosed() {
		return ErrClosed
	}
	if err := b.appendSnapshotLocked(ctx, encodeAMQPDefinitions(d)); err != nil {
		return fmt.Errorf("bridge: save AMQP definitions: %w", err)
	}
	b.defsSeen.Store(true)
	return nil
}

// appendSnapshotLocked appends snap to AMQPDefinitionsTopic and waits
// until the broker stored it. defsMu held.
func (b *AMQPBackend) appendSnapshotLocked(ctx context.Context, snap []byte) error {
	if b.defs == nil {
		l, err := b.openLog(ctx, AMQPDefinitionsTopic)
		if err != nil {
			return err
		}
		b.defs = l
	}
	res := make(chan error, 1)
	b.defs.appendRecords([][]byte{snap}, func(_ uint64, err error) { res <- err })
	select {
	case err := <-res:
		return err
	case <-ctx.Done():
		// The append ends by itself within the request timeout; its
		// result is dropped.
		return ctx.Err()
	}
}

// OpenQueue opens the log of a durable queue, creating its topic (one
// queue, on one master: see topicBroker) when the registries know none.
func (b *AMQPBackend) OpenQueue(ctx context.Context, vhost, name string) (amqp.QueueLog, error) {
	if b.isClosed() {
		return nil, ErrClosed
	}
	l, err := b.openLog(ctx, AMQPQueueTopic(vhost, name))
	if err != nil {
		return nil, fmt.Errorf("bridge: open AMQP queue %q in vhost %q: %w", name, vhost, err)
	}
	l.what = fmt.Sprintf("queue %q in vhost %q", name, vhost)
	b.mu.Lock()
	defer b.mu.Unlock()
	if b.closed {
		return nil, ErrClosed
	}
	b.logs[l] = l.topic
	return l, nil
}

// DeleteQueue deletes the queue's topic (with its committed offsets) from
// every master and the registries; a queue that has none is deleted
// already.
func (b *AMQPBackend) DeleteQueue(ctx context.Context, vhost, name string) error {
	if b.isClosed() {
		return ErrClosed
	}
	topic := AMQPQueueTopic(vhost, name)
	err := b.adm.DeleteTopic(ctx, "", topic)
	if err != nil && !errors.Is(err, client.ErrTopicNotExist) {
		return fmt.Errorf("bridge: delete AMQP queue %q in vhost %q (topic %s): %w", name, vhost, topic, err)
	}
	return nil
}

// forget drops a closed log from the open ones.
func (b *AMQPBackend) forget(l *amqpLog) {
	b.mu.Lock()
	delete(b.logs, l)
	b.mu.Unlock()
}

// openLog returns a log on topic's queue 0, creating the topic first when
// no registry routes it.
func (b *AMQPBackend) openLog(ctx context.Context, topic string) (*amqpLog, error) {
	broker, err := b.findTopic(ctx, topic)
	if errors.Is(err, errAMQPNoTopic) {
		broker, err = b.createTopic(ctx, topic)
	}
	if err != nil {
		return nil, err
	}
	l := &amqpLog{b: b, topic: topic, mq: client.MessageQueue{Topic: topic, BrokerName: broker, QueueID: 0}, committed: -1}
	l.what = "topic " + topic
	return l, nil
}

// errAMQPNoTopic: no registry routes the topic and every master that
// answered says it has none.
var errAMQPNoTopic = errors.New("no such topic")

// findTopic is topicBroker, with a topic the registries do not route
// looked up on the masters: one that no master has is errAMQPNoTopic;
// one that a master has but the registries do not route yet (a broker
// registering again after a restart) is waited for like a new topic's
// route. With no master registered (the brokers down or not started yet)
// it is an error, never errAMQPNoTopic: what a broker that is down holds
// must not be taken for nothing.
func (b *AMQPBackend) findTopic(ctx context.Context, topic string) (string, error) {
	broker, err := b.topicBroker(ctx, topic)
	if !errors.Is(err, client.ErrTopicNotExist) {
		return broker, err
	}
	cctx, cancel := context.WithTimeout(ctx, b.opts.RequestTimeout)
	exists, err := b.adm.TopicExists(cctx, "", topic)
	cancel()
	switch {
	case err != nil:
		return "", fmt.Errorf("look up topic %s: %w", topic, err)
	case !exists:
		return "", errAMQPNoTopic
	}
	return b.waitRoute(ctx, topic)
}

// waitRoute waits (up to five request timeouts) until the registries
// route topic and returns its log's broker group.
func (b *AMQPBackend) waitRoute(ctx context.Context, topic string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*b.opts.RequestTimeout)
	defer cancel()
	for {
		broker, err := b.topicBroker(cctx, topic)
		if err == nil {
			return broker, nil
		}
		if !errors.Is(err, client.ErrTopicNotExist) && cctx.Err() != nil {
			return "", fmt.Errorf("wait for the route of topic %s: %w", topic, err)
		}
		select {
		case <-cctx.Done():
			return "", fmt.Errorf("wait for the route of topic %s: %w", topic, errors.Join(err, cctx.Err()))
		case <-time.After(20 * time.Millisecond):
		}
	}
}

// topicBroker returns the broker group whose queue 0 holds topic's log:
// of those the route gives queues, the first by name (a log topic is
// created on one group; should an operator create it on several, every
// node still picks the same one). client.ErrTopicNotExist when no
// registry routes it.
func (b *AMQPBackend) topicBroker(ctx context.Context, topic string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, b.opts.RequestTimeout)
	defer cancel()
	rd, err := b.adm.TopicRoute(cctx, topic)
	if err != nil {
		return "", err
	}
	var names []string
	for _, qd := range rd.QueueDatas {
		if qd != nil && qd.ReadQueueNums > 0 && qd.WriteQueueNums > 0 {
			names = append(names, qd.BrokerName)
		}
	}
	if len(names) == 0 {
		return "", fmt.Errorf("%w: %s (routed with no readable and writable queue)", client.ErrTopicNotExist, topic)
	}
	return slices.Min(names), nil
}

// createTopic creates topic with one queue on one master, picked by a
// hash of the topic name among the masters sorted by name, and waits (up
// to five request timeouts) until the registries route it.
func (b *AMQPBackend) createTopic(ctx context.Context, topic string) (string, error) {
	cctx, cancel := context.WithTimeout(ctx, 5*b.opts.RequestTimeout)
	defer cancel()
	masters, err := b.adm.Masters(cctx, "")
	if err != nil {
		return "", fmt.Errorf("create topic %s: %w", topic, err)
	}
	sum := sha256.Sum256([]byte(topic))
	m := masters[binary.BigEndian.Uint64(sum[:8])%uint64(len(masters))]
	if err := b.adm.CreateTopicOn(cctx, []admin.Broker{m}, admin.TopicConfig{Name: topic, ReadQueues: 1, WriteQueues: 1}); err != nil {
		return "", fmt.Errorf("create topic %s on broker %s: %w", topic, m.Name, err)
	}
	b.log.Info("AMQP backend created a topic", "topic", topic, "broker", m.Name)
	return b.waitRoute(ctx, topic)
}
