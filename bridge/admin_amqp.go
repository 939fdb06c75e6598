package bridge

import (
	"slices"
	"strings"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/client/admin"
)

// The AMQP administration calls (admin.AMQPHandler) answered from the
// node's AMQP server, when it serves one: listings paged like the MQTT
// ones, purging a queue, closing a connection.

// SetAMQP gives the node's AMQP 0-9-1 server to the administration calls
// the registries relay (nil: the node serves none; its listings are
// empty). The server stays the caller's to close.
func (b *Bridge) SetAMQP(s *amqp.Server) { b.amqp.Store(s) }

// amqpPage sorts items by key (stable: the engine's order within a key
// stays), cuts q's page and converts the items to their wire form.
func amqpPage[T, W any](items []T, err error, key func(T) string, conv func(T) W, q admin.MQTTQuery) (admin.AMQPPage[W], error) {
	if err != nil {
		return admin.AMQPPage[W]{}, err
	}
	slices.SortStableFunc(items, func(a, b T) int { return strings.Compare(key(a), key(b)) })
	keep, total, next := page(items, key, q)
	out := admin.AMQPPage[W]{Items: make([]W, len(keep)), Total: total, Next: next}
	for i, it := range keep {
		out.Items[i] = conv(it)
	}
	return out, nil
}

func (h adminHandler) AMQPQueues(vhost string, q admin.MQTTQuery) (admin.AMQPQueuePage, error) {
	s := h.b.amqp.Load()
	if s == nil {
		return admin.AMQPQueuePage{Items: []admin.AMQPQueue{}}, nil
	}
	items, err := s.Queues(vhost)
	return amqpPage(items, err, func(x amqp.QueueInfo) string { return x.Name },
		func(x amqp.QueueInfo) admin.AMQPQueue { return admin.AMQPQueue(x) }, q)
}

func (h adminHandler) AMQPExchanges(vhost string, q admin.MQTTQuery) (admin.AMQPExchangePage, error) {
	s := h.b.amqp.Load()
	if s == nil {
		return admin.AMQPExchangePage{Items: []admin.AMQPExchange{}}, nil
	}
	items, err := s.Exchanges(vhost)
	return amqpPage(items, err, func(x amqp.ExchangeInfo) string { return x.Name },
		func(x amqp.ExchangeInfo) admin.AMQPExchange { return admin.AMQPExchange(x) }, q)
}

func (h adminHandler) AMQPBindings(vhost string, q admin.MQTTQuery) (admin.AMQPBindingPage, error) {
	s := h.b.amqp.Load()
	if s == nil {
		return admin.AMQPBindingPage{Items: []admin.AMQPBinding{}}, nil
	}
	items, err := s.Bindings(vhost)
	return amqpPage(items, err, func(x amqp.BindingInfo) string { return x.Source },
		func(x amqp.BindingInfo) admin.AMQPBinding { return admin.AMQPBinding(x) }, q)
}

func (h adminHandler) AMQPConnections(q admin.MQTTQuery) admin.AMQPConnectionPage {
	s := h.b.amqp.Load()
	if s == nil {
		return admin.AMQPConnectionPage{Items: []admin.AMQPConnection{}}
	}
	p, _ := amqpPage(s.Connections(), nil, func(x amqp.ConnectionInfo) string { return x.Name },
		func(x amqp.ConnectionInfo) admin.AMQPConnection { return admin.AMQPConnection(x) }, q)
	return p
}

func (h adminHandler) AMQPConsumers(vhost string, q admin.MQTTQuery) (admin.AMQPConsumerPage, error) {
	s := h.b.amqp.Load()
	if s == nil {
		return admin.AMQPConsumerPage{Items: []admin.AMQPConsumer{}}, nil
	}
	items, err := s.Consumers(vhost)
	return amqpPage(items, err, func(x amqp.ConsumerInfo) string { return x.Queue },
		func(x amqp.ConsumerInfo) admin.AMQPConsumer { return admin.AMQPConsumer(x) }, q)
}

func (h adminHandler) PurgeAMQPQueue(vhost, queue string) (int, bool) {
	s := h.b.amqp.Load()
	if s == nil {
		return 0, false
	}
	n, err := s.PurgeQueue(vhost, queue)
	return n, err == nil
}

func (h adminHandler) CloseAMQPConnection(name, reason string) bool {
	s := h.b.amqp.Load()
	return s != nil && s.CloseConnection(name, reason) == nil
}
