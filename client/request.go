package client

import (
	"context"
	"crypto/rand"
	"encoding/hex"
	"fmt"
	"net/netip"
	"strconv"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Request-reply (RocketMQ 4.6+, wire in remoting/protocol/headers_reply.go).
//
// Request sends a message carrying a fresh CORRELATION_ID, this
// producer's client id as REPLY_TO_CLIENT and the timeout (ms) as TTL,
// and waits for the reply. A responder (any consumer of the topic) builds
// the reply with NewReplyMessage, or sends it with Producer.Reply: it goes
// to the reply topic of the request's cluster, and that broker pushes it
// to this producer's connection (PUSH_REPLY_MESSAGE_TO_CLIENT), where the
// correlation id finds the waiting request. The broker can push only to a
// producer that sent it a heartbeat, so before its first request to a
// cluster the producer fetches the route of the cluster's reply topic and
// heartbeats to every broker of it.

// RequestCallback receives the reply to RequestAsync, or why there is
// none (ErrTimeout when it did not come in time, the send's error,
// ErrClosed).
type RequestCallback func(reply *MessageExt, err error)

// replyWaiter is a request waiting for its reply.
type replyWaiter struct {
	done  RequestCallback
	timer *time.Timer // RequestAsync's timeout; nil for Request
}

// newCorrelationID returns a random UUID (version 4), the form Java's
// client uses.
func newCorrelationID() string {
	var b [16]byte
	_, _ = rand.Read(b[:])
	b[6] = b[6]&0x0f | 0x40
	b[8] = b[8]&0x3f | 0x80
	var s [36]byte
	hex.Encode(s[0:8], b[0:4])
	s[8] = '-'
	hex.Encode(s[9:13], b[4:6])
	s[13] = '-'
	hex.Encode(s[14:18], b[6:8])
	s[18] = '-'
	hex.Encode(s[19:23], b[8:10])
	s[23] = '-'
	hex.Encode(s[24:], b[10:])
	return string(s[:])
}

// requestMessage returns a copy of m carrying the request properties.
func (p *Producer) requestMessage(m *Message, timeout time.Duration) (*Message, string, error) {
	if m == nil {
		return nil, "", fmt.Errorf("%w: nil message", ErrBadMessage)
	}
	if timeout <= 0 {
		return nil, "", fmt.Errorf("%w: request timeout %v", ErrBadOptions, timeout)
	}
	if m.DelayLevel > 0 {
		return nil, "", fmt.Errorf("%w: a request cannot have a delay level", ErrBadMessage)
	}
	corr := newCorrelationID()
	req := *m
	req.Properties = make(map[string]string, len(m.Properties)+3)
	for k, v := range m.Properties {
		req.Properties[k] = v
	}
	req.Properties[record.PropertyCorrelationID] = corr
	req.Properties[record.PropertyReplyToClient] = p.core.clientID
	req.Properties[record.PropertyTTL] = strconv.FormatInt(timeout.Milliseconds(), 10)
	return &req, corr, nil
}

// Request sends m and waits, for at most timeout (and while ctx lasts),
// for the reply a responder sends with Reply. The send itself is retried
// like Send's. A reply that does not come in time is ErrTimeout.
func (p *Producer) Request(ctx context.Context, m *Message, timeout time.Duration) (*MessageExt, error) {
	req, corr, err := p.requestMessage(m, timeout)
	if err != nil {
		return nil, err
	}
	deadline := time.Now().Add(timeout)
	ctx, cancel := context.WithDeadline(ctx, deadline)
	defer cancel()
	p.prepareReplies(ctx, req.Topic)
	type outcome struct {
		reply *MessageExt
		err   error
	}
	ch := make(chan outcome, 1)
	p.addWaiter(corr, &replyWaiter{done: func(r *MessageExt, err error) { ch <- outcome{r, err} }})
	if _, err := p.Send(ctx, req); err != nil {
		p.takeWaiter(corr)
		return nil, err
	}
	select {
	case o := <-ch:
		return o.reply, o.err
	case <-ctx.Done():
		if p.takeWaiter(corr) == nil {
			o := <-ch // delivered meanwhile
			return o.reply, o.err
		}
		if time.Now().Before(deadline) {
			return nil, ctx.Err()
		}
		return nil, fmt.Errorf("%w: no reply to request %s (topic %s) within %v", ErrTimeout, corr, req.Topic, timeout)
	}
}

// RequestAsync sends m as Request does and returns once the send is under
// way; cb runs once with the reply or the failure, on a goroutine of the
// producer (it should not block). The returned error reports a request
// that cannot be sent at all (cb is then not called).
func (p *Producer) RequestAsync(ctx context.Context, m *Message, timeout time.Duration, cb RequestCallback) error {
	if cb == nil {
		return fmt.Errorf("%w: nil request callback", ErrBadOptions)
	}
	req, corr, err := p.requestMessage(m, timeout)
	if err != nil {
		return err
	}
	p.prepareReplies(ctx, req.Topic)
	w := &replyWaiter{done: cb}
	// Registered and timed under the lock: the timer cannot fire before
	// the waiter is there, and whoever takes it sees its timer.
	p.rmu.Lock()
	p.waiters[corr] = w
	w.timer = time.AfterFunc(timeout, func() {
		if p.takeWaiter(corr) != nil {
			cb(nil, fmt.Errorf("%w: no reply to request %s (topic %s) within %v", ErrTimeout, corr, req.Topic, timeout))
		}
	})
	p.rmu.Unlock()
	err = p.SendAsync(ctx, req, func(_ *SendResult, err error) {
		if err != nil && p.takeWaiter(corr) != nil {
			w.timer.Stop()
			cb(nil, err)
		}
	})
	if err != nil && p.takeWaiter(corr) != nil {
		w.timer.Stop()
	}
	return err
}

func (p *Producer) addWaiter(corr string, w *replyWaiter) {
	p.rmu.Lock()
	p.waiters[corr] = w
	p.rmu.Unlock()
}

// takeWaiter removes and returns the request waiting under corr (nil if
// none: answered, timed out or never there). Whoever takes it completes it.
func (p *Producer) takeWaiter(corr string) *replyWaiter {
	p.rmu.Lock()
	defer p.rmu.Unlock()
	w := p.waiters[corr]
	delete(p.waiters, corr)
	return w
}

// failWaiters ends every waiting request with err (Close).
func (p *Producer) failWaiters(err error) {
	p.rmu.Lock()
	ws := p.waiters
	p.waiters = map[string]*replyWaiter{}
	p.rmu.Unlock()
	for _, w := range ws {
		if w.timer != nil {
			w.timer.Stop()
		}
		w.done(nil, err)
	}
}

// prepareReplies makes sure the brokers that may receive the replies to a
// request on topic know this producer: it fetches the reply topic route
// of every cluster hosting topic the first time, then heartbeats. Errors
// are only logged: the send reports a topic without a route, and a reply
// that cannot be pushed ends as a timeout.
func (p *Producer) prepareReplies(ctx context.Context, topic string) {
	tr, err := p.publishRoute(ctx, topic)
	if err != nil {
		return
	}
	fresh := false
	for _, bd := range tr.data.BrokerDatas {
		if bd == nil || bd.Cluster == "" {
			continue
		}
		p.rmu.Lock()
		known := p.replyClusters[bd.Cluster]
		p.rmu.Unlock()
		if known {
			continue
		}
		if _, err := p.core.updateRoute(ctx, protocol.ReplyTopic(bd.Cluster)); err != nil {
			p.core.log.Warn("no route to the reply topic of a cluster; replies may not reach this producer",
				"cluster", bd.Cluster, "err", err)
			continue
		}
		p.rmu.Lock()
		p.replyClusters[bd.Cluster] = true
		p.rmu.Unlock()
		fresh = true
	}
	if fresh {
		if err := p.heartbeat(ctx); err != nil {
			p.core.log.Warn("heartbeat before a request failed", "err", err)
		}
	}
}

// onReply takes PUSH_REPLY_MESSAGE_TO_CLIENT (326) from a broker and
// completes the request its correlation id names.
func (p *Producer) onReply(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.ReplyMessageRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		p.core.log.Warn("bad pushed reply", "broker", c.RemoteAddr().String(), "err", err)
		return protocol.NewResponse(protocol.SystemError, fmt.Sprintf("bad reply header: %v", err)), nil
	}
	m, err := p.replyMessage(&h, req.Body)
	if err != nil {
		p.core.log.Warn("bad pushed reply", "broker", c.RemoteAddr().String(), "err", err)
		return protocol.NewResponse(protocol.SystemError, err.Error()), nil
	}
	corr := m.Property(record.PropertyCorrelationID)
	w := p.takeWaiter(corr)
	if w == nil {
		p.core.log.Debug("reply for no waiting request (timed out, or not ours)", "correlationId", corr,
			"broker", c.RemoteAddr().String())
		return protocol.NewResponse(protocol.Success, ""), nil
	}
	if w.timer != nil {
		w.timer.Stop()
	}
	w.done(m, nil)
	return protocol.NewResponse(protocol.Success, ""), nil
}

// replyMessage builds the received reply from a push; the body is
// copied (the request's body aliases the connection's buffer) or
// inflated.
func (p *Producer) replyMessage(h *protocol.ReplyMessageRequestHeader, body []byte) (*MessageExt, error) {
	var b []byte
	if h.SysFlag&record.FlagCompressed != 0 {
		var err error
		if b, err = record.DecompressBody(nil, body, h.SysFlag, p.opts.MaxMessageSize); err != nil {
			return nil, fmt.Errorf("client: inflate reply body: %w", err)
		}
	} else {
		b = append([]byte(nil), body...)
	}
	born, _ := netip.ParseAddrPort(h.BornHost)
	store, _ := netip.ParseAddrPort(h.StoreHost)
	m := &MessageExt{
		Message:        Message{Topic: h.Topic, Body: b, Flag: h.Flag},
		Queue:          MessageQueue{Topic: h.Topic, QueueID: h.QueueID},
		BornTimestamp:  h.BornTimestamp,
		StoreTimestamp: h.StoreTimestamp,
		BornHost:       born,
		StoreHost:      store,
		ReconsumeTimes: h.ReconsumeTimes,
		SysFlag:        h.SysFlag,
	}
	m.setProperties(h.Properties)
	return m, nil
}

// NewReplyMessage returns the reply to a received request, with body: a
// message to the reply topic of the request's cluster carrying its
// correlation id and requester. Send it with any producer (it goes as
// SEND_REPLY_MESSAGE_V2), or use Producer.Reply. A message that is not a
// request (no CORRELATION_ID, REPLY_TO_CLIENT or CLUSTER) is ErrBadMessage.
func NewReplyMessage(request *MessageExt, body []byte) (*Message, error) {
	if request == nil {
		return nil, fmt.Errorf("%w: nil request", ErrBadMessage)
	}
	props := map[string]string{record.PropertyMsgType: protocol.ReplyMessageFlag}
	for _, k := range []string{record.PropertyCluster, record.PropertyCorrelationID, record.PropertyReplyToClient} {
		v := request.Property(k)
		if v == "" {
			return nil, fmt.Errorf("%w: message %s is not a request (no %s property)", ErrBadMessage, request.MsgID, k)
		}
		props[k] = v
	}
	if ttl := request.Property(record.PropertyTTL); ttl != "" {
		props[record.PropertyTTL] = ttl
	}
	cluster := props[record.PropertyCluster]
	delete(props, record.PropertyCluster)
	return &Message{Topic: protocol.ReplyTopic(cluster), Body: body, Properties: props}, nil
}

// Reply sends body as the reply to request (see NewReplyMessage). It is
// tried once: a broker that cannot push the reply (the requester left,
// or is not connected to it) answers SYSTEM_ERROR, which comes back as a
// *BrokerError naming the reason.
func (p *Producer) Reply(ctx context.Context, request *MessageExt, body []byte) (*SendResult, error) {
	m, err := NewReplyMessage(request, body)
	if err != nil {
		return nil, err
	}
	pm, err := p.prepare(m)
	if err != nil {
		return nil, err
	}
	return p.sendPrepared(ctx, pm, m.Topic, func(qs []MessageQueue) MessageQueue { return p.selectQueue(qs, "") })
}
