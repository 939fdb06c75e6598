package admin

import (
	"context"
	"errors"
	"fmt"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// AMQP 0-9-1 administration: a bridge node's AMQP server (its queues,
// exchanges, bindings, connections and consumers; purging a queue and
// closing a connection), reached like the MQTT calls, through a
// registry (protocol in remoting/protocol/adminamqp.go).

// Wire types of the AMQP administration calls.
type (
	AMQPQueue          = protocol.AMQPQueueInfo
	AMQPExchange       = protocol.AMQPExchangeInfo
	AMQPBinding        = protocol.AMQPBindingInfo
	AMQPConnection     = protocol.AMQPConnectionInfo
	AMQPConsumer       = protocol.AMQPConsumerInfo
	AMQPQueuePage      = protocol.AMQPQueuePage
	AMQPExchangePage   = protocol.AMQPExchangePage
	AMQPBindingPage    = protocol.AMQPBindingPage
	AMQPConnectionPage = protocol.AMQPConnectionPage
	AMQPConsumerPage   = protocol.AMQPConsumerPage
	// AMQPPage is a page of an AMQP listing.
	AMQPPage[T any] = protocol.AMQPPage[T]
)

// AMQPQuery selects a page of an AMQP listing: VHost ("": every virtual
// host), then MQTTQuery's Prefix, After and Limit on the listing's key
// (see remoting/protocol/adminamqp.go).
type AMQPQuery struct {
	VHost string
	MQTTQuery
}

func amqpList[T any](ctx context.Context, a *Admin, node, op string, q AMQPQuery) (*protocol.AMQPPage[T], error) {
	mq, err := q.MQTTQuery.Normalize()
	if err != nil {
		return nil, err
	}
	var p protocol.AMQPPage[T]
	r := protocol.MQTTAdminRequest{Node: node, Op: op, VHost: q.VHost, Prefix: mq.Prefix, After: mq.After, Limit: mq.Limit}
	if err := a.mqttCall(ctx, r, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// AMQPQueues returns a page of a node's AMQP queues, by name.
func (a *Admin) AMQPQueues(ctx context.Context, node string, q AMQPQuery) (*AMQPQueuePage, error) {
	return amqpList[AMQPQueue](ctx, a, node, protocol.AMQPOpQueues, q)
}

// AMQPExchanges returns a page of a node's AMQP exchanges, by name.
func (a *Admin) AMQPExchanges(ctx context.Context, node string, q AMQPQuery) (*AMQPExchangePage, error) {
	return amqpList[AMQPExchange](ctx, a, node, protocol.AMQPOpExchanges, q)
}

// AMQPBindings returns a page of a node's AMQP bindings, by source
// exchange.
func (a *Admin) AMQPBindings(ctx context.Context, node string, q AMQPQuery) (*AMQPBindingPage, error) {
	return amqpList[AMQPBinding](ctx, a, node, protocol.AMQPOpBindings, q)
}

// AMQPConnections returns a page of a node's AMQP connections, by name
// (the peer's address).
func (a *Admin) AMQPConnections(ctx context.Context, node string, q AMQPQuery) (*AMQPConnectionPage, error) {
	return amqpList[AMQPConnection](ctx, a, node, protocol.AMQPOpConnections, q)
}

// AMQPConsumers returns a page of a node's AMQP consumers, by queue.
func (a *Admin) AMQPConsumers(ctx context.Context, node string, q AMQPQuery) (*AMQPConsumerPage, error) {
	return amqpList[AMQPConsumer](ctx, a, node, protocol.AMQPOpConsumers, q)
}

// AMQPPurged is one node's answer to a purge.
type AMQPPurged struct {
	Node   string `json:"node"`
	Purged int    `json:"purged"`
}

// BridgeNodeIDs returns node, or the ids of every bridge node the
// registries know when it is "".
func (a *Admin) BridgeNodeIDs(ctx context.Context, node string) ([]string, error) {
	if node != "" {
		return []string{node}, nil
	}
	bs, err := a.Bridges(ctx)
	if err != nil {
		return nil, err
	}
	out := make([]string, 0, len(bs))
	for _, b := range bs {
		out = append(out, b.Node)
	}
	return out, nil
}

// PurgeAMQPQueue drops the ready messages of queue in vhost on node, or
// on every bridge node that has such a queue when node is "" (each node
// serves its own AMQP queues). It returns what each node dropped, or an
// error wrapping client.ErrNotFound when no node had the queue.
func (a *Admin) PurgeAMQPQueue(ctx context.Context, node, vhost, queue string) ([]AMQPPurged, error) {
	if queue == "" || vhost == "" {
		return nil, fmt.Errorf("%w: empty queue or virtual host", client.ErrBadOptions)
	}
	nodes, err := a.BridgeNodeIDs(ctx, node)
	if err != nil {
		return nil, err
	}
	var out []AMQPPurged
	for _, n := range nodes {
		var res protocol.AMQPPurgeResult
		if err := a.mqttCall(ctx, protocol.MQTTAdminRequest{Node: n, Op: protocol.AMQPOpPurge, VHost: vhost, Name: queue}, &res); err != nil {
			if node == "" && errors.Is(err, client.ErrNotFound) {
				continue // the node left meanwhile
			}
			return out, err
		}
		if res.Found {
			out = append(out, AMQPPurged{Node: n, Purged: res.Purged})
		}
	}
	if len(out) == 0 {
		return nil, fmt.Errorf("%w: AMQP queue %q in virtual host %q", client.ErrNotFound, queue, vhost)
	}
	return out, nil
}

// CloseAMQPConnection closes the AMQP connection named name (its peer's
// address) on node, or on whichever node has it when node is "", with
// connection.close 320 CONNECTION_FORCED and reason. It returns the node,
// or an error wrapping client.ErrNotFound when no node had it.
func (a *Admin) CloseAMQPConnection(ctx context.Context, node, name, reason string) (string, error) {
	if name == "" {
		return "", fmt.Errorf("%w: empty connection name", client.ErrBadOptions)
	}
	nodes, err := a.BridgeNodeIDs(ctx, node)
	if err != nil {
		return "", err
	}
	for _, n := range nodes {
		var res protocol.AMQPCloseResult
		if err := a.mqttCall(ctx, protocol.MQTTAdminRequest{Node: n, Op: protocol.AMQPOpClose, Name: name, Reason: reason}, &res); err != nil {
			if node == "" && errors.Is(err, client.ErrNotFound) {
				continue
			}
			return "", err
		}
		if res.Found {
			return n, nil
		}
	}
	return "", fmt.Errorf("%w: AMQP connection %q", client.ErrNotFound, name)
}

// AMQPHandler answers a node's AMQP administration calls (part of
// BridgeHandler). A listing's error (an unknown virtual host) is the
// call's answer.
type AMQPHandler interface {
	AMQPQueues(vhost string, q MQTTQuery) (AMQPQueuePage, error)
	AMQPExchanges(vhost string, q MQTTQuery) (AMQPExchangePage, error)
	AMQPBindings(vhost string, q MQTTQuery) (AMQPBindingPage, error)
	AMQPConnections(q MQTTQuery) AMQPConnectionPage
	AMQPConsumers(vhost string, q MQTTQuery) (AMQPConsumerPage, error)
	// PurgeAMQPQueue returns the messages dropped; found false when the
	// node has no such queue.
	PurgeAMQPQueue(vhost, queue string) (purged int, found bool)
	// CloseAMQPConnection reports whether the node had the connection.
	CloseAMQPConnection(name, reason string) bool
}

// amqpAnswer answers an AMQP op with h; ok false when op is not one.
func amqpAnswer(h AMQPHandler, r protocol.MQTTAdminRequest, q MQTTQuery) (out any, ok bool, err error) {
	switch r.Op {
	case protocol.AMQPOpQueues:
		out, err = h.AMQPQueues(r.VHost, q)
	case protocol.AMQPOpExchanges:
		out, err = h.AMQPExchanges(r.VHost, q)
	case protocol.AMQPOpBindings:
		out, err = h.AMQPBindings(r.VHost, q)
	case protocol.AMQPOpConnections:
		out = h.AMQPConnections(q)
	case protocol.AMQPOpConsumers:
		out, err = h.AMQPConsumers(r.VHost, q)
	case protocol.AMQPOpPurge:
		n, found := h.PurgeAMQPQueue(r.VHost, r.Name)
		out = protocol.AMQPPurgeResult{Found: found, Purged: n}
	case protocol.AMQPOpClose:
		out = protocol.AMQPCloseResult{Found: r.Name != "" && h.CloseAMQPConnection(r.Name, r.Reason)}
	default:
		return nil, false, nil
	}
	return out, true, err
}
