package iothub

import (
	"bytes"
	"errors"
	"fmt"
	"io"
	"strings"
	"time"

	"github.com/smartgo/smartgo/bridge/iothub/amqp1"
)

// handshake reads the protocol headers, the SASL exchange if the client
// starts one, and the client's open, and answers them. It returns the
// reader of the frames that follow.
func (c *amqpConn) handshake() (*amqp1.FrameReader, error) {
	fr := &amqp1.FrameReader{R: c.nc, Max: amqpMaxFrame}
	var hdr [8]byte
	if _, err := io.ReadFull(c.nc, hdr[:]); err != nil {
		return nil, fmt.Errorf("protocol header: %w", err)
	}
	if hdr == amqp1.HeaderSASL {
		if err := c.sasl(fr); err != nil {
			return nil, err
		}
		if _, err := io.ReadFull(c.nc, hdr[:]); err != nil {
			return nil, fmt.Errorf("protocol header after SASL: %w", err)
		}
	}
	if hdr != amqp1.HeaderAMQP {
		// The header we speak, then the close the specification asks for.
		_ = c.writeRaw(amqp1.HeaderAMQP[:])
		return nil, fmt.Errorf("protocol header % x is not AMQP 1.0", hdr)
	}
	if err := c.writeRaw(amqp1.HeaderAMQP[:]); err != nil {
		return nil, err
	}
	f, err := fr.ReadFrame()
	if err != nil {
		return nil, fmt.Errorf("open: %w", err)
	}
	code, fields, _, err := amqp1.Performative(f.Body)
	if err != nil || f.Type != amqp1.TypeAMQP || code != amqp1.CodeOpen {
		return nil, fmt.Errorf("the first frame is not an open (type %d, code %#x, %v)", f.Type, code, err)
	}
	c.maxOut = 1<<32 - 1
	if m, ok := amqp1.Uint(fields, 2); ok {
		if m < amqp1.MinMaxFrameSize {
			return nil, fmt.Errorf("max-frame-size %d below %d", m, amqp1.MinMaxFrameSize)
		}
		c.maxOut = uint32(min(m, 1<<32-1))
	}
	if idle, ok := amqp1.Uint(fields, 4); ok && idle > 0 {
		c.heartbeat = max(time.Duration(idle)*time.Millisecond/2, 100*time.Millisecond)
	}
	return fr, c.writeRaw(amqp1.AppendFrame(nil, amqp1.TypeAMQP, 0, amqp1.Perf(amqp1.CodeOpen,
		"smartgo-iothub", nil, uint32(amqpMaxFrame), uint16(amqpChannelMax), uint32(amqpIdleTimeout/time.Millisecond)), nil))
}

// sasl serves the SASL layer: ANONYMOUS and MSSBCBS (the client then
// proves itself with a put-token), or PLAIN with a policy's SAS token as
// the password.
func (c *amqpConn) sasl(fr *amqp1.FrameReader) error {
	mechs := amqp1.Array{amqp1.Symbol("MSSBCBS"), amqp1.Symbol("PLAIN"), amqp1.Symbol("ANONYMOUS")}
	out := append([]byte(nil), amqp1.HeaderSASL[:]...)
	out = amqp1.AppendFrame(out, amqp1.TypeSASL, 0, amqp1.Perf(amqp1.CodeSASLMechanisms, mechs), nil)
	if err := c.writeRaw(out); err != nil {
		return err
	}
	f, err := fr.ReadFrame()
	if err != nil {
		return fmt.Errorf("sasl-init: %w", err)
	}
	code, fields, _, err := amqp1.Performative(f.Body)
	if err != nil || f.Type != amqp1.TypeSASL || code != amqp1.CodeSASLInit {
		return fmt.Errorf("expected sasl-init (type %d, code %#x, %v)", f.Type, code, err)
	}
	mech, _ := amqp1.String(fields, 0)
	outcome := uint8(0) // ok
	var why error
	switch mech {
	case "ANONYMOUS", "MSSBCBS":
	case "PLAIN":
		resp, _ := amqp1.Binary(fields, 1)
		parts := bytes.SplitN(resp, []byte{0}, 3)
		if len(parts) != 3 {
			outcome, why = 1, errors.New("PLAIN response not authzid NUL authcid NUL password")
			break
		}
		if why = c.authorize(string(parts[2])); why != nil {
			outcome = 1
		}
	default:
		outcome, why = 1, fmt.Errorf("SASL mechanism %q not offered", mech)
	}
	if err := c.writeRaw(amqp1.AppendFrame(nil, amqp1.TypeSASL, 0, amqp1.Perf(amqp1.CodeSASLOutcome, outcome), nil)); err != nil {
		return err
	}
	if why != nil {
		return fmt.Errorf("SASL %s: %w", mech, why)
	}
	return nil
}

// authorize checks a SAS token of a shared access policy and keeps the
// policy and the token's expiry for the sends that follow.
func (c *amqpConn) authorize(raw string) error {
	p, tok, err := c.h.policyToken(raw, c.h.opts.HostName)
	if err != nil {
		return err
	}
	c.auth, c.authExpiry = p, tok.Expiry
	return nil
}

// writeRaw writes bytes as they are (the handshake, before the writer
// starts).
func (c *amqpConn) writeRaw(b []byte) error {
	_ = c.nc.SetWriteDeadline(time.Now().Add(amqpStartTimeout))
	_, err := c.nc.Write(b)
	return err
}

// errAMQPWriteFailed: the writer could not write to the client (it is
// gone); the connection ends without a close frame.
var errAMQPWriteFailed = errors.New("iothub: AMQP write failed")

// write queues encoded frames for the writer. It never waits on the
// socket; it fails once the writer gave up, or when the frames waiting
// would pass amqpMaxQueued (the client does not read: it is dropped).
func (c *amqpConn) write(b []byte) error {
	if len(b) == 0 {
		return nil
	}
	c.omu.Lock()
	err := c.wfail
	if err == nil && len(c.out)+len(b) > amqpMaxQueued {
		err = failf(amqp1.CondResourceLimit, "the client does not read: %d bytes wait for it", len(c.out))
		c.wfail, c.out = err, nil
		_ = c.raw.Close()
	}
	if err == nil {
		c.out = append(c.out, b...)
	}
	c.omu.Unlock()
	if err != nil {
		return err
	}
	select {
	case c.wake <- struct{}{}:
	default:
	}
	return nil
}

// amqpEmptyFrame is a heartbeat.
var amqpEmptyFrame = amqp1.AppendFrame(nil, amqp1.TypeAMQP, 0, nil, nil)

// writeLoop writes what is queued, and an empty frame every heartbeat,
// until stop closes; then what is left. A write that fails (or takes
// over amqpWriteTimeout) closes the connection: the serving goroutine's
// read ends.
func (c *amqpConn) writeLoop(stop <-chan struct{}) {
	var tick <-chan time.Time
	if c.heartbeat > 0 {
		t := time.NewTicker(c.heartbeat)
		defer t.Stop()
		tick = t.C
	}
	var buf []byte
	for {
		last := false
		select {
		case <-c.wake:
		case <-tick:
			_ = c.write(amqpEmptyFrame)
		case <-stop:
			last = true
		}
		c.omu.Lock()
		buf, c.out = c.out, buf[:0]
		c.omu.Unlock()
		if len(buf) > 0 {
			_ = c.nc.SetWriteDeadline(time.Now().Add(amqpWriteTimeout))
			if _, err := c.nc.Write(buf); err != nil {
				c.omu.Lock()
				c.wfail, c.out = errAMQPWriteFailed, nil
				c.omu.Unlock()
				_ = c.raw.Close()
				return
			}
		}
		if cap(buf) > 4*amqpMaxFrame {
			buf = nil
		}
		if last {
			return
		}
	}
}

// closeWith sends a close carrying err's condition (the connection is
// closed by serve's return).
func (c *amqpConn) closeWith(err error) {
	cond, msg := amqp1.CondInternalError, err.Error()
	var f *amqpFail
	switch {
	case errors.As(err, &f):
		cond, msg = f.cond, f.msg
	case errors.Is(err, amqp1.ErrMalformed):
		cond = amqp1.CondDecodeError
	case errors.Is(err, io.ErrUnexpectedEOF), errors.Is(err, errAMQPWriteFailed):
		return // the peer is gone
	}
	c.h.log.Info("iothub: AMQP connection closed on an error", "remote", c.nc.RemoteAddr().String(), "condition", string(cond), "err", msg)
	_ = c.write(amqp1.AppendFrame(nil, amqp1.TypeAMQP, 0, amqp1.Perf(amqp1.CodeClose, amqp1.Error(cond, msg)), nil))
}

// handle serves one frame after the open (under c.mu); done reports the
// close, st a cloud-to-device message the caller stores (outside c.mu).
func (c *amqpConn) handle(ch uint16, code uint64, f []any, payload []byte) (done bool, st *c2dStore, err error) {
	if code == amqp1.CodeBegin {
		return false, nil, c.begin(ch, f)
	}
	if code == amqp1.CodeClose {
		if e := amqp1.ErrorOf(amqp1.Field(f, 0)); e != "" {
			c.h.log.Info("iothub: AMQP client closed with an error", "remote", c.nc.RemoteAddr().String(), "err", e)
		}
		return true, nil, c.write(amqp1.AppendFrame(nil, amqp1.TypeAMQP, 0, amqp1.Perf(amqp1.CodeClose), nil))
	}
	s := c.sessions[ch]
	if s == nil {
		return false, nil, failf(amqp1.CondNotAllowed, "performative %#x on channel %d, which has no session", code, ch)
	}
	switch code {
	case amqp1.CodeAttach:
		return false, nil, c.attach(s, f)
	case amqp1.CodeFlow:
		return false, nil, c.flow(s, f)
	case amqp1.CodeTransfer:
		st, err := c.transfer(s, f, payload)
		return false, st, err
	case amqp1.CodeDisposition:
		return false, nil, c.disposition(s, f)
	case amqp1.CodeDetach:
		h, _ := amqp1.Uint(f, 0)
		l := s.links[uint32(h)]
		if l == nil {
			return false, nil, failf(amqp1.CondNotAllowed, "detach of handle %d, which is not attached", h)
		}
		delete(s.links, l.handle)
		c.linkGone(s, l)
		return false, nil, c.write(amqp1.AppendFrame(nil, amqp1.TypeAMQP, s.ch, amqp1.Perf(amqp1.CodeDetach, l.handle, true), nil))
	case amqp1.CodeEnd:
		delete(c.sessions, ch)
		for _, l := range s.links {
			c.linkGone(s, l)
		}
		return false, nil, c.write(amqp1.AppendFrame(nil, amqp1.TypeAMQP, s.ch, amqp1.Perf(amqp1.CodeEnd), nil))
	}
	return false, nil, failf(amqp1.CondNotAllowed, "performative %#x", code)
}

func (c *amqpConn) begin(ch uint16, f []any) error {
	if c.sessions[ch] != nil {
		return failf(amqp1.CondNotAllowed, "begin on channel %d, which has a session", ch)
	}
	if ch > amqpChannelMax {
		return failf(amqp1.CondNotAllowed, "channel %d over channel-max %d", ch, amqpChannelMax)
	}
	if _, ok := amqp1.Uint(f, 0); ok {
		return failf(amqp1.CondNotAllowed, "begin answering a session the hub did not start")
	}
	next, ok := amqp1.Uint(f, 1)
	if !ok {
		return failf(amqp1.CondInvalidField, "begin without next-outgoing-id")
	}
	s := &amqpSession{ch: ch, links: map[uint32]*amqpLink{}, nextIn: uint32(next), inWindow: amqpWindow}
	c.sessions[ch] = s
	return c.write(amqp1.AppendFrame(nil, amqp1.TypeAMQP, ch, amqp1.Perf(amqp1.CodeBegin,
		ch, uint32(0), uint32(amqpWindow), uint32(amqpWindow), uint32(amqpHandleMax)), nil))
}

func (c *amqpConn) attach(s *amqpSession, f []any) error {
	name, _ := amqp1.String(f, 0)
	h, ok := amqp1.Uint(f, 1)
	if !ok || h > amqpHandleMax {
		return failf(amqp1.CondInvalidField, "attach handle %v (at most %d)", amqp1.Field(f, 1), amqpHandleMax)
	}
	if s.links[uint32(h)] != nil {
		return failf(amqp1.CondNotAllowed, "handle %d already attached", h)
	}
	clientRole, _ := amqp1.Bool(f, 2)
	srcAddr, src := amqp1.Terminus(f, 5)
	tgtAddr, tgt := amqp1.Terminus(f, 6)
	l := &amqpLink{name: name, handle: uint32(h), hubRole: !clientRole}
	known := false
	if l.hubRole == amqp1.RoleReceiver {
		l.address = tgtAddr
		known = tgtAddr == cbsAddress || strings.EqualFold(tgtAddr, c2dAddress)
		dc, _ := amqp1.Uint(f, 9)
		l.deliveryCount = uint32(dc)
	} else {
		l.address = srcAddr
		known = srcAddr == cbsAddress || strings.EqualFold(srcAddr, feedbackAddress)
		for _, a := range amqpSilent {
			known = known || strings.EqualFold(srcAddr, a)
		}
	}
	var initial any
	if l.hubRole == amqp1.RoleSender {
		initial = uint32(0)
	}
	var maxSize any
	if l.hubRole == amqp1.RoleReceiver {
		maxSize = uint64(c.maxMessage())
	}
	if !known {
		src, tgt = nil, nil
	}
	var srcV, tgtV any
	if src != nil {
		srcV = src
	}
	if tgt != nil {
		tgtV = tgt
	}
	// Settle modes: the hub settles what it receives at once (first,
	// whatever the client asked for); it sends feedback batches
	// unsettled (the client's accepted commits them) and its other
	// deliveries ($cbs replies) settled.
	sndSettle, rcvSettle := amqp1.Field(f, 3), any(nil)
	if l.hubRole == amqp1.RoleSender {
		sndSettle, rcvSettle = uint8(1), amqp1.Field(f, 4)
		if l.feedback() {
			sndSettle = uint8(0)
		}
	}
	out := amqp1.AppendFrame(nil, amqp1.TypeAMQP, s.ch, amqp1.Perf(amqp1.CodeAttach, name, uint32(h), l.hubRole,
		sndSettle, rcvSettle, srcV, tgtV, nil, nil, initial, maxSize), nil)
	if !known {
		addr := tgtAddr
		if clientRole == amqp1.RoleReceiver {
			addr = srcAddr
		}
		out = amqp1.AppendFrame(out, amqp1.TypeAMQP, s.ch, amqp1.Perf(amqp1.CodeDetach, uint32(h), true,
			amqp1.Error(amqp1.CondNotFound, fmt.Sprintf("no node %q on this hub", truncate(addr, 96)))), nil)
		return c.write(out)
	}
	s.links[l.handle] = l
	if l.feedback() {
		c.startFeedback()
	}
	if l.hubRole == amqp1.RoleReceiver {
		l.credit = amqpLinkCredit
		out = c.appendFlow(out, s, l)
	}
	return c.write(out)
}

// maxMessage is the largest message the hub takes: the body limit, with
// room for the sections around it.
func (c *amqpConn) maxMessage() int { return c.h.opts.C2DMaxSize + 16<<10 }

// appendFlow appends a flow for the session and, with l, for the link.
func (c *amqpConn) appendFlow(b []byte, s *amqpSession, l *amqpLink) []byte {
	fields := []any{s.nextIn, s.inWindow, s.nextOut, uint32(amqpWindow)}
	if l != nil {
		credit := l.credit
		fields = append(fields, l.handle, l.deliveryCount, credit)
	}
	return amqp1.AppendFrame(b, amqp1.TypeAMQP, s.ch, amqp1.Perf(amqp1.CodeFlow, fields...), nil)
}

func (c *amqpConn) flow(s *amqpSession, f []any) error {
	h, ok := amqp1.Uint(f, 4)
	echo, _ := amqp1.Bool(f, 9)
	if !ok {
		if echo {
			return c.write(c.appendFlow(nil, s, nil))
		}
		return nil
	}
	l := s.links[uint32(h)]
	if l == nil {
		return failf(amqp1.CondNotAllowed, "flow for handle %d, which is not attached", h)
	}
	if l.hubRole == amqp1.RoleSender {
		// The client's view: its delivery-count (ours as it last knew
		// it; the initial one when absent) plus its credit.
		dc, ok := amqp1.Uint(f, 5)
		if !ok {
			dc = 0
		}
		credit, _ := amqp1.Uint(f, 6)
		l.credit = uint32(dc) + uint32(credit) - l.deliveryCount
		if err := c.sendPending(s, l); err != nil {
			return err
		}
		c.creditCame()
		if drain, _ := amqp1.Bool(f, 8); drain && l.credit > 0 {
			l.deliveryCount += l.credit
			l.credit = 0
			echo = true
		}
	}
	if echo {
		return c.write(c.appendFlow(nil, s, l))
	}
	return nil
}

// sendPending sends the replies waiting on a sending link, as far as its
// credit goes, settled.
func (c *amqpConn) sendPending(s *amqpSession, l *amqpLink) error {
	var out []byte
	for len(l.pending) > 0 && l.credit > 0 {
		out, _ = c.appendDelivery(out, s, l, l.pending[0], true)
		l.pending = l.pending[1:]
	}
	return c.write(out)
}

// appendDelivery appends the transfers of one message on a sending link
// with credit and returns its delivery id. A message larger than the
// client's frames goes in several transfers (the first carries the
// delivery's fields). Caller holds c.mu.
func (c *amqpConn) appendDelivery(out []byte, s *amqpSession, l *amqpLink, msg []byte, settled bool) ([]byte, uint32) {
	id := s.delivery
	tag := []byte{byte(id >> 24), byte(id >> 16), byte(id >> 8), byte(id)}
	room := int(min(c.maxOut, amqpMaxFrame)) - 64
	for first := true; first || len(msg) > 0; first = false {
		part := msg[:min(room, len(msg))]
		msg = msg[len(part):]
		if first {
			out = amqp1.AppendFrame(out, amqp1.TypeAMQP, s.ch, amqp1.Perf(amqp1.CodeTransfer,
				l.handle, id, tag, uint32(0), settled, len(msg) > 0), part)
		} else {
			out = amqp1.AppendFrame(out, amqp1.TypeAMQP, s.ch, amqp1.Perf(amqp1.CodeTransfer,
				l.handle, nil, nil, nil, nil, len(msg) > 0), part)
		}
		s.nextOut++
	}
	s.delivery++
	l.deliveryCount++
	l.credit--
	return out, id
}
