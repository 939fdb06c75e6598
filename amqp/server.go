package amqp

import (
	"context"
	"crypto/rand"
	"encoding/base64"
	"fmt"
	"log/slog"
	"net"
	"sync"
	"sync/atomic"
	"time"
)

// Server is an AMQP 0-9-1 broker engine. It is safe for concurrent use.
//
// One mutex (mu) guards the whole broker state: virtual hosts, exchanges,
// bindings, queues, consumers, channels' delivery state. Nothing holds it
// across socket I/O: frames go to connections' outbound queues, which
// never block. Backend calls that may block run without it, except
// OpenQueue (a new durable queue's declare).
type Server struct {
	opts Options
	log  *slog.Logger

	handshakeTimeout time.Duration // from protocol header to open-ok

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // Serve calls
	bg     sync.WaitGroup // the durable worker and the janitor

	mu            sync.Mutex
	closed        bool
	vhosts        map[string]*vhost
	conns         map[*conn]struct{}
	timed         map[*queue]struct{} // queues with TTLs or x-expires, for the janitor
	timedSet      chan struct{}       // the janitor's wake-up when timed gains a queue (capacity 1)
	janitorRounds atomic.Uint64       // rounds the janitor ran (tests)
	stats         Stats
	durable       *durableWorker
	defsVer       uint64 // bumped by every change of durable definitions
	logLimit      logLimiter
	alarm         alarmState // the backend's resource alarm (alarm.go)
	stopAlarm     func()     // ends the AlarmSource's calls; nil without one

	defsMu    sync.Mutex // serializes SaveDefinitions
	defsSaved uint64     // defsVer of the last saved definitions
}

// vhost is one virtual host: a namespace of exchanges and queues.
type vhost struct {
	name      string
	open      bool // in Options.VirtualHosts: clients may open it
	exchanges map[string]*exchange
	queues    map[string]*queue
}

// builtinExchanges are declared in every virtual host.
var builtinExchanges = []struct{ name, typ string }{
	{"", typeDirect}, {"amq.direct", typeDirect}, {"amq.fanout", typeFanout},
	{"amq.topic", typeTopic}, {"amq.headers", typeHeaders}, {"amq.match", typeHeaders},
}

func newVhost(name string) *vhost {
	vh := &vhost{name: name, exchanges: map[string]*exchange{}, queues: map[string]*queue{}}
	for _, b := range builtinExchanges {
		vh.exchanges[b.name] = &exchange{vh: vh, name: b.name, typ: b.typ, durable: true}
	}
	return vh
}

func isBuiltinExchange(name string) bool {
	for _, b := range builtinExchanges {
		if b.name == name {
			return true
		}
	}
	return false
}

// Stats are the server's counters and gauges at one moment.
type Stats struct {
	Connections, Channels, Consumers, Queues                  int
	MessagesReady, MessagesUnacked                            int64
	Published, Delivered, Acked, Confirmed, Returned, Dropped uint64
}

// NewServer returns a server with opts; zero fields take their defaults.
// With a Backend it loads the saved definitions and the messages of
// durable queues (from each queue's committed offset) before it returns.
func NewServer(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	s := &Server{opts: opts, log: opts.Logger, handshakeTimeout: handshakeTimeout, vhosts: map[string]*vhost{},
		conns: map[*conn]struct{}{}, timed: map[*queue]struct{}{}, timedSet: make(chan struct{}, 1)}
	for _, v := range opts.VirtualHosts {
		s.vhosts[v] = newVhost(v)
		s.vhosts[v].open = true
	}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	s.durable = newDurableWorker(s)
	if opts.Backend != nil {
		if err := s.recover(s.ctx); err != nil {
			s.cancel()
			s.durable.closeLogs()
			return nil, err
		}
	}
	if as, ok := opts.Backend.(AlarmSource); ok {
		s.stopAlarm = as.WatchAlarm(s.setAlarm)
	}
	s.bg.Add(2)
	go func() {
		defer s.bg.Done()
		s.durable.run()
	}()
	go func() {
		defer s.bg.Done()
		s.janitor()
	}()
	return s, nil
}

// Serve accepts connections on ln until ctx ends, Close is called or ln
// fails; it then closes every connection it accepted (320
// CONNECTION_FORCED) and returns after every goroutine it started has
// ended. Serve may run for several listeners at once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.wg.Add(1)
	s.mu.Unlock()
	defer s.wg.Done()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
	var mu sync.Mutex
	mine := map[*conn]struct{}{}
	wg.Add(1)
	go func() {
		defer wg.Done()
		select {
		case <-ctx.Done():
		case <-s.ctx.Done():
		}
		ln.Close()
	}()
	var err error
	for {
		nc, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() == nil && s.ctx.Err() == nil {
				err = fmt.Errorf("amqp: accept: %w", aerr)
			}
			break
		}
		c := s.newConn(nc)
		mu.Lock()
		mine[c] = struct{}{}
		mu.Unlock()
		wg.Add(1)
		go func() {
			defer wg.Done()
			c.serve()
			mu.Lock()
			delete(mine, c)
			mu.Unlock()
		}()
	}
	cancel()
	mu.Lock()
	for c := range mine {
		c.forceClose()
	}
	mu.Unlock()
	wg.Wait()
	return err
}

// Close ends every Serve, closes every connection, commits the durable
// queues' acknowledged offsets and closes their logs, and waits for the
// server's goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	if s.stopAlarm != nil {
		s.stopAlarm()
	}
	s.cancel()
	s.wg.Wait()
	close(s.durable.stop)
	s.bg.Wait()
	return s.durable.closeLogs()
}

// Stats returns the server's counters and gauges.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	st := s.stats
	st.Connections = len(s.conns)
	for _, vh := range s.vhosts {
		st.Queues += len(vh.queues)
		for _, q := range vh.queues {
			st.MessagesReady += int64(q.readyLen())
			st.MessagesUnacked += int64(q.unacked)
		}
	}
	return st
}

// kick delivers again to the consumers of c, after its writer drained.
func (s *Server) kick(c *conn) {
	s.mu.Lock()
	for _, ch := range c.channels {
		ch.dispatchConsumers()
	}
	s.mu.Unlock()
}

// teardown releases what a closed connection held: its channels'
// consumers and unacked messages, its exclusive queues. Server.mu not held.
func (s *Server) teardown(c *conn) {
	s.mu.Lock()
	defer s.mu.Unlock()
	c.gone = true
	for id, ch := range c.channels {
		s.closeChannel(ch)
		ch.closing.Store(true)
		delete(c.channels, id)
		s.stats.Channels--
	}
	for q := range c.exclusive {
		s.deleteQueue(q, false)
	}
	delete(s.conns, c)
}

// janitorTick is the resolution of message TTLs and x-expires.
const janitorTick = 25 * time.Millisecond

// addTimedLocked hands q to the janitor (s.mu held).
func (s *Server) addTimedLocked(q *queue) {
	if _, ok := s.timed[q]; ok {
		return
	}
	s.timed[q] = struct{}{}
	select {
	case s.timedSet <- struct{}{}:
	default:
	}
}

// janitor expires messages (x-message-ttl, expiration) and unused queues
// (x-expires) until the server closes. While no queue has a TTL or an
// x-expires it sleeps: an idle server does not wake every janitorTick.
func (s *Server) janitor() {
	t := time.NewTicker(janitorTick)
	defer t.Stop()
	for {
		s.mu.Lock()
		idle := len(s.timed) == 0
		s.mu.Unlock()
		if idle {
			select {
			case <-s.ctx.Done():
				return
			case <-s.timedSet:
			}
			t.Reset(janitorTick)
			continue
		}
		select {
		case <-s.ctx.Done():
			return
		case now := <-t.C:
			s.janitorRounds.Add(1)
			s.mu.Lock()
			for q := range s.timed {
				s.expire(q, now)
			}
			s.mu.Unlock()
		}
	}
}

// randomName returns prefix and 22 random URL-safe characters.
func randomName(prefix string) string {
	var b [16]byte
	rand.Read(b[:])
	return prefix + base64.RawURLEncoding.EncodeToString(b[:])
}

// logLimiter lets through at most logBurst connection logs per second: a
// bad peer cannot flood the log.
type logLimiter struct {
	mu      sync.Mutex
	window  time.Time
	n       int
	dropped int
}

const logBurst = 20

func (l *logLimiter) allow() (bool, int) {
	l.mu.Lock()
	defer l.mu.Unlock()
	now := time.Now()
	if now.Sub(l.window) >= time.Second {
		d := l.dropped
		l.window, l.n, l.dropped = now, 0, 0
		l.n++
		return true, d
	}
	if l.n < logBurst {
		l.n++
		return true, 0
	}
	l.dropped++
	return false, 0
}

func (s *Server) logConnErr(c *conn, what string, err error) {
	ok, dropped := s.logLimit.allow()
	if !ok {
		return
	}
	s.log.Info("amqp: "+what, "remote", c.nc.RemoteAddr().String(), "user", c.user, "err", err, "suppressed", dropped)
}
