package bridge

import (
	"context"
	"errors"
	"fmt"
	"slices"
	"strings"
	"time"

	"github.com/smartgo/smartgo/client/admin"
	"github.com/smartgo/smartgo/mqtt"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// A bridge node heartbeats to every registry with its connection counts
// (admin.RegisterBridge) and answers the MQTT administration calls the
// registries relay to it (admin.ServeBridge): its connected clients, the
// cluster's sessions and retained messages as its copy of the system
// topics holds them, and disconnecting a client.

// retainedPayloadMax bounds the payload bytes a retained listing carries
// per message.
const retainedPayloadMax = 4 << 10

// adminHandler implements admin.BridgeHandler for a Bridge.
type adminHandler struct{ b *Bridge }

// page cuts a list sorted by key to q: the items whose key starts with
// q.Prefix, after q.After, at most q.Limit, except that items of one key
// are never split across pages (keys of the MQTT listings are unique). It
// returns them, the number of matching items and the cursor of the next
// page.
func page[T any](items []T, key func(T) string, q admin.MQTTQuery) (keep []T, total int, next string) {
	for _, it := range items {
		k := key(it)
		if !strings.HasPrefix(k, q.Prefix) {
			continue
		}
		total++
		if q.After != "" && k <= q.After {
			continue
		}
		if len(keep) >= q.Limit && (next != "" || k != key(keep[len(keep)-1])) {
			next = key(keep[len(keep)-1])
			continue
		}
		keep = append(keep, it)
	}
	return keep, total, next
}

func (h adminHandler) Clients(q admin.MQTTQuery) admin.MQTTClientPage {
	cs, total, next := page(h.b.server.Clients(), func(c mqtt.ClientSnapshot) string { return c.ClientID }, q)
	out := admin.MQTTClientPage{Items: make([]admin.MQTTClient, 0, len(cs)), Total: total, Next: next}
	node := h.b.backend.NodeID()
	for _, c := range cs {
		mc := admin.MQTTClient{ClientID: c.ClientID, Node: node, Username: c.Username, RemoteAddr: c.RemoteAddr, Version: c.Version,
			KeepAliveSecs: int64(c.KeepAlive / time.Second), Inflight: c.Inflight, Queued: c.Queued,
			Subscriptions: make([]admin.MQTTSubscription, 0, len(c.Subscriptions))}
		for _, s := range c.Subscriptions {
			mc.Subscriptions = append(mc.Subscriptions, admin.MQTTSubscription{Filter: s.Filter, QoS: s.QoS})
		}
		out.Items = append(out.Items, mc)
	}
	return out
}

func (h adminHandler) Sessions(q admin.MQTTQuery) admin.MQTTSessionPage {
	b := h.b.backend
	now := time.Now()
	b.mu.Lock()
	recs := make([]*sessionRecord, 0, len(b.sessions))
	for _, r := range b.sessions {
		if !r.Deleted && !expiredAt(r, now) {
			recs = append(recs, r)
		}
	}
	b.mu.Unlock()
	// Records are immutable once applied: read them without the lock.
	slices.SortFunc(recs, func(x, y *sessionRecord) int { return strings.Compare(x.ClientID, y.ClientID) })
	recs, total, next := page(recs, func(r *sessionRecord) string { return r.ClientID }, q)
	out := admin.MQTTSessionPage{Items: make([]admin.MQTTSession, 0, len(recs)), Total: total, Next: next}
	for _, r := range recs {
		s := admin.MQTTSession{ClientID: r.ClientID, Node: r.Node, Online: r.Online, Username: r.Username,
			ExpirySecs: r.ExpiryMs / 1000, DisconnectedAt: r.DisconnectedAt, Pending: len(r.Pending),
			Subscriptions: make([]admin.MQTTSubscription, 0, len(r.Subscriptions))}
		for _, sub := range r.Subscriptions {
			s.Subscriptions = append(s.Subscriptions, admin.MQTTSubscription{Filter: sub.Filter, QoS: sub.QoS})
		}
		if s.Online {
			s.DisconnectedAt = 0
		}
		out.Items = append(out.Items, s)
	}
	return out
}

func (h adminHandler) Retained(q admin.MQTTQuery) admin.MQTTRetainedPage {
	b := h.b.backend
	now := time.Now()
	type ret struct {
		topic string
		e     retainedEntry
	}
	b.mu.Lock()
	all := make([]ret, 0, len(b.retained))
	for t, e := range b.retained {
		if e.msg != nil && (e.msg.Expiry.IsZero() || now.Before(e.msg.Expiry)) {
			all = append(all, ret{t, *e})
		}
	}
	b.mu.Unlock()
	slices.SortFunc(all, func(x, y ret) int { return strings.Compare(x.topic, y.topic) })
	all, total, next := page(all, func(r ret) string { return r.topic }, q)
	out := admin.MQTTRetainedPage{Items: make([]admin.MQTTRetained, 0, len(all)), Total: total, Next: next}
	for _, rt := range all {
		m := rt.e.msg
		r := admin.MQTTRetained{Topic: rt.topic, QoS: m.QoS, Size: len(m.Payload),
			Payload: slices.Clone(m.Payload[:min(len(m.Payload), retainedPayloadMax)]), ContentType: m.ContentType}
		if !m.Expiry.IsZero() {
			r.ExpiresAt = m.Expiry.UnixMilli()
		}
		out.Items = append(out.Items, r)
	}
	return out
}

func (h adminHandler) Disconnect(clientID string) bool {
	return h.b.server.Disconnect(clientID, packets.ReasonAdministrativeAction) == nil
}

// prepareC2DTimeout bounds an admin call's session preparation.
const prepareC2DTimeout = 10 * time.Second

func (h adminHandler) PrepareC2D(deviceID string) (bool, error) {
	prep := h.b.backend.opts.PrepareC2D
	if prep == nil {
		return false, nil
	}
	ctx, cancel := context.WithTimeout(h.b.backend.ctx, prepareC2DTimeout)
	defer cancel()
	if err := prep(ctx, deviceID); err != nil {
		return false, err
	}
	return true, nil
}

// info is the node's heartbeat.
func (b *Bridge) info() admin.BridgeNode {
	st := b.server.Stats()
	sessions, retained := b.backend.ClusterCounts()
	info := admin.BridgeNode{Node: b.backend.NodeID(), Version: b.backend.opts.Version, StartedAt: b.started.UnixMilli(),
		Connections: st.Clients.Load(), Sessions: st.Sessions.Load(), Subscriptions: st.Subscriptions.Load(),
		ClusterSessions: int64(sessions), Retained: int64(retained), Received: st.Received.Load(), Sent: st.Sent.Load()}
	for _, a := range b.server.Addrs() {
		info.Addrs = append(info.Addrs, a.String())
	}
	return info
}

// heartbeat registers the node with every registry now and then every
// HeartbeatInterval until ctx ends; a registry that refused or could not
// be reached is retried after a second, backing off to the interval.
func (b *Bridge) heartbeat(ctx context.Context) {
	adm := b.backend.adm
	log := b.backend.log
	every := b.backend.opts.HeartbeatInterval
	wait := time.Duration(0)
	failing := false
	for {
		select {
		case <-ctx.Done():
			return
		case <-time.After(wait):
		}
		cctx, cancel := context.WithTimeout(ctx, every)
		ok, err := adm.RegisterBridge(cctx, b.info())
		cancel()
		if ok > 0 {
			b.lastRegistered.Store(time.Now().UnixNano())
		}
		switch {
		case err != nil && ctx.Err() == nil:
			if !failing {
				log.Warn("bridge: heartbeat to a registry failed", "node", b.backend.NodeID(), "accepted", ok, "err", err)
			}
			failing = true
			wait = min(max(2*wait, time.Second), every)
		default:
			if failing {
				log.Info("bridge: heartbeat accepted by every registry again", "node", b.backend.NodeID())
			}
			failing = false
			wait = every
		}
	}
}

// registered reports whether a registry accepted a heartbeat within three
// heartbeat intervals.
func (b *Bridge) registered() error {
	last := b.lastRegistered.Load()
	switch {
	case last == 0:
		return errors.New("bridge: not registered with any registry yet")
	case time.Since(time.Unix(0, last)) > 3*b.backend.opts.HeartbeatInterval:
		return fmt.Errorf("bridge: no registry accepted a heartbeat since %s", time.Unix(0, last).UTC().Format(time.RFC3339))
	}
	return nil
}

// ConnectedOn returns the clients whose latest session record, as this
// node's copy of the session topic holds it, says they are connected to
// a node for which gone is true: that node's online claim or connect
// request. A node that died (kill -9, power loss) wrote nothing after
// them. Clean sessions leave no record to find.
func (b *Backend) ConnectedOn(gone func(node string) bool) []string {
	b.mu.Lock()
	defer b.mu.Unlock()
	var out []string
	for id, r := range b.sessions {
		if !r.Deleted && (r.Online || r.Connect) && r.Node != b.opts.NodeID && gone(r.Node) {
			out = append(out, id)
		}
	}
	return out
}

// BridgeNodes returns the ids of the bridge nodes the registries list
// (each heartbeats every HeartbeatInterval; a silent one is dropped
// after the registry's expiry).
func (b *Backend) BridgeNodes(ctx context.Context) ([]string, error) {
	list, err := b.adm.Bridges(ctx)
	if err != nil {
		return nil, fmt.Errorf("bridge: list bridge nodes: %w", err)
	}
	out := make([]string, len(list))
	for i, n := range list {
		out[i] = n.Node
	}
	return out, nil
}

// HeartbeatInterval is how often this node registers with the registries.
func (b *Backend) HeartbeatInterval() time.Duration { return b.opts.HeartbeatInterval }
