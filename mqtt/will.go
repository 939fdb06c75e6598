package mqtt

import (
	"context"
	"time"
)

// Wills that outlive the server. A server keeps each connected client's
// will in memory and publishes it when the connection ends without a
// normal DISCONNECT (session.go, conn.go); a server that dies (kill -9,
// power loss) publishes none. A backend that stores the wills of
// connected clients (WillBackend) lets another server, or the next
// process, publish them: it reads the will with Server.Will when it
// writes the session's records and publishes an orphaned one with
// Server.PublishWill.

// WillBackend is an optional extension of Backend that stores the wills
// of connected clients. The server calls ConnectedWill after the CONNACK
// of every connection (after DeleteSession for a clean start), so the
// backend can store the connection's will (Server.Will), or store that
// it has none, before the client can be orphaned by a crash of the
// server. It calls WillPublished after it published a will whose delay
// ran while the session was offline (the backend stored it with the
// session's offline state); not when publishing it failed (the stored
// will stands). Errors are the backend's to log.
type WillBackend interface {
	Backend
	ConnectedWill(ctx context.Context, clientID string, cleanStart bool)
	WillPublished(ctx context.Context, clientID string, will *Message)
}

// Will is a connected client's will as the server holds it.
type Will struct {
	Msg *Message
	// Delay is the MQTT 5 Will Delay Interval: the will is published
	// that long after the connection ends, unless the client resumes its
	// session first.
	Delay time.Duration
	// Expiry is the session expiry: a session that ends earlier than
	// Delay publishes its will then.
	Expiry time.Duration
	// Due is when the will goes out, for a session whose connection
	// ended and whose will delay is running (zero while connected).
	Due time.Time
}

// Will returns the will of clientID's session while a connection holds
// it, or while its delay runs after the connection ended (Due set);
// false: none (a will kept over a shutdown does not count). The message
// is the server's: callers must not change it.
func (s *Server) Will(clientID string) (Will, bool) {
	s.mu.Lock()
	ss := s.sessions[clientID]
	s.mu.Unlock()
	if ss == nil {
		return Will{}, false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.dead || ss.will == nil {
		return Will{}, false
	}
	w := Will{Msg: ss.will, Delay: ss.willDelay, Expiry: ss.expiry}
	if ss.conn == nil {
		due, ok := s.wheel.due(&ss.willTimer)
		if !ok {
			return Will{}, false
		}
		w.Due = due
	}
	return w, true
}

// due is when t fires (false: not armed).
func (w *wheel) due(t *timer) (time.Time, bool) {
	w.mu.Lock()
	defer w.mu.Unlock()
	if t.fn == nil || t.slot < 0 {
		return time.Time{}, false
	}
	return w.start.Add(time.Duration(t.at) * w.tick), true
}

// PublishWill publishes m, the will of a client whose connection was on
// a server that is gone (another node, or an earlier process), as this
// server publishes its own clients' wills: only where m.ClientID and
// m.Username may publish (reserved topics, Options.Authorize; nil where
// they may not). An error: the backend did not store it.
func (s *Server) PublishWill(m *Message) error { return s.sendWill(m) }

// willPublished tells a WillBackend that the delayed will m of clientID
// went out.
func (s *Server) willPublished(clientID string, m *Message) {
	if wb, ok := s.backend.(WillBackend); ok {
		wb.WillPublished(s.ctx, clientID, m)
	}
}

// connectedWill tells a WillBackend of a new connection (see WillBackend).
func (s *Server) connectedWill(clientID string, cleanStart bool) {
	if wb, ok := s.backend.(WillBackend); ok {
		wb.ConnectedWill(s.ctx, clientID, cleanStart)
	}
}
