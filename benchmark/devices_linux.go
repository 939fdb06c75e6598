package benchmark

import (
	"context"
	"errors"
	"fmt"
	"net"
	"slices"
	"strconv"
	"sync"
	"time"

	"golang.org/x/sys/unix"

	"github.com/smartgo/smartgo/mqtt/packets"
)

// A device's connection goes through these states, in order; any of the
// first three may end in closed.
const (
	devIdle    uint8 = iota // not started
	devTCP                  // TCP connect in progress
	devConnack              // CONNECT sent, waiting for CONNACK
	devUp                   // connected
	devClosed               // failed, dropped or disconnected
)

// fleetTick is the resolution of the keep-alive and publish schedules.
const fleetTick = 100 * time.Millisecond

// fleetReadBuf is a loop's read buffer: room for many small packets. A
// larger packet grows it (the decoder's maximum bounds that); the head of
// a packet a read cut waits in the device's own pending bytes.
const fleetReadBuf = 64 << 10

// dconn is one device's connection, owned by its loop.
type dconn struct {
	fd      int32
	state   uint8
	pubOut  bool   // a telemetry PUBLISH waits for its PUBACK
	pktID   uint16 // the last telemetry packet id
	at      int64  // when the TCP connect started (unix ns)
	pubAt   int64  // when the waiting PUBLISH was sent (unix ns)
	pending []byte // the head of a packet the last read cut
}

// fleetLoop owns a share of the devices: their sockets, one epoll set,
// the schedules. Only its goroutine touches them.
type fleetLoop struct {
	cfg   *DevicesConfig
	stats *fleetStats
	addrs []unix.SockaddrInet4
	index int // this loop's number: it owns devices First+index+k*Loops
	ep    int
	conns []dconn
	next  int // the next device (k) to start
	oldK  int // no device before it waits for a CONNACK
	// waiting counts devices between their connect and their CONNACK,
	// bounded by maxWaiting; tokens meter new connects to the rate.
	waiting, maxWaiting int
	tokens, perLoopRate float64
	lastFill            time.Time
	pings, pubs         fleetWheel
	dec                 packets.Decoder // packets up to packets.DefaultMaxPacketSize
	scratch             packets.Scratch
	buf, out, payload   []byte
}

// fleetWheel schedules each connected device once a period, in ticks.
type fleetWheel struct {
	slots [][]int32
	cur   int
	steps int
}

func newFleetWheel(period time.Duration) fleetWheel {
	steps := max(1, int(period/fleetTick))
	return fleetWheel{slots: make([][]int32, steps+1), steps: steps}
}

// add schedules k a period from now.
func (w *fleetWheel) add(k int) {
	if len(w.slots) == 0 {
		return
	}
	i := (w.cur + w.steps) % len(w.slots)
	w.slots[i] = append(w.slots[i], int32(k))
}

// advance moves one tick on and calls fn for each device due; fn says
// whether the device stays scheduled.
func (w *fleetWheel) advance(fn func(k int) bool) {
	if len(w.slots) == 0 {
		return
	}
	w.cur = (w.cur + 1) % len(w.slots)
	due := w.slots[w.cur]
	w.slots[w.cur] = nil
	for _, k := range due {
		if fn(int(k)) {
			w.add(int(k))
		}
	}
	if w.slots[w.cur] == nil {
		w.slots[w.cur] = due[:0]
	}
}

func runFleet(ctx context.Context, cfg DevicesConfig) (DevicesReport, error) {
	addrs := make([]unix.SockaddrInet4, len(cfg.Targets))
	for i, t := range cfg.Targets {
		a, err := net.ResolveTCPAddr("tcp4", t)
		if err != nil {
			return DevicesReport{}, fmt.Errorf("bench devices: target %q: %w", t, err)
		}
		addrs[i].Port = a.Port
		copy(addrs[i].Addr[:], a.IP.To4())
	}
	stats := &fleetStats{}
	loops := make([]*fleetLoop, 0, cfg.Loops)
	defer func() {
		for _, l := range loops {
			unix.Close(l.ep)
		}
	}()
	for i := 0; i < cfg.Loops; i++ {
		ep, err := unix.EpollCreate1(unix.EPOLL_CLOEXEC)
		if err != nil {
			return DevicesReport{}, fmt.Errorf("bench devices: epoll: %w", err)
		}
		n := (cfg.Devices - i + cfg.Loops - 1) / cfg.Loops
		l := &fleetLoop{cfg: &cfg, stats: stats, addrs: addrs, index: i, ep: ep, conns: make([]dconn, n),
			maxWaiting: max(1, (cfg.InFlight+cfg.Loops-1)/cfg.Loops), perLoopRate: cfg.Rate / float64(cfg.Loops),
			pings: newFleetWheel(cfg.KeepAlive * 3 / 4), buf: make([]byte, fleetReadBuf), payload: make([]byte, cfg.PublishSize)}
		if cfg.PublishEvery > 0 {
			l.pubs = newFleetWheel(cfg.PublishEvery)
		}
		loops = append(loops, l)
	}

	start := time.Now()
	stop := make(chan struct{})
	var wg sync.WaitGroup
	var phase sync.WaitGroup
	phase.Add(len(loops))
	for _, l := range loops {
		wg.Add(1)
		go func() {
			defer wg.Done()
			l.run(stop, sync.OnceFunc(phase.Done))
		}()
	}
	progressDone := make(chan struct{})
	if cfg.Progress != nil {
		wg.Add(1)
		go func() {
			defer wg.Done()
			progressDevices(cfg.Progress, stats, start, progressDone)
		}()
	}
	connected := make(chan struct{})
	wg.Add(1)
	go func() {
		defer wg.Done()
		phase.Wait() // every loop's Done runs at the latest when it stops
		close(connected)
	}()

	var err error
	select {
	case <-connected:
	case <-ctx.Done():
		err = fmt.Errorf("bench devices: stopped before every device connected: %w", ctx.Err())
	}
	up := stats.connected.Load()
	heldFrom := time.Now()
	if err == nil {
		if cfg.Hold > 0 {
			t := time.NewTimer(cfg.Hold)
			select {
			case <-t.C:
			case <-ctx.Done():
			}
			t.Stop()
		} else {
			<-ctx.Done()
		}
	}
	held := time.Since(heldFrom)
	close(stop)
	close(progressDone)
	wg.Wait()
	return stats.report(&cfg, up, held), err
}

// device is the fleet index of this loop's k-th device.
func (l *fleetLoop) device(k int) int { return l.cfg.First + l.index + k*l.cfg.Loops }

func (l *fleetLoop) run(stop <-chan struct{}, connected func()) {
	defer l.closeAll()
	events := make([]unix.EpollEvent, 512)
	now := time.Now()
	l.lastFill = now
	tick := now.Add(fleetTick)
	phaseOver := false
	for {
		select {
		case <-stop:
			connected()
			return
		default:
		}
		now = time.Now()
		l.startConnects(now)
		l.expire(now)
		if !phaseOver && l.next == len(l.conns) && l.oldK == l.next {
			phaseOver = true
			connected()
		}
		for n := 0; !now.Before(tick) && n < len(l.pings.slots)+1; n++ {
			l.onTick(now)
			tick = tick.Add(fleetTick)
		}
		if !now.Before(tick) {
			tick = now.Add(fleetTick) // too far behind: skip, do not burst
		}
		wait := int(time.Until(tick)/time.Millisecond) + 1
		if l.next < len(l.conns) || l.waiting > 0 {
			wait = min(wait, 10)
		}
		n, err := unix.EpollWait(l.ep, events, wait)
		if err != nil {
			if errors.Is(err, unix.EINTR) {
				continue
			}
			l.stats.fail("epoll: "+err.Error(), false)
			connected()
			return
		}
		for _, ev := range events[:n] {
			l.event(int(ev.Fd), ev.Events)
		}
	}
}

// startConnects starts as many connects as the rate and the in-flight
// bound allow.
func (l *fleetLoop) startConnects(now time.Time) {
	if l.next >= len(l.conns) {
		return
	}
	// Up to a second's worth of connects may start at once: a loop that
	// waited for a CPU catches up instead of falling behind the rate.
	l.tokens += now.Sub(l.lastFill).Seconds() * l.perLoopRate
	l.lastFill = now
	l.tokens = min(l.tokens, max(1, l.perLoopRate))
	for l.next < len(l.conns) && l.waiting < l.maxWaiting && l.tokens >= 1 {
		l.tokens--
		k := l.next
		l.next++
		l.connect(k, now)
	}
}

func (l *fleetLoop) connect(k int, now time.Time) {
	c := &l.conns[k]
	dev := l.device(k)
	c.at = now.UnixNano()
	l.stats.firstAt.CompareAndSwap(0, c.at)
	fd, err := unix.Socket(unix.AF_INET, unix.SOCK_STREAM|unix.SOCK_NONBLOCK|unix.SOCK_CLOEXEC, 0)
	if err != nil {
		c.state = devClosed
		l.stats.fail("socket: "+err.Error(), false)
		return
	}
	c.fd, c.state = int32(fd), devTCP
	l.waiting++
	l.stats.connecting.Add(1)
	target := &l.addrs[dev%len(l.addrs)]
	if src := l.cfg.Sources; len(src) > 0 {
		// The port is picked at connect, for the whole 4-tuple: one source
		// address then reaches each listener with its own port range.
		_ = unix.SetsockoptInt(fd, unix.IPPROTO_IP, unix.IP_BIND_ADDRESS_NO_PORT, 1)
		if err := unix.Bind(fd, &unix.SockaddrInet4{Addr: src[(dev/len(l.addrs))%len(src)].As4()}); err != nil {
			l.drop(k, "bind: "+err.Error())
			return
		}
	}
	_ = unix.SetsockoptInt(fd, unix.IPPROTO_TCP, unix.TCP_NODELAY, 1)
	if err := unix.Connect(fd, target); err != nil && !errors.Is(err, unix.EINPROGRESS) {
		l.drop(k, "connect: "+err.Error())
		return
	}
	ev := unix.EpollEvent{Events: unix.EPOLLOUT | unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(k)}
	if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_ADD, fd, &ev); err != nil {
		l.drop(k, "epoll: "+err.Error())
	}
}

// expire fails the devices whose CONNACK is late. Devices start in order,
// so the late ones are at the front.
func (l *fleetLoop) expire(now time.Time) {
	limit := now.Add(-l.cfg.ConnectTimeout).UnixNano()
	for l.oldK < l.next {
		c := &l.conns[l.oldK]
		if c.state == devTCP || c.state == devConnack {
			if c.at > limit {
				return
			}
			l.drop(l.oldK, "timeout")
		}
		l.oldK++
	}
}

// onTick sends the PINGREQs and PUBLISHes due.
func (l *fleetLoop) onTick(now time.Time) {
	l.pings.advance(func(k int) bool {
		if l.conns[k].state != devUp {
			return false
		}
		l.stats.pings.Add(1)
		return l.write(k, []byte{byte(packets.TypePingreq) << 4, 0})
	})
	l.pubs.advance(func(k int) bool {
		c := &l.conns[k]
		if c.state != devUp {
			return false
		}
		if c.pubOut {
			return true // one at a time: the last one is not acknowledged yet
		}
		c.pktID++
		if c.pktID == 0 {
			c.pktID = 1
		}
		stamp(l.payload)
		p := packets.Publish{QoS: 1, PacketID: c.pktID, Topic: l.topic(k, "/out"), Payload: l.payload}
		b, err := packets.AppendPublish(l.out[:0], &p, packets.Version(l.cfg.Version))
		if err != nil {
			l.drop(k, "encode PUBLISH: "+err.Error())
			return false
		}
		l.out = b
		c.pubOut, c.pubAt = true, now.UnixNano()
		l.stats.published.Add(1)
		return l.write(k, b)
	})
}

func (l *fleetLoop) topic(k int, suffix string) string {
	return l.cfg.Topic + "/" + l.clientID(k) + suffix
}

func (l *fleetLoop) clientID(k int) string {
	return l.cfg.Prefix + strconv.Itoa(l.device(k))
}

// event handles what epoll reported for device k.
func (l *fleetLoop) event(k int, ev uint32) {
	if k < 0 || k >= len(l.conns) {
		return
	}
	c := &l.conns[k]
	switch c.state {
	case devTCP:
		if ev&(unix.EPOLLOUT|unix.EPOLLERR|unix.EPOLLHUP) == 0 {
			return
		}
		if soErr, err := unix.GetsockoptInt(int(c.fd), unix.SOL_SOCKET, unix.SO_ERROR); err != nil || soErr != 0 {
			if err == nil {
				err = unix.Errno(soErr)
			}
			l.drop(k, "connect: "+err.Error())
			return
		}
		if !l.sendConnect(k) {
			return
		}
		c.state = devConnack
		mod := unix.EpollEvent{Events: unix.EPOLLIN | unix.EPOLLRDHUP, Fd: int32(k)}
		if err := unix.EpollCtl(l.ep, unix.EPOLL_CTL_MOD, int(c.fd), &mod); err != nil {
			l.drop(k, "epoll: "+err.Error())
		}
	case devConnack, devUp:
		l.read(k)
	}
}

func (l *fleetLoop) sendConnect(k int) bool {
	p := packets.Connect{CleanStart: !l.cfg.Persistent, KeepAlive: uint16(l.cfg.KeepAlive / time.Second), ClientID: l.clientID(k)}
	if l.cfg.Persistent && l.cfg.Version == 5 {
		p.Properties.SessionExpiry = l.cfg.SessionExpiry
		p.Properties.Present.Add(packets.PropSessionExpiry)
	}
	if l.cfg.Username != "" {
		p.UsernameFlag, p.Username = true, l.cfg.Username
	}
	if l.cfg.Password != "" {
		p.PasswordFlag, p.Password = true, []byte(l.cfg.Password)
	}
	b, err := packets.AppendPacket(l.out[:0], &p, packets.Version(l.cfg.Version))
	if err != nil {
		l.drop(k, "encode CONNECT: "+err.Error())
		return false
	}
	l.out = b
	return l.write(k, b)
}

// read reads what waits on k's socket (once: the set is level-triggered)
// and handles every whole packet in it.
func (l *fleetLoop) read(k int) {
	c := &l.conns[k]
	buf := append(l.buf[:0], c.pending...)
	c.pending = nil
	if cap(buf)-len(buf) < 4096 {
		buf = slices.Grow(buf, fleetReadBuf)
	}
	n, err := unix.Read(int(c.fd), buf[len(buf):cap(buf)])
	switch {
	case errors.Is(err, unix.EAGAIN) || errors.Is(err, unix.EINTR):
		c.pending = append([]byte(nil), buf...)
		return
	case err != nil:
		l.drop(k, "read: "+err.Error())
		return
	case n == 0:
		l.drop(k, "closed by the server")
		return
	}
	data := buf[:len(buf)+n]
	if cap(buf) > fleetReadBuf {
		l.buf = buf[:0] // keep what a large packet grew
	}
	for len(data) > 0 && c.state != devClosed {
		p, used, err := l.dec.NextScratchAlias(packets.Version(l.cfg.Version), data, &l.scratch)
		if errors.Is(err, packets.ErrIncomplete) {
			c.pending = append(make([]byte, 0, len(data)), data...)
			return
		}
		if err != nil {
			l.drop(k, "bad packet from the server: "+err.Error())
			return
		}
		data = data[used:]
		l.packet(k, p)
	}
}

// packet handles one packet the server sent device k.
func (l *fleetLoop) packet(k int, p packets.Packet) {
	c := &l.conns[k]
	now := time.Now().UnixNano()
	switch p := p.(type) {
	case *packets.Connack:
		if c.state != devConnack {
			l.drop(k, "CONNACK out of turn")
			return
		}
		if p.ReasonCode != 0 {
			l.drop(k, "CONNACK "+p.ReasonCode.String())
			return
		}
		c.state = devUp
		l.waiting--
		l.stats.connecting.Add(-1)
		l.stats.connected.Add(1)
		l.stats.connectHist.Record(time.Duration(now - c.at))
		for last := l.stats.lastAckAt.Load(); now > last && !l.stats.lastAckAt.CompareAndSwap(last, now); last = l.stats.lastAckAt.Load() {
		}
		l.pings.add(k)
		l.pubs.add(k)
		if l.cfg.Subscribe {
			s := packets.Subscribe{PacketID: 1, Subscriptions: []packets.Subscription{{Filter: l.topic(k, "/in"), QoS: 1}}}
			b, err := packets.AppendPacket(l.out[:0], &s, packets.Version(l.cfg.Version))
			if err != nil {
				l.drop(k, "encode SUBSCRIBE: "+err.Error())
				return
			}
			l.out = b
			l.write(k, b)
		}
	case *packets.Suback:
		if len(p.ReasonCodes) == 1 && p.ReasonCodes[0] < 0x80 {
			l.stats.subscribed.Add(1)
		} else {
			l.stats.note("SUBSCRIBE refused")
		}
	case *packets.Pingresp:
		l.stats.pongs.Add(1)
	case *packets.Puback:
		if c.pubOut && p.PacketID == c.pktID {
			c.pubOut = false
			if p.ReasonCode >= 0x80 {
				l.stats.note("PUBLISH refused: " + p.ReasonCode.String())
				return
			}
			l.stats.acked.Add(1)
			l.stats.publishHist.Record(time.Duration(now - c.pubAt))
		}
	case *packets.Publish:
		l.stats.received.Add(1)
		var b []byte
		var err error
		switch p.QoS {
		case 1:
			b, err = packets.AppendAck(l.out[:0], packets.TypePuback, p.PacketID, 0, nil, packets.Version(l.cfg.Version))
		case 2:
			b, err = packets.AppendAck(l.out[:0], packets.TypePubrec, p.PacketID, 0, nil, packets.Version(l.cfg.Version))
		}
		if err == nil && len(b) > 0 {
			l.out = b
			l.write(k, b)
		}
	case *packets.Pubrel:
		if b, err := packets.AppendAck(l.out[:0], packets.TypePubcomp, p.PacketID, 0, nil, packets.Version(l.cfg.Version)); err == nil {
			l.out = b
			l.write(k, b)
		}
	case *packets.Disconnect:
		l.drop(k, "DISCONNECT "+p.ReasonCode.String())
	}
}

// write sends b on k's socket. The packets are small and the socket's
// buffer is empty unless the server stopped reading: a write that does not
// go whole drops the device.
func (l *fleetLoop) write(k int, b []byte) bool {
	c := &l.conns[k]
	n, err := unix.Write(int(c.fd), b)
	switch {
	case errors.Is(err, unix.EAGAIN):
		l.drop(k, "send buffer full")
		return false
	case err != nil:
		l.drop(k, "write: "+err.Error())
		return false
	case n < len(b):
		l.drop(k, "send buffer full")
		return false
	}
	return true
}

// drop closes k's socket and counts why.
func (l *fleetLoop) drop(k int, reason string) {
	c := &l.conns[k]
	switch c.state {
	case devClosed, devIdle:
		return
	case devTCP, devConnack:
		l.waiting--
		l.stats.connecting.Add(-1)
	}
	l.stats.fail(reason, c.state == devUp)
	unix.Close(int(c.fd))
	c.state, c.pending = devClosed, nil
}

// closeAll ends every connection: DISCONNECT and close for the connected
// devices; the ones still connecting count as failed.
func (l *fleetLoop) closeAll() {
	bye := []byte{byte(packets.TypeDisconnect) << 4, 0}
	for k := range l.conns[:l.next] {
		c := &l.conns[k]
		switch c.state {
		case devUp:
			_, _ = unix.Write(int(c.fd), bye)
			unix.Close(int(c.fd))
			c.state = devClosed
			l.stats.connected.Add(-1)
		case devTCP, devConnack:
			l.drop(k, "stopped before CONNACK")
		}
	}
}
