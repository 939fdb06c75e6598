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
// the first one a connection attaches starts a pump that consumes
// Options.FeedbackTopic as the group IOTHUB_FEEDBACK_RECEIVER (every
// record goes to one back end) and sends what each poll brings as one
// message, a JSON array of records (feedback.go), content type
// application/vnd.microsoft.iothub.feedback.json, settled, on a
// feedback link with credit. A batch's offsets are committed once it is
// written; a connection that ends first leaves them to the next
// receiver.

const (
	feedbackAddress     = "/messages/servicebound/feedback"
	feedbackGroup       = "IOTHUB_FEEDBACK_RECEIVER"
	feedbackContentType = "application/vnd.microsoft.iothub.feedback.json"
	feedbackMaxBatch    = 64 << 10 // bytes of records in one message
)

// feedbackPump is a connection's feedback consumer.
type feedbackPump struct {
	cancel context.CancelFunc
	done   chan struct{}
	credit chan struct{} // 1-buffered: a flow may have given credit
}

// startFeedback starts the connection's pump (once). Caller holds c.mu.
func (c *amqpConn) startFeedback() {
	if c.fb != nil {
		return
	}
	ctx, cancel := context.WithCancel(c.h.ctx)
	c.fb = &feedbackPump{cancel: cancel, done: make(chan struct{}), credit: make(chan struct{}, 1)}
	go func() {
		defer close(c.fb.done)
		c.pumpFeedback(ctx)
	}()
}

// stopFeedback stops the pump and waits for it.
func (c *amqpConn) stopFeedback() {
	c.mu.Lock()
	fb := c.fb
	c.mu.Unlock()
	if fb != nil {
		fb.cancel()
		<-fb.done
	}
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

func (c *amqpConn) pumpFeedback(ctx context.Context) {
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
			if err := c.sendFeedback(ctx, batch); err != nil {
				return // the connection is going: the records stay for the next receiver
			}
			for _, m := range msgs[:n] {
				cons.MarkConsumed(m.Queue, m.QueueOffset+1)
			}
			msgs = msgs[n:]
		}
		cctx, cancel := context.WithTimeout(ctx, 5*time.Second)
		if err := cons.Commit(cctx); err != nil && ctx.Err() == nil {
			h.log.Warn("iothub: commit the feedback taken", "err", err)
		}
		cancel()
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
// for credit (or a link) while ctx lasts.
func (c *amqpConn) sendFeedback(ctx context.Context, body []byte) error {
	var id amqp1.UUID
	_, _ = rand.Read(id[:])
	var msg []byte
	msg = amqp1.Append(msg, amqp1.Perf(amqp1.CodeProperties, id, nil, nil, nil, nil, nil, amqp1.Symbol(feedbackContentType)))
	msg = amqp1.Append(msg, &amqp1.Described{Descriptor: uint64(amqp1.CodeData), Value: body})
	for {
		c.mu.Lock()
		s, l := c.feedbackLink()
		if l != nil {
			l.pending = append(l.pending, msg)
			err := c.sendPending(s, l)
			c.mu.Unlock()
			return err
		}
		c.mu.Unlock()
		select {
		case <-ctx.Done():
			return ctx.Err()
		case <-c.fb.credit:
		}
	}
}

// feedbackLink returns an attached feedback link with credit and nothing
// waiting. Caller holds c.mu.
func (c *amqpConn) feedbackLink() (*amqpSession, *amqpLink) {
	for _, s := range c.sessions {
		for _, l := range s.links {
			if l.hubRole == amqp1.RoleSender && strings.EqualFold(l.address, feedbackAddress) && l.credit > 0 && len(l.pending) == 0 {
				return s, l
			}
		}
	}
	return nil, nil
}
