//go:build !linux

package mqtt

import (
	"net"

	"golang.org/x/sys/unix"
)

// Without epoll (development on macOS), plain TCP connections are served
// like TLS ones: a reader and a writer goroutine each (netio_tls.go,
// acceptPiped). The epoll path's poller is an empty stand-in.

type poller struct{}

func newPoller(*Server) (*poller, error) { return &poller{}, nil }
func (p *poller) run()                   {}
func (p *poller) close()                 {}
func (p *poller) remove(*conn)           {}

// Without epoll there is no SO_RCVLOWAT hold-back (lowat_linux.go).
func (c *conn) lowatOn()  {}
func (c *conn) lowatOff() {}

// listen starts a plain TCP listener served by goroutines.
func (s *Server) listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	s.acceptPiped(l, addr)
	return l, nil
}

func sysRead(fd int, b []byte) (int, error)  { return unix.Read(fd, b) }
func sysWrite(fd int, b []byte) (int, error) { return unix.Write(fd, b) }

// Without pollers there are no rounds.
func (c *conn) roundOf() *Round { return nil }
