//go:build !linux

package remoting

import "net"

// sock does a connection's socket reads and writes: through the net.Conn
// (see sock_linux.go for Linux).
type sock struct{ nc net.Conn }

func newSock(nc net.Conn) *sock { return &sock{nc: nc} }

// Read reads at least one byte into p.
func (s *sock) Read(p []byte) (int, error) { return s.nc.Read(p) }

// write writes all of b.
func (s *sock) write(b []byte) error {
	_, err := s.nc.Write(b)
	return err
}

// writev writes all of bufs (consumed).
func (s *sock) writev(bufs [][]byte) error {
	nb := net.Buffers(bufs)
	_, err := nb.WriteTo(s.nc)
	return err
}
