// Package broker is SmartGo's message broker: it serves RocketMQ 4.x
// producers, consumers and admin tools over remoting, keeps topics,
// subscription groups and consumer offsets, holds pulls until messages
// arrive, re-delivers failed messages through retry topics and delay
// levels, keeps statistics, and registers with the registries.
package broker

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math/rand/v2"
	"net"
	"net/netip"
	"path/filepath"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/internal/beat"
	"github.com/smartgo/smartgo/internal/ratelog"
	"github.com/smartgo/smartgo/internal/wake"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/ha"
)

// Broker is one running broker. Start it with New; stop it with Close.
type Broker struct {
	opts Options
	log  *slog.Logger
	// plog is for lines a client can cause (joins, leaves, send-backs,
	// topics and groups it creates): each reason at most once per
	// ratelog.DefaultInterval, with the count of lines suppressed.
	plog *slog.Logger
	now  func() time.Time

	addr      string         // advertised ip:port of the remoting server
	storeHost netip.AddrPort // written into every record

	store        *store.Store
	srv          *remoting.Server
	client       *remoting.Client // to registries (and, for slaves, the master)
	topics       *TopicManager
	groups       *GroupManager
	offsets      *OffsetManager
	delayOffsets *DelayOffsets
	consumers    *ConsumerManager
	producers    *ProducerManager
	locks        *LockManager
	shareStarts  shareStarts // START_SHARE_GROUP (sharestart.go)
	stats        *Stats
	rt           *runtimeStats // broker-wide counters of GET_BROKER_RUNTIME_INFO
	hold         *HoldService
	schedule     *scheduleService
	selectors    selectorCache   // compiled SQL92 subscriptions
	tx           *txService      // transactional messages
	fwd          *replyForwarder // replies handed to the broker of their requester
	metrics      *metrics

	perm       atomic.Int32           // broker permission (read/write bits)
	slaveRead  atomic.Bool            // Options.SlaveReadEnable, changeable by UPDATE_BROKER_CONFIG
	cfgVersion dataVersion            // bumped by UPDATE_BROKER_CONFIG
	queueRR    atomic.Uint32          // round-robin for sends with queueId < 0
	registered sync.Map               // registry address -> bool: its last registration succeeded
	regNow     chan struct{}          // capacity 1: register now (the store's write state changed)
	regClosed  chan struct{}          // capacity 1: a registry connection closed (register.go)
	masterAddr atomic.Pointer[string] // a slave's master, as registries report it
	// arrivalWakes: topic -> *wake.Notifier of a log-hosted engine (state
	// store, twins) that a slave applies as entries are dispatched.
	arrivalWakes sync.Map
	// Sends not answered yet (sendasync.go), at most sendLimit.
	sendsInFlight atomic.Int64
	sendLimit     int64
	// maxBatchBody is the store's MaxMessageSize: the largest encoded
	// SEND_BATCH body accepted (send.go putBatch).
	maxBatchBody int
	// Offset change notices to slaves (metasync.go).
	offsetKick     chan struct{}  // cap 1: consumer or delay offsets changed
	offsetSyncKick chan struct{}  // cap 1: a slave copies its master's offsets now
	offsetRun      uint64         // names this process's offset changes in notices (offsetdelta.go)
	offApplyMu     sync.Mutex     // serialises a slave's offset deltas and full copies
	offApplied     offsetsApplied // protected by offApplyMu

	// Replication (broker/ha.go): haSrv on a master, haCli on a slave
	// (both change with the role in controller mode).
	haSrv     atomic.Pointer[ha.Server]
	haCli     atomic.Pointer[ha.Client]
	ctlCancel context.CancelFunc // stops the controller-mode loops (ctlWG)
	ctlWG     sync.WaitGroup
	// regTurns (capacity 1 each, by registry address) serialise the
	// registrations with each registry: the one that holds a registry's
	// turn takes its topic table snapshot and waits for that registry's
	// answer, so no registry gets an older table after a newer one, and a
	// registry that hangs holds up no other's.
	regTurns map[string]chan struct{}

	// Controller mode (broker/controller.go, broker/role.go, broker/isr.go); ctl is nil
	// otherwise.
	ctl    *ctrlState
	acting atomic.Bool // acts as master
	// masterFrom is the commitlog offset at which this broker last became
	// master: its log end at its start outside controller mode, at its
	// promotion in it. A pull past a queue's end goes back to the first
	// record stored since (pull.go). A log offset, not a time: the
	// records before it may carry the old master's clock.
	masterFrom   atomic.Int64
	leaseUntil   atomic.Int64 // mono() until which the master lease holds
	leaseHeld    atomic.Bool  // acting master with a valid lease, as ctrlLoop last saw it
	monoBase     time.Time
	roleCh       chan protocol.ControllerGroup // views for roleLoop (latest wins)
	hbKick       chan struct{}
	metaKick     chan struct{}   // cap 1: the topic or group table changed (metasync.go)
	syncKick     chan struct{}   // cap 1: a slave copies its master's metadata now
	haLn         net.Listener    // HA listener opened at start, used by the first promotion; owned by roleLoop
	haListen     string          // its bound address, listened on again at later promotions
	pendingSet   []int64         // a sync state set change asked of the controller; protected by ctl.mu
	candidates   map[int64]int64 // slaves about to join the set -> log end when they became candidates; protected by ctl.mu
	roleMu       sync.Mutex
	roleLs       []roleListener         // services following the role; protected by roleMu
	haAdvertised string                 // master's published HA address
	imported     importedTopics         // topics configured from the log (republish.go)
	masterHAAddr atomic.Pointer[string] // a slave's master HA address, as registries report it

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
	closeErr  error
	// startCtx ends the start-up waits (NewContext's ctx).
	startCtx context.Context
}

// New opens the broker's store and metadata, starts serving on
// opts.ListenAddr and starts its background services. It is NewContext
// with a context that never ends.
func New(opts Options) (*Broker, error) {
	return NewContext(context.Background(), opts)
}

// NewContext is New whose start-up waits end when startCtx does (the
// process's stop signal). The store's recovery stops and NewContext
// returns its error (errors.Is startCtx's error; the next start recovers
// again). The later waits end: that of the transactions for the
// dispatcher here, and those of OpenStateStore and OpenTwins for the
// consume queues. The broker then starts without what they waited for,
// to be closed at once; startCtx bounds only the start, not the broker's
// life (Close ends that).
func NewContext(startCtx context.Context, opts Options) (*Broker, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill()
	var err error
	b := &Broker{opts: opts, log: opts.Logger.With("broker", opts.BrokerName), now: opts.Now, metrics: newMetrics(), startCtx: startCtx}
	b.sendLimit = int64(opts.Remoting.SendPool.QueueSize)
	if b.sendLimit <= 0 {
		b.sendLimit = int64(remoting.DefaultOptions().SendPool.QueueSize)
	}
	b.plog = ratelog.Wrap(b.log, 0)
	b.regNow = make(chan struct{}, 1)
	b.regClosed = make(chan struct{}, 1)
	b.regTurns = make(map[string]chan struct{}, len(opts.Registries))
	for _, addr := range opts.Registries {
		b.regTurns[addr] = make(chan struct{}, 1)
	}
	b.perm.Store(PermRW)
	b.slaveRead.Store(opts.SlaveReadEnable)

	// Take the port first (the store needs it for its store host), but
	// listen only after the store's recovery: until then a client that
	// connects is refused at once and goes to another broker.
	bound, err := bindTCP(opts.ListenAddr)
	if err != nil {
		return nil, fmt.Errorf("broker: listen %s: %w", opts.ListenAddr, err)
	}
	var ln net.Listener
	defer func() {
		if err != nil {
			bound.close()
			if ln != nil {
				_ = ln.Close()
			}
			_ = b.closeParts()
		}
	}()
	port := bound.Addr().Port
	ip := advertiseIP(opts.AdvertiseIP, bound.Addr().IP)
	b.addr = net.JoinHostPort(ip.String(), strconv.Itoa(port))
	b.storeHost = netip.AddrPortFrom(ip, uint16(port))

	configDir := filepath.Join(opts.Store.Root, "config")
	if b.topics, err = OpenTopics(TopicOptions{Dir: configDir, BrokerName: opts.BrokerName, ClusterName: opts.ClusterName,
		AutoCreateTopic: opts.AutoCreateTopic, DefaultQueueNums: opts.DefaultTopicQueues,
		DelayLevels: int32(len(opts.DelayLevels)), Now: opts.Now, Logger: b.plog}); err != nil {
		return nil, err
	}
	if b.groups, err = OpenGroups(GroupOptions{Dir: configDir, AutoCreate: opts.AutoCreateGroup,
		MaxAutoCreated: opts.MaxAutoCreatedGroups, Now: opts.Now, Logger: b.plog}); err != nil {
		return nil, err
	}
	if b.offsets, err = OpenOffsets(configDir); err != nil {
		return nil, err
	}
	if b.delayOffsets, err = OpenDelayOffsets(configDir); err != nil {
		return nil, err
	}
	for _, f := range []struct {
		name string
		on   bool
	}{{ConsumerOffsetFile, b.offsets.fromSpare}, {DelayOffsetFile, b.delayOffsets.fromSpare}} {
		if f.on {
			b.log.Warn("metadata read from its spare: the last save could not replace the file (a full disk); the file is written again at the next save",
				"file", filepath.Join(configDir, f.name+spareSuffix))
		}
	}
	b.metaKick, b.syncKick = make(chan struct{}, 1), make(chan struct{}, 1)
	b.topics.version.onBump, b.groups.version.onBump = b.metaChanged, b.metaChanged
	b.offsetKick, b.offsetSyncKick = make(chan struct{}, 1), make(chan struct{}, 1)
	b.offsets.onChange, b.delayOffsets.onChange = b.offsetsChanged, b.offsetsChanged
	b.offsetRun = rand.Uint64()
	b.consumers = NewConsumerManager()
	b.producers = NewProducerManager()
	b.locks = NewLockManager(0)
	b.stats = NewStats(opts.Now)
	b.hold = NewHoldService(2, opts.Now)

	so := opts.Store
	so.StoreHost = b.storeHost
	if so.Logger == nil {
		so.Logger = b.log
	}
	if so.Now == nil {
		so.Now = opts.Now
	}
	so.TagsCode = b.scheduleTagsCode
	so.Consumed = b.consumed
	if len(opts.Retained) > 0 {
		so.Retain = b.retain
	}
	so.Listener = b.onStoreEvent(so.Listener)
	so.PutTally = &sendTally{b: b} // b.rt is set before the first put
	// A signal (startCtx) stops the store's recovery.
	if b.store, err = store.OpenContext(startCtx, so); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b.maxBatchBody = b.store.Options().MaxMessageSize
	if ln, err = bound.listen(); err != nil { // recovery is done: accept clients
		return nil, fmt.Errorf("broker: listen %s: %w", opts.ListenAddr, err)
	}
	b.schedule = newScheduleService(b)
	b.tx = newTxService(b)
	b.rt = newRuntimeStats(opts.Now, func() int64 { return b.store.Stats().PutMessages })
	b.masterFrom.Store(b.store.MaxPhysicalOffset())

	ro := opts.Remoting
	ro.Addr = opts.ListenAddr
	if ro.Logger == nil {
		ro.Logger = b.log
	}
	if b.srv, err = remoting.NewServer(ro); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	if b.client, err = remoting.NewClient(remoting.ClientOptions{Logger: b.log}); err != nil {
		return nil, fmt.Errorf("broker: %w", err)
	}
	b.fwd = newReplyForwarder(b)
	b.registerProcessors()
	b.srv.OnConnClose(b.connClosed)

	ctx, cancel := context.WithCancel(context.Background())
	b.cancel = cancel
	b.goFunc(func() { b.hold.Run(ctx) })
	b.goFunc(func() { b.stats.Run(ctx) })
	b.goFunc(func() { b.rt.run(ctx) })
	b.goFunc(func() { b.housekeeping(ctx) })
	if opts.Role != RoleSlave {
		b.goFunc(func() { b.schedule.run(ctx) }) // a slave's log is the master's copy
		b.goFunc(func() { b.tx.run(ctx) })
	}
	if b.controlled() {
		b.addRoleListener(b.tx)
	} else if opts.Role != RoleSlave {
		b.tx.prepare(startCtx)
	}
	if b.controlled() {
		b.monoBase = time.Now()
		b.roleCh, b.hbKick = make(chan protocol.ControllerGroup, 1), make(chan struct{}, 1)
		cctx, ccancel := context.WithCancel(ctx)
		b.ctlCancel = ccancel
		err = b.startController(cctx)
	} else {
		err = b.startHA(ctx)
	}
	if err != nil {
		cancel()
		b.stopController()
		b.wg.Wait()
		return nil, err
	}
	b.store.OnArrival(b.onArrival) // after startHA: it reads b.haSrv
	b.goFunc(func() { b.notifySlavesLoop(ctx) })
	b.goFunc(func() { b.notifyOffsetsLoop(ctx) })
	b.goFunc(func() { b.trackReplication(ctx) })
	if len(opts.Registries) > 0 {
		b.client.OnConnClose(b.registryConnClosed)
		b.goFunc(func() { b.registerLoop(ctx) })
	}
	if err = b.srv.Serve(ln); err != nil {
		cancel()
		b.stopController()
		b.wg.Wait()
		return nil, fmt.Errorf("broker: serve: %w", err)
	}
	if opts.AdvertiseIP == "" && bound.Addr().IP.IsUnspecified() {
		b.log.Info("advertising a loopback address; set broker.advertise_ip for clients on other hosts", "addr", b.addr)
	}
	b.log.Info("broker started", "addr", b.addr, "role", opts.Role.String(), "id", opts.BrokerID,
		"cluster", opts.ClusterName, "store", opts.Store.Root, "flush", b.store.Options().FlushMode.String())
	return b, nil
}

// advertiseIP picks the address published for the broker: the configured
// one, else the listen address when it is a specific IP, else loopback (a
// broker listening on every interface must be told which address other
// hosts reach it at: broker.advertise_ip).
func advertiseIP(configured string, listen net.IP) netip.Addr {
	if configured != "" {
		if a, err := netip.ParseAddr(configured); err == nil {
			return a.Unmap()
		}
	}
	if listen != nil && !listen.IsUnspecified() {
		if a, ok := netip.AddrFromSlice(listen); ok {
			return a.Unmap()
		}
	}
	return netip.AddrFrom4([4]byte{127, 0, 0, 1})
}

// onArrival is the store's dispatch notification: it wakes held pulls of
// the queue, and the delay service for the schedule topic.
func (b *Broker) onArrival(topic string, queueID int32, maxOffset int64) {
	b.hold.Notify(topic, queueID, maxOffset)
	b.notifyHA()
	switch topic {
	case ScheduleTopic:
		b.schedule.notify()
	default:
		if n, ok := b.arrivalWakes.Load(topic); ok {
			n.(*wake.Notifier).Notify() // a slave's state store or twins apply it
		}
	}
}

func (b *Broker) goFunc(fn func()) {
	b.wg.Add(1)
	go func() {
		defer b.wg.Done()
		fn()
	}()
}

// consumed is the store's Options.Consumed: how far the consumers of a
// queue have got, the lowest offset any group committed (for the delay
// levels' queues, the delay service's own offsets). Retention deletes an
// unexpired segment only when every queue's messages in it are below it.
func (b *Broker) consumed(topic string, queueID int32) (int64, bool) {
	if topic == ScheduleTopic {
		return b.delayOffsets.Get(queueID + 1), true
	}
	return b.offsets.MinConsumed(topic, queueID)
}

// WritesRefused reports whether the broker's store refuses writes now
// (disk full, a failed write, closed) and why: the broker then registers
// without write permission and answers sends with SERVICE_NOT_AVAILABLE.
func (b *Broker) WritesRefused() (bool, string) { return b.store.WritesRefused() }

// Addr returns the broker's advertised remoting address (ip:port).
func (b *Broker) Addr() string { return b.addr }

// Store returns the broker's message store.
func (b *Broker) Store() *store.Store { return b.store }

// Topics returns the topic manager.
func (b *Broker) Topics() *TopicManager { return b.topics }

// Groups returns the subscription group manager.
func (b *Broker) Groups() *GroupManager { return b.groups }

// Offsets returns the consumer offset manager.
func (b *Broker) Offsets() *OffsetManager { return b.offsets }

// Stats returns the statistics service.
func (b *Broker) Stats() *Stats { return b.stats }

// Close unregisters from the registries, stops serving (held pulls are
// answered), persists offsets and closes the store. It is idempotent.
func (b *Broker) Close() error {
	b.closeOnce.Do(func() {
		b.stopController()
		if len(b.opts.Registries) > 0 {
			ctx, cancel := context.WithTimeout(context.Background(), 3*time.Second)
			b.unregisterAll(ctx)
			cancel()
		}
		// Stop replication and arrival callbacks first: the hold service
		// must not be notified after it shut down.
		closeHAErr := b.closeHA()
		b.store.OnArrival(nil)
		errs := []error{closeHAErr}
		b.cancel() // hold service answers held pulls before the server goes
		b.wg.Wait()
		errs = append(errs, b.srv.Close())
		errs = append(errs, b.keptAside(b.offsets.Persist()), b.keptAside(b.delayOffsets.Persist()))
		errs = append(errs, b.closeParts())
		b.closeErr = errors.Join(errs...)
		b.log.Info("broker stopped", "addr", b.addr)
	})
	return b.closeErr
}

// keptAside logs a save that went to its spare file at shutdown (a WARN:
// nothing is lost, the next start reads it) and returns the errors of
// the others.
func (b *Broker) keptAside(err error) error {
	if errors.Is(err, ErrSavedInSpare) {
		b.log.Warn("metadata kept in its spare file at shutdown; the next start reads it from there", "err", err)
		return nil
	}
	return err
}

// closeParts closes what New opened, in reverse order (also on a failed
// start).
func (b *Broker) closeParts() error {
	var errs []error
	errs = append(errs, b.closeHA())
	if b.fwd != nil {
		b.fwd.close() // its forwards use the client
	}
	if b.client != nil {
		errs = append(errs, b.client.Close())
	}
	if b.store != nil {
		errs = append(errs, b.store.Close())
	}
	return errors.Join(errs...)
}

// housekeeping persists offsets and expires silent clients.
func (b *Broker) housekeeping(ctx context.Context) {
	persist := beat.NewTicker(b.opts.OffsetPersistPeriod)
	defer persist.Stop()
	scan := beat.NewTicker(10 * time.Second)
	defer scan.Stop()
	offsetsFailing := persistFailure{log: b.log, what: "persist consumer offsets"}
	delayFailing := persistFailure{log: b.log, what: "persist delay offsets"}
	for {
		select {
		case <-ctx.Done():
			return
		case <-persist.C:
			offsetsFailing.report(b.offsets.Persist())
			delayFailing.report(b.delayOffsets.Persist())
		case <-scan.C:
			b.expireClients()
		}
	}
}

// persistFailure logs a periodic persist's failures once per episode:
// the error when it starts failing (a full disk fails it every period
// until space frees) and a line when it succeeds again, not an ERROR
// every period.
type persistFailure struct {
	log     *slog.Logger
	what    string
	failing bool
	since   time.Time
}

func (p *persistFailure) report(err error) {
	switch {
	case err != nil && !p.failing:
		p.failing, p.since = true, time.Now()
		level := slog.LevelError
		if errors.Is(err, ErrSavedInSpare) {
			level = slog.LevelWarn // nothing is lost
		}
		p.log.Log(context.Background(), level, p.what+" failed; retried every period, logged again when it succeeds", "err", err)
	case err == nil && p.failing:
		p.failing = false
		p.log.Info(p.what+" succeeded again", "failing_for", time.Since(p.since).Round(time.Millisecond))
	}
}

func (b *Broker) expireClients() {
	deadline := b.now().Add(-b.opts.ClientExpiry)
	for _, g := range b.consumers.ScanExpired(deadline) {
		b.plog.Info("consumer group members expired", "group", g)
		b.notifyConsumerIDsChanged(g)
	}
	b.producers.ScanExpired(deadline)
}

func (b *Broker) connClosed(c *remoting.Conn, err error) {
	for _, g := range b.consumers.ChannelClosed(c) {
		b.plog.Info("consumer left with its connection", "group", g, "peer", c.RemoteAddr().String())
		b.notifyConsumerIDsChanged(g)
	}
	b.producers.ChannelClosed(c)
}

// notifyConsumerIDsChanged tells every member of group to rebalance,
// without waiting for any: a member that stopped reading must not hold
// up the others' notices nor the caller (a heartbeat worker, a closing
// connection, the expiry scan).
func (b *Broker) notifyConsumerIDsChanged(group string) {
	if g, ok := b.groups.Get(group); ok && !g.NotifyConsumerIdsChangedEnable {
		return
	}
	for _, ch := range b.consumers.Channels(group) {
		c, ok := ch.(*remoting.Conn)
		if !ok {
			continue
		}
		req := protocol.NewRequest(protocol.NotifyConsumerIDsChanged, &protocol.ConsumerGroupHeader{ConsumerGroup: group}, nil)
		req.SerializeType = protocol.SerializeJSON
		if err := c.OnewayNoWait(req); err != nil {
			b.log.Debug("notify consumer ids changed", "group", group, "peer", c.RemoteAddr().String(), "err", err)
		}
	}
}
