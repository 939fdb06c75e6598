package mqtt

import (
	"slices"
	"strings"
	"time"
)

// Inspection for operators (admin calls, the console, metrics): what is
// connected to this server and what its sessions hold. Each call takes a
// snapshot under the locks it needs and returns copies.

// ClientSnapshot is one connected client.
type ClientSnapshot struct {
	ClientID   string
	Username   string
	RemoteAddr string
	Version    byte          // protocol level: 3, 4 or 5
	KeepAlive  time.Duration // as agreed in CONNACK (0: none)
	// Subscriptions of the client's session, sorted by filter.
	Subscriptions []Subscription
	Inflight      int // QoS 1/2 messages sent and not yet acknowledged
	Queued        int // QoS 1/2 messages waiting for quota
}

// Clients returns the connected clients (past CONNECT), sorted by client
// id.
func (s *Server) Clients() []ClientSnapshot {
	s.mu.Lock()
	conns := make([]*conn, 0, len(s.conns))
	for c := range s.conns {
		conns = append(conns, c)
	}
	s.mu.Unlock()
	out := make([]ClientSnapshot, 0, len(conns))
	for _, c := range conns {
		if !c.connected.Load() || c.closing.Load() {
			continue
		}
		ss := c.session
		cs := ClientSnapshot{ClientID: ss.id, Username: c.username, RemoteAddr: c.remote, Version: byte(c.version), KeepAlive: c.keepAlive}
		ss.mu.Lock()
		if ss.conn == c {
			cs.Subscriptions = make([]Subscription, 0, len(ss.subs))
			for _, sub := range ss.subs {
				cs.Subscriptions = append(cs.Subscriptions, *sub)
			}
			cs.Inflight, cs.Queued = len(ss.inflight), len(ss.queue)
		}
		ss.mu.Unlock()
		slices.SortFunc(cs.Subscriptions, func(a, b Subscription) int { return strings.Compare(a.Filter, b.Filter) })
		out = append(out, cs)
	}
	slices.SortFunc(out, func(a, b ClientSnapshot) int { return strings.Compare(a.ClientID, b.ClientID) })
	return out
}
