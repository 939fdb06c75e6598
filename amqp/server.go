package amqp

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"sync"
)

// Server is an AMQP 0-9-1 broker engine. It is safe for concurrent use.
type Server struct {
	opts Options
	log  *slog.Logger

	ctx    context.Context // ends at Close
	cancel context.CancelFunc
	wg     sync.WaitGroup // every goroutine the server started

	mu     sync.Mutex // guards the fields below and the broker state
	closed bool
	conns  map[net.Conn]struct{}
	stats  Stats
}

// Stats are the server's counters and gauges at one moment.
type Stats struct {
	Connections, Channels, Consumers, Queues                  int
	MessagesReady, MessagesUnacked                            int64
	Published, Delivered, Acked, Confirmed, Returned, Dropped uint64
}

// NewServer returns a server with opts; zero fields take their defaults.
func NewServer(opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults()
	s := &Server{opts: opts, log: opts.Logger, conns: map[net.Conn]struct{}{}}
	s.ctx, s.cancel = context.WithCancel(context.Background())
	return s, nil
}

// Serve accepts connections on ln until ctx ends, Close is called or ln
// fails; it then closes every connection it accepted and returns after
// every goroutine it started has ended. Serve may run for several
// listeners at once.
func (s *Server) Serve(ctx context.Context, ln net.Listener) error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return ErrClosed
	}
	s.mu.Unlock()
	ctx, cancel := context.WithCancel(ctx)
	defer cancel()
	var wg sync.WaitGroup
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
		c, aerr := ln.Accept()
		if aerr != nil {
			if ctx.Err() != nil || s.ctx.Err() != nil {
				err = nil
			} else {
				err = fmt.Errorf("amqp: accept: %w", aerr)
			}
			break
		}
		// The engine is not wired yet: refuse politely.
		c.Close()
	}
	cancel()
	wg.Wait()
	if err == nil && s.ctx.Err() != nil && ctx.Err() == nil {
		err = ErrClosed
	}
	if errors.Is(err, ErrClosed) {
		return nil
	}
	return err
}

// Close ends every Serve, closes every connection and the Backend's queue
// logs, and waits for the server's goroutines.
func (s *Server) Close() error {
	s.mu.Lock()
	if s.closed {
		s.mu.Unlock()
		return nil
	}
	s.closed = true
	s.mu.Unlock()
	s.cancel()
	s.wg.Wait()
	return nil
}

// Stats returns the server's counters and gauges.
func (s *Server) Stats() Stats {
	s.mu.Lock()
	defer s.mu.Unlock()
	return s.stats
}
