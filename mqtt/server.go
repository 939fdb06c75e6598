package mqtt

import (
	"context"
	"crypto/tls"
	"fmt"
	"io"
	"log/slog"
	"net"
	"runtime"
	"slices"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// maxExpiry is the v5 session expiry 0xFFFFFFFF: the session never expires.
const maxExpiry = time.Duration(0xFFFFFFFF) * time.Second

// Handler receives PUBLISHes to a topic filter registered with
// Server.Handle, instead of the backend, with the publishing client's
// identity. A non-nil error is reported to a v5 client in the PUBACK/PUBREC
// (ErrNotAuthorized as 0x87, ErrQueueFull and ErrQuotaExceeded as 0x97,
// anything else 0x80).
type Handler func(ctx context.Context, from ClientInfo, msg *Message) error

// AsyncHandler is a Handler that may answer after it returns, so that a
// request served elsewhere (another goroutine, another process) holds no
// worker meanwhile. It must not block. To answer at once it returns what
// a Handler returns. To answer later it calls later before it returns
// (then returns nil): later returns done, which the handler calls exactly
// once, from any goroutine, with what a Handler would have returned. The
// acknowledgement is sent when done is called: what the handler sent the
// client before (a response with SendTo) precedes it, and
// acknowledgements still leave in PUBLISH order. While ReceiveMaximum
// acknowledgements wait for done, the connection reads nothing more.
// later belongs to this call only: it must not be kept.
type AsyncHandler func(ctx context.Context, from ClientInfo, msg *Message, later func() (done func(error))) error

type handlerEntry struct {
	filter string
	h      Handler
	async  AsyncHandler // instead of h (HandleAsync)
	inline bool         // async may run on the poller (HandleInline)
	id     uint64
	// set is the hlist copy the entry is in (Server.handlerFor's cache
	// is good while set is the current one).
	set *[]handlerEntry
}

// Server is the MQTT server engine. Create it with NewServer, then Start.
type Server struct {
	opts    Options
	backend Backend
	async   AsyncBackend // backend, when it implements AsyncBackend
	qos2    QoS2Backend  // backend, when it implements QoS2Backend
	log     *slog.Logger
	dec     *packets.Decoder
	creds   *Credentials
	acl     *ACL
	res     *reservedSet

	ctx    context.Context
	cancel context.CancelFunc
	wg     sync.WaitGroup

	pool    *pool
	wheel   *wheel
	pollers []*poller
	subs    subIndex

	mu        sync.Mutex
	sessions  map[string]*session // protected by mu
	persist   persistOrder        // orders each client's SaveSession and DeleteSession calls
	conns     map[*conn]struct{}  // protected by mu
	listeners []net.Listener      // protected by mu
	started   bool                // protected by mu
	closed    bool                // protected by mu

	hmu      sync.Mutex
	handlers []handlerEntry // protected by hmu
	nextH    uint64         // protected by hmu
	// hlist is a copy of handlers, replaced (never changed) with them:
	// a PUBLISH finds its handler without a lock. hlast is the entry of
	// the last lookup that matched an exact filter (handlerFor).
	hlist atomic.Pointer[[]handlerEntry]
	hlast atomic.Pointer[handlerEntry]
	// asyncHandlers is set once an AsyncHandler was registered: from then
	// on acknowledgements go through the ordered queue (acks.go) even
	// without an AsyncBackend.
	asyncHandlers atomic.Bool
	// inlineTopics are the topics of the inline handlers (HandleInline),
	// nil when there are none: the poller looks a PUBLISH's topic up here
	// before it decodes it (netio.go's inlineOnly).
	inlineTopics atomic.Pointer[[]string]

	retries willRetries // wills whose publish failed (will.go)

	sessionSeq atomic.Uint64
	connSeq    atomic.Uint64 // ClientInfo.ConnID
	stats      Stats
	sys        sysTree // the $SYS topics (sys.go)
	holdMax    int     // output a unit of work holds per connection (batch.go)
	inb        inbound // the inbound memory budget (inbound.go)
	io         ioCounters
}

// ioCounters count the socket syscalls of the epoll path (tests read
// them: writes and reads per request).
type ioCounters struct {
	writes atomic.Int64 // write(2) calls
	reads  atomic.Int64 // read(2) calls
	// lowered counts SO_RCVLOWAT marks lowered (lowat_linux.go).
	lowered atomic.Int64
	// lowKept counts the sweep's looks at a quiet connection with a mark
	// that found nothing but PUBACKs waiting, and kept the mark; lowSeen
	// those that found something else and lowered it.
	lowKept, lowSeen atomic.Int64
	// restNanos, when positive, replaces lowatRest (tests only).
	restNanos atomic.Int64
	// lingers counts the times a poller started lingering
	// (linger_linux.go).
	lingers atomic.Int64
	// lingered counts the rounds a lingering poller's timer paced.
	lingered atomic.Int64
}

// Stats are the server's counters; the $SYS tree (sys.go) publishes them.
type Stats struct {
	Connections atomic.Int64 // open connections (CONNECT accepted or not)
	// Clients is the number of connections whose CONNECT was accepted
	// ($SYS/broker/clients/connected).
	Clients atomic.Int64
	// Sessions is the number of sessions the server holds, connected or
	// not ($SYS/broker/clients/total).
	Sessions atomic.Int64
	// Subscriptions is the number of subscriptions of those sessions
	// ($SYS/broker/subscriptions/count).
	Subscriptions atomic.Int64
	Received      atomic.Int64 // PUBLISH packets received
	Sent          atomic.Int64 // PUBLISH packets sent
	// PacketsReceived and PacketsSent count control packets of every
	// type ($SYS/broker/messages/received and .../sent).
	PacketsReceived atomic.Int64
	PacketsSent     atomic.Int64
	// BytesReceived and BytesSent count the bytes read from and written
	// to client sockets (TLS: plaintext).
	BytesReceived atomic.Int64
	BytesSent     atomic.Int64
	Dropped       atomic.Int64 // messages dropped (queue full, too large, slow reader)
	// DroppedQoS0 counts the QoS 0 messages (also in Dropped) not sent
	// because the client's output was backed up.
	DroppedQoS0 atomic.Int64
	// Overflows counts the times a session's queue filled under
	// DeliverLive: its further QoS 1/2 messages were left to the backend
	// to hand over again (Refill), not dropped.
	Overflows atomic.Int64
	// SlowReaders counts clients disconnected as slow readers (output over
	// MaxOutbound, or backed up longer than SlowReaderTimeout).
	SlowReaders atomic.Int64
	// ReceivedQoS and SentQoS split Received and Sent by QoS (0, 1, 2).
	ReceivedQoS [3]atomic.Int64
	SentQoS     [3]atomic.Int64
	// AuthFailures counts CONNECTs refused for a missing or wrong user
	// name or password.
	AuthFailures atomic.Int64
	// InboundBytes is the input buffered beyond the connections' small
	// arrays, charged to Options.MaxInboundMemory (a gauge; inbound.go).
	InboundBytes atomic.Int64
	// InboundThrottled counts the times a connection stopped being read
	// because the inbound budget was used up; InboundStalled the clients
	// disconnected for holding part of it while stalled inside a packet.
	InboundThrottled atomic.Int64
	InboundStalled   atomic.Int64
}

// NewServer checks the options, loads the credentials and ACL files, and
// returns a server that is not yet listening.
func NewServer(opts Options, backend Backend) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if backend == nil {
		return nil, fmt.Errorf("%w: nil backend", ErrInvalidOptions)
	}
	opts = opts.withDefaults()
	s := &Server{opts: opts, backend: backend, log: opts.Logger,
		sessions: map[string]*session{}, conns: map[*conn]struct{}{}}
	s.holdMax = min(holdMaxBytes, opts.MaxOutbound/4)
	s.inb.limit = opts.MaxInboundMemory
	s.inb.sweep.slot = -1
	s.res = newReservedSet(opts.ReservedFilters)
	s.subs.res, s.subs.count = s.res, &s.stats.Subscriptions
	s.async, _ = backend.(AsyncBackend)
	s.qos2, _ = backend.(QoS2Backend)
	if s.log == nil {
		s.log = slog.New(slog.NewTextHandler(io.Discard, nil))
	}
	var err error
	if s.dec, err = packets.NewDecoder(packets.Options{MaxPacketSize: opts.MaxPacketSize}); err != nil {
		return nil, fmt.Errorf("%w: %w", ErrInvalidOptions, err)
	}
	if opts.CredentialsFile != "" {
		if s.creds, err = LoadCredentials(opts.CredentialsFile); err != nil {
			return nil, err
		}
	}
	if opts.ACLFile != "" {
		if s.acl, err = LoadACL(opts.ACLFile); err != nil {
			return nil, err
		}
	}
	return s, nil
}

// Start binds the backend and opens the listeners. The server runs until
// Close: cancelling ctx does not stop it once started; during Start it
// ends the backend's start-up (Backend.Start's context).
func (s *Server) Start(ctx context.Context) error {
	s.mu.Lock()
	if s.started || s.closed {
		s.mu.Unlock()
		return fmt.Errorf("mqtt: server already started or closed")
	}
	s.started = true
	s.mu.Unlock()
	s.ctx, s.cancel = context.WithCancel(context.WithoutCancel(ctx))
	s.pool = newPool(s.opts.Workers)
	s.wheel = newWheel(100*time.Millisecond, 4096, s.pool)
	n := s.opts.Pollers
	if n == 0 {
		n = max(1, runtime.GOMAXPROCS(0)/4)
	}
	for range n {
		p, err := newPoller(s)
		if err != nil {
			s.Close()
			return fmt.Errorf("mqtt: epoll: %w", err)
		}
		s.pollers = append(s.pollers, p)
		go p.run()
	}
	// The backend's start-up waits end with ctx (a signal during start)
	// as well as with Close.
	startCtx, cancelStart := context.WithCancel(s.ctx)
	stopStart := context.AfterFunc(ctx, cancelStart)
	err := s.backend.Start(startCtx, s)
	stopStart()
	cancelStart()
	if err != nil {
		s.Close()
		return fmt.Errorf("mqtt: backend: %w", err)
	}
	s.startSys()
	var tlsCfg *tls.Config
	if len(s.opts.TLSListen) > 0 {
		tlsCfg = s.opts.TLSConfig
		if tlsCfg == nil {
			cert, err := tls.LoadX509KeyPair(s.opts.TLSCertFile, s.opts.TLSKeyFile)
			if err != nil {
				s.Close()
				return fmt.Errorf("mqtt: TLS key pair: %w", err)
			}
			tlsCfg = &tls.Config{Certificates: []tls.Certificate{cert}, MinVersion: tls.VersionTLS12}
		}
	}
	for _, a := range s.opts.Listen {
		l, err := s.listen(a)
		if err != nil {
			s.Close()
			return fmt.Errorf("mqtt: listen %s: %w", a, err)
		}
		s.mu.Lock()
		s.listeners = append(s.listeners, l)
		s.mu.Unlock()
	}
	for _, a := range s.opts.TLSListen {
		l, err := s.listenTLS(a, tlsCfg)
		if err != nil {
			s.Close()
			return fmt.Errorf("mqtt: listen TLS %s: %w", a, err)
		}
		s.mu.Lock()
		s.listeners = append(s.listeners, l)
		s.mu.Unlock()
	}
	return nil
}

// Addrs returns the listeners' addresses, plain TCP first, in Options order.
func (s *Server) Addrs() []net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]net.Addr, len(s.listeners))
	for i, l := range s.listeners {
		out[i] = l.Addr()
	}
	return out
}

// Stats returns the server's counters.
func (s *Server) Stats() *Stats { return &s.stats }

// Close disconnects every client (v5: DISCONNECT 0x8B), saves sessions that
// outlive their connection to the backend, and stops every goroutine. It is
// idempotent. It does not close the backend.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	ls := s.listeners
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	for _, l := range ls {
		l.Close()
	}
	if s.cancel != nil {
		s.cancel()
	}
	for _, c := range conns {
		c.closeWith(packets.ReasonServerShuttingDown, "server shutting down", closeShutdown)
	}
	if d, ok := s.backend.(interface{ Detach(Deliverer) }); ok {
		d.Detach(s)
	}
	s.wg.Wait()
	if s.wheel != nil {
		s.wheel.close()
	}
	if s.pool != nil {
		s.pool.close()
	}
	for _, p := range s.pollers {
		p.close()
	}
	return nil
}

// track registers a new connection; false when the server is closed.
func (s *Server) track(c *conn) bool {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.closed {
		return false
	}
	s.conns[c] = struct{}{}
	s.stats.Connections.Add(1)
	s.wheel.arm(&c.ka, s.opts.ConnectTimeout, c.keepAliveCheck)
	return true
}

func (s *Server) untrack(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	if _, ok := s.conns[c]; ok {
		delete(s.conns, c)
		s.stats.Connections.Add(-1)
	}
}

// Handle registers h for PUBLISHes whose topic matches filter: they go to h
// instead of the backend, and the filter is claimed from the reserved
// topics. The returned function unregisters it.
func (s *Server) Handle(filter string, h Handler) (unregister func()) {
	return s.addHandler(handlerEntry{filter: filter, h: h})
}

// HandleAsync is Handle for an AsyncHandler.
func (s *Server) HandleAsync(filter string, h AsyncHandler) (unregister func()) {
	s.asyncHandlers.Store(true)
	return s.addHandler(handlerEntry{filter: filter, async: h})
}

// HandleInline is HandleAsync for a handler that answers without ever
// blocking (no lock held for long, no disk flush, no network, no
// Disconnect), on a topic name (no wildcards). A v5 client's QoS 0 or 1
// PUBLISH to that topic (without a topic alias) is handled on the
// connection's poller, like the acknowledgements: no worker is woken for
// it, and the response the handler sends with SendTo leaves in one write
// with the PUBACK. What may wait goes elsewhere: the handler calls later,
// hands the work to a goroutine of its own and returns. Other PUBLISHes to
// the topic (3.1.1, QoS 2, with a topic alias, read together with other
// packets) reach h on a worker, as with HandleAsync.
//
// msg, and every byte it points to (topic, payload, response topic,
// correlation data, content type, user properties), belongs to the call:
// on the poller it is decoded in place, pointing into the connection's
// input, which is reused once h returns. h copies what it keeps: what it
// uses after calling later, and what a message it sends with SendTo
// carries (the session keeps that message until the client acknowledges
// it). Tests under the race detector overwrite the request's bytes when h
// returns, so a handler that keeps them fails there.
//
// On a poller, h's ctx carries the poller's round (RoundOf): h may call
// later and defer the rest of its work, and its done, to the end of the
// round (Round.Defer), when every ready connection of the round was
// handled: work shared by the round's requests is then done once (the
// state store writes the records of a round's SETs with one pwrite). The
// connection's output stays held until then, so the deferred answer
// still leaves with its acknowledgement in one write.
func (s *Server) HandleInline(topic string, h AsyncHandler) (unregister func()) {
	s.asyncHandlers.Store(true)
	return s.addHandler(handlerEntry{filter: topic, async: h, inline: packets.ValidTopicName(topic)})
}

func (s *Server) addHandler(e handlerEntry) (unregister func()) {
	s.hmu.Lock()
	defer s.hmu.Unlock()
	s.nextH++
	id := s.nextH
	e.id = id
	s.handlers = append(s.handlers, e)
	s.setHandlersLocked()
	return func() {
		s.hmu.Lock()
		defer s.hmu.Unlock()
		for i, e := range s.handlers {
			if e.id == id {
				s.handlers = append(s.handlers[:i:i], s.handlers[i+1:]...)
				s.setHandlersLocked()
				return
			}
		}
	}
}

// setHandlersLocked publishes the handlers (hlist) and the inline
// handlers' topics. Called with hmu held.
func (s *Server) setHandlersLocked() {
	list := slices.Clone(s.handlers)
	for i := range list {
		list[i].set = &list
	}
	s.hlist.Store(&list)
	var topics []string
	for _, e := range s.handlers {
		if e.inline {
			topics = append(topics, e.filter)
		}
	}
	if topics == nil {
		s.inlineTopics.Store(nil)
		return
	}
	s.inlineTopics.Store(&topics)
}

// handlerFor returns the handler registered for topic, if any (h or
// async set); inline reports that async may run on the poller. It reads
// the handlers without a lock, and remembers the last handler found by
// its exact topic (every inline handler's filter is one): request-
// response clients publish to the topic of their service, which then
// costs one string comparison rather than a match against each handler,
// twice a request (publishInline, handlePublish).
func (s *Server) handlerFor(topic string) (h Handler, async AsyncHandler, inline bool) {
	list := s.hlist.Load()
	if list == nil {
		return nil, nil, false
	}
	if e := s.hlast.Load(); e != nil && e.set == list && e.filter == topic {
		return e.h, e.async, e.inline
	}
	for i := range *list {
		e := &(*list)[i]
		if packets.Match(e.filter, topic) {
			if e.filter == topic {
				s.hlast.Store(e)
			}
			return e.h, e.async, e.inline
		}
	}
	return nil, nil, false
}

// publishInline reports whether the poller may handle p (inlinePublish
// accepted its bytes): a v5 client's PUBLISH without a topic alias (whose
// errors close the connection, which may wait on the backend) whose
// handler is inline, while the connection has room for one more pending
// acknowledgement (a worker parks it otherwise).
func (c *conn) publishInline(p *packets.Publish) bool {
	if c.version != packets.Version5 || p.Properties.Present.Has(packets.PropTopicAlias) {
		return false
	}
	if _, _, inline := c.srv.handlerFor(p.Topic); !inline {
		return false
	}
	return !c.acksFull()
}

// inlinePublish reports whether a PUBLISH (fixed header flags, variable
// header and payload) may be handled on the poller: QoS 0 or 1, to the
// topic of an inline handler. workInline checks the rest once decoded.
func (s *Server) inlinePublish(flags int, body []byte) bool {
	topics := s.inlineTopics.Load()
	if topics == nil || flags&0x06 > 0x02 || len(body) < 2 {
		return false
	}
	n := int(body[0])<<8 | int(body[1])
	if len(body) < 2+n {
		return false
	}
	for _, t := range *topics {
		if string(body[2:2+n]) == t {
			return true
		}
	}
	return false
}

// pipelined reports whether acknowledgements go through the ordered queue
// of acks.go: with an AsyncBackend, or once an AsyncHandler exists.
func (s *Server) pipelined() bool { return s.async != nil || s.asyncHandlers.Load() }

// Publish stores an internal message through the backend, as if a client
// had published it (without ACL checks).
func (s *Server) Publish(ctx context.Context, msg *Message) error {
	return s.backend.Publish(ctx, msg)
}

// Deliver implements Deliverer: the backend hands every stored message to
// the matching local subscriptions.
func (s *Server) Deliver(msg *Message) {
	if msg.expired(time.Now()) {
		return
	}
	for _, t := range s.subs.match(msg.Topic, msg.ClientID) {
		retain := msg.Retain && t.rap
		t.s.deliver(msg, min(msg.QoS, t.qos), retain, t.subIDs)
	}
}

// SendTo delivers msg into clientID's session without a subscription: sent
// now if the client is connected, queued (QoS 1/2) if its session is
// offline. It returns ErrNoSession if the server has no session of that id.
func (s *Server) SendTo(clientID string, msg *Message) error {
	return s.sendTo(clientID, msg, false, nil)
}

// SendToConnected is SendTo for a connected client only: when the session
// is offline (or missing) the message is not queued and ErrNotConnected
// (or ErrNoSession) is returned. A QoS 1/2 message may still wait in the
// session queue for the client's receive quota, and is resent on a resumed
// session like any other unacknowledged message.
func (s *Server) SendToConnected(clientID string, msg *Message) error {
	return s.sendTo(clientID, msg, true, nil)
}

// A Recycler takes back a message given to SendToRecycled once the server
// holds it no more.
type Recycler interface {
	// Recycle is called at most once per SendToRecycled, with the
	// message, once its client acknowledged it (QoS 1 PUBACK, QoS 2
	// PUBCOMP or a failed PUBREC), on the goroutine that handled the
	// acknowledgement and under the session's lock: it must not block
	// nor call into the server.
	Recycle(msg *Message)
}

// A Releaser is a Recycler that also learns when the server discards a
// message it was given before the client acknowledged it, with the
// session that held it: a session with expiry 0 whose connection ended,
// an offline session that expired or was ended, one a clean start
// replaced. Its caller may then hand the message to another client (MQTT
// 5 4.8.2: a shared subscription's message goes to another member when
// the session that had it ends). Released is called at most once per
// SendToRecycled, instead of Recycle, under the session's lock (and the
// server's): it must not block nor call into the server. A Releaser's
// Recycle does not reuse the message, so unlike other Recyclers it is
// still told after the message was handed out in a SessionState (an
// offline session's save), and when another node took the session over
// (Evict) unless the session goes on there with that state.
type Releaser interface {
	Recycler
	Released(msg *Message)
}

// SendToRecycled is SendTo for a message its caller reuses: rec is told
// when the session holds msg no more, and the caller may then rewrite it.
// Until then msg must not change. A message the server does not keep
// until its acknowledgement (sent at QoS 0, refused with an error,
// expired, dropped, resent to a client whose session state went to the
// backend, discarded with its session) is never recycled and is left to
// the collector; on an error it was not kept and is the caller's again.
func (s *Server) SendToRecycled(clientID string, msg *Message, rec Recycler) error {
	return s.sendTo(clientID, msg, false, rec)
}

func (s *Server) sendTo(clientID string, msg *Message, connectedOnly bool, rec Recycler) error {
	ss, err := s.sessionOf(clientID)
	if err != nil {
		return err
	}
	return ss.deliverTo(msg, connectedOnly, rec, nil).err(clientID)
}

// err is the error of a delivery's result to clientID.
func (r deliverResult) err(clientID string) error {
	switch r {
	case deliverFull:
		return ErrQueueFull
	case deliverOffline:
		return fmt.Errorf("%w: %q", ErrNotConnected, clientID)
	}
	return nil
}

// Disconnect ends the connection of clientID: a v5 client gets a
// DISCONNECT with reason (when it is a valid DISCONNECT reason code), a
// 3.1.1 client has its connection closed. The disconnect is logged and
// handled like any server-side close (the will is published, a persistent
// session is kept). It returns ErrNotConnected when the client has no
// connection and ErrNoSession when the server has no such session.
func (s *Server) Disconnect(clientID string, reason packets.ReasonCode) error {
	ss, err := s.sessionOf(clientID)
	if err != nil {
		return err
	}
	ss.mu.Lock()
	c := ss.conn
	ss.mu.Unlock()
	if c == nil {
		return fmt.Errorf("%w: %q", ErrNotConnected, clientID)
	}
	s.log.Info("mqtt: disconnecting client", "client", clientID, "remote", c.remote, "reason", reason.String(), "code", byte(reason))
	c.closeWith(reason, "disconnected by the server", closeServer)
	return nil
}

// sessionOf returns the session of clientID, or ErrNoSession.
func (s *Server) sessionOf(clientID string) (*session, error) {
	s.mu.Lock()
	ss := s.sessions[clientID]
	s.mu.Unlock()
	if ss == nil {
		return nil, fmt.Errorf("%w: %q", ErrNoSession, clientID)
	}
	return ss, nil
}
