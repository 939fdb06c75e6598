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
// server. An error is the backend's to log: the client stays connected.
type WillBackend interface {
	Backend
	ConnectedWill(ctx context.Context, clientID string, cleanStart bool)
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
}

// Will returns the will of clientID's session while a connection holds
// it (false: not connected here, or no will). The message is the
// server's: callers must not change it.
func (s *Server) Will(clientID string) (Will, bool) {
	s.mu.Lock()
	ss := s.sessions[clientID]
	s.mu.Unlock()
	if ss == nil {
		return Will{}, false
	}
	ss.mu.Lock()
	defer ss.mu.Unlock()
	if ss.dead || ss.conn == nil || ss.will == nil {
		return Will{}, false
	}
	return Will{Msg: ss.will, Delay: ss.willDelay, Expiry: ss.expiry}, true
}

// PublishWill publishes m, the will of a client whose connection was on
// a server that is gone (another node, or an earlier process), as this
// server publishes its own clients' wills: only where m.ClientID and
// m.Username may publish (reserved topics, Options.Authorize).
func (s *Server) PublishWill(m *Message) { s.publishWill(m) }

// connectedWill tells a WillBackend of a new connection (see WillBackend).
func (s *Server) connectedWill(clientID string, cleanStart bool) {
	if wb, ok := s.backend.(WillBackend); ok {
		wb.ConnectedWill(s.ctx, clientID, cleanStart)
	}
}
