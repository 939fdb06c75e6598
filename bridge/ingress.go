package bridge

import (
	"context"
	"errors"
	"strconv"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
)

// Pipelined ingress (mqtt.AsyncBackend). The engine hands a connection's
// PUBLISHes over without waiting; the backend keeps one chain per
// ordering key (the publisher's client id, else the topic: Backend.chains),
// and one goroutine per busy chain stores the chain's messages in arrival
// order.
// Whatever arrived while a store was in flight is taken in one go: runs of
// non-retained messages of one broker topic go out as one ordered batch
// when the producer offers one (orderedBatchSender), else one by one.

// maxIngressBatch bounds one ordered batch: messages and body bytes.
const (
	maxIngressBatch      = 256
	maxIngressBatchBytes = 1 << 20
)

// orderedBatchSender is the producer call the chains use for batches: msgs
// (one topic) stored in the queue selector picks for key, with consecutive
// offsets in slice order, acknowledged once all are stored.
type orderedBatchSender interface {
	SendBatchOrderly(ctx context.Context, msgs []*client.Message, key string, selector client.QueueSelector) (*client.SendResult, error)
}

// ingressItem is one message waiting in a chain.
type ingressItem struct {
	m    *mqtt.Message
	done func(error)
}

// orderKey is the key that keeps one publisher's messages in one queue.
func orderKey(m *mqtt.Message) string {
	if m.ClientID != "" {
		return m.ClientID
	}
	return m.Topic
}

// PublishAsync implements mqtt.AsyncBackend: m is stored after every
// earlier message of its publisher, and done runs once it is stored
// (with the retained record, for a retained message) or failed.
func (b *Backend) PublishAsync(ctx context.Context, m *mqtt.Message, done func(error)) {
	key := orderKey(m)
	if !b.chains.add(key, ingressItem{m, done}) {
		return
	}
	if !b.goOwned(func() { b.chains.drain(key, func(items []ingressItem) { b.storeOrdered(ctx, key, items) }) }) {
		b.chains.drain(key, func(items []ingressItem) {
			for _, it := range items {
				it.done(ErrClosed)
			}
		})
	}
}

// storeOrdered stores items in order: batches where possible, otherwise
// one Publish each. A failed batch fails each of its messages, but for a
// batch refused as illegal (too large as a whole), whose messages are
// stored one by one.
func (b *Backend) storeOrdered(ctx context.Context, key string, items []ingressItem) {
	for len(items) > 0 {
		msgs := b.batchable(items)
		n := len(msgs)
		if n < 2 {
			items[0].done(b.Publish(ctx, items[0].m))
			items = items[1:]
			continue
		}
		start := time.Now()
		err := b.sendBatch(ctx, msgs, key)
		if errors.Is(err, client.ErrBadMessage) {
			// A broker bounds a whole batch by its max_message_size,
			// which may be below maxIngressBatchBytes; nothing of the
			// batch was stored: each message goes alone, in order.
			for _, it := range items[:n] {
				it.done(b.Publish(ctx, it.m))
			}
			items = items[n:]
			continue
		}
		b.metrics.observe(start, n, err)
		if err != nil {
			err = storeFailed(strconv.Itoa(n)+" messages", err)
		}
		// Last first: the engine then acknowledges the batch in one write.
		for i := n - 1; i >= 0; i-- {
			items[i].done(err)
		}
		items = items[n:]
	}
}

// batchable converts the leading items that can go in one batch (one
// broker topic, none retained, within the batch bounds); fewer than two
// means no batch.
func (b *Backend) batchable(items []ingressItem) []*client.Message {
	if b.sendBatch == nil || b.isClosed() {
		return nil
	}
	topic := ""
	bytes := 0
	var msgs []*client.Message
	for n := 0; n < len(items) && n < maxIngressBatch; n++ {
		m := items[n].m
		if m.Retain {
			break
		}
		t := b.RouteOf(m.Topic)
		if n == 0 {
			topic = t
		} else if t != topic {
			break
		}
		bytes += len(m.Payload) + 256
		if n > 0 && bytes > maxIngressBatchBytes {
			break
		}
		cm, err := b.ingressMessage(m, t)
		if err != nil {
			break // stored (and failed) on its own
		}
		msgs = append(msgs, cm)
	}
	return msgs
}
