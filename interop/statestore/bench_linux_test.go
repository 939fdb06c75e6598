package statestore

import (
	"fmt"
	"net/netip"
	"slices"
	"syscall"
	"testing"
	"time"
)

// loopStateStoreLoad is rawStateStoreLoad with one event loop driving
// every connection (non-blocking sockets and epoll, outside Go's
// netpoller, on one goroutine), the way redis-benchmark drives its
// clients: the load generator then spends little of the machine's CPU
// on scheduling, as redis-benchmark does. The protocol work and the
// checks are leanClient's, the same as rawStateStoreLoad's.
func loopStateStoreLoad(t *testing.T, addr, verb string, clients, perClient int, val []byte) benchResult {
	t.Helper()
	r, err := loopLoad(addr, verb, clients, perClient, val)
	if err != nil {
		t.Fatal(err)
	}
	if testing.Verbose() {
		t.Logf("%s %s (event-loop MQTT clients): %d ops, %.0f ops/s, p50 %v, p99 %v", addr, verb, clients*perClient,
			r.opsPerSec, r.p50.Round(time.Microsecond), r.p99.Round(time.Microsecond))
	}
	return r
}

// loopLoad is loopStateStoreLoad without the test: safe to call from any
// goroutine.
func loopLoad(addr, verb string, clients, perClient int, val []byte) (benchResult, error) {
	ap, err := netip.ParseAddrPort(addr)
	if err != nil {
		return benchResult{}, err
	}
	sa := &syscall.SockaddrInet4{Port: int(ap.Port()), Addr: ap.Addr().As4()}
	ep, err := syscall.EpollCreate1(syscall.EPOLL_CLOEXEC)
	if err != nil {
		return benchResult{}, err
	}
	defer syscall.Close(ep)
	fds := make([]int, 0, clients)
	defer func() {
		for _, fd := range fds {
			_ = syscall.Close(fd)
		}
	}()
	lcs := map[int]*leanClient{}
	for i := 0; i < clients; i++ {
		fd, err := syscall.Socket(syscall.AF_INET, syscall.SOCK_STREAM|syscall.SOCK_CLOEXEC, 0)
		if err != nil {
			return benchResult{}, err
		}
		fds = append(fds, fd)
		if err := syscall.Connect(fd, sa); err != nil {
			return benchResult{}, fmt.Errorf("connect %s: %v", addr, err)
		}
		_ = syscall.SetsockoptInt(fd, syscall.IPPROTO_TCP, syscall.TCP_NODELAY, 1)
		if err := syscall.SetNonblock(fd, true); err != nil {
			return benchResult{}, err
		}
		if err := syscall.EpollCtl(ep, syscall.EPOLL_CTL_ADD, fd, &syscall.EpollEvent{Events: syscall.EPOLLIN, Fd: int32(fd)}); err != nil {
			return benchResult{}, err
		}
		lc := newLeanClient(fmt.Sprintf("loop-%s-%d", verb, i), verb, i, perClient, val)
		lcs[fd] = lc
		if err := writeAll(fd, lc.connectPacket()); err != nil {
			return benchResult{}, err
		}
	}
	events := make([]syscall.EpollEvent, 64)
	buf := make([]byte, 64<<10)
	// poll runs the loop until every client satisfies cond, calling
	// ready for a client that has just become idle.
	poll := func(cond func(*leanClient) bool, ready func(fd int, lc *leanClient) error) error {
		pending := 0
		finished := map[int]bool{}
		for fd, lc := range lcs {
			if cond(lc) {
				finished[fd] = true
			} else {
				pending++
			}
		}
		for pending > 0 {
			n, err := syscall.EpollWait(ep, events, 30_000)
			if err == syscall.EINTR {
				continue
			}
			if err != nil {
				return err
			}
			if n == 0 {
				return fmt.Errorf("loop %s: no progress in 30 s (%d clients pending)", verb, pending)
			}
			for _, ev := range events[:n] {
				fd := int(ev.Fd)
				lc := lcs[fd]
				for {
					k, err := syscall.Read(fd, buf)
					if k > 0 {
						if err := lc.feed(buf[:k]); err != nil {
							return err
						}
						continue
					}
					if err == syscall.EINTR {
						continue
					}
					if err == syscall.EAGAIN {
						break
					}
					return fmt.Errorf("%s: read: %v (after %d requests)", lc.id, err, lc.j)
				}
				if finished[fd] {
					continue
				}
				if cond(lc) {
					finished[fd] = true
					pending--
					continue
				}
				if lc.idle() && ready != nil {
					if err := ready(fd, lc); err != nil {
						return err
					}
				}
			}
		}
		return nil
	}
	if err := poll(func(lc *leanClient) bool { return lc.connected }, nil); err != nil {
		return benchResult{}, err
	}
	start := time.Now()
	for fd, lc := range lcs {
		if err := writeAll(fd, lc.nextRequest()); err != nil {
			return benchResult{}, err
		}
	}
	if err := poll((*leanClient).done, func(fd int, lc *leanClient) error { return writeAll(fd, lc.nextRequest()) }); err != nil {
		return benchResult{}, err
	}
	el := time.Since(start)
	var all []time.Duration
	for _, lc := range lcs {
		all = append(all, lc.lat...)
	}
	if len(all) != clients*perClient {
		return benchResult{}, fmt.Errorf("loop %s: %d answers, want %d", verb, len(all), clients*perClient)
	}
	slices.Sort(all)
	p := func(q float64) time.Duration { return all[int(q*float64(len(all)-1))] }
	return benchResult{opsPerSec: float64(len(all)) / el.Seconds(), p50: p(0.50), p99: p(0.99)}, nil
}

// writeAll writes b to the non-blocking socket fd, waiting for room when
// the socket buffer is full (requests are small: rare).
func writeAll(fd int, b []byte) error {
	for len(b) > 0 {
		n, err := syscall.Write(fd, b)
		if n > 0 {
			b = b[n:]
			continue
		}
		switch err {
		case syscall.EINTR:
		case syscall.EAGAIN:
			time.Sleep(50 * time.Microsecond)
		default:
			return err
		}
	}
	return nil
}
