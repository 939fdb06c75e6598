package ha

import (
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"log/slog"
	"net"
	"sort"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/internal/ratelog"
	"github.com/smartgo/smartgo/internal/wake"
	"github.com/smartgo/smartgo/store"
)

// HA defaults (RocketMQ 4.x values).
const (
	DefaultHeartbeatInterval = 5 * time.Second  // haSendHeartbeatInterval
	DefaultIdleTimeout       = 20 * time.Second // haHousekeepingInterval
	DefaultFallBehindMax     = 256 << 20        // haSlaveFallbehindMax
	DefaultReconnectMin      = 200 * time.Millisecond
	DefaultReconnectMax      = 5 * time.Second
	pollInterval             = 100 * time.Millisecond // safety net when no Notify comes
	handshakeTimeout         = 10 * time.Second
)

// Options configures both ends of replication. Zero fields take the
// defaults above.
type Options struct {
	// BrokerName is the broker group; master and slave must agree.
	BrokerName string
	// BrokerAddr is this broker's advertised remoting address, sent in
	// the handshake: a slave copies its master's metadata from the
	// master's, and a master tells a slave at its address that the
	// metadata changed (Slave.BrokerAddr).
	BrokerAddr string
	// HeartbeatInterval: the master sends an empty chunk, and the slave a
	// report, after this long without traffic (default 5 s).
	HeartbeatInterval time.Duration
	// IdleTimeout: either side closes a connection silent this long
	// (default 20 s).
	IdleTimeout time.Duration
	// FallBehindMax: a slave further behind than this does not count as
	// available for sync replication (default 256 MiB).
	FallBehindMax int64
	// ReconnectMin and ReconnectMax bound the slave's reconnect backoff
	// (defaults 200 ms and 5 s).
	ReconnectMin, ReconnectMax time.Duration
	// Controlled turns on the epoch extension (a controller elects the
	// master; see wire.go): BrokerID is this broker's controller id, Epoch
	// the master epoch (a master's own; the one a slave was told to
	// follow).
	Controlled bool
	BrokerID   int64
	Epoch      int32
	// OnTruncate (controlled slave) is called after the slave cut its log
	// to match the master's, before it appends anything; an error ends
	// the session.
	OnTruncate func(offset int64) error
	// OnConnected (slave) is called after each handshake with the master,
	// on the session's goroutine; it must not block (the broker copies
	// the master's metadata then: changes noticed while disconnected).
	OnConnected func()
	// Logger, nil = the store's logger.
	Logger *slog.Logger
}

// DefaultOptions returns the defaults (BrokerName, BrokerAddr and Logger
// are the caller's).
func DefaultOptions() Options {
	return Options{HeartbeatInterval: DefaultHeartbeatInterval, IdleTimeout: DefaultIdleTimeout,
		FallBehindMax: DefaultFallBehindMax, ReconnectMin: DefaultReconnectMin, ReconnectMax: DefaultReconnectMax}
}

func (o Options) withDefaults(s *store.Store) Options {
	if o.HeartbeatInterval <= 0 {
		o.HeartbeatInterval = DefaultHeartbeatInterval
	}
	if o.IdleTimeout <= 0 {
		o.IdleTimeout = DefaultIdleTimeout
	}
	if o.FallBehindMax <= 0 {
		o.FallBehindMax = DefaultFallBehindMax
	}
	if o.ReconnectMin <= 0 {
		o.ReconnectMin = DefaultReconnectMin
	}
	if o.ReconnectMax < o.ReconnectMin {
		o.ReconnectMax = max(DefaultReconnectMax, o.ReconnectMin)
	}
	if o.Logger == nil {
		o.Logger = s.Options().Logger
	}
	return o
}

// Validate checks the options.
func (o Options) Validate() error {
	switch {
	case o.BrokerName == "" || len(o.BrokerName) > maxString || len(o.BrokerAddr) > maxString:
		return fmt.Errorf("%w: HA BrokerName must be 1..255 bytes, BrokerAddr at most 255", ErrInvalidOptions)
	case o.HeartbeatInterval < 0 || o.IdleTimeout < 0 || o.ReconnectMin < 0 || o.ReconnectMax < 0 || o.FallBehindMax < 0:
		return fmt.Errorf("%w: negative HA interval or size", ErrInvalidOptions)
	case o.IdleTimeout > 0 && o.HeartbeatInterval >= o.IdleTimeout:
		return fmt.Errorf("%w: HA HeartbeatInterval %v must be below IdleTimeout %v", ErrInvalidOptions, o.HeartbeatInterval, o.IdleTimeout)
	}
	return nil
}

// Server is the master side of replication: it accepts slaves on a
// listener and streams the commitlog to each from the offset it reports.
type Server struct {
	s    *store.Store
	opts Options
	log  *slog.Logger
	rlog *ratelog.Limiter // lines a slave (or any peer of the port) can repeat
	ln   net.Listener

	data wake.Notifier // new commitlog bytes
	acks wake.Notifier // a slave's ack moved, or a slave came or went

	mu    sync.Mutex
	conns map[*slaveConn]struct{} // protected by mu

	// Controlled mode: the sync state set whose acks a write waits for.
	syncMu    sync.Mutex
	syncSet   []int64         // member ids other than this broker; protected by syncMu
	confirmed int             // members the controller holds (this broker included); protected by syncMu
	minInSync int             // fewest members (this broker included); protected by syncMu
	acked     map[int64]int64 // highest end each broker id reported; protected by syncMu
	limit     int64           // dispatch limit last set; protected by syncMu

	// Writes waiting for acknowledgements (WhenAcked), answered by
	// ackLoop; see acks.go. waitMu is taken before mu and syncMu, never
	// after.
	waitMu   sync.Mutex
	waiters  []ackWaiter   // in registration order; protected by waitMu
	waitKick chan struct{} // cap 1: a waiter was added to an empty list

	done      chan struct{}
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// slaveConn is one connected slave.
type slaveConn struct {
	c         net.Conn
	addr      string
	since     time.Time
	remoting  atomic.Pointer[string] // the slave's remoting address from its hello
	brokerID  atomic.Int64           // controlled mode: the slave's broker id
	ack       atomic.Int64           // the slave's last reported end
	sent      atomic.Int64           // next offset to send
	caughtUp  atomic.Int64           // unix ns: the slave had everything the master had then
	closeOnce sync.Once
	done      chan struct{}

	sampleMu sync.Mutex
	samples  [64]endSample // master ends over time, a ring; protected by sampleMu
	nSample  int           // samples written; protected by sampleMu
}

// endSample is the master's log end at a moment.
type endSample struct {
	end int64
	at  int64 // unix ns
}

// sample records the master's end now (at most every 5 ms).
func (c *slaveConn) sample(end int64, now time.Time) {
	c.sampleMu.Lock()
	defer c.sampleMu.Unlock()
	if c.nSample > 0 {
		last := c.samples[(c.nSample-1)%len(c.samples)]
		if last.end == end || now.UnixNano()-last.at < int64(5*time.Millisecond) {
			return
		}
	}
	c.samples[c.nSample%len(c.samples)] = endSample{end, now.UnixNano()}
	c.nSample++
}

// reached notes that the slave reported ack: it then has everything the
// master had at the newest sample not beyond ack.
func (c *slaveConn) reached(ack, masterEnd int64, now time.Time) {
	at := int64(0)
	if ack >= masterEnd {
		at = now.UnixNano()
	} else {
		c.sampleMu.Lock()
		for i := c.nSample - 1; i >= 0 && i >= c.nSample-len(c.samples); i-- {
			if sm := c.samples[i%len(c.samples)]; sm.end <= ack {
				at = sm.at
				break
			}
		}
		c.sampleMu.Unlock()
	}
	for {
		cur := c.caughtUp.Load()
		if at <= cur || c.caughtUp.CompareAndSwap(cur, at) {
			return
		}
	}
}

func (c *slaveConn) close() {
	c.closeOnce.Do(func() {
		close(c.done)
		_ = c.c.Close()
	})
}

// Slave describes a connected slave.
type Slave struct {
	Addr      string    // remote address of the HA connection
	AckOffset int64     // the slave's commitlog end as last reported
	Since     time.Time // when it connected
	// BrokerID (controlled mode) is the slave's broker id; CaughtUp the
	// latest moment whose master log the slave has entirely (zero if
	// none yet).
	BrokerID int64
	CaughtUp time.Time
	// BrokerAddr is the slave's remoting address from its hello ("" from
	// a slave older than the metadata change notice).
	BrokerAddr string
}

// Serve starts the master side of replication for s on ln (which the
// server owns from now on). Close the server before the store.
func Serve(s *store.Store, ln net.Listener, opts Options) (*Server, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	opts = opts.withDefaults(s)
	h := &Server{s: s, opts: opts, log: opts.Logger, rlog: ratelog.New(0, nil), ln: ln,
		conns: make(map[*slaveConn]struct{}), done: make(chan struct{}), acked: map[int64]int64{}, limit: -1,
		waitKick: make(chan struct{}, 1)}
	h.wg.Add(2)
	go func() {
		defer h.wg.Done()
		h.acceptLoop()
	}()
	go func() {
		defer h.wg.Done()
		h.ackLoop()
	}()
	h.log.Info("ha: master listening", "addr", ln.Addr().String())
	return h, nil
}

// Addr returns the listener's address.
func (h *Server) Addr() net.Addr { return h.ln.Addr() }

// Notify tells the senders that the commitlog grew. Cheap when nobody
// waits; the broker calls it after puts.
func (h *Server) Notify() { h.data.Notify() }

// Close stops accepting, closes every slave connection and waits for the
// server's goroutines. It is idempotent.
func (h *Server) Close() error {
	var err error
	h.closeOnce.Do(func() {
		close(h.done)
		err = h.ln.Close()
		h.mu.Lock()
		for c := range h.conns {
			c.close()
		}
		h.mu.Unlock()
		h.wg.Wait()
		if errors.Is(err, net.ErrClosed) {
			err = nil
		}
	})
	return err
}

func (h *Server) acceptLoop() {
	for {
		c, err := h.ln.Accept()
		if err != nil {
			select {
			case <-h.done:
				return
			default:
			}
			h.log.Warn("ha: accept", "err", err)
			select {
			case <-h.done:
				return
			case <-time.After(50 * time.Millisecond):
			}
			continue
		}
		hc := &slaveConn{c: c, addr: c.RemoteAddr().String(), since: time.Now(), done: make(chan struct{})}
		hc.ack.Store(-1)
		h.mu.Lock()
		select {
		case <-h.done:
			h.mu.Unlock()
			_ = c.Close()
			return
		default:
		}
		h.conns[hc] = struct{}{}
		h.mu.Unlock()
		h.wg.Add(1)
		go func() {
			defer h.wg.Done()
			err := h.serve(hc)
			hc.close()
			h.mu.Lock()
			delete(h.conns, hc)
			h.mu.Unlock()
			h.acks.Notify()
			select {
			case <-h.done:
			default:
				h.rlog.Log(h.log, slog.LevelWarn, "slave disconnected", "ha: slave disconnected", "slave", hc.addr, "err", err)
			}
		}()
	}
}

// serve runs one slave connection: handshake, start point, then a report
// reader goroutine and the chunk writer (this goroutine).
func (h *Server) serve(hc *slaveConn) error {
	_ = hc.c.SetDeadline(time.Now().Add(handshakeTimeout))
	peer, err := readHello(hc.c)
	if err != nil {
		return err
	}
	me := Hello{SegmentSize: h.s.Options().SegmentSize, MinOffset: h.s.MinPhysicalOffset(), MaxOffset: h.s.MaxPhysicalOffset(),
		BrokerName: h.opts.BrokerName, BrokerAddr: h.opts.BrokerAddr,
		Controlled: h.opts.Controlled, BrokerID: h.opts.BrokerID, Epoch: h.opts.Epoch}
	if me.Controlled {
		me.Epochs = h.s.Epochs()
		if n := len(me.Epochs); n > MaxHelloEpochs {
			me.Epochs = me.Epochs[n-MaxHelloEpochs:]
		}
	}
	buf, err := AppendHello(nil, me)
	if err != nil {
		return err
	}
	if _, err := hc.c.Write(buf); err != nil {
		return fmt.Errorf("ha: write hello: %w", err)
	}
	if err := checkPeer(me, peer); err != nil {
		h.log.Error("ha: refused slave", "slave", hc.addr, "err", err)
		return err
	}
	if me.Controlled && peer.Epoch > me.Epoch {
		err := fmt.Errorf("%w: slave %d follows master epoch %d, this master is at epoch %d", ErrStaleEpoch, peer.BrokerID, peer.Epoch, me.Epoch)
		h.log.Warn("ha: refused slave of a newer master", "slave", hc.addr, "err", err)
		return err
	}
	hc.brokerID.Store(peer.BrokerID)
	hc.remoting.Store(&peer.BrokerAddr)
	var rb [ReportSize]byte
	if _, err := io.ReadFull(hc.c, rb[:]); err != nil {
		return fmt.Errorf("ha: first report: %w", err)
	}
	report := int64(binary.BigEndian.Uint64(rb[:]))
	start, err := h.startOffset(report)
	if err != nil {
		h.log.Error("ha: refused slave", "slave", hc.addr, "err", err)
		return err
	}
	hc.ack.Store(report)
	hc.sent.Store(start)
	h.noteAck(hc, report)
	h.log.Info("ha: slave connected", "slave", hc.addr, "id", peer.BrokerID, "report", report, "start", start)
	_ = hc.c.SetDeadline(time.Time{})

	h.wg.Add(1)
	go func() {
		defer h.wg.Done()
		defer hc.close()
		h.readReports(hc)
	}()
	return h.writeChunks(hc, start)
}

// startOffset picks where streaming starts for a slave's first report.
func (h *Server) startOffset(report int64) (int64, error) {
	maxOff, minOff := h.s.MaxPhysicalOffset(), h.s.MinPhysicalOffset()
	switch {
	case report == 0:
		return h.s.LastSegmentOffset(), nil
	case report > maxOff:
		return 0, fmt.Errorf("%w: slave at %d, master ends at %d", ErrSlaveAhead, report, maxOff)
	case report < minOff:
		return 0, fmt.Errorf("%w: slave at %d, master starts at %d", ErrSlaveBehind, report, minOff)
	}
	return report, nil
}

// checkPeer compares the two hellos of a handshake.
func checkPeer(me, peer Hello) error {
	if me.BrokerName != peer.BrokerName {
		return fmt.Errorf("%w: broker name %q, this broker is %q", ErrMismatch, peer.BrokerName, me.BrokerName)
	}
	if me.SegmentSize != peer.SegmentSize {
		return fmt.Errorf("%w: segment size %d, this broker uses %d", ErrMismatch, peer.SegmentSize, me.SegmentSize)
	}
	if me.Controlled != peer.Controlled {
		return fmt.Errorf("%w: one side has its master elected by a controller, the other not", ErrMismatch)
	}
	return nil
}

// readHello reads one hello from r.
func readHello(r io.Reader) (Hello, error) {
	buf := make([]byte, 0, 128)
	tmp := make([]byte, 64)
	for {
		h, _, err := DecodeHello(buf)
		if err == nil {
			return h, nil
		}
		if !errors.Is(err, errShort) {
			return h, err
		}
		if len(buf) > maxHelloSize {
			return h, fmt.Errorf("%w: hello too long", ErrProtocol)
		}
		// Read at most what the hello still needs, so no stream bytes
		// after it are swallowed.
		need := helloNeed(buf)
		if cap(tmp) < need-len(buf) {
			tmp = make([]byte, min(need-len(buf), maxHelloSize))
		}
		n, err := r.Read(tmp[:min(len(tmp), need-len(buf))])
		buf = append(buf, tmp[:n]...)
		if err != nil && n == 0 {
			return h, fmt.Errorf("ha: read hello: %w", err)
		}
	}
}

// readReports updates the slave's ack from its 8-byte reports until the
// connection fails or stays silent for IdleTimeout.
func (h *Server) readReports(hc *slaveConn) {
	var rb [ReportSize]byte
	for {
		_ = hc.c.SetReadDeadline(time.Now().Add(h.opts.IdleTimeout))
		if _, err := io.ReadFull(hc.c, rb[:]); err != nil {
			return
		}
		off := int64(binary.BigEndian.Uint64(rb[:]))
		if off > hc.ack.Load() {
			hc.ack.Store(off)
		}
		h.noteAck(hc, off)
	}
}

// noteAck records a slave's report: caught-up time, the per-id ack and
// the confirm offset (controlled mode), and wakes the waiters.
func (h *Server) noteAck(hc *slaveConn, off int64) {
	hc.reached(off, h.s.MaxPhysicalOffset(), time.Now())
	if h.opts.Controlled {
		id := hc.brokerID.Load()
		h.syncMu.Lock()
		if off > h.acked[id] {
			h.acked[id] = off
		}
		h.updateLimitLocked()
		h.syncMu.Unlock()
	}
	h.acks.Notify()
}

// writeChunks streams the commitlog from pos until the connection ends.
func (h *Server) writeChunks(hc *slaveConn, pos int64) error {
	hdr := make([]byte, 0, ChunkHeaderSize)
	lastWrite := time.Now()
	timer := time.NewTimer(pollInterval)
	defer timer.Stop()
	for {
		wake := h.data.Wait()
		hc.sample(h.s.MaxPhysicalOffset(), time.Now())
		r, err := h.s.ReadRaw(pos, TransferBatch)
		if err != nil {
			return fmt.Errorf("ha: read at %d: %w", pos, err)
		}
		if n := r.TotalBytes; n > 0 || time.Since(lastWrite) >= h.opts.HeartbeatInterval {
			hdr = AppendChunkHeader(hdr[:0], pos, n)
			bufs := net.Buffers{hdr}
			bufs = append(bufs, r.Buffers...)
			_ = hc.c.SetWriteDeadline(time.Now().Add(h.opts.IdleTimeout))
			_, err := bufs.WriteTo(hc.c)
			r.Release() // resets r
			if err != nil {
				return fmt.Errorf("ha: write: %w", err)
			}
			pos += int64(n)
			hc.sent.Store(pos)
			lastWrite = time.Now()
			if n > 0 {
				continue
			}
		} else {
			r.Release()
		}
		timer.Reset(min(pollInterval, h.opts.HeartbeatInterval))
		select {
		case <-wake:
		case <-timer.C:
		case <-hc.done:
			return errors.New("ha: connection closed")
		case <-h.done:
			return ErrClosed
		}
		if !timer.Stop() {
			select {
			case <-timer.C:
			default:
			}
		}
	}
}

// Slaves returns the connected slaves (those past the handshake), sorted
// by address.
func (h *Server) Slaves() []Slave {
	h.mu.Lock()
	out := make([]Slave, 0, len(h.conns))
	for c := range h.conns {
		if a := c.ack.Load(); a >= 0 {
			sl := Slave{Addr: c.addr, AckOffset: a, Since: c.since, BrokerID: c.brokerID.Load()}
			if p := c.remoting.Load(); p != nil {
				sl.BrokerAddr = *p
			}
			if ns := c.caughtUp.Load(); ns > 0 {
				sl.CaughtUp = time.Unix(0, ns)
			}
			out = append(out, sl)
		}
	}
	h.mu.Unlock()
	sort.Slice(out, func(i, j int) bool { return out[i].Addr < out[j].Addr })
	return out
}

// AckOffset returns the highest end any connected slave reported, and
// false when no slave is connected.
func (h *Server) AckOffset() (int64, bool) {
	best, ok := int64(-1), false
	for _, s := range h.Slaves() {
		if s.AckOffset > best {
			best, ok = s.AckOffset, true
		}
	}
	return best, ok
}
