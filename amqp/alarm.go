package amqp

import (
	"bufio"
	"errors"
	"os"
	"sync"
	"time"

	"github.com/smartgo/smartgo/amqp/wire"
)

// AlarmSource is implemented by a Backend whose store can refuse writes
// for lack of a resource (a full disk). NewServer calls WatchAlarm once it
// loaded; Close calls the stop it returned.
//
// While an alarm is raised the server blocks publishers as RabbitMQ does
// for its resource alarms: a connection that sends basic.publish is not
// read from (its publish and what follows wait in TCP) until the alarm
// clears; a client that announced the capability "connection.blocked" is
// sent connection.blocked with the reason when its connection blocks and
// connection.unblocked when it resumes. Connections that do not publish
// (consumers, declares) are not blocked, and a blocked connection's
// deliveries and heartbeats still go out.
type AlarmSource interface {
	// WatchAlarm calls set with a reason (for example "low on disk")
	// when the store begins to refuse writes, and with "" when it takes
	// them again; from any goroutine, until stop returns. stop is
	// idempotent.
	WatchAlarm(set func(reason string)) (stop func())
}

// alarmState is the server's resource alarm.
type alarmState struct {
	mu     sync.Mutex
	reason string        // "" while none
	clear  chan struct{} // closed when the alarm clears; nil while none
}

// set raises (reason != "") or clears the alarm; it reports whether the
// alarm went on or off.
func (a *alarmState) set(reason string) (changed bool) {
	a.mu.Lock()
	defer a.mu.Unlock()
	switch {
	case reason == "" && a.clear != nil:
		close(a.clear)
		a.clear, a.reason = nil, ""
		return true
	case reason != "" && a.clear == nil:
		a.clear, a.reason = make(chan struct{}), reason
		return true
	case reason != "":
		a.reason = reason
	}
	return false
}

// get returns the alarm's reason and the channel closed when it clears;
// a nil channel when no alarm is raised.
func (a *alarmState) get() (string, <-chan struct{}) {
	a.mu.Lock()
	defer a.mu.Unlock()
	return a.reason, a.clear
}

// setAlarm is the AlarmSource's callback.
func (s *Server) setAlarm(reason string) {
	if !s.alarm.set(reason) {
		return
	}
	if reason != "" {
		s.log.Warn("AMQP resource alarm: publishing connections are blocked until it clears", "reason", reason)
	} else {
		s.log.Info("AMQP resource alarm cleared: publishing connections resume")
	}
}

// waitAlarm holds the connection's reader at a basic.publish while the
// resource alarm is raised (see AlarmSource), telling a capable client
// with connection.blocked and connection.unblocked. It reports false when
// the connection ended meanwhile (the server closed it or its socket
// failed). Reader goroutine only.
func (c *conn) waitAlarm() bool {
	reason, clear := c.srv.alarm.get()
	if clear == nil {
		return true
	}
	c.flushDirty() // confirms already due go out before the wait
	c.blocked.Store(true)
	defer c.blocked.Store(false)
	gone, stopWatch := c.watchPeer()
	defer stopWatch()
	told := false
	for clear != nil {
		if c.blockedCap && !told {
			c.send(0, &wire.ConnectionBlocked{Reason: reason})
			told = true
		}
		select {
		case <-clear:
		case <-c.quit:
			return false
		case <-c.writerDone:
			return false
		case <-gone:
			return false
		}
		reason, clear = c.srv.alarm.get()
	}
	if told {
		c.send(0, &wire.ConnectionUnblocked{})
	}
	return true
}

// watchPeer sees a blocked connection's client go away: its socket is
// read on into the connection's read buffer (the frames stay there, in
// order, for the reader once the alarm clears) until the peer closes or
// misses its heartbeats (gone is closed), the buffer is full (TCP holds
// the rest; a dead peer is then left to TCP keepalive and to the
// writer's heartbeats failing) or stop is called. Without it a client
// that closed its socket while blocked would linger until the alarm
// clears when heartbeats are off: nothing is read or written. stop
// returns once the socket is no longer read; the reader then owns it
// again. Reader goroutine only.
func (c *conn) watchPeer() (gone <-chan struct{}, stop func()) {
	g := make(chan struct{})
	done := make(chan struct{})
	var mu sync.Mutex // orders stop's deadline after the reads'
	stopping := false
	go func() {
		defer close(done)
		for {
			deadline := time.Time{}
			if hb := time.Duration(c.heartbeat.Load()); hb > 0 {
				deadline = time.Now().Add(2 * hb)
			}
			mu.Lock()
			if stopping {
				mu.Unlock()
				return
			}
			c.nc.SetReadDeadline(deadline)
			mu.Unlock()
			_, err := c.br.Peek(c.br.Buffered() + 1)
			mu.Lock()
			stopped := stopping
			mu.Unlock()
			switch {
			case err == nil:
				continue
			case errors.Is(err, bufio.ErrBufferFull) || stopped:
			default:
				if errors.Is(err, os.ErrDeadlineExceeded) {
					c.srv.logConnErr(c, "missed heartbeats while blocked", err)
				}
				close(g) // EOF, reset, missed heartbeats: the client is gone
			}
			return
		}
	}()
	return g, func() {
		mu.Lock()
		stopping = true
		c.nc.SetReadDeadline(time.Now())
		mu.Unlock()
		<-done
		// The reader sets its heartbeat or closing deadline before its
		// next read.
		c.nc.SetReadDeadline(time.Time{})
	}
}
