package remoting

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// Server accepts remoting connections and serves requests with the
// processors registered per request code, each code group on its own
// bounded worker pool.
type Server struct {
	opts Options
	log  *slog.Logger
	mux  *mux

	mu      sync.Mutex
	ln      net.Listener               // protected by mu
	conns   map[*Conn]struct{}         // protected by mu
	onOpen  []func(c *Conn)            // protected by mu
	onClose []func(c *Conn, err error) // protected by mu
	closed  bool                       // protected by mu
	started bool                       // protected by mu

	wg   sync.WaitGroup // accept loop and connection readers
	once sync.Once
}

// NewServer validates opts and returns a server that is not listening yet.
func NewServer(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts.fill()
	log := peerLogger(opts.Logger)
	s := &Server{opts: opts, log: log, conns: make(map[*Conn]struct{})}
	s.mux = newMux(log, opts.pool)
	return s, nil
}

// Register serves requests with code by p on one of pool's workers.
// Registering a code again replaces its processor. Safe at any time. p may
// block and may wait for the peer.
func (s *Server) Register(code int32, pool Pool, p Processor) {
	s.mux.register(code, pool, p, RegisterOptions{})
}

// RegisterInline is Register for quick processors that never block: a
// request runs directly on its connection's reader goroutine, saving the
// hand-off to a worker, and its response is written together with those
// of the other requests the reader had already received (one write per
// batch). Requests pipelined on one connection thus run one after
// another. While p runs the connection reads nothing, so p must never
// wait for anything (a disk flush, a slave, a response from the peer): a
// processor whose answer takes time returns nil and answers later with
// Conn.WriteResponse. pool is unused by inline processors.
func (s *Server) RegisterInline(code int32, pool Pool, p Processor) {
	s.mux.register(code, pool, p, RegisterOptions{Inline: true})
}

// RegisterWith is Register with options: RegisterWith(code, pool, p,
// RegisterOptions{Inline: true}) is RegisterInline; NoRetain lets the
// connection reuse the requests' receive buffers (see RegisterOptions).
func (s *Server) RegisterWith(code int32, pool Pool, p Processor, opts RegisterOptions) {
	s.mux.register(code, pool, p, opts)
}

// RegisterFunc is Register with a function.
func (s *Server) RegisterFunc(code int32, pool Pool, fn func(c *Conn, req *protocol.Command) (*protocol.Command, error)) {
	s.mux.register(code, pool, ProcessorFunc(fn), RegisterOptions{})
}

// OnConnOpen registers fn to run for every accepted connection before its
// first request is read.
func (s *Server) OnConnOpen(fn func(c *Conn)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onOpen = append(s.onOpen, fn)
}

// OnConnClose registers fn to run once for every connection that closes,
// with the reason (io.EOF, ErrIdle, a protocol error, ErrConnClosed...).
func (s *Server) OnConnClose(fn func(c *Conn, err error)) {
	s.mu.Lock()
	defer s.mu.Unlock()
	s.onClose = append(s.onClose, fn)
}

// Start listens on Options.Addr and serves in the background until Close.
// ctx bounds the listen call only.
func (s *Server) Start(ctx context.Context) error {
	var lc net.ListenConfig
	ln, err := lc.Listen(ctx, "tcp", s.opts.Addr)
	if err != nil {
		return fmt.Errorf("remoting: listen %s: %w", s.opts.Addr, err)
	}
	if err := s.Serve(ln); err != nil {
		_ = ln.Close()
		return err
	}
	return nil
}

// doneCh is closed when Close starts.
func (s *Server) doneCh() <-chan struct{} { return s.mux.stop }

// Serve serves connections accepted from ln in the background. The server
// owns ln from now on.
func (s *Server) Serve(ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	if s.started {
		s.mu.Unlock()
		return fmt.Errorf("remoting: server already started")
	}
	s.started = true
	s.ln = ln
	s.mu.Unlock()
	if tl, ok := ln.(*net.TCPListener); ok && s.opts.ReadBuffer > 0 {
		// Set on the listener, the buffer is every accepted socket's
		// from its first segment: the window it advertises is sized
		// by it. Set on a connection once accepted, it would stop the
		// kernel's tuning with the window clamped where it began.
		if err := setReadBuffer(tl, s.opts.ReadBuffer); err != nil {
			s.log.Warn("remoting: set the receive buffer", "bytes", s.opts.ReadBuffer, "err", err)
		}
	}
	s.mux.start()
	s.wg.Add(1)
	go s.acceptLoop(ln)
	s.log.Info("remoting: listening", "addr", ln.Addr().String())
	return nil
}

// Addr returns the listening address, or nil before Start.
func (s *Server) Addr() net.Addr {
	s.mu.Lock()
	defer s.mu.Unlock()
	if s.ln == nil {
		return nil
	}
	return s.ln.Addr()
}

// Conns returns the open connections.
func (s *Server) Conns() []*Conn {
	s.mu.Lock()
	defer s.mu.Unlock()
	out := make([]*Conn, 0, len(s.conns))
	for c := range s.conns {
		out = append(out, c)
	}
	return out
}

func (s *Server) acceptLoop(ln net.Listener) {
	defer s.wg.Done()
	var delay time.Duration
	for {
		nc, err := ln.Accept()
		if err != nil {
			if errors.Is(err, net.ErrClosed) {
				return
			}
			// Temporary failure (e.g. too many open files): back off.
			if delay == 0 {
				delay = 5 * time.Millisecond
			} else if delay < time.Second {
				delay *= 2
			}
			s.log.Warn("remoting: accept failed", "err", err, "retry_in", delay)
			select {
			case <-time.After(delay):
				continue
			case <-s.doneCh():
				return
			}
		}
		delay = 0
		if tc, ok := nc.(*net.TCPConn); ok {
			_ = tc.SetNoDelay(true)
		}
		s.startConn(nc)
	}
}

func (s *Server) startConn(nc net.Conn) {
	c := newConn(nc, s.opts.ConnOptions, s.log, s.mux)
	c.server = true
	if d := s.opts.ReadCoalesce; d > 0 {
		c.co.wait = d
	}
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		_ = nc.Close()
		return
	}
	s.conns[c] = struct{}{}
	open := slices.Clone(s.onOpen)
	hooks := slices.Clone(s.onClose)
	s.mu.Unlock()
	c.OnClose(func(c *Conn, err error) {
		s.mu.Lock()
		delete(s.conns, c)
		s.mu.Unlock()
		for _, fn := range hooks {
			fn(c, err)
		}
	})
	for _, fn := range open {
		fn(c)
	}
	s.log.Debug("remoting: connection accepted", "peer", c.peer)
	c.start(&s.wg)
}

// Close stops accepting, closes every connection, lets the workers finish
// the requests already queued and waits for every goroutine. It is
// idempotent.
func (s *Server) Close() error {
	s.once.Do(func() {
		s.mu.Lock()
		s.closed = true
		ln := s.ln
		conns := make([]*Conn, 0, len(s.conns))
		for c := range s.conns {
			conns = append(conns, c)
		}
		s.mu.Unlock()
		s.mux.once.Do(func() { close(s.mux.stop) })
		if ln != nil {
			_ = ln.Close()
		}
		for _, c := range conns {
			c.Close()
		}
	})
	s.wg.Wait()
	s.mux.close()
	return nil
}
