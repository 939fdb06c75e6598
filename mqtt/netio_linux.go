package mqtt

import (
	"net"
	"os"
	"strconv"
	"sync"
	"sync/atomic"
	"syscall"
	"time"
	"unsafe"

	"golang.org/x/sys/unix"
)

// The epoll half of the socket I/O (see netio.go): pollers, the plain TCP
// listener registered in them, and accept4.
//
// A poller never blocks a thread in epoll_wait. Its epoll descriptor is
// itself registered in Go's network poller (through a gate, an epoll
// with an os.File over it that also holds the linger's timer:
// linger_linux.go): the poller goroutine collects ready events with
// epoll_wait and a zero timeout and, when there are none, parks like any
// goroutine waiting for a socket until the runtime sees the gate readable
// (nested epoll: a new event in a poller's epoll wakes the runtime's). A
// thread blocked in epoll_wait would hold its P in a system call: the
// runtime's monitor then hands the P to another thread and wakes one for
// every return (futex), and keeps polling every 20 µs while that goes on. The
// socket reads and writes are non-blocking and short, so they are made as
// raw system calls, without the scheduler's system call bookkeeping
// (sysRead, sysWrite).

type poller struct {
	s     *Server
	epfd  int
	ep    *os.File        // the gate (linger_linux.go) in Go's network poller
	rc    syscall.RawConn // ep's
	evfd  int
	mu    sync.Mutex
	conns map[int]*conn // protected by mu
	byFD  fdTable       // conns by descriptor for event, written under mu
	done  chan struct{}

	lmu       sync.Mutex
	listeners map[int]string // protected by lmu: listening descriptors

	// Connections with a raised SO_RCVLOWAT (lowat_linux.go).
	lowMu    sync.Mutex
	lowConns []lowEntry // protected by lowMu
	lowArmed bool       // protected by lowMu: lowTimer is armed
	lowTimer timer

	round Round // the poller goroutine's (round.go)

	// Lingering between rounds (linger_linux.go).
	gate     int           // ep's descriptor
	tfd      int           // timerfd in the gate
	linger   time.Duration // 0: never
	lingerOn bool          // epfd is out of the gate, tfd paces the rounds
	idle     int           // empty rounds in a row while lingering
	lone     int           // rounds in a row of at most one event while lingering
	gathered bool          // a round of this linger held two events or more
	needHot  int           // hot wake-ups in a row that start lingering (1 at first)
	hotRun   int           // hot wake-ups in a row so far
	lastWake int64         // nanotime of the previous wake-up
	// The linger follows the clients (pace): cur is the wait between
	// rounds, at most linger; ins holds the descriptors a round found
	// readable (the first lingerFull of them), prevIns the round
	// before's.
	cur          time.Duration
	ins, prevIns []int32
	// lingering is lingerOn for tests (read off the poller), curLinger
	// is cur.
	lingering atomic.Bool
	curLinger atomic.Int64
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
	p := &poller{s: s, epfd: epfd, evfd: evfd, conns: map[int]*conn{}, listeners: map[int]string{}, done: make(chan struct{})}
	if err := p.openGate(); err != nil {
		unix.Close(epfd)
		unix.Close(evfd)
		return nil, err
	}
	p.lowTimer.slot = -1
	return p, nil
}

func (p *poller) add(c *conn) error {
	p.mu.Lock()
	p.conns[c.fd] = c
	p.byFD.set(c.fd, c)
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
		p.byFD.set(c.fd, nil)
	}
	p.mu.Unlock()
}

func (p *poller) run() {
	defer close(p.done)
	events := make([]unix.EpollEvent, 256)
	buf := make([]byte, readBufSize)
	p.round.init(p.s)
	p.ins, p.prevIns = make([]int32, 0, lingerFull), make([]int32, 0, lingerFull)
	// The callback returns false to park until the epoll descriptor is
	// readable again, true to end (closing, or epoll failed). The events
	// of one epoll_wait are a round (round.go): what their handlers
	// deferred runs, and the connections held for it are written, before
	// the next epoll_wait.
	err := p.rc.Read(func(uintptr) bool {
		for {
			n, err := epollWaitNow(p.epfd, events)
			if err != nil {
				if err == unix.EINTR {
					continue
				}
				p.s.log.Error("mqtt: epoll wait", "err", err)
				return true
			}
			for i := 0; i < n; i++ {
				if !p.event(&events[i], buf) {
					p.round.end()
					return true // closing
				}
			}
			p.round.end()
			more := n >= len(events) || p.pace(n)
			p.ins, p.prevIns = p.prevIns[:0], p.ins
			if !more {
				// Drained: whatever arrives later is a new event in
				// this epoll, which wakes the runtime's (or, while
				// lingering, the timer does).
				return false
			}
		}
	})
	if err != nil {
		p.s.log.Error("mqtt: epoll wait", "err", err)
	}
}

// event handles one ready descriptor; false when the poller is closing.
func (p *poller) event(ev *unix.EpollEvent, buf []byte) bool {
	fd := int(ev.Fd)
	if fd == p.evfd {
		return false
	}
	if ev.Pad == epollListener {
		if ev.Events&unix.EPOLLIN != 0 {
			p.accept(fd)
		}
		return true
	}
	c, ok := p.byFD.get(fd)
	if !ok {
		p.mu.Lock()
		c = p.conns[fd]
		p.mu.Unlock()
	}
	if c == nil {
		return true
	}
	if ev.Events&(unix.EPOLLOUT|unix.EPOLLERR) != 0 {
		c.flush()
	}
	if ev.Events&unix.EPOLLIN != 0 && len(p.ins) < lingerFull {
		p.ins = append(p.ins, ev.Fd)
	}
	if ev.Events&(unix.EPOLLIN|unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0 {
		c.readable(buf, ev.Events&(unix.EPOLLRDHUP|unix.EPOLLHUP|unix.EPOLLERR) != 0, &p.round)
	}
	return true
}

// fdTable finds a poller's connections by descriptor without its lock
// (one lock and one map lookup fewer per event): a fixed directory of
// chunks allocated on first use, whose slots are atomic pointers. Only
// descriptors below fdTableMax are kept; event looks larger ones up in
// the map.
type fdTable [fdTableMax >> fdChunkBits]atomic.Pointer[fdChunk]

type fdChunk [1 << fdChunkBits]atomic.Pointer[conn]

const (
	fdChunkBits = 10
	fdTableMax  = 1 << 20
)

// set stores c (nil: none) for fd (caller holds the poller's mu).
func (t *fdTable) set(fd int, c *conn) {
	if fd < 0 || fd >= fdTableMax {
		return
	}
	ch := t[fd>>fdChunkBits].Load()
	if ch == nil {
		if c == nil {
			return
		}
		ch = new(fdChunk)
		t[fd>>fdChunkBits].Store(ch)
	}
	ch[fd&(1<<fdChunkBits-1)].Store(c)
}

// get returns fd's connection; false when fd is not kept in the table.
func (t *fdTable) get(fd int) (*conn, bool) {
	if fd < 0 || fd >= fdTableMax {
		return nil, false
	}
	ch := t[fd>>fdChunkBits].Load()
	if ch == nil {
		return nil, true
	}
	return ch[fd&(1<<fdChunkBits-1)].Load(), true
}

// epollListener tags a listening descriptor's epoll registration (the
// event's Pad word; a connection's is 0), so that a connection's event
// does not look among the listeners first.
const epollListener = 1

// epollWaitNow is epoll_wait with a zero timeout: it never blocks, so it
// is a raw system call.
func epollWaitNow(epfd int, events []unix.EpollEvent) (int, error) {
	r, _, e := unix.RawSyscall6(unix.SYS_EPOLL_WAIT, uintptr(epfd), uintptr(unsafe.Pointer(&events[0])), uintptr(len(events)), 0, 0, 0)
	if e != 0 {
		return 0, e
	}
	return int(r), nil
}

// sysRead and sysWrite are read(2) and write(2) on a non-blocking socket:
// they never block, so they are raw system calls (see the top of this
// file).
func sysRead(fd int, b []byte) (int, error)  { return rawIO(unix.SYS_READ, fd, b) }
func sysWrite(fd int, b []byte) (int, error) { return rawIO(unix.SYS_WRITE, fd, b) }

func rawIO(trap uintptr, fd int, b []byte) (int, error) {
	if len(b) == 0 {
		return 0, nil
	}
	r, _, e := unix.RawSyscall(trap, uintptr(fd), uintptr(unsafe.Pointer(&b[0])), uintptr(len(b)))
	if e != 0 {
		return -1, e
	}
	return int(r), nil
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
	p.ep.Close() // the gate
	unix.Close(p.epfd)
	unix.Close(p.tfd)
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
	ev := unix.EpollEvent{Events: unix.EPOLLIN, Fd: int32(lfd), Pad: epollListener}
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
func (p *poller) accept(lfd int) {
	p.lmu.Lock()
	defer p.lmu.Unlock()
	addr, ok := p.listeners[lfd]
	if !ok {
		return // closed meanwhile
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
			return
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

// roundOf returns the poller's round while workInline runs on it.
func (c *conn) roundOf() *Round {
	if !c.onRound {
		return nil
	}
	return &c.p.round
}
