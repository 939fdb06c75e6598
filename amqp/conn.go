package amqp

import (
	"bufio"
	"errors"
	"fmt"
	"io"
	"net"
	"runtime"
	"strings"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// Timeouts of a connection's life.
const (
	handshakeTimeout = 10 * time.Second
	// closeTimeout: how long a closing connection waits for close-ok.
	closeTimeout = 3 * time.Second
)

// Version is the server version sent in connection.start.
const Version = "0.9.1-smartgo"

// amqpError is a protocol exception: a channel error closes the channel,
// a connection error (hard) the connection.
type amqpError struct {
	code              uint16
	text              string
	classID, methodID uint16
	hard              bool
}

func (e *amqpError) Error() string { return fmt.Sprintf("amqp: %d %s", e.code, e.text) }

func chErr(code uint16, m wire.Method, format string, args ...any) *amqpError {
	e := &amqpError{code: code, text: replyText(code) + " - " + fmt.Sprintf(format, args...)}
	if m != nil {
		e.classID, e.methodID = m.ClassID(), m.MethodID()
	}
	return e
}

func connErr(code uint16, m wire.Method, format string, args ...any) *amqpError {
	e := chErr(code, m, format, args...)
	e.hard = true
	return e
}

func replyText(code uint16) string {
	switch code {
	case wire.ContentTooLarge:
		return "CONTENT_TOO_LARGE"
	case wire.NoRoute:
		return "NO_ROUTE"
	case wire.ConnectionForced:
		return "CONNECTION_FORCED"
	case wire.AccessRefused:
		return "ACCESS_REFUSED"
	case wire.NotFound:
		return "NOT_FOUND"
	case wire.ResourceLocked:
		return "RESOURCE_LOCKED"
	case wire.PreconditionFailed:
		return "PRECONDITION_FAILED"
	case wire.FrameError:
		return "FRAME_ERROR"
	case wire.SyntaxError:
		return "SYNTAX_ERROR"
	case wire.CommandInvalid:
		return "COMMAND_INVALID"
	case wire.ChannelError:
		return "CHANNEL_ERROR"
	case wire.UnexpectedFrame:
		return "UNEXPECTED_FRAME"
	case wire.ResourceError:
		return "RESOURCE_ERROR"
	case wire.NotAllowed:
		return "NOT_ALLOWED"
	case wire.NotImplemented:
		return "NOT_IMPLEMENTED"
	case wire.InternalError:
		return "INTERNAL_ERROR"
	}
	return "ERROR"
}

// conn is one client connection. The reader goroutine (serve) owns it and
// waits for the writer goroutine (writeLoop) before it returns.
type conn struct {
	srv       *Server
	nc        net.Conn
	out       *outq
	r         *wire.Reader
	br        *bufio.Reader
	heartbeat atomic.Int64 // negotiated interval in nanoseconds; 0: off
	hbSet     chan struct{}

	// Set during the handshake, then read-only.
	channelMax   uint16
	frameMax     uint32
	vh           *vhost
	user         string
	cancelNotify bool      // the client handles basic.cancel from the server
	blockedCap   bool      // the client handles connection.blocked
	client       string    // the client's product and version (start-ok)
	since        time.Time // accepted

	// Reader goroutine only.
	closing bool // connection.close sent: wait for close-ok

	shutdown     atomic.Bool   // the server closes it (320 CONNECTION_FORCED sent)
	quit         chan struct{} // closed once the shutdown's connection.close is queued
	writerDone   chan struct{} // closed when writeLoop ends
	shutdownSeen bool          // the reader has applied closeTimeout for it
	blocked      atomic.Bool   // the reader waits at a publish for the resource alarm to clear

	// Guarded by Server.mu.
	channels  map[uint16]*channel
	exclusive map[*queue]struct{}
	gone      bool       // torn down
	dirty     []*channel // channels with confirms to flush
}

func (s *Server) newConn(nc net.Conn) *conn {
	return &conn{srv: s, nc: nc, out: newOutq(), hbSet: make(chan struct{}), since: time.Now(),
		quit: make(chan struct{}), writerDone: make(chan struct{}),
		channels: map[uint16]*channel{}, exclusive: map[*queue]struct{}{}}
}

// send queues one method frame.
func (c *conn) send(channel uint16, m wire.Method) {
	c.out.push(wire.AppendMethodFrame(nil, channel, m))
}

// serve runs the connection to its end: handshake, frames, teardown.
func (c *conn) serve() {
	done := c.writerDone
	go func() {
		defer close(done)
		c.writeLoop()
	}()
	c.br = bufio.NewReaderSize(c.nc, 64<<10)
	if err := c.handshake(c.br); err != nil {
		if !errors.Is(err, io.EOF) && !errors.Is(err, io.ErrUnexpectedEOF) {
			c.srv.logConnErr(c, "handshake", err) // not port probes
		}
	} else {
		c.readLoop()
	}
	c.srv.teardown(c)
	c.out.close()
	c.nc.SetWriteDeadline(time.Now().Add(flushTimeout))
	<-done
	c.nc.Close()
}

func (c *conn) readFrame() (wire.Frame, error) {
	for {
		f, err := c.r.ReadFrame()
		if err != nil || f.Type != wire.FrameHeartbeat {
			return f, err
		}
	}
}

// handshake runs connection.start to connection.open-ok.
func (c *conn) handshake(br *bufio.Reader) error {
	s := c.srv
	c.nc.SetDeadline(time.Now().Add(s.handshakeTimeout))
	if err := wire.ReadProtocolHeader(br); err != nil {
		if errors.Is(err, wire.ErrBadProtocolHeader) {
			c.out.push(wire.ProtocolHeader[:])
		}
		return fmt.Errorf("protocol header: %w", err)
	}
	c.r = wire.NewReader(br, wire.FrameMinSize)
	c.send(0, &wire.ConnectionStart{VersionMajor: 0, VersionMinor: 9,
		ServerProperties: serverProperties(), Mechanisms: "PLAIN AMQPLAIN", Locales: "en_US"})
	m, err := c.expect(&wire.ConnectionStartOk{})
	if err != nil {
		return err
	}
	so := m.(*wire.ConnectionStartOk)
	if caps, ok := so.ClientProperties["capabilities"].(wire.Table); ok {
		c.cancelNotify, _ = caps["consumer_cancel_notify"].(bool)
		c.blockedCap, _ = caps["connection.blocked"].(bool)
	}
	c.client = clientName(so.ClientProperties)
	user, pass, err := credentials(so.Mechanism, so.Response)
	if err != nil {
		c.refuse(err.Error())
		return err
	}
	if s.opts.Authenticate != nil {
		ok, aerr := s.opts.Authenticate(user, pass)
		if aerr != nil || !ok {
			c.refuse(fmt.Sprintf("Login was refused using authentication mechanism %s", so.Mechanism))
			return fmt.Errorf("login of %q refused (%v)", user, aerr)
		}
	}
	c.user = user
	hb := s.opts.Heartbeat
	if hb < 0 {
		hb = 0
	}
	c.send(0, &wire.ConnectionTune{ChannelMax: s.opts.ChannelMax, FrameMax: s.opts.FrameMax, Heartbeat: uint16(hb / time.Second)})
	m, err = c.expect(&wire.ConnectionTuneOk{})
	if err != nil {
		return err
	}
	to := m.(*wire.ConnectionTuneOk)
	c.channelMax = s.opts.ChannelMax
	if to.ChannelMax != 0 && to.ChannelMax < c.channelMax {
		c.channelMax = to.ChannelMax
	}
	c.frameMax = s.opts.FrameMax
	if to.FrameMax != 0 {
		if to.FrameMax < wire.FrameMinSize || to.FrameMax > s.opts.FrameMax {
			c.hardClose(wire.NotAllowed, fmt.Sprintf("NOT_ALLOWED - frame_max=%d outside [%d, %d]", to.FrameMax, wire.FrameMinSize, s.opts.FrameMax))
			return fmt.Errorf("client frame_max %d refused", to.FrameMax)
		}
		c.frameMax = to.FrameMax
	}
	c.r.SetMax(c.frameMax)
	c.heartbeat.Store(int64(time.Duration(to.Heartbeat) * time.Second))
	close(c.hbSet)
	m, err = c.expect(&wire.ConnectionOpen{})
	if err != nil {
		return err
	}
	vhName := m.(*wire.ConnectionOpen).VirtualHost
	s.mu.Lock()
	vh := s.vhosts[vhName]
	if vh != nil && !vh.open {
		vh = nil // saved definitions of a virtual host no longer configured
	}
	if vh != nil {
		c.vh = vh
		s.conns[c] = struct{}{}
	}
	s.mu.Unlock()
	if vh == nil {
		c.hardClose(wire.NotAllowed, fmt.Sprintf("NOT_ALLOWED - vhost %s not found", vhName))
		return fmt.Errorf("virtual host %q refused", vhName)
	}
	c.send(0, &wire.ConnectionOpenOk{})
	c.nc.SetDeadline(time.Time{})
	return nil
}

// expect reads the next method on channel 0 and requires it to be like
// want (same class and method).
func (c *conn) expect(want wire.Method) (wire.Method, error) {
	f, err := c.readFrame()
	if err != nil {
		return nil, err
	}
	if f.Type != wire.FrameMethod || f.Channel != 0 {
		c.hardClose(wire.UnexpectedFrame, "UNEXPECTED_FRAME - handshake frames are methods on channel 0")
		return nil, fmt.Errorf("frame type %d on channel %d during the handshake", f.Type, f.Channel)
	}
	m, err := wire.DecodeMethod(f.Payload)
	if err != nil {
		c.hardClose(wire.SyntaxError, "SYNTAX_ERROR - "+err.Error())
		return nil, err
	}
	if m.ClassID() != want.ClassID() || m.MethodID() != want.MethodID() {
		if _, ok := m.(*wire.ConnectionClose); ok {
			c.send(0, &wire.ConnectionCloseOk{})
			return nil, io.EOF
		}
		c.hardClose(wire.CommandInvalid, fmt.Sprintf("COMMAND_INVALID - expected method %d.%d, got %d.%d",
			want.ClassID(), want.MethodID(), m.ClassID(), m.MethodID()))
		return nil, fmt.Errorf("method %d.%d during the handshake", m.ClassID(), m.MethodID())
	}
	return m, nil
}

// refuse answers a failed login: 403 ACCESS_REFUSED, then the socket
// closes (RabbitMQ's authentication_failure_close).
func (c *conn) refuse(text string) {
	c.hardClose(wire.AccessRefused, "ACCESS_REFUSED - "+text)
}

// hardClose queues connection.close without waiting for close-ok (the
// handshake's failures).
func (c *conn) hardClose(code uint16, text string) {
	c.send(0, &wire.ConnectionClose{ReplyCode: code, ReplyText: text})
}

// credentials decodes a start-ok response.
func credentials(mechanism, response string) (user, pass string, err error) {
	switch mechanism {
	case "PLAIN":
		parts := strings.SplitN(response, "\x00", 3)
		if len(parts) != 3 {
			return "", "", errors.New("malformed PLAIN response")
		}
		return parts[1], parts[2], nil
	case "AMQPLAIN":
		// A field table without its leading length.
		t, err := decodeArgs([]byte(response))
		if err != nil {
			return "", "", fmt.Errorf("malformed AMQPLAIN response: %w", err)
		}
		user, _ = stringArg(t["LOGIN"])
		pass, _ = stringArg(t["PASSWORD"])
		return user, pass, nil
	}
	return "", "", fmt.Errorf("unsupported authentication mechanism %q", mechanism)
}

func serverProperties() wire.Table {
	return wire.Table{
		"product":     "SmartGo",
		"version":     Version,
		"platform":    "Go " + runtime.Version(),
		"copyright":   "SmartGo authors",
		"information": "SmartGo AMQP 0-9-1 engine",
		"capabilities": wire.Table{
			"publisher_confirms":           true,
			"exchange_exchange_bindings":   true,
			"basic.nack":                   true,
			"consumer_cancel_notify":       true,
			"authentication_failure_close": true,
			"per_consumer_qos":             true,
			"consumer_priorities":          true,
			"connection.blocked":           true,
		},
	}
}

// readLoop reads frames until the connection ends.
func (c *conn) readLoop() {
	for {
		if c.br.Buffered() == 0 {
			c.flushDirty()
		}
		c.out.waitRoom()
		if hb := time.Duration(c.heartbeat.Load()); hb > 0 && !c.closing && !c.shutdownSeen {
			c.nc.SetReadDeadline(time.Now().Add(2 * hb))
		}
		if c.shutdown.Load() && !c.shutdownSeen {
			// After the heartbeat deadline: forceClose's may have come first.
			c.shutdownSeen = true
			c.nc.SetReadDeadline(time.Now().Add(closeTimeout))
		}
		f, err := c.r.ReadFrame()
		if err != nil {
			if c.closing || c.shutdown.Load() {
				return
			}
			if errors.Is(err, wire.ErrFrameTooLarge) || errors.Is(err, wire.ErrBadFrameEnd) {
				c.connectionError(connErr(wire.FrameError, nil, "%v", err))
				continue
			}
			var ne net.Error
			if errors.As(err, &ne) && ne.Timeout() {
				c.srv.logConnErr(c, "missed heartbeats", err)
			} else if !errors.Is(err, io.EOF) && !errors.Is(err, net.ErrClosed) {
				c.srv.logConnErr(c, "read", err)
			}
			return
		}
		if c.closing {
			if f.Type == wire.FrameMethod && f.Channel == 0 {
				if m, err := wire.DecodeMethod(f.Payload); err == nil {
					switch m.(type) {
					case *wire.ConnectionCloseOk:
						return
					case *wire.ConnectionClose:
						c.send(0, &wire.ConnectionCloseOk{})
						return
					}
				}
			}
			continue
		}
		if e := c.frame(f); e != nil {
			if e == errClientClosed {
				return
			}
			c.connectionError(e)
		}
	}
}

var errClientClosed = &amqpError{}

// connectionError sends connection.close and waits for close-ok (or
// closeTimeout).
func (c *conn) connectionError(e *amqpError) {
	c.srv.logConnErr(c, "connection error", e)
	c.send(0, &wire.ConnectionClose{ReplyCode: e.code, ReplyText: e.text, FailingClassID: e.classID, FailingMethodID: e.methodID})
	c.startClosing()
}

// forceClose is the server's shutdown of c, from any goroutine: 320
// CONNECTION_FORCED, then the reader waits closeTimeout for close-ok.
func (c *conn) forceClose() { c.forceCloseReason("broker shutdown") }

// forceCloseReason is forceClose with the reason the client is given.
func (c *conn) forceCloseReason(reason string) {
	if c.shutdown.Swap(true) {
		return
	}
	c.send(0, &wire.ConnectionClose{ReplyCode: wire.ConnectionForced, ReplyText: "CONNECTION_FORCED - " + reason})
	c.nc.SetReadDeadline(time.Now().Add(closeTimeout))
	close(c.quit) // after the send: a reader blocked at a publish ends on it (waitAlarm)
}

func (c *conn) startClosing() {
	c.closing = true
	c.nc.SetReadDeadline(time.Now().Add(closeTimeout))
}

// frame handles one frame after the handshake.
func (c *conn) frame(f wire.Frame) *amqpError {
	switch f.Type {
	case wire.FrameHeartbeat:
		if f.Channel != 0 {
			return connErr(wire.FrameError, nil, "heartbeat frame on channel %d", f.Channel)
		}
		return nil
	case wire.FrameMethod, wire.FrameHeader, wire.FrameBody:
	default:
		return connErr(wire.FrameError, nil, "unknown frame type %d", f.Type)
	}
	if f.Channel > c.channelMax {
		return connErr(wire.ChannelError, nil, "channel %d above channel_max %d", f.Channel, c.channelMax)
	}
	if f.Channel == 0 {
		if f.Type != wire.FrameMethod {
			return connErr(wire.UnexpectedFrame, nil, "content frame on channel 0")
		}
		m, err := wire.DecodeMethod(f.Payload)
		if err != nil {
			return decodeErr(err)
		}
		return c.connMethod(m)
	}
	s := c.srv
	s.mu.Lock()
	ch := c.channels[f.Channel]
	s.mu.Unlock()
	if f.Type != wire.FrameMethod {
		if ch == nil {
			return connErr(wire.UnexpectedFrame, nil, "content frame on channel %d, which is not open", f.Channel)
		}
		return ch.content(f)
	}
	m, err := wire.DecodeMethod(f.Payload)
	if err != nil {
		return decodeErr(err)
	}
	if m.ClassID() == 10 {
		return connErr(wire.CommandInvalid, m, "connection method on channel %d", f.Channel)
	}
	if ch == nil {
		if _, ok := m.(*wire.ChannelOpen); !ok {
			return connErr(wire.ChannelError, m, "channel %d is not open", f.Channel)
		}
		s.mu.Lock()
		c.openChannel(f.Channel)
		s.mu.Unlock()
		c.send(f.Channel, &wire.ChannelOpenOk{})
		return nil
	}
	return ch.method(m)
}

func decodeErr(err error) *amqpError {
	if errors.Is(err, wire.ErrUnknownMethod) {
		return connErr(wire.NotImplemented, nil, "%v", err)
	}
	return connErr(wire.SyntaxError, nil, "%v", err)
}

// connMethod handles a method on channel 0 after the handshake.
func (c *conn) connMethod(m wire.Method) *amqpError {
	switch m := m.(type) {
	case *wire.ConnectionClose:
		c.send(0, &wire.ConnectionCloseOk{})
		return errClientClosed
	case *wire.ConnectionCloseOk:
		return errClientClosed
	case *wire.ConnectionUpdateSecret:
		if a := c.srv.opts.Authenticate; a != nil {
			if ok, err := a(c.user, m.NewSecret); err != nil || !ok {
				return connErr(wire.AccessRefused, m, "new secret of %q refused", c.user)
			}
		}
		c.send(0, &wire.ConnectionUpdateSecretOk{})
		return nil
	case *wire.ConnectionBlocked, *wire.ConnectionUnblocked:
		return connErr(wire.CommandInvalid, m, "connection.blocked is sent by servers only")
	}
	if m.ClassID() != 10 {
		return connErr(wire.CommandInvalid, m, "method %d.%d on channel 0", m.ClassID(), m.MethodID())
	}
	return connErr(wire.CommandInvalid, m, "unexpected method %d.%d after the handshake", m.ClassID(), m.MethodID())
}
