package mqtt

import (
	"fmt"
	"os"
	"slices"
	"time"

	"golang.org/x/sys/unix"
)

// Lingering: wake-up moderation for a busy poller (like a NIC's interrupt
// coalescing).
//
// What Go's network poller waits on is not a poller's epoll descriptor
// but a gate: a second epoll holding the poller's epoll descriptor and a
// timerfd. Parked, a poller wakes for the first event that arrives: when
// requests trickle in from many clients, each wake-up (a context switch
// and three epoll calls through the runtime's scheduler) serves one or
// two of them. Once wake-ups come closer together than lingerHotGap, the
// poller lingers: it mutes its epoll descriptor's entry in the gate (see
// gateEvents), so that arrivals no longer wake anything, and after each round of fewer than
// lingerFull events it arms the timer for Options.PollLinger and parks on
// the gate; when the timer fires it collects whatever arrived meanwhile
// with a zero-timeout epoll_wait. A round thus serves what arrived over
// the linger, and each request waits at most about the linger more.
// After lingerIdle empty rounds in a row the epoll descriptor goes back
// into the gate.
//
// An empty round means the clients' next requests are later than the
// linger (their process is slower, or waits for a CPU): the wait after it
// is lingerEmpty times the linger, so that a stall of the clients costs
// fewer empty wake-ups and the round that follows it gathers more. A
// request that arrives just after an empty round may wait that long.
//
// The wait follows the clients. When every connection readable in a
// round was readable in the round before too (a few clients that send
// their next request as soon as they have the answer), the linger is
// longer than their round trip and only holds them back: the next wait
// is halved (down to lingerMin). Any other round doubles it again, up to
// Options.PollLinger. Many clients whose next requests come later than
// a round (slow clients, or many of them) keep the whole linger; a few
// quick ones get a wait near their own round trip, and keep it from one
// linger to the next.
//
// A lone client sending one request after the other also wakes the
// poller often enough to start it lingering, but its rounds hold one
// request each whatever the poller waits, so lingering would only add
// the linger to each request. A linger therefore also ends after
// lingerLone rounds in a row of at most one event, and one that never
// gathered two events in a round doubles the hot wake-ups in a row the
// next one needs to start (up to lingerBackoff); a linger that gathered
// more resets it to one. The poller never holds its thread or P while it waits:
// the process sleeps in the runtime's poller as before, and the
// runtime's monitor with it.

const (
	// lingerFull is the round size from which the poller does not
	// wait for the timer before its next epoll_wait (it is saturated).
	lingerFull = 16
	// lingerIdle empty rounds in a row end lingering, and so do
	// lingerLone rounds in a row of at most one event.
	lingerIdle = 3
	lingerLone = 8
	// lingerEmpty times the linger is the wait after an empty round.
	lingerEmpty = 2
	// lingerBackoff bounds the hot wake-ups in a row that start
	// lingering again after lingers that gathered nothing (see pace).
	lingerBackoff = 64
	// lingerMin is the shortest wait the linger follows quick clients
	// down to.
	lingerMin = 50 * time.Microsecond
	// lingerHotGap: wake-ups this close together (or twice the linger,
	// if longer) start lingering.
	lingerHotGap = 500 * time.Microsecond
)

// openGate creates the gate and the timer and registers the gate in Go's
// network poller (p.ep, p.rc).
func (p *poller) openGate() error {
	p.linger = p.s.opts.pollLinger()
	gate, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
	if err != nil {
		return err
	}
	tfd, err := unix.TimerfdCreate(unix.CLOCK_MONOTONIC, unix.TFD_NONBLOCK|unix.TFD_CLOEXEC)
	if err != nil {
		unix.Close(gate)
		return err
	}
	// The timer edge-triggered: each expiry is a new event, and its
	// count is never read (setting the timer clears it).
	for _, ev := range []unix.EpollEvent{{Events: unix.EPOLLIN, Fd: int32(p.epfd)}, {Events: unix.EPOLLIN | unix.EPOLLET, Fd: int32(tfd)}} {
		if err = unix.EpollCtl(gate, unix.EPOLL_CTL_ADD, int(ev.Fd), &ev); err != nil {
			break
		}
	}
	// Non-blocking, so that os.NewFile registers it in the runtime's
	// poller (epoll_wait itself ignores the flag).
	if err == nil {
		err = unix.SetNonblock(gate, true)
	}
	if err != nil {
		unix.Close(gate)
		unix.Close(tfd)
		return err
	}
	ep := os.NewFile(uintptr(gate), "mqtt-epoll")
	rc, err := ep.SyscallConn()
	if err != nil {
		ep.Close()
		unix.Close(tfd)
		return fmt.Errorf("epoll descriptor not pollable: %w", err)
	}
	p.ep, p.rc, p.gate, p.tfd = ep, rc, gate, tfd
	return nil
}

// pace runs after a round of n events that did not fill the event array:
// true to poll again at once, false to park on the gate (for the next
// arrival, or while lingering for the timer).
func (p *poller) pace(n int) bool {
	if p.linger <= 0 {
		return false
	}
	if !p.lingerOn {
		if n == 0 {
			return false
		}
		if !p.hot() {
			p.hotRun = 0
			return false
		}
		if p.hotRun++; p.hotRun < max(p.needHot, 1) {
			return false
		}
		if err := p.gateEvents(0); err != nil {
			p.s.log.Warn("mqtt: linger", "err", err)
			return false
		}
		p.lingerOn, p.idle, p.lone, p.gathered, p.hotRun = true, 0, 0, false, 0
		p.lingering.Store(true)
		p.s.io.lingers.Add(1)
		if p.cur <= 0 || p.cur > p.linger {
			p.cur = p.linger
			p.curLinger.Store(int64(p.cur))
		}
		p.arm(p.cur)
		return false
	}
	p.s.io.lingered.Add(1)
	if n <= 1 {
		p.lone++
	} else {
		p.lone, p.gathered = 0, true
	}
	if n == 0 {
		p.idle++
	} else {
		p.idle = 0
	}
	if p.idle >= lingerIdle || p.lone >= lingerLone {
		// Back to waking for arrivals. The gate reports at once
		// what arrived since the last round.
		if p.gathered {
			p.needHot = 1
		} else {
			p.needHot = min(2*max(p.needHot, 1), lingerBackoff)
		}
		p.lingerOn, p.lastWake = false, 0
		p.lingering.Store(false)
		p.arm(0)
		if err := p.gateEvents(unix.EPOLLIN); err != nil {
			p.s.log.Error("mqtt: linger", "err", err)
		}
		return false
	}
	if n >= lingerFull {
		return true
	}
	if p.quickClients() {
		p.cur = max(p.cur/2, lingerMin) // quick clients: wait less
	} else {
		p.cur = min(2*p.cur, p.linger)
	}
	p.curLinger.Store(int64(p.cur))
	if n == 0 {
		// The clients are late: wait longer for their next burst.
		p.arm(lingerEmpty * p.cur)
	} else {
		p.arm(p.cur)
	}
	return false
}

// gateEvents sets what the poller's epoll descriptor reports to the gate:
// EPOLLIN, or nothing while the poller lingers. Its entry stays in the
// gate: adding an epoll descriptor to another epoll makes the kernel walk
// every descriptor the added one watches (its loop check), a cost that
// grows with the connections; taking it out and back in at every linger
// was half of what a fleet of 18,000 idle devices cost a bridge (their
// PINGREQs, some 2,400 a second, start and end lingers all the time).
// A modified entry costs the same whatever it watches, and one switched
// back to EPOLLIN reports at once what arrived meanwhile.
func (p *poller) gateEvents(events uint32) error {
	ev := unix.EpollEvent{Events: events, Fd: int32(p.epfd)}
	return unix.EpollCtl(p.gate, unix.EPOLL_CTL_MOD, p.epfd, &ev)
}

// quickClients reports whether every connection this round found
// readable was readable in the round before too (and there was one).
func (p *poller) quickClients() bool {
	if len(p.ins) == 0 {
		return false
	}
	for _, fd := range p.ins {
		if !slices.Contains(p.prevIns, fd) {
			return false
		}
	}
	return true
}

// hot records a wake-up and says whether it came within the gap of the
// previous one.
func (p *poller) hot() bool {
	now := nanotime()
	gap := max(lingerHotGap, 2*p.linger)
	hot := p.lastWake != 0 && now-p.lastWake < int64(gap)
	p.lastWake = now
	return hot
}

// arm sets the timer to fire once after d (0 disarms it). Setting it
// clears the count of an expiry, so the timer is never read. (A periodic
// timer would save the call per round, but an unread timerfd does not
// rearm itself: it fires once.)
func (p *poller) arm(d time.Duration) {
	spec := unix.ItimerSpec{Value: unix.NsecToTimespec(int64(d))}
	if err := unix.TimerfdSettime(p.tfd, 0, &spec, nil); err != nil {
		p.s.log.Warn("mqtt: linger timer", "err", err)
	}
}

// pollLinger is the linger the pollers use (0: none).
func (o Options) pollLinger() time.Duration { return max(o.PollLinger, 0) }
