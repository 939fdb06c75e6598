package iothub

import (
	"context"
	"encoding/json"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/mqtt"
)

// Direct methods. The back end's call reaches whichever node holds the
// device's connection: the invoking node delivers it itself when the
// device is connected there, otherwise it writes the call to the RPC
// topic, which every node follows from its end. The node holding the
// device puts $iothub/methods/POST/{name}/?$rid={call id} into the
// device's session (through its $iothub/methods/POST/# subscription) and
// acknowledges; the device's $iothub/methods/res/{status}/?$rid= answer
// goes back to the invoking node the same way. No acknowledgement within
// MethodAckTimeout (or the call's connect timeout, if longer, resending
// every second) means the device is not online: 404. No answer within
// the response timeout: 504.
//
// RPC topic messages (FROZEN; TestHubRPCFormatPinned pins them). The
// body is the method's JSON payload (invoke, result; "null" when none)
// or "{}" (ack); the properties are
//
//	hub-op        "invoke", "ack" or "result"
//	hub-node      invoke: the invoking node (where ack and result go);
//	              ack, result: the node they are for
//	hub-call      the call id: unique across nodes, [0-9a-f.], also the $rid
//	hub-client    invoke: the device's client id ({deviceId}[/{moduleId}])
//	hub-method    invoke: the method name
//	hub-deadline  invoke: when the call gives up, Unix milliseconds
//	hub-status    ack: 202 delivered, 404 connected but not subscribed to
//	              methods, 429 session queue full; result: the device's status
//
// The message key is the call id.

// RPC property names and operations.
const (
	propOp       = "hub-op"
	propNode     = "hub-node"
	propCall     = "hub-call"
	propClient   = "hub-client"
	propMethod   = "hub-method"
	propDeadline = "hub-deadline"
	propStatus   = "hub-status"
	opInvoke     = "invoke"
	opAck        = "ack"
	opResult     = "result"
	rpcGroup     = "IOTHUB_RPC_TAIL"

	statusDelivered = 202
	statusNotSubbed = 404
	statusQueueFull = 429
)

// MethodCall is a direct method invocation (the back end's request).
type MethodCall struct {
	Name            string
	Payload         json.RawMessage // JSON; nil is null
	ResponseTimeout time.Duration   // default 30 s
	ConnectTimeout  time.Duration   // how long the device may take to come online
}

// MethodResult is a device's answer.
type MethodResult struct {
	Status  int
	Payload json.RawMessage // JSON (a non-JSON answer becomes a JSON string)
}

// call is a method call waiting on the invoking node.
type call struct {
	ack chan int
	res chan MethodResult
}

// devCall is a call delivered to a device on this node.
type devCall struct {
	node     string // the invoking node
	deadline time.Time
}

type methods struct {
	seq    atomic.Uint64
	prefix string // this process's part of call ids

	mu       sync.Mutex
	calls    map[string]*call              // call id -> waiting caller; protected by mu
	delivery map[string]map[string]devCall // client id -> call id -> delivered call; protected by mu
}

func (m *methods) init() {
	m.prefix = randomHex(6)
	m.calls = map[string]*call{}
	m.delivery = map[string]map[string]devCall{}
}

func (m *methods) newCall() (string, *call) {
	id := m.prefix + "." + strconv.FormatUint(m.seq.Add(1), 16)
	c := &call{ack: make(chan int, 1), res: make(chan MethodResult, 1)}
	m.mu.Lock()
	m.calls[id] = c
	m.mu.Unlock()
	return id, c
}

func (m *methods) endCall(id string) {
	m.mu.Lock()
	delete(m.calls, id)
	m.mu.Unlock()
}

// acked and resulted hand an ack or a result to a waiting call.
func (m *methods) acked(id string, status int) {
	m.mu.Lock()
	c := m.calls[id]
	m.mu.Unlock()
	if c != nil {
		select {
		case c.ack <- status:
		default:
		}
	}
}

func (m *methods) resulted(id string, r MethodResult) {
	m.mu.Lock()
	c := m.calls[id]
	m.mu.Unlock()
	if c != nil {
		select {
		case c.res <- r:
		default:
		}
	}
}

// delivered records a call put into a device's session.
func (m *methods) delivered(clientID, id string, dc devCall) {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.delivery[clientID]
	if d == nil {
		d = map[string]devCall{}
		m.delivery[clientID] = d
	}
	d[id] = dc
}

// answered takes a delivered call back when its device answers.
func (m *methods) answered(clientID, id string) (devCall, bool) {
	m.mu.Lock()
	defer m.mu.Unlock()
	dc, ok := m.delivery[clientID][id]
	if ok {
		delete(m.delivery[clientID], id)
		if len(m.delivery[clientID]) == 0 {
			delete(m.delivery, clientID)
		}
	}
	return dc, ok
}

// sweep forgets delivered calls past their deadline.
func (m *methods) sweep(now time.Time) {
	m.mu.Lock()
	defer m.mu.Unlock()
	for cid, d := range m.delivery {
		for id, dc := range d {
			if now.After(dc.deadline) {
				delete(d, id)
			}
		}
		if len(d) == 0 {
			delete(m.delivery, cid)
		}
	}
}

// failAll wakes every waiting call at Close.
func (m *methods) failAll() {
	m.mu.Lock()
	defer m.mu.Unlock()
	for _, c := range m.calls {
		select {
		case c.ack <- -1:
		default:
		}
	}
}

// startMethods creates the RPC topic and follows it.
func (h *Hub) startMethods(ctx context.Context) error {
	be := h.br.Backend()
	if err := be.EnsureTopic(ctx, h.opts.RPCTopic); err != nil {
		return fmt.Errorf("iothub: %w", err)
	}
	regs := h.opts.Twins.Registries
	po := client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: regs, Logger: h.opts.Logger},
		Group: "IOTHUB_RPC", SendTimeout: 3 * time.Second, Retries: -1}
	prod, err := client.NewProducer(po)
	if err != nil {
		return fmt.Errorf("iothub: producer: %w", err)
	}
	h.prod = prod
	rpc, err := be.NewTailConsumer(ctx, rpcGroup, h.opts.RPCTopic)
	if err != nil {
		return fmt.Errorf("iothub: %w", err)
	}
	h.rpc = rpc
	h.wg.Add(1)
	go h.rpcLoop()
	return nil
}

// rpcLoop serves the RPC topic.
func (h *Hub) rpcLoop() {
	defer h.wg.Done()
	for {
		msgs, err := h.rpc.Poll(h.ctx)
		if err != nil {
			if h.ctx.Err() != nil || errors.Is(err, client.ErrClosed) {
				return
			}
			h.log.Warn("iothub: poll the RPC topic", "err", err)
			continue
		}
		for _, x := range msgs {
			h.rpcMessage(x.Properties, x.Body)
		}
	}
}

// rpcMessage serves one RPC topic message.
func (h *Hub) rpcMessage(p map[string]string, body []byte) {
	id := p[propCall]
	switch p[propOp] {
	case opInvoke:
		if p[propNode] == h.nodeID {
			return // our own call: delivered here already if it could be
		}
		ms, _ := strconv.ParseInt(p[propDeadline], 10, 64)
		st := h.deliverCall(p[propClient], p[propMethod], id, body, p[propNode], time.UnixMilli(ms))
		if st != 0 {
			h.sendRPC(map[string]string{propOp: opAck, propNode: p[propNode], propCall: id, propStatus: strconv.Itoa(st)}, []byte("{}"))
		}
	case opAck:
		if p[propNode] == h.nodeID {
			st, _ := strconv.Atoi(p[propStatus])
			h.m.acked(id, st)
		}
	case opResult:
		if p[propNode] == h.nodeID {
			st, _ := strconv.Atoi(p[propStatus])
			h.m.resulted(id, MethodResult{Status: st, Payload: body})
		}
	}
}

// sendRPC writes one message to the RPC topic.
func (h *Hub) sendRPC(props map[string]string, body []byte) {
	ctx, cancel := context.WithTimeout(h.ctx, 3*time.Second)
	defer cancel()
	m := &client.Message{Topic: h.opts.RPCTopic, Body: body, Properties: props, Keys: []string{props[propCall]}}
	if _, err := h.prod.SendOrderly(ctx, m, props[propCall], client.HashSelector); err != nil {
		h.log.Warn("iothub: write to the RPC topic", "op", props[propOp], "err", err)
	}
}

// deliverCall puts a call into a device's session on this node. It
// returns 0 when the device is not connected here, else an ack status.
func (h *Hub) deliverCall(clientID, name, id string, payload []byte, node string, deadline time.Time) int {
	if !h.connectedHere(clientID) || checkMethodName(name) != nil || len(id) > maxRequestIDLen {
		return 0
	}
	h.m.delivered(clientID, id, devCall{node: node, deadline: deadline})
	err := h.srv.SendToSubscriber(clientID, &mqtt.Message{Topic: methodRequestTopic(name, id), Payload: payload, QoS: 1,
		Expiry: deadline})
	switch {
	case err == nil:
		return statusDelivered
	case errors.Is(err, mqtt.ErrNotSubscribed):
		h.m.answered(clientID, id)
		return statusNotSubbed
	case errors.Is(err, mqtt.ErrQueueFull):
		h.m.answered(clientID, id)
		return statusQueueFull
	}
	h.m.answered(clientID, id)
	return 0
}

// InvokeMethod calls a direct method on a connected device (or module),
// on whichever node it is connected to.
func (h *Hub) InvokeMethod(ctx context.Context, id Identity, c MethodCall) (MethodResult, error) {
	if err := checkMethodName(c.Name); err != nil {
		return MethodResult{}, err
	}
	if c.ResponseTimeout <= 0 {
		c.ResponseTimeout = DefaultMethodTimeout
	}
	if c.ResponseTimeout > h.opts.MaxMethodTimeout || c.ConnectTimeout > h.opts.MaxMethodTimeout || c.ConnectTimeout < 0 {
		return MethodResult{}, fmt.Errorf("%w: timeouts over %s", ErrBadRequest, h.opts.MaxMethodTimeout)
	}
	payload := []byte(c.Payload)
	if len(payload) == 0 {
		payload = []byte("null")
	} else if !json.Valid(payload) {
		return MethodResult{}, fmt.Errorf("%w: the payload is not JSON", ErrBadRequest)
	}
	h.stats.MethodCalls.Add(1)
	clientID := id.ClientID()
	callID, cl := h.m.newCall()
	defer h.m.endCall(callID)
	start := time.Now()
	connectBy := start.Add(max(c.ConnectTimeout, h.opts.MethodAckTimeout))
	deadline := start.Add(c.ConnectTimeout + c.ResponseTimeout)
	for {
		st := h.deliverCall(clientID, c.Name, callID, payload, h.nodeID, deadline)
		if st == 0 {
			h.sendRPC(map[string]string{propOp: opInvoke, propNode: h.nodeID, propCall: callID, propClient: clientID,
				propMethod: c.Name, propDeadline: strconv.FormatInt(deadline.UnixMilli(), 10)}, payload)
			wait := min(time.Until(connectBy), time.Second)
			if c.ConnectTimeout <= 0 {
				wait = time.Until(connectBy)
			}
			t := time.NewTimer(max(wait, 0))
			select {
			case st = <-cl.ack:
			case <-t.C:
			case <-ctx.Done():
				t.Stop()
				return MethodResult{}, ctx.Err()
			}
			t.Stop()
		}
		switch {
		case st == statusDelivered:
			return h.awaitResult(ctx, cl, id, c.Name, start.Add(c.ConnectTimeout+c.ResponseTimeout))
		case st == statusNotSubbed:
			return MethodResult{}, fmt.Errorf("%w: %s is connected but not subscribed to methods", ErrDeviceNotOnline, id)
		case st == statusQueueFull:
			return MethodResult{}, fmt.Errorf("%w: %s's session queue is full", ErrThrottled, id)
		case st < 0:
			return MethodResult{}, ErrClosed
		}
		if !time.Now().Before(connectBy) {
			return MethodResult{}, fmt.Errorf("%w: %s is not connected to any node", ErrDeviceNotOnline, id)
		}
	}
}

// awaitResult waits for the device's answer until deadline.
func (h *Hub) awaitResult(ctx context.Context, cl *call, id Identity, name string, deadline time.Time) (MethodResult, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case r := <-cl.res:
		return r, nil
	case <-t.C:
		return MethodResult{}, fmt.Errorf("%w: %s did not answer %s in time", ErrMethodTimeout, id, name)
	case <-ctx.Done():
		return MethodResult{}, ctx.Err()
	case <-h.ctx.Done():
		return MethodResult{}, ErrClosed
	}
}

// handleMethodResponse serves $iothub/methods/res/{status}/?$rid=.
func (h *Hub) handleMethodResponse(_ context.Context, from mqtt.ClientInfo, msg *mqtt.Message) error {
	id, ok := h.deviceOf(from)
	if !ok {
		h.log.Info("iothub: method response from a client that is not a device", "client", from.ClientID)
		return mqtt.ErrNotAuthorized
	}
	status, rid, err := methodResponse(msg.Topic)
	if err != nil {
		h.log.Info("iothub: malformed method response dropped", "device", id.String(), "reason", "malformed", "err", err)
		return nil
	}
	dc, ok := h.m.answered(from.ClientID, rid)
	if !ok {
		h.stats.UnknownResponses.Add(1)
		h.log.Info("iothub: method response for an unknown $rid dropped", "device", id.String(), "reason", "unknown rid",
			"rid", truncate(rid, 64))
		return nil
	}
	payload := msg.Payload
	switch {
	case len(payload) == 0:
		payload = []byte("null")
	case !json.Valid(payload):
		payload, _ = json.Marshal(string(payload))
	}
	if dc.node == h.nodeID {
		h.m.resulted(rid, MethodResult{Status: status, Payload: payload})
		return nil
	}
	h.sendRPC(map[string]string{propOp: opResult, propNode: dc.node, propCall: rid, propStatus: strconv.Itoa(status)}, payload)
	return nil
}
