package mqtt

import (
	"context"
	"errors"
	"slices"
	"sync"
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
// session's offline state), or one whose earlier publish failed (see
// willRetries), or one the backend refused for good (ErrUnstorable: it
// is dropped); not when publishing it failed otherwise (the stored will
// stands, and Server.Will gives it while the server tries again). Errors
// are the backend's to log.
type WillBackend interface {
	Backend
	ConnectedWill(ctx context.Context, clientID string, cleanStart bool)
	WillPublished(ctx context.Context, clientID string, will *Message)
}

// WillOwer is an optional extension of WillBackend. The server calls
// WillOwed when a will's publish failed and it starts to owe it (see
// willRetries), before its first try again and before the session
// record that follows, so the backend keeps the will stored whatever the
// client's next connection stores; WillPublished follows once it went
// out.
type WillOwer interface {
	WillOwed(ctx context.Context, clientID string, will Will)
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
	// Owed: the will's publish failed and the server tries it again
	// (Due is the next try).
	Owed bool
}

// Will returns the will of clientID's session while a connection holds
// it, or while its delay runs after the connection ended (Due set);
// false: none (a will kept over a shutdown does not count). The message
// is the server's: callers must not change it.
//
// A will whose publish failed and that the server tries again (see
// willRetries) counts, when the session holds no other: Delay is zero
// (a resume does not cancel a will that was due) and Due is its next try.
func (s *Server) Will(clientID string) (Will, bool) {
	if w, ok := s.sessionWill(clientID); ok {
		return w, true
	}
	return s.retries.will(clientID)
}

// sessionWill is Will for the will clientID's session holds.
func (s *Server) sessionWill(clientID string) (Will, bool) {
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

// Wills whose publish failed. A will is published when its connection
// ends (no delay), when its delay passes, when its session expires or is
// taken over; the backend may fail to store it (a broker down, a full
// disk). Such a will stays owed: the server tries it again after
// willRetryFirst, then after twice the last wait up to willRetryMax,
// until it goes out or the server closes (its pool waits for a try under
// way). While it is owed Server.Will gives it, so the session records a
// WillBackend writes meanwhile keep it stored (another node publishes it
// if this one dies), and WillPublished follows once it went out.
const (
	willRetryFirst = time.Second
	willRetryMax   = 30 * time.Second
)

// retryWill is a will whose publish failed.
type retryWill struct {
	clientID string
	msg      *Message
	expiry   time.Duration
	wait     time.Duration // before the next try; protected by willRetries.mu
	due      time.Time     // the next try; protected by willRetries.mu
	t        timer
}

// willRetries are the wills owed after a failed publish, by client (the
// latest last).
type willRetries struct {
	mu   sync.Mutex
	owed map[string][]*retryWill
}

func (r *willRetries) will(clientID string) (Will, bool) {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := r.owed[clientID]
	if len(list) == 0 {
		return Will{}, false
	}
	rw := list[len(list)-1]
	return Will{Msg: rw.msg, Expiry: rw.expiry, Due: rw.due, Owed: true}, true
}

func (r *willRetries) add(rw *retryWill) {
	r.mu.Lock()
	defer r.mu.Unlock()
	if r.owed == nil {
		r.owed = map[string][]*retryWill{}
	}
	r.owed[rw.clientID] = append(r.owed[rw.clientID], rw)
}

func (r *willRetries) remove(rw *retryWill) {
	r.mu.Lock()
	defer r.mu.Unlock()
	list := slices.DeleteFunc(r.owed[rw.clientID], func(e *retryWill) bool { return e == rw })
	if len(list) == 0 {
		delete(r.owed, rw.clientID)
	} else {
		r.owed[rw.clientID] = list
	}
}

// sendWillOrOwe publishes the will m of the session ss (true: it went
// out, its client may not publish there, or the backend refused it for
// good: ErrUnstorable). When that fails the will is owed (willRetries)
// and its first try armed, unless the caller does that (armWillRetry)
// once it wrote the session record that keeps the will stored; owed is
// then the will to arm.
func (s *Server) sendWillOrOwe(ss *session, m *Message, expiry time.Duration, armLater bool) (sent bool, owed *retryWill) {
	err := s.sendWill(m)
	if err == nil {
		return true, nil
	}
	if errors.Is(err, ErrUnstorable) {
		// No try can store it: owing it would keep it (and try it) for
		// as long as the server runs, one per connection that ended.
		s.log.Warn("mqtt: will cannot be stored; dropped", "client", ss.id, "err", err)
		return true, nil
	}
	s.log.Warn("mqtt: publish will; trying again", "client", ss.id, "err", err)
	rw := &retryWill{clientID: ss.id, msg: m, expiry: expiry, wait: willRetryFirst, due: time.Now().Add(willRetryFirst)}
	rw.t.slot = -1
	s.retries.add(rw)
	if wo, ok := s.backend.(WillOwer); ok {
		wo.WillOwed(s.ctx, ss.id, Will{Msg: m, Expiry: expiry, Due: rw.due, Owed: true})
	}
	if armLater {
		return false, rw
	}
	s.armWillRetry(rw)
	return false, nil
}

// armWillRetry arms the next try of the owed will rw (nil: none).
func (s *Server) armWillRetry(rw *retryWill) {
	if rw == nil {
		return
	}
	s.retries.mu.Lock()
	rw.due = time.Now().Add(rw.wait)
	wait := rw.wait
	s.retries.mu.Unlock()
	s.wheel.arm(&rw.t, wait, func() { s.retryWill(rw) })
}

// retryWill tries the owed will rw again.
func (s *Server) retryWill(rw *retryWill) {
	if s.ctx.Err() != nil {
		return // closing: the stored will stands
	}
	err := s.sendWill(rw.msg)
	switch {
	case errors.Is(err, ErrUnstorable):
		s.log.Warn("mqtt: will cannot be stored; dropped", "client", rw.clientID, "err", err)
	case err != nil:
		s.retries.mu.Lock()
		rw.wait = min(rw.wait*2, willRetryMax)
		s.retries.mu.Unlock()
		s.log.Debug("mqtt: publish will again", "client", rw.clientID, "err", err)
		s.armWillRetry(rw)
		return
	default:
		s.log.Info("mqtt: will published after a failed try", "client", rw.clientID, "topic", rw.msg.Topic)
	}
	s.retries.remove(rw) // done with it either way: settled
	s.willPublished(rw.clientID, rw.msg)
}
