package mqtt

import (
	"crypto/tls"
	"errors"
	"net"
	"time"
)

// The TLS path of the socket I/O (netio.go): crypto/tls over net.Conn,
// a reader and a writer goroutine per connection.

// listenTLS starts a TLS listener; its connections use goroutines.
func (s *Server) listenTLS(addr string, cfg *tls.Config) (net.Listener, error) {
	l, err := tls.Listen("tcp", addr, cfg)
	if err != nil {
		return nil, err
	}
	s.acceptPiped(l, addr)
	return l, nil
}

// acceptPiped accepts l's connections on a goroutine and serves each with
// a reader and a writer goroutine (tlsPipe): TLS connections, and plain
// ones where there is no epoll (netio_other.go).
func (s *Server) acceptPiped(l net.Listener, addr string) {
	s.wg.Add(1)
	go func() {
		defer s.wg.Done()
		for {
			nc, err := l.Accept()
			if err != nil {
				if errors.Is(err, net.ErrClosed) {
					return
				}
				s.log.Warn("mqtt: accept", "addr", addr, "err", err)
				time.Sleep(20 * time.Millisecond)
				continue
			}
			c := s.newConn(nc.RemoteAddr().String())
			c.tls, c.fd = &tlsPipe{nc: nc, wake: make(chan struct{}, 1), memWake: make(chan struct{}, 1)}, -1
			if !s.track(c) {
				nc.Close()
				continue
			}
			s.wg.Add(2)
			go c.tlsReader()
			go c.tlsWriter()
		}
	}()
}

func (c *conn) tlsReader() {
	defer c.srv.wg.Done()
	defer func() {
		if c.tls.ends.Add(1) == 2 {
			c.tls.nc.Close()
		}
	}()
	buf := make([]byte, 4096)
	for {
		room := c.tlsRoom(len(buf))
		if room == 0 {
			<-c.tls.memWake // memResume, or unqueue at the close
			continue
		}
		n, err := c.tls.nc.Read(buf[:room])
		if n > 0 {
			c.feed(buf[:n])
		}
		if err != nil {
			c.inMu.Lock()
			c.eof = true
			sched := !c.scheduled && !c.closed
			c.scheduled = c.scheduled || sched
			c.inMu.Unlock()
			if sched {
				c.srv.pool.submit(c.work)
			}
			return
		}
	}
}

func (c *conn) tlsWriter() {
	defer c.srv.wg.Done()
	var b []byte
	for range c.tls.wake {
		c.outMu.Lock()
		b, c.out = c.out, b[:0]
		c.backedUpSince = 0
		closed, linger := c.wclosed, c.tls.linger
		c.outMu.Unlock()
		if len(b) > 0 {
			if !closed {
				c.tls.nc.SetWriteDeadline(time.Now().Add(30 * time.Second))
			}
			n, err := c.tls.nc.Write(b)
			c.srv.stats.BytesSent.Add(int64(n))
			if err != nil {
				c.tls.nc.Close()
				c.fail("write: " + err.Error())
				return
			}
		}
		if closed {
			if cw, ok := c.tls.nc.(interface{ CloseWrite() error }); linger && ok {
				cw.CloseWrite()
				if c.tls.ends.Add(1) == 2 {
					c.tls.nc.Close()
				}
				return
			}
			c.tls.nc.Close()
			return
		}
	}
}

// feed appends TLS plaintext to the input and schedules the worker (the
// TLS path's counterpart of readable).
func (c *conn) feed(b []byte) {
	c.lastRecv.Store(nanotime())
	c.srv.stats.BytesReceived.Add(int64(len(b)))
	c.inMu.Lock()
	if c.closed {
		c.inMu.Unlock()
		return // closed, lingering: dropped
	}
	c.appendIn(b)
	sched := !c.scheduled && !c.closed
	c.scheduled = c.scheduled || sched
	c.inMu.Unlock()
	if sched {
		c.srv.pool.submit(c.work)
	}
}

// wakeWriter signals a TLS connection's writer goroutine (caller holds
// outMu).
func (c *conn) wakeWriter() {
	select {
	case c.tls.wake <- struct{}{}:
	default:
	}
}
