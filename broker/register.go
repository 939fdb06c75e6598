package broker

import (
	"context"
	"hash/crc32"
	"net"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// registerTimeout bounds one registration round trip (RocketMQ: 6 s).
const registerTimeout = 6 * time.Second

// syncRegisterTimeout bounds the registration a topic change waits for.
const syncRegisterTimeout = 3 * time.Second

// triggerRegister registers with every registry now, before the request
// that created, changed or deleted a topic is answered: a client that saw
// its send to a new topic succeed must find the topic's route (Java
// brokers do the same; rocketmq-client-go's push consumer refuses to start
// without a route).
func (b *Broker) triggerRegister() {
	if len(b.opts.Registries) == 0 {
		return
	}
	ctx, cancel := context.WithTimeout(context.Background(), syncRegisterTimeout)
	defer cancel()
	if !b.registerAll(ctx) {
		// Not published: registerLoop tries again within a second
		// instead of at the next RegisterInterval (30 s), which a client
		// waiting for the topic's route would not outlive.
		select {
		case b.regNow <- struct{}{}:
		default:
		}
	}
}

// registryConnClosed (the client's OnConnClose) has the broker register
// again at once when its connection to a registry closed: a registry
// that was restarted holds no broker until it is registered with, and
// would answer every route lookup with TOPIC_NOT_EXIST until the next
// RegisterInterval (30 s). The attempt fails while the registry is down
// and registerLoop retries it after 1 s, 2 s, 4 s... until it answers.
// A registry named by host name is matched by its port. registerLoop
// heeds it only after a round that succeeded: a peer that accepts and
// closes every connection (a load balancer with no backend up) closes
// each attempt's connection, and would otherwise be dialled, and a WARN
// logged, in a tight loop past the backoff.
func (b *Broker) registryConnClosed(cn *remoting.Conn, _ error) {
	ra := cn.RemoteAddr()
	if ra == nil {
		return
	}
	rhost, rport, err := net.SplitHostPort(ra.String())
	if err != nil {
		return
	}
	for _, addr := range b.opts.Registries {
		host, port, err := net.SplitHostPort(addr)
		if err != nil || port != rport {
			continue
		}
		if ip := net.ParseIP(host); ip != nil && !ip.IsUnspecified() && !ip.Equal(net.ParseIP(rhost)) {
			continue
		}
		select {
		case b.regClosed <- struct{}{}:
		default:
		}
		return
	}
}

// registerLoop registers with every registry at start and every
// RegisterInterval.
func (b *Broker) registerLoop(ctx context.Context) {
	ok := b.registerAll(ctx)
	t := time.NewTicker(b.opts.RegisterInterval)
	defer t.Stop()
	retry := time.Second
	for {
		// A registry that refused or was unreachable (e.g. it starts after
		// the broker) is retried soon, backing off to the interval; a slave
		// that has not learnt its master yet asks again every second.
		var soon <-chan time.Time
		var closed <-chan struct{} // nil (never ready) while retrying with the backoff
		if ok {
			closed = b.regClosed
		}
		switch {
		case !ok:
			soon = time.After(retry)
			retry = min(2*retry, b.opts.RegisterInterval)
		case !b.controlled() && b.isSlave() && b.masterHAAddress() == "":
			soon = time.After(time.Second)
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		case <-soon:
		case <-b.regNow: // the store started or stopped refusing writes
		case <-closed: // a registry connection closed (a registry restarted?)
		}
		if ok = b.registerAll(ctx); ok {
			retry = time.Second
		}
	}
}

// haAddr is the replication address published to registries (listen port
// + 1, as RocketMQ).
func (b *Broker) haAddr() string {
	if b.haAdvertised != "" {
		return b.haAdvertised
	}
	host, port, err := net.SplitHostPort(b.addr)
	if err != nil {
		return ""
	}
	p, _ := strconv.Atoi(port)
	return net.JoinHostPort(host, strconv.Itoa(p+1))
}

// registrationBody returns the REGISTER_BROKER body: every topic, with the
// broker's own permission applied (a broker without write permission
// publishes read-only topics).
func (b *Broker) registrationBody() ([]byte, error) {
	w := b.topics.Snapshot()
	if b.isSlave() {
		// Publish replicated topics not copied from the master yet, so
		// their route outlives a master that dies before the next copy.
		for _, topic := range b.store.Topics() {
			if _, ok := w.TopicConfigTable[topic]; !ok {
				if tc, ok := b.readableTopic(topic); ok {
					w.TopicConfigTable[topic] = &tc
				}
			}
		}
	}
	perm := b.perm.Load()
	var full int32
	if refused, _ := b.store.WritesRefused(); refused {
		// Disk full (or a failed write): producers are sent elsewhere
		// until the store takes writes again, as a Java broker whose
		// write permission was taken away. A full disk says so
		// (protocol.PermDiskFull).
		perm &^= PermWrite
		if b.store.Stats().DiskFull {
			full = protocol.PermDiskFull
		}
	}
	for _, tc := range w.TopicConfigTable {
		tc.Perm = tc.Perm&(perm|PermInherit|PermPriority) | full
	}
	return protocol.EncodeJSON(protocol.RegisterBrokerBody{TopicConfigSerializeWrapper: w})
}

// registrationCRC is RocketMQ's UtilAll.crc32 of the body: IEEE CRC-32
// masked to 31 bits (registries reject any other value).
func registrationCRC(body []byte) int32 { return int32(crc32.ChecksumIEEE(body) & 0x7FFFFFFF) }

// registerAll registers with every registry in parallel.
//
// It reports whether every registry accepted the registration.
func (b *Broker) registerAll(ctx context.Context) bool {
	var wg sync.WaitGroup
	var failed atomic.Int32
	for _, addr := range b.opts.Registries {
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			if !b.registerWith(ctx, addr) {
				failed.Add(1)
			}
		}(addr)
	}
	wg.Wait()
	return failed.Load() == 0
}

// registerWith registers with the registry at addr, in its turn: a
// registry replaces a master's topics with those of its registration, so
// one carrying the table before a topic was created must not arrive
// after one carrying the topic (two topics created side by side: the
// route of one vanished until the next periodic registration, 30 s
// later); in controller mode, one under the old role must not arrive
// after one under the new role. The turn is the registry's own: one that
// hangs (6 s a registration) holds up no other's, so a new topic's route
// still reaches the others before its creation is answered.
//
// The turn lasts until the registry answers (or registerTimeout passes),
// not until the caller stops waiting: a topic creation waits
// syncRegisterTimeout (3 s) and is answered, but the registration it
// sent is still queued at the registry, which serves requests on several
// workers; the next one, sent at once, could be applied first and the
// older table after it.
func (b *Broker) registerWith(ctx context.Context, addr string) bool {
	turn := b.regTurns[addr]
	select {
	case turn <- struct{}{}:
	case <-ctx.Done():
		return false
	}
	id, ok := b.registryBrokerID()
	if !ok {
		<-turn
		return false // no controller id yet
	}
	body, err := b.registrationBody()
	if err != nil {
		<-turn
		b.log.Error("encode registration", "err", err)
		return false
	}
	hdr := protocol.RegisterBrokerRequestHeader{
		BrokerName: b.opts.BrokerName, BrokerAddr: b.addr, ClusterName: b.opts.ClusterName,
		HAServerAddr: b.haAddr(), BrokerID: id, BodyCRC32: registrationCRC(body),
	}
	done := make(chan bool, 1)
	err = b.client.InvokeAsync(ctx, addr, protocol.NewRequest(protocol.RegisterBroker, &hdr, body), registerTimeout,
		func(resp *protocol.Command, err error) {
			ok := b.registrationAnswered(addr, resp, err)
			<-turn
			done <- ok
		})
	if err != nil {
		<-turn
		b.registrationAnswered(addr, nil, err)
		return false
	}
	select {
	case ok := <-done:
		return ok
	case <-ctx.Done():
		return false // the registration keeps the turn until it is answered
	}
}

// registrationAnswered notes the registry's answer to a registration (or
// the error that took its place) and reports whether it was accepted.
func (b *Broker) registrationAnswered(addr string, resp *protocol.Command, err error) bool {
	switch {
	case err != nil:
		b.registered.Store(addr, false)
		b.log.Warn("register with registry failed", "registry", addr, "err", err)
		return false
	case resp.Code != protocol.Success:
		b.registered.Store(addr, false)
		b.log.Warn("registry refused registration", "registry", addr, "code", resp.Code, "remark", resp.Remark)
		return false
	}
	b.metrics.lastRegistered.Store(b.now().UnixNano())
	// Logged once per registry, and again after it failed.
	if prev, ok := b.registered.Swap(addr, true); !ok || !prev.(bool) {
		b.log.Info("registered with registry", "registry", addr)
	}
	var rh protocol.RegisterBrokerResponseHeader
	if resp.DecodeHeader(&rh) == nil && rh.MasterAddr != "" {
		b.masterAddr.Store(&rh.MasterAddr)
	}
	if rh.HAServerAddr != "" && !b.controlled() && b.isSlave() {
		b.masterHAAddr.Store(&rh.HAServerAddr)
	}
	return true
}

// unregisterAll tells every registry the broker is going away.
func (b *Broker) unregisterAll(ctx context.Context) {
	id, ok := b.registryBrokerID()
	if !ok {
		return
	}
	hdr := protocol.UnregisterBrokerRequestHeader{BrokerName: b.opts.BrokerName, BrokerAddr: b.addr,
		ClusterName: b.opts.ClusterName, BrokerID: id}
	var wg sync.WaitGroup
	for _, addr := range b.opts.Registries {
		wg.Add(1)
		go func(addr string) {
			defer wg.Done()
			if _, err := b.client.Invoke(ctx, addr, protocol.NewRequest(protocol.UnregisterBroker, &hdr, nil)); err != nil {
				b.log.Warn("unregister from registry failed", "registry", addr, "err", err)
			}
		}(addr)
	}
	wg.Wait()
}
