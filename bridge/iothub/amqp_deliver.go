package iothub

import (
	"context"
	"fmt"
	"net/url"
	"strings"
	"time"

	"github.com/smartgo/smartgo/bridge/iothub/amqp1"
)

// transfer takes one transfer frame on a link the client sends on; the
// last frame of a delivery has it served and settled, or, for a
// cloud-to-device message, returned for the caller to store (outside
// c.mu) and settle. Caller holds c.mu.
func (c *amqpConn) transfer(s *amqpSession, f []any, payload []byte) (*c2dStore, error) {
	h, _ := amqp1.Uint(f, 0)
	l := s.links[uint32(h)]
	if l == nil || l.hubRole != amqp1.RoleReceiver {
		return nil, failf(amqp1.CondNotAllowed, "transfer on handle %d, which the client does not send on", h)
	}
	s.nextIn++
	if s.inWindow > 0 {
		s.inWindow--
	}
	var out []byte
	if s.inWindow < amqpWindow/2 {
		s.inWindow = amqpWindow
		out = c.appendFlow(out, s, nil)
	}
	if !l.partialOn {
		id, ok := amqp1.Uint(f, 1)
		if !ok {
			return nil, failf(amqp1.CondInvalidField, "the first transfer of a delivery without delivery-id")
		}
		l.partialOn, l.partialID, l.oversize = true, uint32(id), false
		l.partialTag, _ = amqp1.Binary(f, 2)
		l.partialSettle, _ = amqp1.Bool(f, 4)
		l.partial = l.partial[:0]
		l.deliveryCount++
		if l.credit > 0 {
			l.credit--
		}
	}
	if aborted, _ := amqp1.Bool(f, 9); aborted {
		c.partialBytes -= len(l.partial)
		l.partialOn, l.partial = false, l.partial[:0]
		return nil, c.write(out)
	}
	switch {
	case l.oversize:
	case len(l.partial)+len(payload) > c.linkLimit(l):
		l.oversize = true
		c.partialBytes -= len(l.partial)
		l.partial = l.partial[:0]
	case c.partialBytes+len(payload) > amqpMaxPartial:
		return nil, failf(amqp1.CondResourceLimit, "deliveries in progress over %d bytes", amqpMaxPartial)
	default:
		l.partial = append(l.partial, payload...)
		c.partialBytes += len(payload)
	}
	if more, _ := amqp1.Bool(f, 5); more {
		return nil, c.write(out)
	}
	l.partialOn = false
	c.partialBytes -= len(l.partial)
	state, st := c.deliver(s, l)
	if st != nil {
		st.ch, st.id, st.settled = s.ch, l.partialID, l.partialSettle
	} else if !l.partialSettle {
		out = amqp1.AppendFrame(out, amqp1.TypeAMQP, s.ch, amqp1.Perf(amqp1.CodeDisposition,
			amqp1.RoleReceiver, l.partialID, nil, true, state), nil)
	}
	if cap(l.partial) > 64<<10 {
		l.partial = nil // the message st holds does not refer to it
	}
	if l.credit < amqpLinkCredit/2 {
		l.credit = amqpLinkCredit
		out = c.appendFlow(out, s, l)
	}
	if err := c.write(out); err != nil {
		return nil, err
	}
	if l.address == cbsAddress {
		if reply := s.cbsReplyLink(); reply != nil {
			return nil, c.sendPending(s, reply)
		}
	}
	return st, nil
}

// amqpMaxPartial bounds the bytes a connection's deliveries in progress
// (split over several transfer frames) hold together.
const amqpMaxPartial = 4 << 20

// linkLimit is the largest message a link takes: a put-token's on $cbs,
// a cloud-to-device message's once the connection holds a token, and
// none before (the delivery is then rejected as unauthorized without
// being kept).
func (c *amqpConn) linkLimit(l *amqpLink) int {
	switch {
	case l.address == cbsAddress:
		return 64 << 10
	case c.auth == nil:
		return 0
	}
	return c.maxMessage()
}

// cbsReplyLink is the session's link on which the client receives $cbs
// replies (nil: none attached).
func (s *amqpSession) cbsReplyLink() *amqpLink {
	for _, l := range s.links {
		if l.hubRole == amqp1.RoleSender && l.address == cbsAddress {
			return l
		}
	}
	return nil
}

var accepted = amqp1.Perf(amqp1.CodeAccepted)

func rejected(cond amqp1.Symbol, msg string) *amqp1.Described {
	return amqp1.Perf(amqp1.CodeRejected, amqp1.Error(cond, msg))
}

// c2dStore is a cloud-to-device message the serving goroutine stores
// outside c.mu, then settles (unless the client sent it settled).
type c2dStore struct {
	msg     *C2DMessage
	to      string // the message's "to", for the log
	ch      uint16
	id      uint32 // delivery-id
	settled bool
}

// deliver serves a whole delivery and returns its outcome, or the
// cloud-to-device message to store (then no outcome yet).
func (c *amqpConn) deliver(s *amqpSession, l *amqpLink) (*amqp1.Described, *c2dStore) {
	if l.oversize {
		if c.auth == nil && l.address != cbsAddress {
			return rejected(amqp1.CondUnauthorized, "no put-token on this connection"), nil
		}
		return rejected(amqp1.CondMessageSize, fmt.Sprintf("message over %d bytes", c.linkLimit(l))), nil
	}
	m, err := amqp1.DecodeMessage(l.partial)
	if err != nil {
		return rejected(amqp1.CondDecodeError, err.Error()), nil
	}
	if l.address == cbsAddress {
		c.putToken(s, m)
		return accepted, nil
	}
	msg, err := c.c2dMessage(m)
	if err != nil {
		return c.refused(m.To, err), nil
	}
	return nil, &c2dStore{msg: msg, to: m.To}
}

// refused logs a cloud-to-device message the hub does not take and
// returns the rejection the SDKs map to their errors.
func (c *amqpConn) refused(to string, err error) *amqp1.Described {
	cond, text := amqpCondition(err)
	c.h.log.Info("iothub: AMQP cloud-to-device message refused", "remote", c.nc.RemoteAddr().String(), "to", truncate(to, 96),
		"condition", string(cond), "err", text)
	return rejected(cond, text)
}

// store stores a cloud-to-device message and settles its delivery. It
// runs on the serving goroutine without c.mu: the feedback pump goes on
// while the store takes its time.
func (c *amqpConn) store(st *c2dStore) error {
	ctx, cancel := context.WithTimeout(c.h.ctx, c.h.opts.RequestTimeout)
	defer cancel()
	if hook := c.h.amqp.storeHook.Load(); hook != nil {
		(*hook)(ctx)
	}
	state := accepted
	if err := c.h.SendC2D(ctx, st.msg); err != nil {
		state = c.refused(st.to, err)
	}
	if st.settled {
		return nil
	}
	return c.write(amqp1.AppendFrame(nil, amqp1.TypeAMQP, st.ch, amqp1.Perf(amqp1.CodeDisposition,
		amqp1.RoleReceiver, st.id, nil, true, state), nil))
}

// putToken serves a claims-based-security request: operation put-token,
// type servicebus.windows.net:sastoken (or azure-devices.net:sastoken),
// the token as the body's value. The reply, on the session's $cbs
// receiving link, carries the request's message-id as its
// correlation-id and status-code 200, or 401 (400 for a request that is
// not a put-token).
func (c *amqpConn) putToken(s *amqpSession, m *amqp1.Message) {
	status, desc := int32(200), "OK"
	op, _ := m.Properties.Get("operation")
	tok, _ := m.Value.(string)
	switch {
	case op != "put-token":
		status, desc = 400, fmt.Sprintf("operation %v is not put-token", op)
	case tok == "":
		status, desc = 400, "put-token without a token (an amqp-value string)"
	default:
		if err := c.authorize(tok); err != nil {
			status, desc = 401, err.Error()
			c.h.log.Info("iothub: AMQP put-token refused", "remote", c.nc.RemoteAddr().String(), "err", err)
		}
	}
	props := amqp1.Perf(amqp1.CodeProperties, nil, nil, nil, nil, nil, m.MessageID)
	app := &amqp1.Map{Keys: []any{"status-code", "status-description"}, Values: []any{status, desc}}
	var msg []byte
	msg = amqp1.Append(msg, props)
	msg = amqp1.Append(msg, &amqp1.Described{Descriptor: uint64(amqp1.CodeApplicationProperties), Value: app})
	msg = amqp1.Append(msg, &amqp1.Described{Descriptor: uint64(amqp1.CodeAMQPValue), Value: nil})
	if reply := s.cbsReplyLink(); reply != nil && len(reply.pending) < 16 {
		reply.pending = append(reply.pending, msg)
	}
}

// c2dMessage is the cloud-to-device message an AMQP message carries:
// the connection must hold a token of a policy with serviceConnect, and
// "to" must be /devices/{id}/messages/devicebound.
func (c *amqpConn) c2dMessage(m *amqp1.Message) (*C2DMessage, error) {
	switch {
	case c.auth == nil:
		return nil, fmt.Errorf("%w: no put-token on this connection", ErrUnauthorized)
	case !c.authExpiry.After(time.Now()):
		return nil, fmt.Errorf("%w: the connection's token expired at %s", ErrTokenExpired, c.authExpiry.UTC().Format(time.RFC3339))
	case !c.auth.has(PermServiceConnect):
		return nil, fmt.Errorf("%w: policy %s lacks %s", ErrUnauthorized, c.auth.Name, PermServiceConnect)
	}
	id, err := c2dDevice(m.To)
	if err != nil {
		return nil, err
	}
	body := m.Data
	switch v := m.Value.(type) {
	case []byte:
		body = v
	case string:
		body = []byte(v)
	}
	msg := &C2DMessage{DeviceID: id, Body: body, MessageID: amqp1.IDString(m.MessageID),
		CorrelationID: amqp1.IDString(m.CorrelationID), UserID: string(m.UserID),
		ContentType: m.ContentType, Encoding: m.Encoding, Expiry: m.Expiry}
	if m.Properties != nil {
		for i, k := range m.Properties.Keys {
			name, ok := k.(string)
			if !ok {
				return nil, fmt.Errorf("%w: application property key of type %T", ErrBadRequest, k)
			}
			v := m.Properties.Values[i]
			if v == nil {
				continue
			}
			val, ok := v.(string)
			if !ok {
				val = fmt.Sprint(v)
			}
			msg.Properties = append(msg.Properties, Property{name, val})
		}
	}
	return msg, nil
}

// c2dDevice reads the device id from a message's "to":
// /devices/{url-encoded id}/messages/devicebound.
func c2dDevice(to string) (string, error) {
	const suffix = "/messages/devicebound"
	rest, ok := strings.CutPrefix(to, "/devices/")
	if !ok || len(rest) <= len(suffix) || !strings.EqualFold(rest[len(rest)-len(suffix):], suffix) {
		return "", fmt.Errorf("%w: to %q is not /devices/{id}/messages/devicebound", ErrBadRequest, truncate(to, 96))
	}
	id, err := url.PathUnescape(rest[:len(rest)-len(suffix)])
	if err != nil || id == "" {
		return "", fmt.Errorf("%w: device id in %q: %v", ErrBadRequest, truncate(to, 96), err)
	}
	return id, nil
}

// amqpCondition maps a hub error to the AMQP error condition the service
// SDKs turn into the matching error class.
func amqpCondition(err error) (amqp1.Symbol, string) {
	status, code, text := statusOf(err)
	text = code + ": " + text
	switch status {
	case 400:
		return amqp1.CondArgumentError, text
	case 401:
		return amqp1.CondUnauthorized, text
	case 403:
		return amqp1.CondResourceLimit, text
	case 404:
		return amqp1.CondNotFound, text
	case 412:
		return amqp1.CondPreconditionFailed, text
	case 413:
		return amqp1.CondMessageSize, text
	case 429:
		return amqp1.CondThrottled, text
	case 503, 504:
		return amqp1.CondTimeout, text
	}
	return amqp1.CondInternalError, text
}
