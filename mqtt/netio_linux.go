package mqtt

import (
	"net"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"
)

// The epoll half of the socket I/O (see netio.go): pollers, the plain TCP
// listener registered in them, and accept4.

type poller struct {
	s     *Server
	epfd  int
	evfd  int
	mu    sync.Mutex
	conns map[int]*conn // protected by mu
	done  chan struct{}

	lmu       sync.Mutex
	listeners map[int]string // protected by lmu: listening descriptors
}

func newPoller(s *Server) (*poller, error) {
	epfd, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return nil, err
	}
	evfd, err := unix.Eventfd(0, unix.EFD_NONBLOCK|unix.EFD_CLOEXEC)
	if err != nil {
		unix.Close(epfd)
		return nil, err
	}
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(evfd)}
	if err := unix.EpollCtl(epfd, unix.EPOLL_CTL_ADD, evfd, &ev); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, err
	}
	return &poller{s: s, epfd: epfd, evfd: evfd, conns: map[int]*conn{}, listeners: map[int]string{}, done: make(chan struct{})}, nil
}

func (p *poller) add(c *conn) error {
	p.mu.Lock()
	p.conns[c.fd] = c
	p.mu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLOUT | unix.EPOLLRDHUP | unix.EPOLLET, Fd: int32(c.fd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, c.fd, &ev); err != nil {
		p.remove(c)
		return err
	}
	return nil
}

func (p *poller) remove(c *conn) {
	p.mu.Lock()
	if p.conns[c.fd] == c {
		delete(p.conns, c.fd)
	}
	p.mu.Unlock()
}

func (p *poller) run() {
	defer close(p.done)
	events := make([]unix.EpollEvent, 256)
	buf := make([]byte, readBufSize)
	for {
		n, err := unix.EpollWait(p.epfd, events, -1)
		if err != nil {
			if err == unix.EINTR {
				continue
			}
			p.s.log.Error("mqtt: epoll wait", "err", err)
			return
		}
		for i := 0; i < n; i++ {
			ev := &events[i]
			fd := int(ev.Fd)
			if fd == p.evfd {
				return // closing
			}
			if ev.Events&unix.EPOLLIN != 0 && p.accept(fd) {
				continue
			}
			p.mu.Lock()
			c := p.conns[fd]
			p.mu.Unlock()
			if c == nil {
				continue
			}
			if ev.Events&(unix.EPOLLOUT|unix.EPOLLERR) != 0 {
				c.flush()
			}
			if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
				c.readable(buf, ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0)
			}
		}
	}
}

func (p *poller) close() {
	var one = [8]byte{1}
	unix.Write(p.evfd, one[:])
	<-p.done
	// Sockets still lingering after their close (shutdownIO) go now.
	p.mu.Lock()
	left := make([]*conn, 0, len(p.conns))
	for _, c := range p.conns {
		left = append(left, c)
	}
	p.mu.Unlock()
	for _, c := range left {
		c.closeFD()
	}
	unix.Close(p.epfd)
	unix.Close(p.evfd)
}

// listen starts a plain TCP listener. Its descriptor is registered
// (level-triggered) in the first poller, which accepts with accept4; Go's
// own netpoller never waits on it because Accept is never called.
func (s *Server) listen(addr string) (net.Listener, error) {
	l, err := net.Listen("tcp", addr)
	if err != nil {
		return nil, err
	}
	rc, err := l.(*net.TCPListener).SyscallConn()
	if err != nil {
		l.Close()
		return nil, err
	}
	lfd := -1
	rc.Control(func(fd uintptr) { lfd = int(fd) })
	p := s.pollers[0]
	p.lmu.Lock()
	p.listeners[lfd] = addr
	p.lmu.Unlock()
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(lfd)}
	if err := unix.EpollCtl(p.epfd, unix.EPOLL_CTL_ADD, lfd, &ev); err != nil {
		l.Close()
		return nil, err
	}
	return &pollListener{Listener: l, fd: lfd, p: p}, nil
}

// pollListener unregisters the descriptor from epoll before closing it.
type pollListener struct {
	net.Listener
	fd   int
	p    *poller
	once sync.Once
}

func (l *pollListener) Close() error {
	l.once.Do(func() {
		l.p.lmu.Lock()
		delete(l.p.listeners, l.fd)
		unix.EpollCtl(l.p.epfd, unix.EPOLL_CTL_DEL, l.fd, nil)
		l.p.lmu.Unlock()
	})
	return l.Listener.Close()
}

// accept takes every pending connection of a listening descriptor.
func (p *poller) accept(lfd int) bool {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	addr, ok := p.listeners[lfd]
	if !ok {
		return false
	}
	for {
		nfd, sa, err := unix.Accept4(lfd, unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC)
		if err != nil {
			switch err {
			case unix.EAGAIN:
			case unix.EINTR, unix.ECONNABORTED:
				continue
			default:
				p.s.log.Warn("mqtt: accept", "addr", addr, "err", err)
				time.Sleep(10 * time.Millisecond) // EMFILE: back off
			}
			return true
		}
		unix.SetsockoptInt(nfd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
		p.s.acceptFD(nfd, sockaddrString(sa))
	}
}

func sockaddrString(sa unix.Sockaddr) string {
	switch a := sa.(type) {
	case *unix.SockaddrInet4:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port))
	case *unix.SockaddrInet6:
		return net.JoinHostPort(net.IP(a.Addr[:]).String(), strconv.Itoa(a.Port))
	}
	return "?"
}

func (s *Server) acceptFD(fd int, remote string) {
	p := s.pollers[fd%len(s.pollers)]
	c := s.newConn(remote)
	c.fd, c.p = fd, p
	if !s.track(c) {
		unix.Close(fd)
		return
	}
	if err := p.add(c); err != nil {
		s.untrack(c)
		unix.Close(fd)
		return
	}
}
