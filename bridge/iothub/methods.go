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
	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/mqtt"
	tw "github.com/smartgo/smartgo/twin"
)

// Direct methods. The back end's call reaches whichever node holds the
// device's connection: the invoking node delivers it itself when the
// device is connected there, otherwise it writes the call to the RPC
// topic, which every node follows from its end. The node holding the
// device puts $iothub/methods/POST/{name}/?$rid={call id} into the
// device's session (through its $iothub/methods/POST/# subscription) and
// acknowledges; the device's $iothub/methods/res/{status}/?$rid= answer
// goes back to the invoking node the same way. A device that the
// registry records connected to no node is not online: 404 at once, or,
// with a connect timeout, after looking again every connectPoll until
// it. No acknowledgement within MethodAckTimeout (or the connect timeout,
// if longer, resending every second) from the node the registry names
// means the same. No answer within the response timeout: 504.
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
//	hub-too-large result: the size in bytes of the device's answer, which
//	              is over MaxMethodPayload and not sent (the body is "null");
//	              absent when it fits
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
	propTooLarge = "hub-too-large"
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

	tooLarge int // the size of an answer over MaxMethodPayload (then Payload is null); 0 when it fits
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

// delivered records a call put into a device's session; false when it
// was delivered already (the invoking node resends until acknowledged).
func (m *methods) delivered(clientID, id string, dc devCall) bool {
	m.mu.Lock()
	defer m.mu.Unlock()
	d := m.delivery[clientID]
	if d == nil {
		d = map[string]devCall{}
		m.delivery[clientID] = d
	}
	if _, ok := d[id]; ok {
		return false
	}
	d[id] = dc
	return true
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
			n, _ := strconv.Atoi(p[propTooLarge])
			h.m.resulted(id, MethodResult{Status: st, Payload: body, tooLarge: max(n, 0)})
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
	if !h.m.delivered(clientID, id, devCall{node: node, deadline: deadline}) {
		return statusDelivered // a resent invoke: the device has the call already
	}
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

// connectPoll is how often a call with a connect timeout looks again
// for a device that is not connected anywhere.
const connectPoll = 200 * time.Millisecond

// InvokeMethod calls a direct method on a connected device (or module),
// on whichever node it is connected to. A device connected to no node
// (its twin's connectionState, as every node records its devices'
// connections) fails the call with ErrDeviceNotOnline at once, unless
// the call has a connect timeout: then it waits that long for the device
// to connect. A device the registry says is connected to another node
// must be acknowledged by that node within MethodAckTimeout (or the
// connect timeout, if longer), else ErrDeviceNotOnline. A payload over
// MaxMethodPayload is ErrTooLarge, an answer over it ErrResponseTooLarge.
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
	} else if len(payload) > MaxMethodPayload {
		return MethodResult{}, fmt.Errorf("%w: method payload of %d bytes (at most %d)", ErrTooLarge, len(payload), MaxMethodPayload)
	} else if !json.Valid(payload) {
		return MethodResult{}, fmt.Errorf("%w: the payload is not JSON", ErrBadRequest)
	}
	h.stats.MethodCalls.Add(1)
	clientID := id.ClientID()
	callID, cl := h.m.newCall()
	defer h.m.endCall(callID)
	start := time.Now()
	connectBy := start.Add(c.ConnectTimeout)
	ackBy := start.Add(max(c.ConnectTimeout, h.opts.MethodAckTimeout))
	deadline := start.Add(c.ConnectTimeout + c.ResponseTimeout)
	notOnline := func(why string) error {
		return &methodError{err: fmt.Errorf("%w: %s %s", ErrDeviceNotOnline, id, why), timeout: c.ConnectTimeout}
	}
	for {
		st := h.deliverCall(clientID, c.Name, callID, payload, h.nodeID, deadline)
		if st == 0 {
			if !h.connectedElsewhere(ctx, id) {
				// Connected to no node: no node could acknowledge.
				if !time.Now().Before(connectBy) {
					return MethodResult{}, notOnline("is not connected")
				}
				if err := h.pause(ctx, min(connectPoll, time.Until(connectBy))); err != nil {
					return MethodResult{}, err
				}
				continue
			}
			h.sendRPC(map[string]string{propOp: opInvoke, propNode: h.nodeID, propCall: callID, propClient: clientID,
				propMethod: c.Name, propDeadline: strconv.FormatInt(deadline.UnixMilli(), 10)}, payload)
			t := time.NewTimer(max(min(time.Until(ackBy), time.Second), 0))
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
			return h.awaitResult(ctx, cl, id, c.Name, deadline, c.ResponseTimeout)
		case st == statusNotSubbed:
			// A device that just connected subscribes next: within the
			// connect timeout, look again.
			if !time.Now().Before(connectBy) {
				return MethodResult{}, notOnline("is connected but not subscribed to methods")
			}
			if err := h.pause(ctx, min(connectPoll, time.Until(connectBy))); err != nil {
				return MethodResult{}, err
			}
			continue
		case st == statusQueueFull:
			return MethodResult{}, fmt.Errorf("%w: %s's session queue is full", ErrThrottled, id)
		case st < 0:
			return MethodResult{}, ErrClosed
		}
		if !time.Now().Before(ackBy) {
			return MethodResult{}, notOnline("is not connected to any node that answers")
		}
	}
}

// connectedElsewhere reports whether the registry records id connected
// (to another node: the caller has looked on this one). When the registry
// cannot say, it reports true: the call then asks the other nodes and
// waits for their acknowledgement, as if the device were connected.
func (h *Hub) connectedElsewhere(ctx context.Context, id Identity) bool {
	_, state, err := h.identityState(ctx, id)
	switch {
	case errors.Is(err, twincli.ErrNotFound):
		return false // not registered (yet): not connected
	case err != nil:
		h.log.Debug("iothub: connection state of a method's device", "device", id.String(), "err", err)
		return true
	}
	return state != tw.StateDisconnected
}

// pause waits d, or until ctx or the hub ends.
func (h *Hub) pause(ctx context.Context, d time.Duration) error {
	t := time.NewTimer(max(d, 0))
	defer t.Stop()
	select {
	case <-t.C:
		return nil
	case <-ctx.Done():
		return ctx.Err()
	case <-h.ctx.Done():
		return ErrClosed
	}
}

// methodError is a failed direct method call with the timeout it waited
// for (the connect timeout for ErrDeviceNotOnline, the response timeout
// for ErrMethodTimeout): the HTTPS API reports it in IoT Hub's shape.
type methodError struct {
	err     error
	timeout time.Duration
}

func (e *methodError) Error() string { return e.err.Error() }
func (e *methodError) Unwrap() error { return e.err }

// awaitResult waits for the device's answer until deadline.
func (h *Hub) awaitResult(ctx context.Context, cl *call, id Identity, name string, deadline time.Time, timeout time.Duration) (MethodResult, error) {
	t := time.NewTimer(time.Until(deadline))
	defer t.Stop()
	select {
	case r := <-cl.res:
		if r.tooLarge > 0 {
			return MethodResult{}, fmt.Errorf("%w: %s answered %s with %d bytes (at most %d)", ErrResponseTooLarge, id, name,
				r.tooLarge, MaxMethodPayload)
		}
		return r, nil
	case <-t.C:
		return MethodResult{}, &methodError{err: fmt.Errorf("%w: %s did not answer %s in time", ErrMethodTimeout, id, name), timeout: timeout}
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
	res := MethodResult{Status: status, Payload: payload}
	if len(payload) > MaxMethodPayload {
		// IoT Hub's limit holds for answers too: the caller gets 413 at
		// once rather than the payload (or a timeout).
		res = MethodResult{Status: status, Payload: json.RawMessage("null"), tooLarge: len(payload)}
	}
	if dc.node == h.nodeID {
		h.m.resulted(rid, res)
		return nil
	}
	props := map[string]string{propOp: opResult, propNode: dc.node, propCall: rid, propStatus: strconv.Itoa(status)}
	if res.tooLarge > 0 {
		props[propTooLarge] = strconv.Itoa(res.tooLarge)
	}
	h.sendRPC(props, res.Payload)
	return nil
}
