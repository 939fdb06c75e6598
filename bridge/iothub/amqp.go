package iothub

import (
	"context"
	"crypto/tls"
	"errors"
	"fmt"
	"io"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/bridge/iothub/amqp1"
)

// The AMQP 1.0 endpoint (Options.AMQPSListen, IoT Hub's port 5671): what
// the service SDKs use to send cloud-to-device messages (azure-iothub's
// Client.send). A back end connects over TLS, with or without a SASL
// layer (ANONYMOUS, or PLAIN with a policy's SAS token as the password),
// proves a shared access policy with a claims-based-security put-token
// on the $cbs node, then sends on a link to /messages/devicebound, each
// message's "to" naming /devices/{id}/messages/devicebound. Each
// delivery is settled with accepted once the message is stored (as the
// HTTPS endpoint's 204), or rejected with the error condition the SDKs
// map to their errors (amqp:not-found: DeviceNotFoundError,
// amqp:resource-limit-exceeded: DeviceMaximumQueueDepthExceededError,
// amqp:unauthorized-access: UnauthorizedError, ...).
//
// A link to /messages/serviceBound/feedback receives the delivery
// feedback of messages sent with an ack request (amqp_feedback.go); one
// to /messages/serviceBound/filenotifications attaches and stays silent
// (the hub has no file uploads). Any other
// address is refused (the attach answered without a terminus, then
// detached with amqp:not-found).
//
// One goroutine serves a connection, frames in order; a second, the
// writer, owns the socket's writes (and the heartbeats the client asked
// for with its idle-time-out); a feedback pump runs while a feedback link
// is attached.

const (
	amqpMaxFrame     = 64 << 10 // our max-frame-size
	amqpChannelMax   = 15       // sessions per connection - 1
	amqpHandleMax    = 63       // links per session - 1
	amqpIdleTimeout  = 4 * time.Minute
	amqpStartTimeout = 10 * time.Second // TLS, headers, SASL and open
	amqpWriteTimeout = 10 * time.Second // one write of what is queued
	amqpLinkCredit   = 100
	amqpWindow       = 5000    // a session's incoming window, in transfer frames
	amqpMaxQueued    = 4 << 20 // bytes waiting to be written to a client before it is dropped
	cbsAddress       = "$cbs"
	c2dAddress       = "/messages/devicebound"
)

// amqpSilent are the receiving addresses that attach and never deliver.
var amqpSilent = []string{"/messages/servicebound/filenotifications"}

// amqpServer is the hub's AMQP listeners and connections.
type amqpServer struct {
	mu    sync.Mutex
	lns   []net.Listener
	conns map[*amqpConn]struct{} // protected by mu
	addrs []net.Addr
	// storeHook, when set (by tests, to stall a store), runs before each
	// cloud-to-device message sent over AMQP is stored.
	storeHook atomic.Pointer[func(context.Context)]
}

// startAMQP opens the AMQP listeners.
func (h *Hub) startAMQP(cfg *tls.Config) error {
	if len(h.opts.AMQPSListen) == 0 {
		return nil
	}
	h.amqp.conns = make(map[*amqpConn]struct{})
	for _, addr := range h.opts.AMQPSListen {
		ln, err := net.Listen("tcp", addr)
		if err != nil {
			return fmt.Errorf("iothub: AMQPS listen %s: %w", addr, err)
		}
		h.amqp.mu.Lock()
		h.amqp.lns = append(h.amqp.lns, ln)
		h.amqp.addrs = append(h.amqp.addrs, ln.Addr())
		h.amqp.mu.Unlock()
		h.wg.Add(1)
		go h.acceptAMQP(ln, cfg)
	}
	return nil
}

// AMQPSAddrs returns the AMQP endpoint's listen addresses.
func (h *Hub) AMQPSAddrs() []net.Addr {
	h.amqp.mu.Lock()
	defer h.amqp.mu.Unlock()
	return append([]net.Addr(nil), h.amqp.addrs...)
}

// closeAMQP closes the listeners and every connection (their goroutines
// are waited for by Close, through h.wg).
func (h *Hub) closeAMQP() {
	h.amqp.mu.Lock()
	defer h.amqp.mu.Unlock()
	for _, ln := range h.amqp.lns {
		_ = ln.Close()
	}
	for c := range h.amqp.conns {
		_ = c.nc.Close()
	}
}

func (h *Hub) acceptAMQP(ln net.Listener, cfg *tls.Config) {
	defer h.wg.Done()
	for {
		nc, err := ln.Accept()
		if err != nil {
			if h.closing.Load() || errors.Is(err, net.ErrClosed) {
				return
			}
			h.log.Warn("iothub: AMQPS accept", "err", err)
			select {
			case <-time.After(50 * time.Millisecond):
			case <-h.ctx.Done():
				return
			}
			continue
		}
		c := &amqpConn{h: h, raw: nc, nc: tls.Server(nc, cfg), sessions: map[uint16]*amqpSession{}, wake: make(chan struct{}, 1)}
		h.amqp.mu.Lock()
		if h.closing.Load() {
			h.amqp.mu.Unlock()
			_ = nc.Close()
			return
		}
		h.amqp.conns[c] = struct{}{}
		h.amqp.mu.Unlock()
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			c.serve()
			h.amqp.mu.Lock()
			delete(h.amqp.conns, c)
			h.amqp.mu.Unlock()
		}()
	}
}

// amqpConn is one back end's connection.
type amqpConn struct {
	h   *Hub
	raw net.Conn // the TCP connection under nc
	nc  net.Conn

	// After the handshake only the writer (writeLoop) writes to nc: the
	// other goroutines queue frames in out, in the order they compose
	// them, and never wait on the socket. A client that lets more than
	// amqpMaxQueued bytes wait is dropped.
	omu   sync.Mutex
	out   []byte        // protected by omu
	wfail error         // protected by omu: why the writer gave up
	wake  chan struct{} // 1-buffered: out has frames

	// mu guards the sessions, their links and the feedback pump's state:
	// the serving goroutine holds it while it handles a frame (never
	// across a store or a socket write), the feedback pump while it
	// queues a batch.
	mu    sync.Mutex
	fb    *feedbackPump  // protected by mu; nil while no feedback link is attached
	pumps sync.WaitGroup // the feedback pumps this connection started

	maxOut   uint32 // the client's max-frame-size
	sessions map[uint16]*amqpSession
	// auth is the policy a put-token (or SASL PLAIN) proved, and until
	// when; nil before.
	auth       *Policy
	authExpiry time.Time
	// partialBytes are the bytes held by deliveries in progress over all
	// links (at most amqpMaxPartial).
	partialBytes int
	// heartbeat is how often an empty frame goes out (half the client's
	// idle-time-out; 0: none asked).
	heartbeat time.Duration
}

// amqpSession is one session (a begin), keyed by the client's channel;
// the hub answers on the same channel number.
type amqpSession struct {
	ch       uint16
	links    map[uint32]*amqpLink
	nextOut  uint32 // next-outgoing-id (our transfer ids)
	nextIn   uint32 // next-incoming-id expected
	inWindow uint32 // transfer frames we still take before a flow
	delivery uint32 // our next delivery-id
}

// amqpLink is one link of a session. role is the hub's.
type amqpLink struct {
	name    string
	handle  uint32
	address string
	hubRole bool // amqp1.RoleReceiver: the client sends on it
	// receiving links: the client's delivery-count and our credit; a
	// delivery being put together from several transfer frames.
	deliveryCount uint32
	credit        uint32
	partial       []byte
	partialID     uint32
	partialTag    []byte
	partialSettle bool
	partialOn     bool
	oversize      bool
	// sending links (the $cbs replies): the client's credit, and replies
	// waiting for it.
	pending [][]byte
}

// amqpFail is a connection error: close with this condition.
type amqpFail struct {
	cond amqp1.Symbol
	msg  string
}

func (e *amqpFail) Error() string { return string(e.cond) + ": " + e.msg }

func failf(cond amqp1.Symbol, format string, args ...any) error {
	return &amqpFail{cond: cond, msg: fmt.Sprintf(format, args...)}
}

func (c *amqpConn) serve() {
	defer c.nc.Close()
	_ = c.nc.SetDeadline(time.Now().Add(amqpStartTimeout))
	fr, err := c.handshake()
	if err != nil {
		c.h.log.Info("iothub: AMQP connection refused", "remote", c.nc.RemoteAddr().String(), "err", err)
		return
	}
	_ = c.nc.SetWriteDeadline(time.Time{})
	stop, written := make(chan struct{}), make(chan struct{})
	go func() {
		defer close(written)
		c.writeLoop(stop)
	}()
	defer func() {
		c.stopFeedback()
		close(stop)
		<-written
	}()
	for {
		_ = c.nc.SetReadDeadline(time.Now().Add(amqpIdleTimeout))
		f, err := fr.ReadFrame()
		if err != nil {
			if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.closeWith(err)
			}
			return
		}
		if f.Type != amqp1.TypeAMQP {
			c.closeWith(failf(amqp1.CondFramingError, "frame type %d after the open", f.Type))
			return
		}
		if len(f.Body) == 0 {
			continue // heartbeat
		}
		code, fields, payload, err := amqp1.Performative(f.Body)
		if err != nil {
			c.closeWith(err)
			return
		}
		c.mu.Lock()
		done, st, err := c.handle(f.Channel, code, fields, payload)
		c.mu.Unlock()
		if err == nil && st != nil {
			err = c.store(st) // outside mu: the store may take up to the request timeout
		}
		if err != nil {
			c.closeWith(err)
			return
		}
		if done {
			return
		}
	}
}
