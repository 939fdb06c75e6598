package amqp

import (
	"sync"

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
		}
		reason, clear = c.srv.alarm.get()
	}
	if told {
		c.send(0, &wire.ConnectionUnblocked{})
	}
	return true
}
