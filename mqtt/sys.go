package mqtt

import (
	"runtime/debug"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smartgo/smartgo/internal/beat"
	"github.com/smartgo/smartgo/mqtt/packets"
)

// The $SYS tree: every Options.SysInterval the server publishes its
// counters (Stats) as retained QoS 0 messages under $SYS/broker/, with the
// topic names and payload forms mosquitto uses, so that tools written for
// it work unchanged:
//
//	$SYS/broker/version                      "smartgo version <Options.Version>", or the module version (<commit>)
//	$SYS/broker/uptime                       "<N> seconds"
//	$SYS/broker/clients/connected            connections with an accepted CONNECT
//	$SYS/broker/clients/disconnected         sessions kept without a connection
//	$SYS/broker/clients/total                sessions, connected or not
//	$SYS/broker/messages/received            control packets received (any type)
//	$SYS/broker/messages/sent                control packets sent (any type)
//	$SYS/broker/publish/messages/received    PUBLISH packets received
//	$SYS/broker/publish/messages/sent        PUBLISH packets sent
//	$SYS/broker/publish/messages/dropped     messages dropped (Stats.Dropped)
//	$SYS/broker/bytes/received               bytes read from client sockets
//	$SYS/broker/bytes/sent                   bytes written to client sockets
//	$SYS/broker/subscriptions/count          subscriptions of those sessions
//	$SYS/broker/retained messages/count      retained messages (when the Backend is a RetainedCounter)
//
// Values are decimal text. The tree is the node's own: it is delivered to
// the node's subscribers only, never stored through the Backend, and a new
// subscription to it gets the latest values as retained messages. Like
// mosquitto, a value is published again only when it changed. Clients may
// subscribe to $SYS (as the ACL allows) but never publish into it.

// sysTree is the server's $SYS state.
type sysTree struct {
	mu       sync.Mutex
	retained map[string]*Message // protected by mu: the latest message of each topic
	started  time.Time           // set by startSys
}

// startSys publishes the tree once and then every SysInterval, until
// Close; a negative SysInterval disables it.
func (s *Server) startSys() {
	if s.opts.SysInterval < 0 {
		return
	}
	s.sys.started = time.Now()
	s.publishSys()
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		t := beat.NewTicker(s.opts.SysInterval)
		defer t.Stop()
		for {
			select {
			case <-s.ctx.Done():
				return
			case <-t.C:
				s.publishSys()
			}
		}
	}()
}

// sysValues returns the tree's topics and values now.
func (s *Server) sysValues() [][2]string {
	st := &s.stats
	i := func(n int64) string { return strconv.FormatInt(n, 10) }
	sessions, clients := st.Sessions.Load(), st.Clients.Load()
	v := [][2]string{
		{"$SYS/broker/version", s.sysVersion()},
		{"$SYS/broker/uptime", i(int64(time.Since(s.sys.started)/time.Second)) + " seconds"},
		{"$SYS/broker/clients/connected", i(clients)},
		{"$SYS/broker/clients/disconnected", i(max(sessions-clients, 0))},
		{"$SYS/broker/clients/total", i(sessions)},
		{"$SYS/broker/messages/received", i(st.PacketsReceived.Load())},
		{"$SYS/broker/messages/sent", i(st.PacketsSent.Load())},
		{"$SYS/broker/publish/messages/received", i(st.Received.Load())},
		{"$SYS/broker/publish/messages/sent", i(st.Sent.Load())},
		{"$SYS/broker/publish/messages/dropped", i(st.Dropped.Load())},
		{"$SYS/broker/bytes/received", i(st.BytesReceived.Load())},
		{"$SYS/broker/bytes/sent", i(st.BytesSent.Load())},
		{"$SYS/broker/subscriptions/count", i(st.Subscriptions.Load())},
	}
	if n, ok := s.RetainedCount(); ok {
		v = append(v, [2]string{"$SYS/broker/retained messages/count", i(int64(n))})
	}
	return v
}

// publishSys delivers the values that changed since the last round to
// the local subscribers and keeps them for new ones.
func (s *Server) publishSys() {
	var changed []*Message
	s.sys.mu.Lock()
	if s.sys.retained == nil {
		s.sys.retained = map[string]*Message{}
	}
	for _, tv := range s.sysValues() {
		if old := s.sys.retained[tv[0]]; old != nil && string(old.Payload) == tv[1] {
			continue
		}
		m := &Message{Topic: tv[0], Payload: []byte(tv[1]), Retain: true}
		s.sys.retained[tv[0]] = m
		changed = append(changed, m)
	}
	s.sys.mu.Unlock()
	for _, m := range changed {
		s.Deliver(m)
	}
}

// sysRetained returns the $SYS messages matching filter.
func (s *Server) sysRetained(filter string) []*Message {
	if !strings.HasPrefix(filter, "$SYS") {
		return nil // a filter starting with a wildcard never matches '$' topics
	}
	s.sys.mu.Lock()
	defer s.sys.mu.Unlock()
	var out []*Message
	for t, m := range s.sys.retained {
		if packets.Match(filter, t) {
			out = append(out, m)
		}
	}
	return out
}

// RetainedCount returns the number of retained messages the backend holds,
// when it implements RetainedCounter.
func (s *Server) RetainedCount() (int, bool) {
	if rc, ok := s.backend.(RetainedCounter); ok {
		return rc.RetainedCount(), true
	}
	return 0, false
}

// sysVersion is the $SYS/broker/version payload.
func (s *Server) sysVersion() string {
	if s.opts.Version != "" {
		return "smartgo version " + s.opts.Version
	}
	return buildVersion()
}

// buildVersion is the $SYS/broker/version payload without Options.Version,, from the binary's
// build information.
var buildVersion = sync.OnceValue(func() string {
	v, rev := "(devel)", ""
	if bi, ok := debug.ReadBuildInfo(); ok {
		if bi.Main.Version != "" {
			v = bi.Main.Version
		}
		for _, kv := range bi.Settings {
			if kv.Key == "vcs.revision" {
				rev = kv.Value
			}
		}
	}
	if len(rev) > 12 {
		rev = rev[:12]
	}
	if rev != "" {
		return "smartgo version " + v + " (" + rev + ")"
	}
	return "smartgo version " + v
})
