//go:build linux

package remoting

import (
	"io"
	"net"
	"os"
	"sync/atomic"
	"syscall"
	"unsafe"

	"golang.org/x/sys/unix"
)

// sock does a connection's socket reads and writes. On Linux, for a TCP
// (or Unix) socket, each read(2) and writev(2) is a raw system call made
// inside syscall.RawConn's Read and Write: the socket is non-blocking, so
// the call never blocks; when it is not ready (EAGAIN) the goroutine waits
// in Go's network poller as net.Conn's Read and Write would, with the same
// deadlines and Close. A raw call does not enter the scheduler's system
// call state. With a plain net.Conn read or write, one that lasts past a
// tick of the runtime's monitor (sysmon, 20 µs) while the other Ps are
// busy has its P handed to another thread, which wakes (futex) and
// switches threads; and every such hand-off keeps sysmon polling every
// 20 µs instead of backing off to 10 ms. A loopback write of a batch of
// answers runs the peer's TCP receive path too and easily lasts that
// long. Connections that are not syscall.Conns (net.Pipe, TLS) use the
// net.Conn's own methods.
type sock struct {
	nc net.Conn
	rc syscall.RawConn // nil: use nc

	// Read's call, bound once (a method value allocates).
	rbuf   []byte
	rn     int
	rerr   syscall.Errno
	readFn func(fd uintptr) bool

	// write's call: the parts still to write, and iovecs for them.
	wbufs   [][]byte
	iov     []unix.Iovec
	werr    syscall.Errno
	writeFn func(fd uintptr) bool
	one     [1][]byte

	// left is how many bytes of the write under way the socket has not
	// taken yet (0 between writes), for Conn.NotReading on any goroutine;
	// the connection's writer sets it already when it takes the bytes
	// from its queue (Conn.flushLocked).
	left atomic.Int64
}

func newSock(nc net.Conn) *sock {
	s := &sock{nc: nc}
	if sc, ok := nc.(syscall.Conn); ok {
		if rc, err := sc.SyscallConn(); err == nil {
			s.rc = rc
			s.readFn = s.readRaw
			s.writeFn = s.writeRaw
		}
	}
	return s
}

// Read reads at least one byte into p (io.EOF at the end of the stream).
// Only the connection's reader calls it.
func (s *sock) Read(p []byte) (int, error) {
	if s.rc == nil {
		return s.nc.Read(p)
	}
	if len(p) == 0 {
		return 0, nil
	}
	s.rbuf, s.rn, s.rerr = p, 0, 0
	err := s.rc.Read(s.readFn)
	s.rbuf = nil
	if err != nil {
		return 0, err
	}
	raceAcquireIO()
	if s.rerr != 0 {
		return 0, s.opError("read", s.rerr)
	}
	if s.rn == 0 {
		return 0, io.EOF
	}
	return s.rn, nil
}

// readNow reads what the socket holds into p without waiting for more:
// errWouldBlock when it holds nothing. Only the connection's reader calls
// it.
func (s *sock) readNow(p []byte) (int, error) {
	if s.rc == nil {
		return 0, errWouldBlock
	}
	s.rbuf, s.rn, s.rerr = p, 0, 0
	err := s.rc.Read(s.readNowRaw)
	s.rbuf = nil
	if err != nil {
		return 0, err
	}
	raceAcquireIO()
	switch s.rerr {
	case 0:
	case unix.EAGAIN:
		return 0, errWouldBlock
	default:
		return 0, s.opError("read", s.rerr)
	}
	if s.rn == 0 {
		return 0, io.EOF
	}
	return s.rn, nil
}

func (s *sock) readNowRaw(fd uintptr) bool {
	if !s.readRaw(fd) {
		s.rerr = unix.EAGAIN
	}
	return true
}

// setLowat sets the socket's receive low-water mark (SO_RCVLOWAT): the
// poller is told the socket is readable once that many bytes wait.
func (s *sock) setLowat(n int) error {
	if s.rc == nil {
		return errWouldBlock
	}
	var serr error
	if err := s.rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVLOWAT, n)
	}); err != nil {
		return err
	}
	return serr
}

// rcvbuf returns the socket's receive buffer size (SO_RCVBUF: what the
// kernel's autotuning has grown it to).
func (s *sock) rcvbuf() (int, error) {
	if s.rc == nil {
		return 0, errWouldBlock
	}
	var n int
	var serr error
	if err := s.rc.Control(func(fd uintptr) {
		n, serr = unix.GetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF)
	}); err != nil {
		return 0, err
	}
	return n, serr
}

func (s *sock) readRaw(fd uintptr) bool {
	for {
		n, _, e := unix.RawSyscall(unix.SYS_READ, fd, uintptr(unsafe.Pointer(&s.rbuf[0])), uintptr(len(s.rbuf)))
		switch e {
		case 0:
			s.rn = int(n)
			return true
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // wait in the poller
		default:
			s.rerr = e
			return true
		}
	}
}

// write writes all of b. Only the goroutine that owns the connection's
// write side calls write and writev.
func (s *sock) write(b []byte) error {
	if s.rc == nil {
		s.left.Store(int64(len(b)))
		_, err := s.nc.Write(b)
		s.left.Store(0)
		return err
	}
	s.one[0] = b
	err := s.writev(s.one[:])
	s.one[0] = nil
	return err
}

// writev writes all of bufs (consumed: the slices are advanced).
func (s *sock) writev(bufs [][]byte) error {
	var n int64
	for _, b := range bufs {
		n += int64(len(b))
	}
	s.left.Store(n)
	defer s.left.Store(0)
	if s.rc == nil {
		nb := net.Buffers(bufs)
		_, err := nb.WriteTo(s.nc)
		return err
	}
	raceReleaseIO()
	s.wbufs, s.werr = bufs, 0
	err := s.rc.Write(s.writeFn)
	s.wbufs = nil
	if err != nil {
		return err
	}
	if s.werr != 0 {
		return s.opError("write", s.werr)
	}
	return nil
}

// maxIov is the most iovecs one writev takes (IOV_MAX on Linux).
const maxIov = 1024

func (s *sock) writeRaw(fd uintptr) bool {
	for {
		for len(s.wbufs) > 0 && len(s.wbufs[0]) == 0 {
			s.wbufs = s.wbufs[1:]
		}
		if len(s.wbufs) == 0 {
			return true
		}
		iov := s.iov[:0]
		for _, b := range s.wbufs {
			if len(iov) == maxIov {
				break
			}
			if len(b) > 0 {
				v := unix.Iovec{Base: &b[0]}
				v.SetLen(len(b))
				iov = append(iov, v)
			}
		}
		s.iov = iov
		n, _, e := unix.RawSyscall(unix.SYS_WRITEV, fd, uintptr(unsafe.Pointer(&iov[0])), uintptr(len(iov)))
		clear(iov) // no pointers into the parts stay behind
		switch e {
		case 0:
		case unix.EINTR:
			continue
		case unix.EAGAIN:
			return false // wait in the poller
		default:
			s.werr = e
			return true
		}
		s.left.Add(-int64(n))
		for w := int(n); w > 0; {
			b := s.wbufs[0]
			if w < len(b) {
				s.wbufs[0] = b[w:]
				break
			}
			w -= len(b)
			s.wbufs[0] = nil
			s.wbufs = s.wbufs[1:]
		}
	}
}

// opError wraps a failed system call as net.Conn's methods do.
func (s *sock) opError(op string, e syscall.Errno) error {
	return &net.OpError{Op: op, Net: s.nc.LocalAddr().Network(), Source: s.nc.LocalAddr(), Addr: s.nc.RemoteAddr(),
		Err: os.NewSyscallError(op, e)}
}

// setReadBuffer sets the receive buffer (SO_RCVBUF) of ln's socket, which
// the sockets it accepts inherit.
func setReadBuffer(ln *net.TCPListener, n int) error {
	rc, err := ln.SyscallConn()
	if err != nil {
		return err
	}
	var serr error
	if err := rc.Control(func(fd uintptr) {
		serr = unix.SetsockoptInt(int(fd), unix.SOL_SOCKET, unix.SO_RCVBUF, n)
	}); err != nil {
		return err
	}
	return serr
}
