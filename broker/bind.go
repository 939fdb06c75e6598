package broker

import (
	"errors"
	"fmt"
	"net"
	"os"

	"golang.org/x/sys/unix"
)

// boundPort is a TCP socket bound to the broker's address but not yet
// listening. The broker takes its port before it opens the store (the store
// writes the address into every record), and listens only once the store's
// recovery is done: a client that connects meanwhile is refused at once
// (connection refused, so it tries another broker) instead of waiting in
// the accept queue of a broker that cannot answer yet.
type boundPort struct {
	fd   int
	addr *net.TCPAddr
}

// bindTCP binds (without listening) a socket to addr as net.Listen("tcp",
// addr) would: an empty or unspecified host binds every address (IPv6
// dual stack where available), port 0 picks a free port.
func bindTCP(addr string) (*boundPort, error) {
	ta, err := net.ResolveTCPAddr("tcp", addr)
	if err != nil {
		return nil, err
	}
	family, sa := unix.AF_INET, unix.Sockaddr(nil)
	switch ip4 := ta.IP.To4(); {
	case ip4 != nil:
		s := &unix.SockaddrInet4{Port: ta.Port}
		copy(s.Addr[:], ip4)
		sa = s
	case ta.IP == nil || ta.IP.IsUnspecified():
		family, sa = unix.AF_INET6, &unix.SockaddrInet6{Port: ta.Port}
	default:
		s := &unix.SockaddrInet6{Port: ta.Port}
		copy(s.Addr[:], ta.IP.To16())
		family, sa = unix.AF_INET6, s
	}
	fd, err := socket(family)
	if err != nil && family == unix.AF_INET6 && (ta.IP == nil || ta.IP.IsUnspecified()) {
		family, sa = unix.AF_INET, &unix.SockaddrInet4{Port: ta.Port} // no IPv6 here
		fd, err = socket(family)
	}
	if err != nil {
		return nil, os.NewSyscallError("socket", err)
	}
	if family == unix.AF_INET6 && (ta.IP == nil || ta.IP.IsUnspecified()) {
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IPV6, unix.IPV6_V6ONLY, 0) // dual stack, as net.Listen
	}
	if err := unix.Bind(fd, sa); err != nil {
		_ = unix.Close(fd)
		return nil, os.NewSyscallError("bind", err)
	}
	got, err := unix.Getsockname(fd)
	if err != nil {
		_ = unix.Close(fd)
		return nil, os.NewSyscallError("getsockname", err)
	}
	b := &boundPort{fd: fd}
	switch a := got.(type) {
	case *unix.SockaddrInet4:
		b.addr = &net.TCPAddr{IP: net.IP(a.Addr[:]).To16(), Port: a.Port}
	case *unix.SockaddrInet6:
		b.addr = &net.TCPAddr{IP: net.IP(a.Addr[:]), Port: a.Port}
	default:
		_ = unix.Close(fd)
		return nil, errors.New("broker: bound socket has no TCP address")
	}
	return b, nil
}

func socket(family int) (int, error) {
	fd, err := unix.Socket(family, unix.SOCK_STREAM, 0)
	if err != nil {
		return -1, err
	}
	unix.CloseOnExec(fd)
	if err := unix.SetsockoptInt(fd, unix.SOL_SOCKET, unix.SO_REUSEADDR, 1); err != nil {
		_ = unix.Close(fd)
		return -1, err
	}
	return fd, nil
}

// Addr is the bound address (its port is the real one when 0 was asked).
func (b *boundPort) Addr() *net.TCPAddr { return b.addr }

// listen starts listening and hands the socket over as a net.Listener;
// the boundPort is spent either way.
func (b *boundPort) listen() (net.Listener, error) {
	if b.fd < 0 {
		return nil, errors.New("broker: port already listening or closed")
	}
	fd := b.fd
	b.fd = -1
	if err := unix.Listen(fd, unix.SOMAXCONN); err != nil {
		_ = unix.Close(fd)
		return nil, os.NewSyscallError("listen", err)
	}
	f := os.NewFile(uintptr(fd), fmt.Sprintf("tcp:%s", b.addr))
	defer f.Close() // FileListener holds its own descriptor
	return net.FileListener(f)
}

// close releases a port that never listened.
func (b *boundPort) close() {
	if b.fd >= 0 {
		_ = unix.Close(b.fd)
		b.fd = -1
	}
}
