package iothub

import (
	"bytes"
	"context"
	"crypto/rand"
	"strings"
	"time"

	"github.com/smartgo/smartgo/bridge/iothub/amqp1"
	"github.com/smartgo/smartgo/client"
)

// The AMQP endpoint's feedback link (/messages/serviceBound/feedback):
// while a connection has one attached, a pump consumes
// Options.FeedbackTopic as the group IOTHUB_FEEDBACK_RECEIVER (every
// record goes to one back end) and sends what each poll brings as
// messages, each a JSON array of records (feedback.go), content type
// application/vnd.microsoft.iothub.feedback.json, unsettled, one at a
// time, on a feedback link with credit. A batch's offsets are committed
// once the client settles it accepted (or rejected: it refuses the
// records for good); released or modified, it is sent again. A batch the
// client has not settled when its link detaches is sent again on another
// feedback link of the connection; one it has not settled within
// Options.FeedbackLockDuration (IoT Hub's lock duration, 1 min) is taken
// back and sent again as a new delivery (a late settlement of the old one
// is ignored); when the connection's last feedback
// link detaches, or the connection ends, the pump stops and what it has
// not committed goes to the next receiver.

const (
	feedbackAddress     = "/messages/servicebound/feedback"
	feedbackGroup       = "IOTHUB_FEEDBACK_RECEIVER"
	feedbackContentType = "application/vnd.microsoft.iothub.feedback.json"
	feedbackMaxBatch    = 64 << 10 // bytes of records in one message
)

// feedbackPump is a connection's feedback consumer while it has a
// feedback link.
type feedbackPump struct {
	cancel context.CancelFunc
	credit chan struct{} // 1-buffered: a flow may have given credit
	// waiting is the batch on the wire until the client settles it or
	// its link goes (protected by the connection's mu).
	waiting *feedbackDelivery
}

// feedbackDelivery is a batch sent and not yet settled.
type feedbackDelivery struct {
	ch      uint16
	handle  uint32
	id      uint32
	outcome chan uint64 // 1-buffered: the outcome's descriptor code; 0: the link went first
}

// feedback reports whether l is a link on which the hub sends feedback.
func (l *amqpLink) feedback() bool {
	return l.hubRole == amqp1.RoleSender && strings.EqualFold(l.address, feedbackAddress)
}

// startFeedback starts the connection's pump unless one runs. Caller
// holds c.mu.
func (c *amqpConn) startFeedback() {
	if c.fb != nil {
		return
	}
	ctx, cancel := context.WithCancel(c.h.ctx)
	fb := &feedbackPump{cancel: cancel, credit: make(chan struct{}, 1)}
	c.fb = fb
	c.pumps.Add(1)
	go func() {
		defer c.pumps.Done()
		c.pumpFeedback(ctx, fb)
	}()
}

// stopPump stops the running pump (it ends by itself). Caller holds c.mu.
func (c *amqpConn) stopPump() {
	if c.fb == nil {
		return
	}
	c.fb.cancel()
	c.fb.lost()
	c.fb = nil
}

// lost tells the pump its batch on the wire will not be settled.
// Caller holds the connection's mu.
func (fb *feedbackPump) lost() {
	if fb.waiting != nil {
		fb.waiting.outcome <- 0
		fb.waiting = nil
	}
}

// stopFeedback stops the pump and waits for every pump the connection
// started.
func (c *amqpConn) stopFeedback() {
	c.mu.Lock()
	c.stopPump()
	c.mu.Unlock()
	c.pumps.Wait()
}

// linkGone is called for a link that detached or whose session ended: a
// batch on it is lost, and the pump stops with the last feedback link.
// Caller holds c.mu.
func (c *amqpConn) linkGone(s *amqpSession, l *amqpLink) {
	if !l.feedback() || c.fb == nil {
		return
	}
	if w := c.fb.waiting; w != nil && w.ch == s.ch && w.handle == l.handle {
		c.fb.lost()
	}
	for _, s := range c.sessions {
		for _, l := range s.links {
			if l.feedback() {
				return
			}
		}
	}
	c.stopPump()
}

// creditCame wakes the pump after a flow. Caller holds c.mu.
func (c *amqpConn) creditCame() {
	if c.fb != nil {
		select {
		case c.fb.credit <- struct{}{}:
		default:
		}
	}
}

// disposition takes the client's settlement of the hub's deliveries: the
// feedback batch on the wire gets its outcome (a disposition the client
// has not settled is settled by the hub). Dispositions of the client's
// own deliveries are ignored: the hub settles those at once. Caller holds
// c.mu.
func (c *amqpConn) disposition(s *amqpSession, f []any) error {
	if role, _ := amqp1.Bool(f, 0); role != amqp1.RoleReceiver {
		return nil
	}
	first, ok := amqp1.Uint(f, 1)
	if !ok {
		return failf(amqp1.CondInvalidField, "disposition without first")
	}
	last, ok := amqp1.Uint(f, 2)
	if !ok {
		last = first
	}
	if c.fb == nil || c.fb.waiting == nil {
		return nil
	}
	w := c.fb.waiting
	if w.ch != s.ch || uint64(w.id) < first || uint64(w.id) > last {
		return nil
	}
	settled, _ := amqp1.Bool(f, 3)
	st, _ := amqp1.Field(f, 4).(*amqp1.Described)
	var code uint64
	if st != nil {
		code, _ = st.Code()
	}
	switch code {
	case amqp1.CodeAccepted, amqp1.CodeRejected, amqp1.CodeReleased, amqp1.CodeModified:
	default:
		if !settled {
			return nil // a received state, or none: not an outcome yet
		}
		code = amqp1.CodeReleased // settled without an outcome: sent again
	}
	c.fb.waiting = nil
	w.outcome <- code
	if settled {
		return nil
	}
	return c.write(amqp1.AppendFrame(nil, amqp1.TypeAMQP, s.ch, amqp1.Perf(amqp1.CodeDisposition,
		amqp1.RoleSender, w.id, nil, true, st), nil))
}

func (c *amqpConn) pumpFeedback(ctx context.Context, fb *feedbackPump) {
	h := c.h
	cons, err := client.NewPullConsumer(client.PullConsumerOptions{ConsumerOptions: client.ConsumerOptions{
		ClientOptions: client.ClientOptions{Registries: h.opts.Twins.Registries, Logger: h.opts.Logger},
		Group:         feedbackGroup, From: client.ConsumeFromFirst}, ManualOffsets: true})
	if err == nil {
		err = cons.Subscribe(h.opts.FeedbackTopic, "*")
		if err == nil {
			err = cons.Start(ctx)
		}
		defer cons.Close()
	}
	if err != nil {
		if ctx.Err() == nil {
			h.log.Warn("iothub: AMQP feedback receiver not started", "remote", c.nc.RemoteAddr().String(), "err", err)
		}
		return
	}
	for {
		msgs, err := cons.Poll(ctx)
		if ctx.Err() != nil {
			return
		}
		if err != nil {
			h.log.Warn("iothub: poll the feedback topic", "err", err)
			select {
			case <-ctx.Done():
				return
			case <-time.After(time.Second):
			}
			continue
		}
		for len(msgs) > 0 {
			batch, n := feedbackBatch(msgs)
			if !c.sendFeedback(ctx, fb, batch) {
				return // the pump stops: what it has not committed stays for the next receiver
			}
			for _, m := range msgs[:n] {
				cons.MarkConsumed(m.Queue, m.QueueOffset+1)
			}
			msgs = msgs[n:]
			// The records are settled even if the pump is stopping now.
			cctx, cancel := context.WithTimeout(context.WithoutCancel(ctx), 5*time.Second)
			if err := cons.Commit(cctx); err != nil {
				h.log.Warn("iothub: commit the feedback taken", "err", err)
			}
			cancel()
		}
	}
}

// feedbackBatch joins records into one JSON array of at most
// feedbackMaxBatch bytes (at least one record) and returns how many it
// took.
func feedbackBatch(msgs []*client.MessageExt) ([]byte, int) {
	var b bytes.Buffer
	b.WriteByte('[')
	n := 0
	for _, m := range msgs {
		if n > 0 && b.Len()+len(m.Body) > feedbackMaxBatch {
			break
		}
		if n > 0 {
			b.WriteByte(',')
		}
		b.Write(m.Body)
		n++
	}
	b.WriteByte(']')
	return b.Bytes(), n
}

// sendFeedback sends one batch on a feedback link with credit, waiting
// for credit (or a link) while ctx lasts, until the client settles it
// accepted or rejected (true), sending it again when it is released,
// modified or its link goes first; false: the pump stops.
func (c *amqpConn) sendFeedback(ctx context.Context, fb *feedbackPump, body []byte) bool {
	var id amqp1.UUID
	_, _ = rand.Read(id[:])
	var msg []byte
	msg = amqp1.Append(msg, amqp1.Perf(amqp1.CodeProperties, id, nil, nil, nil, nil, nil, amqp1.Symbol(feedbackContentType)))
	msg = amqp1.Append(msg, &amqp1.Described{Descriptor: uint64(amqp1.CodeData), Value: body})
	for {
		var w *feedbackDelivery
		c.mu.Lock()
		if c.fb == fb {
			if s, l := c.feedbackLink(); l != nil {
				w = &feedbackDelivery{ch: s.ch, handle: l.handle, outcome: make(chan uint64, 1)}
				var out []byte
				out, w.id = c.appendDelivery(nil, s, l, msg, false)
				fb.waiting = w
				_ = c.write(out) // a failed writer ends the connection, and the pump
			}
		}
		c.mu.Unlock()
		if w == nil {
			select {
			case <-ctx.Done():
				return false
			case <-fb.credit:
			}
			continue
		}
		var code uint64
		lock := time.NewTimer(c.h.opts.FeedbackLockDuration)
		select {
		case code = <-w.outcome:
		case <-lock.C:
			code = c.lockExpired(fb, w)
		case <-ctx.Done():
			select {
			case code = <-w.outcome: // settled before the pump was stopped
			default:
				lock.Stop()
				return false
			}
		}
		lock.Stop()
		switch code {
		case amqp1.CodeAccepted, amqp1.CodeRejected:
			return true
		}
		if ctx.Err() != nil {
			return false
		}
	}
}

// lockExpired takes back batch w, still unsettled after the lock
// duration: a later settlement of it is ignored, and the caller sends the
// batch again (0). When the client settled it meanwhile, that outcome.
func (c *amqpConn) lockExpired(fb *feedbackPump, w *feedbackDelivery) uint64 {
	c.mu.Lock()
	defer c.mu.Unlock()
	if fb.waiting != w {
		return <-w.outcome // settled, or its link went, just before
	}
	fb.waiting = nil
	c.h.log.Debug("iothub: a feedback batch was not settled within the lock duration; sending it again",
		"remote", c.nc.RemoteAddr().String(), "delivery", w.id, "lock", c.h.opts.FeedbackLockDuration)
	return 0
}

// feedbackLink returns an attached feedback link with credit. Caller
// holds c.mu.
func (c *amqpConn) feedbackLink() (*amqpSession, *amqpLink) {
	for _, s := range c.sessions {
		for _, l := range s.links {
			if l.feedback() && l.credit > 0 {
				return s, l
			}
		}
	}
	return nil, nil
}
