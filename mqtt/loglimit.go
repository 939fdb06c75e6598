package mqtt

import (
	"context"
	"log/slog"
	"sync"
	"time"
)

// Log lines a client can cause at will (a refused SUBSCRIBE or PUBLISH)
// are rate-limited per connection: at most logBurst lines every
// logWindow; the next line after a quiet stretch carries the number of
// lines suppressed meanwhile ("suppressed").
const (
	logWindow = 10 * time.Second
	logBurst  = 10
)

// logLimit is one connection's budget of client-driven log lines.
type logLimit struct {
	mu         sync.Mutex
	start      int64 // protected by mu: nanotime when the window began
	n          int32 // protected by mu: lines logged in the window
	suppressed int32 // protected by mu: lines dropped since the last one logged
}

// take reports whether a line may be logged now and how many were
// suppressed before it.
func (l *logLimit) take() (bool, int32) {
	now := nanotime()
	l.mu.Lock()
	defer l.mu.Unlock()
	if l.start == 0 || now-l.start >= int64(logWindow) {
		l.start, l.n = now, 0
	}
	if l.n >= logBurst {
		l.suppressed++
		return false, 0
	}
	l.n++
	s := l.suppressed
	l.suppressed = 0
	return true, s
}

// logRefusal logs a refusal the client caused, at level, within the
// connection's budget; the client id and remote address are added.
func (c *conn) logRefusal(level slog.Level, msg string, args ...any) {
	log := c.srv.log
	if !log.Enabled(context.Background(), level) {
		return
	}
	l := c.refusals.Load()
	if l == nil {
		c.refusals.CompareAndSwap(nil, &logLimit{})
		l = c.refusals.Load()
	}
	ok, suppressed := l.take()
	if !ok {
		return
	}
	args = append([]any{"client", c.clientID(), "remote", c.remote}, args...)
	if suppressed > 0 {
		args = append(args, "suppressed", suppressed)
	}
	log.Log(context.Background(), level, msg, args...)
}
