package admin

import (
	"context"
	"errors"
	"fmt"
	"sync"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// MQTT bridge nodes and their clients, sessions and retained messages.
// Bridge nodes heartbeat to every registry (RegisterBridge); admin calls
// for a node go to a registry, which relays them over the node's own
// connection (protocol in remoting/protocol/adminext.go).

// Wire types of the bridge administration calls.
type (
	// BridgeNode is a bridge node as its heartbeat describes it.
	BridgeNode = protocol.BridgeInfo
	// MQTTClient is one connected MQTT client.
	MQTTClient = protocol.MQTTClientInfo
	// MQTTClientPage is a page of MQTTClients.
	MQTTClientPage = protocol.MQTTClientPage
	// MQTTSession is one persistent session of the cluster.
	MQTTSession = protocol.MQTTSessionInfo
	// MQTTSessionPage is a page of MQTTSessions.
	MQTTSessionPage = protocol.MQTTSessionPage
	// MQTTRetained is one retained message.
	MQTTRetained = protocol.MQTTRetainedInfo
	// MQTTRetainedPage is a page of MQTTRetained.
	MQTTRetainedPage = protocol.MQTTRetainedPage
	// MQTTSubscription is one subscription of a client or session.
	MQTTSubscription = protocol.MQTTSubscription
)

// DefaultMQTTLimit is the page size of MQTT listings when none is asked.
const DefaultMQTTLimit = 1000

// MaxMQTTLimit is the largest page of an MQTT listing.
const MaxMQTTLimit = protocol.MaxMQTTAdminLimit

// MQTTQuery selects a page of an MQTT listing: entries whose key (client
// id, or topic for retained messages) starts with Prefix, after After, at
// most Limit (0: DefaultMQTTLimit; at most MaxMQTTLimit).
type MQTTQuery struct {
	Prefix string
	After  string
	Limit  int
}

// Normalize checks the query and fills in the default limit.
func (q MQTTQuery) Normalize() (MQTTQuery, error) {
	if q.Limit < 0 || q.Limit > MaxMQTTLimit {
		return q, fmt.Errorf("%w: limit %d outside 1..%d", client.ErrBadOptions, q.Limit, MaxMQTTLimit)
	}
	if q.Limit == 0 {
		q.Limit = DefaultMQTTLimit
	}
	return q, nil
}

// Bridges returns the bridge nodes the registries know, sorted by node id
// (each node heartbeats to every registry; the first registry that
// answers is asked).
func (a *Admin) Bridges(ctx context.Context) ([]BridgeNode, error) {
	resp, err := a.registry(ctx, "bridge list", func() *protocol.Command {
		return protocol.NewRequest(protocol.GetBridgeList, nil, nil)
	})
	if err != nil {
		return nil, err
	}
	var bl protocol.BridgeList
	if err := protocol.DecodeJSON(resp.Body, &bl); err != nil {
		return nil, fmt.Errorf("admin: bridge list: %w", err)
	}
	return bl.Bridges, nil
}

// mqttCall sends an MQTT admin request for node through the registries
// (each in turn until one knows the node) and decodes the answer into out.
func (a *Admin) mqttCall(ctx context.Context, r protocol.MQTTAdminRequest, out any) error {
	body, err := protocol.EncodeJSON(r)
	if err != nil {
		return err
	}
	op := "mqtt " + r.Op
	var errs []error
	for _, reg := range a.opts.Registries {
		resp, err := a.invoke(ctx, op, reg, protocol.NewRequest(protocol.MQTTAdmin, nil, body))
		if err != nil {
			errs = append(errs, err)
			if ctx.Err() != nil {
				break
			}
			continue
		}
		switch resp.Code {
		case protocol.Success:
			if err := protocol.DecodeJSON(resp.Body, out); err != nil {
				return fmt.Errorf("admin: %s: %w", op, err)
			}
			return nil
		case protocol.QueryNotFound:
			errs = append(errs, fmt.Errorf("%w: %s", client.ErrNotFound, resp.Remark))
		default:
			return &client.BrokerError{Addr: reg, Op: op, Code: resp.Code, Remark: resp.Remark}
		}
	}
	if len(errs) > 0 && allNotFound(errs) {
		return fmt.Errorf("%w: bridge node %q: %w", client.ErrNotFound, r.Node, errors.Join(errs...))
	}
	return fmt.Errorf("%w: %s: %w", client.ErrRegistryUnavailable, op, errors.Join(errs...))
}

func allNotFound(errs []error) bool {
	for _, e := range errs {
		if !errors.Is(e, client.ErrNotFound) {
			return false
		}
	}
	return true
}

func (a *Admin) mqttList(ctx context.Context, node, op string, q MQTTQuery, out any) error {
	q, err := q.Normalize()
	if err != nil {
		return err
	}
	return a.mqttCall(ctx, protocol.MQTTAdminRequest{Node: node, Op: op, Prefix: q.Prefix, After: q.After, Limit: q.Limit}, out)
}

// MQTTClients returns a page of the clients connected to a bridge node.
func (a *Admin) MQTTClients(ctx context.Context, node string, q MQTTQuery) (*MQTTClientPage, error) {
	var p MQTTClientPage
	if err := a.mqttList(ctx, node, protocol.MQTTOpClients, q, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// MQTTSessions returns a page of the cluster's persistent sessions,
// connected or not, as a bridge node sees them (every node holds the
// whole table).
func (a *Admin) MQTTSessions(ctx context.Context, node string, q MQTTQuery) (*MQTTSessionPage, error) {
	var p MQTTSessionPage
	if err := a.mqttList(ctx, node, protocol.MQTTOpSessions, q, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// MQTTRetained returns a page of the cluster's retained messages, by
// topic, as a bridge node sees them.
func (a *Admin) MQTTRetained(ctx context.Context, node string, q MQTTQuery) (*MQTTRetainedPage, error) {
	var p MQTTRetainedPage
	if err := a.mqttList(ctx, node, protocol.MQTTOpRetained, q, &p); err != nil {
		return nil, err
	}
	return &p, nil
}

// DisconnectMQTTClient disconnects a client (v5: DISCONNECT 0x98,
// administrative action) from node, or from whichever node has it when
// node is "". It returns the node the client was connected to, or an
// error wrapping client.ErrNotFound when no node had it.
func (a *Admin) DisconnectMQTTClient(ctx context.Context, node, clientID string) (string, error) {
	if clientID == "" {
		return "", fmt.Errorf("%w: empty client id", client.ErrBadOptions)
	}
	nodes := []string{node}
	if node == "" {
		bs, err := a.Bridges(ctx)
		if err != nil {
			return "", err
		}
		nodes = nodes[:0]
		for _, b := range bs {
			nodes = append(nodes, b.Node)
		}
	}
	for _, n := range nodes {
		var res protocol.MQTTDisconnectResult
		if err := a.mqttCall(ctx, protocol.MQTTAdminRequest{Node: n, Op: protocol.MQTTOpDisconnect, ClientID: clientID}, &res); err != nil {
			if node == "" && errors.Is(err, client.ErrNotFound) {
				continue // the node left meanwhile
			}
			return "", err
		}
		if res.Disconnected {
			return n, nil
		}
	}
	return "", fmt.Errorf("%w: MQTT client %q is not connected", client.ErrNotFound, clientID)
}

// PrepareC2D asks the IoT hub nodes to give deviceID a session holding
// its cloud-to-device subscription if it has none, so that what is stored
// for it before its first connect waits for it (what the hub's HTTPS API
// does before it stores a message). It reports whether a hub node did;
// false, with no error, when no bridge node is a hub.
func (a *Admin) PrepareC2D(ctx context.Context, deviceID string) (bool, error) {
	bs, err := a.Bridges(ctx)
	if err != nil {
		return false, err
	}
	var errs []error
	for _, b := range bs {
		var res protocol.MQTTPrepareC2DResult
		err := a.mqttCall(ctx, protocol.MQTTAdminRequest{Node: b.Node, Op: protocol.MQTTOpPrepareC2D, ClientID: deviceID}, &res)
		if err != nil {
			errs = append(errs, err)
			continue
		}
		if res.Prepared {
			return true, nil
		}
	}
	return false, errors.Join(errs...)
}

// BridgeHandler answers the administration calls for one bridge node.
// Listings follow MQTTQuery (already normalized).
type BridgeHandler interface {
	Clients(q MQTTQuery) MQTTClientPage
	Sessions(q MQTTQuery) MQTTSessionPage
	Retained(q MQTTQuery) MQTTRetainedPage
	// Disconnect disconnects a client connected to the node; false when
	// it is not connected here.
	Disconnect(clientID string) bool
	// PrepareC2D gives a device a session holding its cloud-to-device
	// subscription if it has none (an IoT hub node); false when the node
	// is not a hub.
	PrepareC2D(deviceID string) (bool, error)
	// The node's AMQP 0-9-1 server.
	AMQPHandler
}

// ServeBridge makes this Admin's connections answer the MQTT
// administration calls the registries relay for the node, with h. Call it
// once, before the first RegisterBridge.
func (a *Admin) ServeBridge(h BridgeHandler) {
	a.rc.RegisterFunc(protocol.MQTTAdmin, func(_ *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		var r protocol.MQTTAdminRequest
		if err := protocol.DecodeJSON(req.Body, &r); err != nil {
			return protocol.NewResponse(protocol.SystemError, fmt.Sprintf("bad MQTT admin request: %v", err)), nil
		}
		q, err := MQTTQuery{Prefix: r.Prefix, After: r.After, Limit: r.Limit}.Normalize()
		if err != nil {
			return protocol.NewResponse(protocol.SystemError, err.Error()), nil
		}
		var out any
		switch r.Op {
		case protocol.MQTTOpClients:
			out = h.Clients(q)
		case protocol.MQTTOpSessions:
			out = h.Sessions(q)
		case protocol.MQTTOpRetained:
			out = h.Retained(q)
		case protocol.MQTTOpDisconnect:
			out = protocol.MQTTDisconnectResult{Disconnected: r.ClientID != "" && h.Disconnect(r.ClientID)}
		case protocol.MQTTOpPrepareC2D:
			ok, err := h.PrepareC2D(r.ClientID)
			if err != nil {
				return protocol.NewResponse(protocol.SystemError, err.Error()), nil
			}
			out = protocol.MQTTPrepareC2DResult{Prepared: ok}
		default:
			o, ok, err := amqpAnswer(h, r, q)
			if err != nil {
				return protocol.NewResponse(protocol.SystemError, err.Error()), nil
			}
			if !ok {
				return protocol.NewResponse(protocol.RequestCodeNotSupported, fmt.Sprintf("unknown MQTT admin op %q", r.Op)), nil
			}
			out = o
		}
		body, err := protocol.EncodeJSON(out)
		if err != nil {
			return nil, err
		}
		resp := protocol.NewResponse(protocol.Success, "")
		resp.Body = body
		return resp, nil
	})
}

// RegisterBridge sends a bridge node's heartbeat to every registry and
// returns how many accepted it, with the errors of the others.
func (a *Admin) RegisterBridge(ctx context.Context, info BridgeNode) (int, error) {
	return a.toEveryRegistry(ctx, "register bridge", protocol.RegisterBridge, info)
}

// UnregisterBridge tells every registry the node is leaving.
func (a *Admin) UnregisterBridge(ctx context.Context, node string) error {
	_, err := a.toEveryRegistry(ctx, "unregister bridge", protocol.UnregisterBridge, BridgeNode{Node: node})
	return err
}

func (a *Admin) toEveryRegistry(ctx context.Context, op string, code int32, info BridgeNode) (int, error) {
	body, err := protocol.EncodeJSON(info)
	if err != nil {
		return 0, err
	}
	var (
		wg   sync.WaitGroup
		mu   sync.Mutex
		ok   int
		errs []error
	)
	for _, reg := range a.opts.Registries {
		wg.Add(1)
		go func() {
			defer wg.Done()
			_, err := a.invokeOK(ctx, op, reg, protocol.NewRequest(code, nil, body))
			mu.Lock()
			defer mu.Unlock()
			if err != nil {
				errs = append(errs, err)
			} else {
				ok++
			}
		}()
	}
	wg.Wait()
	return ok, errors.Join(errs...)
}
