package iothub

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"hash/fnv"
	"strconv"
	"sync"
	"time"

	twincli "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/mqtt"
)

// Connection bookkeeping: every device connection on this node is
// recorded in the registry (connectionState, lastActivityTime) and its
// twin watched for desired changes while it lasts. The MQTT server's
// connect and disconnect callbacks must not block, so the work goes to a
// few workers; one client's events always go to the same worker, in
// order.

// lifecycleWorkers is the number of bookkeeping workers.
const lifecycleWorkers = 32

type lifecycle struct {
	workers [lifecycleWorkers]lcWorker
	wg      sync.WaitGroup
}

type lcWorker struct {
	mu    sync.Mutex
	cond  *sync.Cond
	queue []func(context.Context) // protected by mu
	busy  bool                    // protected by mu: running a job
	done  bool                    // protected by mu
}

// start runs the workers; drain stops them.
func (l *lifecycle) start(ctx context.Context) {
	for i := range l.workers {
		w := &l.workers[i]
		w.cond = sync.NewCond(&w.mu)
		l.wg.Add(1)
		go w.run(ctx, &l.wg)
	}
}

func (w *lcWorker) run(ctx context.Context, wg *sync.WaitGroup) {
	defer wg.Done()
	for {
		w.mu.Lock()
		for len(w.queue) == 0 && !w.done {
			w.cond.Wait()
		}
		if len(w.queue) == 0 {
			w.mu.Unlock()
			return
		}
		job := w.queue[0]
		w.queue[0] = nil
		w.queue = w.queue[1:]
		w.busy = true
		w.mu.Unlock()
		job(ctx)
		w.mu.Lock()
		w.busy = false
		w.cond.Broadcast()
		w.mu.Unlock()
	}
}

// enqueue runs job on key's worker after the key's earlier jobs.
func (l *lifecycle) enqueue(key string, job func(context.Context)) {
	h := fnv.New32a()
	h.Write([]byte(key))
	w := &l.workers[h.Sum32()%lifecycleWorkers]
	w.mu.Lock()
	if !w.done {
		w.queue = append(w.queue, job)
		w.cond.Broadcast()
	}
	w.mu.Unlock()
}

// idle reports whether no job is queued or running.
func (l *lifecycle) idle() bool {
	for i := range l.workers {
		w := &l.workers[i]
		w.mu.Lock()
		busy := len(w.queue) > 0 || w.busy
		w.mu.Unlock()
		if busy {
			return false
		}
	}
	return true
}

// drain lets the queued jobs run for up to d, then stops the workers
// (jobs still queued are dropped) and waits for them.
func (l *lifecycle) drain(d time.Duration) {
	deadline := time.Now().Add(d)
	for !l.idle() && time.Now().Before(deadline) {
		time.Sleep(10 * time.Millisecond)
	}
	for i := range l.workers {
		w := &l.workers[i]
		w.mu.Lock()
		w.done = true
		w.queue = nil
		w.cond.Broadcast()
		w.mu.Unlock()
	}
	l.wg.Wait()
}

// connID is the registry's name of a connection: the node and the
// server's connection id.
func (h *Hub) connID(c mqtt.ClientInfo) string {
	return h.nodeID + "#" + strconv.FormatUint(c.ConnID, 10)
}

// onConnect (mqtt.Options.OnConnect) records a device connection.
func (h *Hub) onConnect(c mqtt.ClientInfo) {
	id, ok := h.deviceOf(c)
	if !ok {
		return
	}
	model, _, _ := modelID(c.Username, c.ClientID) // checked at CONNECT
	d := &deviceConn{id: id, connID: c.ConnID, watching: make(chan struct{}), cid: h.connID(c), model: model}
	d.bucket.init(h.opts.TwinRate, time.Now())
	h.mu.Lock()
	if exp, ok := h.expiries[c.ClientID]; ok {
		delete(h.expiries, c.ClientID)
		clientID, connID := c.ClientID, c.ConnID
		d.expiry = time.AfterFunc(time.Until(exp), func() { h.tokenExpired(clientID, connID) })
	}
	if old := h.dev[c.ClientID]; old != nil && old.expiry != nil {
		old.expiry.Stop()
	}
	h.dev[c.ClientID] = d
	h.mu.Unlock()
	if model != "" {
		h.models.Store(c.ClientID, modelConn{connID: c.ConnID, model: model})
	} else {
		h.models.Delete(c.ClientID)
	}
	h.lc.enqueue(c.ClientID, func(ctx context.Context) {
		defer close(d.watching)
		if h.setUp(ctx, d) != nil {
			d.redo.Store(true)
			h.setUpLater(c.ClientID, d, setUpRetryMin)
		}
	})
}

// The set-up of a connection that failed is tried again after
// setUpRetryMin, doubling up to setUpRetryMax, while the connection
// lasts, so a device that sends no twin request is recorded too once the
// store has room again.
const (
	setUpRetryMin = time.Second
	setUpRetryMax = 30 * time.Second
)

// setUpLater runs d's set-up again after delay, in the device's
// lifecycle order, unless d is no longer clientID's connection on this
// node or a twin request did it meanwhile (setUpAgain).
func (h *Hub) setUpLater(clientID string, d *deviceConn, delay time.Duration) {
	time.AfterFunc(delay, func() {
		h.lc.enqueue(clientID, func(ctx context.Context) {
			h.mu.Lock()
			current := h.dev[clientID] == d
			h.mu.Unlock()
			if !current || !d.redo.Load() {
				return
			}
			if h.setUp(ctx, d) == nil {
				d.redo.Store(false)
				return
			}
			h.setUpLater(clientID, d, min(2*delay, setUpRetryMax))
		})
	})
}

// setUp records a device connection in the registry: its identity first
// in development mode, its connection state, and the watch of its
// desired properties. It returns the first failure (logged); the steps
// are idempotent, so a failed set-up is run again whole.
func (h *Hub) setUp(ctx context.Context, d *deviceConn) error {
	id := d.id
	var first error
	if h.opts.DeviceAuth == AuthNone {
		first = h.register(ctx, id)
	}
	rctx, cancel := h.requestCtx(ctx)
	defer cancel()
	if err := h.twins.SetConnected(rctx, id.DeviceID, id.ModuleID, d.cid, d.model); err != nil {
		h.log.Warn("iothub: record connection", "device", id.String(), "err", err)
		first = cmp.Or(first, err)
	}
	if err := h.twins.Watch(rctx, id.DeviceID, id.ModuleID); err != nil {
		h.log.Warn("iothub: watch desired properties", "device", id.String(), "err", err)
		first = cmp.Or(first, err)
	}
	return first
}

// setUpAgain runs the set-up of clientID's connection again when it
// failed (deviceConn.redo), in the device's lifecycle order, before a
// twin request is served: a device connected while the store refused
// writes is registered and watched once it accepts them, without
// reconnecting. While it still fails the request gets an error that
// wraps twincli.ErrUnavailable (503: the SDKs retry).
func (h *Hub) setUpAgain(ctx context.Context, clientID string) error {
	h.mu.Lock()
	d := h.dev[clientID]
	h.mu.Unlock()
	if d == nil {
		return nil
	}
	select {
	case <-d.watching:
	case <-ctx.Done():
		return fmt.Errorf("%w: connection not recorded yet: %w", twincli.ErrUnavailable, ctx.Err())
	}
	if !d.redo.Load() {
		return nil
	}
	done := make(chan error, 1)
	h.lc.enqueue(clientID, func(ctx context.Context) {
		if !d.redo.Load() {
			done <- nil
			return
		}
		err := h.setUp(ctx, d)
		if err == nil {
			d.redo.Store(false)
		}
		done <- err
	})
	select {
	case err := <-done:
		if err != nil {
			return fmt.Errorf("%w: device set-up: %w", twincli.ErrUnavailable, err)
		}
		return nil
	case <-ctx.Done():
		return fmt.Errorf("%w: device set-up: %w", twincli.ErrUnavailable, ctx.Err())
	}
}

// onDisconnect (mqtt.Options.OnDisconnect) records the end of a device
// connection; the twin stays watched while another connection of the
// device is on this node.
func (h *Hub) onDisconnect(c mqtt.ClientInfo) {
	id, ok := h.deviceOf(c)
	if !ok {
		return
	}
	h.mu.Lock()
	last, revoked := false, false
	if d := h.dev[c.ClientID]; d != nil && d.connID == c.ConnID {
		if d.expiry != nil {
			d.expiry.Stop()
		}
		delete(h.dev, c.ClientID)
		last, revoked = true, d.revoked.Load()
	}
	h.mu.Unlock()
	var gen string
	var inst uint64
	if revoked && h.srv != nil {
		// The session it left (none if another node's took it) and the
		// identity generation it was for.
		gen, inst = h.ownerTag(c.ClientID), h.srv.SessionInstance(c.ClientID)
	}
	if mc, ok := h.models.Load(c.ClientID); ok && mc.(modelConn).connID == c.ConnID {
		h.models.CompareAndDelete(c.ClientID, mc)
	}
	// Calls delivered to this connection are kept until their deadline
	// (methods.sweep): a device resuming its session gets an unacknowledged
	// request again and its answer must still reach the caller.
	cid := h.connID(c)
	h.lc.enqueue(c.ClientID, func(ctx context.Context) {
		rctx, cancel := h.requestCtx(ctx)
		defer cancel()
		if last && !h.connectedHere(c.ClientID) {
			if err := h.twins.Unwatch(rctx, id.DeviceID, id.ModuleID); err != nil {
				h.log.Debug("iothub: unwatch", "device", id.String(), "err", err)
			}
		}
		// A device that reconnected elsewhere meanwhile owns the state
		// now: the registry refuses this close (ErrPrecondition).
		err := h.twins.SetDisconnected(rctx, id.DeviceID, id.ModuleID, cid)
		if err != nil && !errors.Is(err, twincli.ErrPrecondition) && !errors.Is(err, twincli.ErrNotFound) {
			h.log.Warn("iothub: record disconnection", "device", id.String(), "err", err)
		}
		if inst != 0 {
			h.endRevoked(ctx, id, gen, inst)
		}
	})
}

// watchingDone waits (within ctx) until the desired changes of
// clientID's current connection are watched: its connect job has run.
func (h *Hub) watchingDone(ctx context.Context, clientID string) {
	h.mu.Lock()
	d := h.dev[clientID]
	h.mu.Unlock()
	if d == nil {
		return
	}
	select {
	case <-d.watching:
	case <-ctx.Done():
	}
}

// connectedHere reports whether clientID has a connection on this node.
func (h *Hub) connectedHere(clientID string) bool {
	h.mu.Lock()
	defer h.mu.Unlock()
	return h.dev[clientID] != nil
}

// tokenExpired closes a connection whose SAS token expired (the SDKs
// reconnect with a fresh one).
func (h *Hub) tokenExpired(clientID string, connID uint64) {
	h.mu.Lock()
	d := h.dev[clientID]
	h.mu.Unlock()
	if d == nil || d.connID != connID || h.srv == nil {
		return
	}
	h.log.Info("iothub: SAS token expired: disconnecting", "device", clientID)
	if err := h.srv.Disconnect(clientID, 0x87); err != nil {
		h.log.Debug("iothub: disconnect", "device", clientID, "err", err)
	}
}

// register creates a development-mode identity on its first connect.
func (h *Hub) register(ctx context.Context, id Identity) error {
	rctx, cancel := h.requestCtx(ctx)
	defer cancel()
	none := &twincli.Authentication{Type: "none"}
	d, err := h.twins.CreateDevice(rctx, &twincli.Device{DeviceID: id.DeviceID, Authentication: none})
	if err == nil && id.ModuleID == "" {
		h.noteOwner(id.ClientID(), d.GenerationID) // owner.go
	}
	if err != nil && !errors.Is(err, twincli.ErrExists) {
		h.log.Warn("iothub: register device", "device", id.DeviceID, "err", err)
		return err
	}
	if id.ModuleID != "" {
		m, err := h.twins.CreateModule(rctx, &twincli.Module{DeviceID: id.DeviceID, ModuleID: id.ModuleID, Authentication: none})
		if err == nil {
			h.noteOwner(id.ClientID(), m.GenerationID) // owner.go
		}
		if err != nil && !errors.Is(err, twincli.ErrExists) {
			h.log.Warn("iothub: register module", "device", id.String(), "err", err)
			return err
		}
	}
	return nil
}

// pushDesired (twin client OnDesired) sends desired changes to the
// connected devices that subscribed to them.
func (h *Hub) pushDesired(list []twincli.DesiredChange) {
	if h.srv == nil {
		return
	}
	for _, d := range list {
		key := d.Key()
		if d.Revoked() {
			h.revoke(key)
			continue
		}
		m := &mqtt.Message{Topic: desiredTopicPrefix + strconv.FormatInt(d.Version, 10), Payload: d.Patch, QoS: 1}
		if err := h.srv.SendToSubscriber(key, m); err != nil {
			h.log.Debug("iothub: desired change not delivered", "device", key, "version", d.Version, "err", err)
			continue
		}
		h.stats.DesiredPushed.Add(1)
	}
}

// revoke closes the connection of a device (or module) whose identity was
// deleted or disabled: it is refused when it connects again. IoT Hub
// closes such connections too.
func (h *Hub) revoke(clientID string) {
	if !h.connectedHere(clientID) {
		return
	}
	h.mu.Lock()
	if d := h.dev[clientID]; d != nil {
		d.revoked.Store(true)
	}
	h.mu.Unlock()
	h.log.Info("iothub: identity deleted or disabled: disconnecting", "device", clientID)
	if err := h.srv.Disconnect(clientID, 0x87); err != nil {
		h.log.Debug("iothub: disconnect", "device", clientID, "err", err)
	}
}
