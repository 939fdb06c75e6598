package mqtt

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"errors"
	"fmt"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// closeKind says who ends a connection and whether the will is published.
type closeKind byte

const (
	closeClientNormal closeKind = iota // DISCONNECT 0x00: will discarded
	closeClientWill                    // DISCONNECT with another code, or EOF: will published
	closeServer                        // protocol error, keep alive, slow reader: DISCONNECT (v5), will published
	closeTakeover                      // session taken over: DISCONNECT 0x8E, will handled by the new connection
	closeShutdown                      // server shutting down: DISCONNECT 0x8B, will kept
)

// batchPackets is how many packets a worker handles for one connection
// before yielding to others.
const batchPackets = 64

// conn is one client connection. Field groups are owned as commented; the
// worker fields are touched only by the goroutine currently running
// c.work (scheduled guarantees there is at most one).
type conn struct {
	srv    *Server
	p      *poller  // nil for TLS
	fd     int      // -1 for TLS
	tls    *tlsPipe // TLS only
	remote string
	id     uint64 // ClientInfo.ConnID

	inMu      sync.Mutex
	scheduled bool    // protected by inMu
	paused    bool    // protected by inMu
	eof       bool    // protected by inMu
	closed    bool    // protected by inMu and outMu
	fdClosed  bool    // protected by inMu and outMu: the descriptor is closed
	inlined   bool    // protected by inMu: a request was handled on the poller (its mark may be up)
	onRound   bool    // worker-owned, here for the padding: workInline runs on the poller (c.p.round, round.go)
	mem       memFlag // protected by inMu: the connection's state in the inbound budget (inbound.go)
	in        []byte  // protected by inMu: unparsed input, nil when drained
	// inBuf (protected by inMu) is in's whole array when it is a pooled
	// one (appendIn: inBufSize bytes) or one charged to the inbound
	// budget (growIn: larger); nil otherwise.
	inBuf *[]byte

	outMu      sync.Mutex
	wclosed    bool // protected by outMu
	blocked    bool // protected by outMu: the socket refused, EPOLLOUT flushes
	slowReader bool // protected by outMu: being disconnected as a slow reader
	draining   bool // protected by inMu and outMu: closed, lingering (shutdownIO)
	// maxOut is worker-owned (see below); it sits here only to use this
	// word's padding.
	maxOut int32
	out    []byte    // protected by outMu: bytes the socket has not taken
	heldBy *outBatch // protected by outMu: the unit of work holding the output
	// Backpressure (see dropQoS0), protected by outMu: when the output
	// went over MaxOutbound/2 (nanotime, 0 while not backed up), QoS 0
	// drops not yet logged, and when the last drop line was logged.
	backedUpSince int64
	dropsUnlogged int64
	lastDropLog   int64

	lastRecv  atomic.Int64
	connected atomic.Bool // CONNECT accepted; version, session and limits are set
	closing   atomic.Bool
	ka        timer

	// Worker-owned; version, session, keepAlive, problemInfo, maxOut and
	// username are written before connected is set and read-only after.
	version     packets.Version
	problemInfo bool
	more        bool // input follows the packet being handled (deliverContext)
	// parked is protected by ackMu and aliasOutMax by session.mu (below);
	// they sit here only to share this word's padding.
	parked      bool   // protected by ackMu: the worker waits for acks to drain
	aliasOutMax uint16 // protected by session.mu
	// lowat (protected by outMu): the socket's SO_RCVLOWAT is raised, so
	// a lone acknowledgement does not wake the poller (lowat_linux.go);
	// lowListed (protected by the poller's lowMu): c is in its sweep list.
	lowat     bool
	lowListed bool
	session   *session
	username  string
	keepAlive time.Duration
	aliasIn   map[uint16]string
	fl        outBatch        // connections held by this connection's unit of work
	wctx      context.Context // workCtx

	// Pipelined ingress (AsyncBackend, see acks.go).
	ackMu     sync.Mutex
	acks      []*pendingAck       // protected by ackMu: owed acknowledgements, arrival order
	qos2Store map[uint16]struct{} // protected by ackMu: QoS 2 packet ids being stored

	// refusals is the budget of log lines the client causes, allocated
	// at the first (loglimit.go).
	refusals atomic.Pointer[logLimit]

	// Protected by session.mu.
	sendQuota int
	aliasOut  map[string]uint16
}

// tlsPipe is the state only a TLS connection has: the crypto/tls
// connection, read and written by the connection's own two goroutines
// (TLS cannot share the epoll loop), and the wake-up of its writer.
type tlsPipe struct {
	nc   net.Conn
	wake chan struct{}
	// memWake wakes the reader throttled by the inbound budget.
	memWake chan struct{}
	// linger (protected by conn.outMu) makes the writer shut only the
	// write side after the last bytes (shutdownIO); the reader reads on
	// to the client's close or the linger deadline.
	linger bool
	// ends counts the reader's exit and a lingering writer's: the second
	// closes the connection.
	ends atomic.Int32
}

func (s *Server) newConn(remote string) *conn {
	c := &conn{srv: s, remote: remote, id: s.connSeq.Add(1)}
	c.ka.slot = -1
	c.lastRecv.Store(nanotime())
	return c
}

func (c *conn) clientID() string {
	if c.connected.Load() {
		return c.session.id
	}
	return ""
}

func (c *conn) info() ClientInfo {
	return ClientInfo{ClientID: c.session.id, Username: c.username, RemoteAddr: c.remote, Version: byte(c.version), ConnID: c.id}
}

// work decodes and handles the connection's buffered packets, in order.
// It is one unit of work for write coalescing (batch.go): the output of
// this connection, and of those its packets deliver to through a
// synchronous backend, is held and flushed before work returns, parks or
// yields, always while it still owns the connection (scheduled or parked),
// since the next worker reuses c.fl.
func (c *conn) work() {
	sc := scratches.Get().(*packets.Scratch)
	defer scratches.Put(sc)
	held := false
	for n := 0; ; n++ {
		if n == batchPackets {
			c.fl.release()
			c.srv.pool.submit(c.work)
			return
		}
		if c.srv.pipelined() && c.connected.Load() && c.acksFull() {
			c.fl.release()
			held = false
			if c.parkIfFull() {
				return // completeAck reschedules the worker
			}
		}
		c.inMu.Lock()
		if c.closed {
			if c.fl.pending() {
				c.inMu.Unlock()
				c.fl.release()
				held = false
				continue
			}
			c.dropIn()
			c.scheduled = false
			c.inMu.Unlock()
			return
		}
		p, used, err := c.srv.dec.NextScratch(c.version, c.in, sc)
		if err == packets.ErrIncomplete {
			if c.fl.pending() {
				// Flush before giving the connection up; then look
				// again, input may have come meanwhile.
				c.inMu.Unlock()
				c.fl.release()
				held = false
				continue
			}
			if c.eof {
				c.inMu.Unlock()
				c.closeWith(0, "connection closed by peer", closeClientWill)
				return
			}
			if len(c.in) == 0 {
				c.dropIn()
			} else if c.charged() != 0 && len(c.in) <= inBufSize/2 {
				c.compactIn()
			}
			c.scheduled = false
			paused := c.paused
			c.paused = false
			if c.mem&memWaiting != 0 && c.roomUnderPressure() > 0 {
				// Throttled with a full input that has been handled
				// since: read it again rather than wait for a release.
				c.unqueue() // (a TLS reader is signalled)
				paused = c.tls == nil
			}
			c.inMu.Unlock()
			if paused {
				c.resume()
			}
			return
		}
		if err != nil {
			c.inMu.Unlock()
			c.fl.release()
			c.decodeError(err)
			return
		}
		c.in = c.in[used:]
		c.more = len(c.in) > 0 && n+1 < batchPackets
		if c.mem&memPassing != 0 {
			c.dropPass() // its packet is whole (inbound.go)
		}
		c.inMu.Unlock()
		c.srv.stats.PacketsReceived.Add(1)
		if !held {
			c.fl.hold(c)
			held = true
		}
		c.handle(p)
		if c.closing.Load() {
			c.fl.release()
			return
		}
	}
}

// scratches lends a unit of work the room its PUBLISHes and
// acknowledgements are decoded into (packets.Scratch): one per running
// unit, none per connection.
var scratches = sync.Pool{New: func() any { return new(packets.Scratch) }}

func (c *conn) handle(p packets.Packet) {
	if cp, ok := p.(*packets.Connect); ok {
		if c.connected.Load() {
			c.closeWith(packets.ReasonProtocolError, "second CONNECT", closeServer)
			return
		}
		c.handleConnect(cp)
		return
	}
	switch p := p.(type) {
	case *packets.Publish:
		c.handlePublish(p, false)
	case *packets.Puback:
		ss := c.session
		ss.mu.Lock()
		if ss.conn == c {
			ss.ackLocked(p.PacketID, false)
		}
		ss.mu.Unlock()
	case *packets.Pubrec:
		c.handlePubrec(p)
	case *packets.Pubrel:
		c.handlePubrel(p)
	case *packets.Pubcomp:
		ss := c.session
		ss.mu.Lock()
		if ss.conn == c {
			ss.ackLocked(p.PacketID, true)
		}
		ss.mu.Unlock()
	case *packets.Subscribe:
		c.handleSubscribe(p)
	case *packets.Unsubscribe:
		c.handleUnsubscribe(p)
	case *packets.Pingreq:
		c.send(&packets.Pingresp{})
	case *packets.Disconnect:
		c.handleDisconnect(p)
	case *packets.Auth:
		c.closeWith(packets.ReasonProtocolError, "AUTH without an authentication method", closeServer)
	default:
		c.closeWith(packets.ReasonProtocolError, "unexpected "+p.Type().String()+" from a client", closeServer)
	}
}

// decodeError answers a packet that failed to decode and closes.
func (c *conn) decodeError(err error) {
	code := packets.ReasonCodeOf(err)
	if c.connected.Load() {
		c.closeWith(code, err.Error(), closeServer)
		return
	}
	var pe *packets.Error
	if errors.As(err, &pe) && pe.Packet == packets.TypeConnect {
		switch {
		case errors.Is(err, packets.ErrUnsupportedProtocol):
			c.version = packets.Version311
			code = packets.ReasonUnsupportedProtocolVersion
			c.send(&packets.Connack{ReasonCode: packets.ConnectRefusedProtocolVersion})
		case pe.Version == packets.Version5:
			c.version = packets.Version5
			if !packets.ValidReasonCode(packets.TypeConnack, packets.Version5, code) {
				code = packets.ReasonMalformedPacket
			}
			c.send(&packets.Connack{ReasonCode: code, Properties: reasonProps(err.Error())})
		}
	}
	c.closeWith(code, "bad CONNECT: "+err.Error(), closeServer)
}

func reasonProps(s string) packets.Properties {
	var p packets.Properties
	if s != "" {
		p.Present.Add(packets.PropReasonString)
		p.ReasonString = reasonText(s)
	}
	return p
}

func (c *conn) refuse(code packets.ReasonCode, detail string) {
	c.send(&packets.Connack{ReasonCode: code, Properties: reasonProps(detail)})
	c.closeWith(code, "CONNECT refused: "+detail, closeServer)
}

func randomID() string {
	var b [12]byte
	rand.Read(b[:])
	return "smartgo-" + hex.EncodeToString(b[:])
}

func secs(d time.Duration) uint32 {
	if d >= maxExpiry {
		return 0xFFFFFFFF
	}
	return uint32(d / time.Second)
}

func (c *conn) handleConnect(cp *packets.Connect) {
	s := c.srv
	o := &s.opts
	c.version = cp.Version
	v5 := c.version == packets.Version5
	pr := &cp.Properties
	c.problemInfo = !pr.Present.Has(packets.PropRequestProblemInfo) || pr.RequestProblemInfo == 1
	if v5 && pr.Present.Has(packets.PropAuthMethod) {
		c.refuse(packets.ReasonBadAuthenticationMethod, "no enhanced authentication method is configured")
		return
	}
	quota := 65535
	if pr.Present.Has(packets.PropReceiveMaximum) {
		quota = int(pr.ReceiveMaximum)
	}
	if pr.Present.Has(packets.PropMaximumPacketSize) {
		c.maxOut = int32(min(pr.MaximumPacketSize, 1<<30))
	}
	id := cp.ClientID
	if o.MaxClientIDLen > 0 && len(id) > o.MaxClientIDLen {
		// The back end cannot store it: refused here, not left to fail
		// every session save (0x88 on each retry) or QoS 1 publish.
		c.refuse(packets.ReasonClientIdentifierNotValid,
			fmt.Sprintf("client identifier of %d bytes, at most %d", len(id), o.MaxClientIDLen))
		return
	}
	if o.MaxIdentityLen > 0 && len(id)+len(cp.Username) > o.MaxIdentityLen {
		// Stored with every message and session record, as the id.
		c.refuse(packets.ReasonBadUserNameOrPassword,
			fmt.Sprintf("user name of %d bytes with a client identifier of %d, at most %d together",
				len(cp.Username), len(id), o.MaxIdentityLen))
		return
	}
	assigned := false
	if id == "" {
		if !v5 && !cp.CleanStart {
			c.refuse(packets.ReasonClientIdentifierNotValid, "empty client identifier needs a clean session")
			return
		}
		id, assigned = randomID(), true
	}
	decided, code, detail := s.authenticate(c, cp)
	if code != 0 {
		s.stats.AuthFailures.Add(1)
		c.refuse(code, detail)
		return
	}
	if s.creds != nil && !decided {
		if !cp.UsernameFlag {
			if !o.AllowAnonymous {
				s.stats.AuthFailures.Add(1)
				c.refuse(packets.ReasonNotAuthorized, "user name required")
				return
			}
		} else if !s.creds.Check(cp.Username, cp.Password) {
			s.stats.AuthFailures.Add(1)
			c.refuse(packets.ReasonBadUserNameOrPassword, "bad user name or password")
			return
		}
	}
	c.username = cp.Username
	ka := time.Duration(cp.KeepAlive) * time.Second
	serverKA := false
	if v5 && (ka == 0 || ka > o.KeepAliveMax) {
		ka, serverKA = o.KeepAliveMax, true
	}
	c.keepAlive = ka
	var expiry time.Duration
	expirySent := false
	if v5 {
		if pr.Present.Has(packets.PropSessionExpiry) {
			expiry = time.Duration(pr.SessionExpiry) * time.Second
		}
	} else if !cp.CleanStart {
		expiry = maxExpiry
	}
	if expiry > o.SessionExpiryMax {
		expiry, expirySent = o.SessionExpiryMax, v5
	}
	var will *Message
	var willDelay time.Duration
	if cp.WillFlag {
		will = messageFrom(cp.WillTopic, cp.WillPayload, cp.WillQoS, cp.WillRetain, &cp.WillProperties)
		will.ClientID, will.Username = id, cp.Username
		willDelay = time.Duration(cp.WillProperties.WillDelay) * time.Second
	}

	ack := c.connackFor(id, assigned, ka, serverKA, expiry, expirySent)
	if v5 && !c.fitConnack(ack) {
		// Before any session is touched: refused, the connect leaves
		// no state behind (the CONNACK's reason string is shed to fit).
		c.refuse(packets.ReasonImplementationSpecificError, fmt.Sprintf(
			"a CONNACK does not fit the client's Maximum Packet Size of %d bytes", c.maxOut))
		return
	}

	// owner names whom this connect is for (OwnerTagger; "": unknown);
	// clean is a clean start, or a connect that may not resume the
	// session held here because an earlier owner of id had it.
	var owner string
	if ot, ok := s.backend.(OwnerTagger); ok {
		owner = ot.OwnerTag(id)
	}
	clean := cp.CleanStart
	var loaded *SessionState
	if !clean {
		s.mu.Lock()
		old, inMem := s.sessions[id]
		if inMem && old.otherOwner(owner) {
			clean = true
		}
		s.mu.Unlock()
		if inMem && !clean && !old.online.Load() {
			// Held offline here: the back end may know of a newer
			// session elsewhere (SessionConfirmer).
			current, err := s.sessionCurrent(id)
			if err != nil {
				c.refuse(packets.ReasonServerUnavailable, "session store unavailable")
				s.log.Warn("mqtt: confirm session", "client", id, "timeout", o.SessionLoadTimeout, "err", err)
				return
			}
			if !current {
				s.log.Info("mqtt: session held offline here was superseded on another node; resuming the newer one", "client", id)
				s.Evict(id, old.seq, EvictSuperseded)
				inMem = false
			}
		}
		if !inMem {
			lctx, cancel := context.WithTimeout(s.ctx, o.SessionLoadTimeout)
			st, ok, err := s.backend.LoadSession(lctx, id)
			cancel()
			if err != nil {
				c.refuse(packets.ReasonServerUnavailable, "session store unavailable")
				s.log.Warn("mqtt: load session", "client", id, "timeout", o.SessionLoadTimeout, "err", err)
				return
			}
			if ok {
				loaded = st
			}
		}
	}

	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		c.refuse(packets.ReasonServerUnavailable, "server shutting down")
		return
	}
	var oldConn *conn
	var pubWills []*Message
	ss := s.sessions[id]
	present := false
	if ss != nil && !clean && ss.otherOwner(owner) {
		clean, loaded = true, nil // held here since the look above
	}
	var delTicket *persistTicket
	if clean {
		delTicket = s.persist.take(id) // for the DeleteSession below
	}
	if ss != nil {
		ss.mu.Lock()
		oldConn = ss.conn
		ss.conn = nil
		s.wheel.disarm(&ss.expiryTimer)
		s.wheel.disarm(&ss.willTimer)
		if ss.will != nil && (clean || ss.willDelay == 0) {
			pubWills = append(pubWills, ss.will)
		}
		ss.will = nil
		if clean {
			ss.dead = true
			ss.dropSubsLocked()
			ss.releaseLocked()
			ss.mu.Unlock()
			delete(s.sessions, id)
			s.stats.Sessions.Store(int64(len(s.sessions)))
			ss = nil
		} else {
			present = true
			ss.mu.Unlock()
		}
	}
	if ss == nil {
		ss = s.newSession(id)
		if loaded != nil {
			if loaded.Overflow != nil {
				// Before restore makes the session reachable.
				loaded.Overflow(ss.seq)
			}
			ss.restore(loaded)
			present = true
		}
		s.sessions[id] = ss
		s.stats.Sessions.Store(int64(len(s.sessions)))
	}
	ss.mu.Lock()
	c.session = ss
	c.sendQuota = min(quota, maxInflightOut)
	if v5 {
		c.aliasOutMax = pr.TopicAliasMaximum
	}
	ss.conn = c
	ss.online.Store(true)
	ss.username = cp.Username
	ss.owner = owner
	ss.expiry = expiry
	ss.will, ss.willDelay = will, willDelay
	ack.SessionPresent = present
	// Held with the unit's output (batch.go), so written once
	// handleConnect returns: after a clean start's DeleteSession below,
	// where a cluster backend records the new session for the other
	// nodes (the bridge's clean-start announcement). A client that
	// connects to another node the moment it has the CONNACK finds the
	// new session there (TestServerCleanStartConnackAfterDelete).
	c.send(ack)
	c.connected.Store(true)
	s.stats.Clients.Add(1)
	if present {
		ss.resendLocked(c)
	}
	ss.mu.Unlock()
	s.mu.Unlock()

	if ka > 0 {
		s.wheel.arm(&c.ka, ka*3/2, c.keepAliveCheck)
	} else {
		s.wheel.disarm(&c.ka)
	}
	if oldConn != nil {
		oldConn.closeWith(packets.ReasonSessionTakenOver, "session taken over by "+c.remote, closeTakeover)
	}
	for _, w := range pubWills {
		s.sendWillOrOwe(ss, w, expiry, false)
	}
	s.connected(c)
	if clean {
		if !cp.CleanStart {
			s.log.Info("mqtt: session of an earlier owner of the client id not resumed", "client", id)
		}
		s.persist.wait(delTicket)
		if err := s.backend.DeleteSession(s.ctx, id); err != nil {
			s.log.Warn("mqtt: delete session", "client", id, "err", err)
		}
		s.persist.finish(delTicket)
	}
	s.connectedWill(id, clean)
}

func propSet(ids ...packets.PropID) packets.PropSet {
	var s packets.PropSet
	for _, id := range ids {
		s.Add(id)
	}
	return s
}

// keepAliveCheck runs from the wheel: before CONNECT it enforces the
// connect timeout, after it 1.5 times the keep alive.
func (c *conn) keepAliveCheck() {
	if c.closing.Load() {
		return
	}
	if !c.connected.Load() {
		// A worker that holds the connection is handling what it sent:
		// a CONNECT that came in time, whose session may take long to
		// load (a cluster backend while many clients resume at once),
		// is not cut off. handleConnect arms the keep alive over this.
		c.inMu.Lock()
		busy := c.scheduled
		c.inMu.Unlock()
		if busy {
			c.srv.wheel.arm(&c.ka, c.srv.opts.ConnectTimeout, c.keepAliveCheck)
			if c.closing.Load() {
				c.srv.wheel.arm(&c.ka, closeLinger, c.closeFD) // as below
			}
			return
		}
		c.closeWith(0, "no CONNECT within the connect timeout", closeServer)
		return
	}
	limit := c.keepAlive * 3 / 2
	idle := time.Duration(nanotime() - c.lastRecv.Load())
	if idle >= limit {
		c.closeWith(packets.ReasonKeepAliveTimeout, "keep alive timeout", closeServer)
		return
	}
	c.srv.wheel.arm(&c.ka, limit-idle, c.keepAliveCheck)
	if c.closing.Load() {
		// closeWith ran meanwhile and may have armed c.ka for the end of
		// a linger (closeFD) before the line above replaced it.
		c.srv.wheel.arm(&c.ka, closeLinger, c.closeFD)
	}
}

// fail drops the connection after an I/O failure (no DISCONNECT).
func (c *conn) fail(detail string) { c.closeWith(0, detail, closeServer) }

// closeWith ends the connection once: a v5 DISCONNECT with code when the
// server ends it with an error code, then the socket, then the session's
// disconnect handling (will, expiry, backend save).
func (c *conn) closeWith(code packets.ReasonCode, detail string, kind closeKind) {
	if !c.closing.CompareAndSwap(false, true) {
		return
	}
	s := c.srv
	connected := c.connected.Load()
	if connected {
		s.stats.Clients.Add(-1)
	}
	serverSide := kind == closeServer || kind == closeTakeover || kind == closeShutdown
	if connected && serverSide && c.version == packets.Version5 && code != 0 {
		d := &packets.Disconnect{ReasonCode: code}
		if packets.ValidReasonCode(packets.TypeDisconnect, packets.Version5, code) {
			d.Properties = reasonProps(detail)
			c.send(d)
		}
	}
	if connected && kind == closeClientNormal {
		// The will of a normal DISCONNECT is dropped before the socket
		// goes: a client that reconnects once it sees the close takes the
		// session over, and a takeover publishes the will the session
		// still holds (possibly before the rest of this close runs).
		ss := c.session
		ss.mu.Lock()
		if ss.conn == c {
			ss.will = nil
		}
		ss.mu.Unlock()
	}
	// After a reason the client must see (a DISCONNECT or a refused
	// CONNACK) the close lingers: the client reads it before the socket
	// goes, and what it sent meanwhile is read, so no reset destroys it.
	linger := serverSide && kind != closeShutdown && code != 0
	linger = c.shutdownIO(linger)
	s.wheel.disarm(&c.ka)
	if linger {
		s.wheel.arm(&c.ka, closeLinger, c.closeFD)
	}
	s.untrack(c)
	id := c.clientID()
	if serverSide && kind != closeShutdown {
		// code 0: the server closed without a reason code (I/O failure,
		// no CONNECT in time); the log then carries none either.
		attrs := []any{"client", id, "remote", c.remote}
		if code != 0 {
			attrs = append(attrs, "reason", code.String(), "code", byte(code))
		}
		s.log.Info("mqtt: client disconnected", append(attrs, "detail", detail)...)
	} else {
		s.log.Debug("mqtt: client disconnected", "client", id, "remote", c.remote, "detail", detail)
	}
	if !connected {
		return
	}
	defer s.disconnected(c.info())
	ss := c.session
	var will *Message
	var willExpiry time.Duration
	var save *SessionState
	dead, deferSave := false, false
	s.mu.Lock()
	ss.mu.Lock()
	if ss.conn == c {
		ss.conn = nil
		ss.online.Store(false)
		ss.disconnectedAt = time.Now().UnixNano()
		switch {
		case ss.expiry == 0 && kind != closeShutdown:
			ss.dead, dead = true, true
			delete(s.sessions, ss.id)
			s.stats.Sessions.Store(int64(len(s.sessions)))
			ss.dropSubsLocked()
			ss.releaseLocked()
			will, ss.will = ss.will, nil
		default:
			if ss.expiry != maxExpiry && kind != closeShutdown {
				s.wheel.arm(&ss.expiryTimer, ss.expiry, ss.expire)
			}
			if ss.will != nil && kind != closeShutdown {
				if d := min(ss.willDelay, ss.expiry); d == 0 {
					will, ss.will = ss.will, nil
				} else {
					s.wheel.arm(&ss.willTimer, d, ss.fireWill)
				}
			}
			if ss.expiry > 0 {
				if ss.storingByLocked(c) {
					deferSave = true // qos2store.go
				} else {
					save = ss.stateLocked()
				}
			}
		}
	}
	var ticket *persistTicket
	if save != nil || dead || deferSave {
		ticket = s.persist.take(ss.id)
	}
	willExpiry = ss.expiry
	ss.mu.Unlock()
	s.mu.Unlock()
	var owed *retryWill
	if will != nil {
		// One that fails stays owed: the save or delete below carries it.
		_, owed = s.sendWillOrOwe(ss, will, willExpiry, true)
	}
	if deferSave {
		s.wg.Add(1)
		go func() {
			defer s.wg.Done()
			s.saveWhenStored(ss, ticket)
		}()
		s.armWillRetry(owed)
		return
	}
	if ticket != nil {
		// After every save or delete of the client decided before this
		// one (persistorder.go).
		s.persist.wait(ticket)
	}
	if save != nil {
		if err := s.backend.SaveSession(s.ctx, save); err != nil {
			s.log.Warn("mqtt: save session", "client", ss.id, "err", err)
		}
	}
	if dead {
		if err := s.backend.DeleteSession(s.ctx, ss.id); err != nil {
			s.log.Warn("mqtt: delete session", "client", ss.id, "err", err)
		}
	}
	if ticket != nil {
		s.persist.finish(ticket)
	}
	s.armWillRetry(owed)
}

func (c *conn) handleDisconnect(p *packets.Disconnect) {
	ss := c.session
	if p.Properties.Present.Has(packets.PropSessionExpiry) {
		ss.mu.Lock()
		bad := ss.expiry == 0 && p.Properties.SessionExpiry != 0
		if !bad {
			ss.expiry = min(time.Duration(p.Properties.SessionExpiry)*time.Second, c.srv.opts.SessionExpiryMax)
		}
		ss.mu.Unlock()
		if bad {
			c.closeWith(packets.ReasonProtocolError, "session expiry set in DISCONNECT after CONNECT gave 0", closeServer)
			return
		}
	}
	kind := closeClientNormal
	if p.ReasonCode != packets.ReasonNormalDisconnection {
		kind = closeClientWill
	}
	c.closeWith(p.ReasonCode, "client DISCONNECT", kind)
}
