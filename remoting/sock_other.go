//go:build !linux

package remoting

import (
	"net"
	"sync/atomic"
)

// sock does a connection's socket reads and writes: through the net.Conn
// (see sock_linux.go for Linux).
type sock struct {
	nc net.Conn
	// left is how many bytes of the write under way the socket has not
	// taken yet (here: all of them until it returns; 0 between writes);
	// the connection's writer sets it already when it takes the bytes
	// from its queue (Conn.flushLocked).
	left atomic.Int64
}

func newSock(nc net.Conn) *sock { return &sock{nc: nc} }

// Read reads at least one byte into p.
func (s *sock) Read(p []byte) (int, error) { return s.nc.Read(p) }

// write writes all of b.
func (s *sock) write(b []byte) error {
	s.left.Store(int64(len(b)))
	defer s.left.Store(0)
	_, err := s.nc.Write(b)
	return err
}

// writev writes all of bufs (consumed).
func (s *sock) writev(bufs [][]byte) error {
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	s.left.Store(n)
	defer s.left.Store(0)
	nb := net.Buffers(bufs)
	_, err := nb.WriteTo(s.nc)
	return err
}

// readNow is not supported here (read coalescing is off).
func (s *sock) readNow([]byte) (int, error) { return 0, errWouldBlock }

// setLowat is not supported here (read coalescing is off).
func (s *sock) setLowat(int) error { return errWouldBlock }

// rcvbuf is not supported here (read coalescing is off).
func (s *sock) rcvbuf() (int, error) { return 0, errWouldBlock }

// setReadBuffer leaves the receive buffer to the system: ReadBuffer is
// Linux-only.
func setReadBuffer(*net.TCPListener, int) error { return nil }
