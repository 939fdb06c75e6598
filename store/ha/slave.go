package ha

import (
	"context"
	"errors"
	"fmt"
	"log/slog"
	"math"
	"net"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/internal/ratelog"
	"github.com/smartgo/smartgo/store"
)

// Client is the slave side of replication: it keeps a connection to the
// master's HA address, appends the streamed commitlog bytes at exactly the
// offsets they come with (AppendRaw; the dispatcher builds consume queues
// and index from them) and reports its end. It reconnects with backoff.
type Client struct {
	s        *store.Store
	opts     Options
	log      *slog.Logger
	rlog     *ratelog.Limiter // lines a failing session repeats
	masterHA func() string

	connected   atomic.Bool
	masterAddr  atomic.Pointer[string] // remoting address from the master's hello
	masterMax   atomic.Int64           // master's end: from its hello, then the highest chunk end seen
	lastContact atomic.Int64           // unix ms of the last byte from the master
	lastErr     atomic.Pointer[error]
	sessions    atomic.Int64

	connMu sync.Mutex
	conn   net.Conn // current connection; protected by connMu

	// Controlled mode: the master's epoch history from its hello, and how
	// many of its entries this log has recorded (owned by the session).
	masterEpochs []store.EpochEntry
	recorded     int
	truncations  atomic.Int64

	cancel    context.CancelFunc
	wg        sync.WaitGroup
	closeOnce sync.Once
}

// StartClient starts replicating into s from the master whose HA address
// masterHA returns (called before every connection attempt; "" waits).
// The store should be used read-only by everything else from now on.
func StartClient(s *store.Store, opts Options, masterHA func() string) (*Client, error) {
	if err := opts.Validate(); err != nil {
		return nil, err
	}
	if masterHA == nil {
		return nil, fmt.Errorf("%w: HA master address function is nil", ErrInvalidOptions)
	}
	opts = opts.withDefaults(s)
	ctx, cancel := context.WithCancel(context.Background())
	c := &Client{s: s, opts: opts, log: opts.Logger, rlog: ratelog.New(0, nil), masterHA: masterHA, cancel: cancel}
	c.masterMax.Store(-1)
	c.wg.Add(1)
	go func() {
		defer c.wg.Done()
		c.run(ctx)
	}()
	return c, nil
}

// Close stops replication and waits for the client's goroutines. It is
// idempotent.
func (c *Client) Close() error {
	c.closeOnce.Do(func() {
		c.cancel()
		c.dropConn()
		c.wg.Wait()
	})
	return nil
}

// Connected reports whether a session with the master is established
// (handshake done, not yet failed).
func (c *Client) Connected() bool { return c.connected.Load() }

// MasterAddr returns the master's remoting address from its last hello,
// or "".
func (c *Client) MasterAddr() string {
	if p := c.masterAddr.Load(); p != nil {
		return *p
	}
	return ""
}

// MasterMaxOffset returns the highest master commitlog end the slave has
// seen (hello or chunk), or -1.
func (c *Client) MasterMaxOffset() int64 { return c.masterMax.Load() }

// LastContact returns when the master last sent something (zero if never).
func (c *Client) LastContact() time.Time {
	if ms := c.lastContact.Load(); ms > 0 {
		return time.UnixMilli(ms)
	}
	return time.Time{}
}

// Err returns the error that ended the last session (nil if none yet).
func (c *Client) Err() error {
	if p := c.lastErr.Load(); p != nil {
		return *p
	}
	return nil
}

// Refusal names why the master refused this slave's last session, while
// no session is up: "mismatch" (another group, another segment size),
// "slave-ahead", "slave-behind", "diverged" or "protocol"; "" otherwise
// (replicating, never tried, or a session that ended for another reason:
// a lost connection, a full disk). A refused slave keeps its data and
// retries every ReconnectMax; it needs an operator.
func (c *Client) Refusal() string {
	if c.connected.Load() {
		return ""
	}
	return refusalOf(c.Err())
}

// refusals are the refusals Refusal names, with the error each is: one
// table for the names and their errors (Refusals is its names).
var refusals = []struct {
	name string
	err  error
}{
	{"mismatch", ErrMismatch},
	{"slave-ahead", ErrSlaveAhead},
	{"slave-behind", ErrSlaveBehind},
	{"diverged", ErrDiverged},
	{"protocol", ErrProtocol},
}

// Refusals are the names Refusal gives.
var Refusals = func() []string {
	names := make([]string, len(refusals))
	for i, r := range refusals {
		names[i] = r.name
	}
	return names
}()

// refusalOf names the refusal err is (see Refusal), or "".
func refusalOf(err error) string {
	for _, r := range refusals {
		if errors.Is(err, r.err) {
			return r.name
		}
	}
	return ""
}

// Sessions returns how many sessions passed the handshake.
func (c *Client) Sessions() int64 { return c.sessions.Load() }

// DropConnection closes the current session (tests and operators); the
// client reconnects after its backoff.
func (c *Client) DropConnection() { c.dropConn() }

func (c *Client) dropConn() {
	c.connMu.Lock()
	if c.conn != nil {
		_ = c.conn.Close()
	}
	c.connMu.Unlock()
}

func (c *Client) run(ctx context.Context) {
	backoff := c.opts.ReconnectMin
	for ctx.Err() == nil {
		addr := c.masterHA()
		if addr != "" {
			before := c.sessions.Load()
			err := c.session(ctx, addr)
			c.connected.Store(false)
			if ctx.Err() != nil {
				return
			}
			c.lastErr.Store(&err)
			refused := refusalOf(err) != ""
			switch {
			case errors.Is(err, store.ErrDiskFull):
				// This store refuses the master's bytes: connecting again
				// before it has room would only be refused again, several
				// times a second on both sides, for as long as the disk
				// stays full.
				c.rlog.Log(c.log, slog.LevelWarn, "disk full", "ha: this slave's disk is full; replication waits for space",
					"master", addr, "err", err)
				if !c.waitWritable(ctx) {
					return
				}
				backoff = c.opts.ReconnectMin
				continue
			case errors.Is(err, ErrStaleEpoch):
				// The master may not know yet that it was elected.
				c.log.Info("ha: master not at the expected epoch yet; retrying", "master", addr, "err", err)
				backoff = c.opts.ReconnectMin
			case refused:
				c.log.Error("ha: replication refused; the slave keeps its data and retries", "master", addr, "err", err)
				backoff = c.opts.ReconnectMax
			default:
				c.rlog.Log(c.log, slog.LevelWarn, "lost", "ha: connection to master lost", "master", addr, "err", err)
				if c.sessions.Load() != before {
					backoff = c.opts.ReconnectMin // it worked for a while: retry soon
				}
			}
		}
		select {
		case <-ctx.Done():
			return
		case <-time.After(backoff):
		}
		if addr != "" {
			backoff = min(2*backoff, c.opts.ReconnectMax)
		}
	}
}

// waitWritable waits until the store takes writes again (its disk
// watcher sees room), checking every ReconnectMin; false when ctx ended.
func (c *Client) waitWritable(ctx context.Context) bool {
	for {
		if refused, _ := c.s.WritesRefused(); !refused {
			c.log.Info("ha: this slave's disk has room again; replication resumes")
			return true
		}
		select {
		case <-ctx.Done():
			return false
		case <-time.After(c.opts.ReconnectMin):
		}
	}
}

// session runs one connection to the master until it fails.
func (c *Client) session(ctx context.Context, addr string) error {
	d := net.Dialer{Timeout: 3 * time.Second}
	conn, err := d.DialContext(ctx, "tcp", addr)
	if err != nil {
		return fmt.Errorf("ha: dial %s: %w", addr, err)
	}
	c.connMu.Lock()
	c.conn = conn
	c.connMu.Unlock()
	stop := context.AfterFunc(ctx, func() { _ = conn.Close() })
	defer stop()
	defer func() {
		c.connMu.Lock()
		c.conn = nil
		c.connMu.Unlock()
		_ = conn.Close()
	}()

	_ = conn.SetDeadline(time.Now().Add(handshakeTimeout))
	me := Hello{SegmentSize: c.s.Options().SegmentSize, MinOffset: c.s.MinPhysicalOffset(), MaxOffset: c.s.MaxPhysicalOffset(),
		BrokerName: c.opts.BrokerName, BrokerAddr: c.opts.BrokerAddr, Controlled: c.opts.Controlled, BrokerID: c.opts.BrokerID, Epoch: c.opts.Epoch}
	buf, err := AppendHello(nil, me)
	if err != nil {
		return err
	}
	if _, err := conn.Write(buf); err != nil {
		return fmt.Errorf("ha: write hello: %w", err)
	}
	peer, err := readHello(conn)
	if err != nil {
		return err
	}
	if err := checkPeer(me, peer); err != nil {
		return fmt.Errorf("master %s: %w", addr, err)
	}
	if me.Controlled {
		if peer.Epoch < me.Epoch {
			return fmt.Errorf("master %s: %w: it is at epoch %d, the controller elected epoch %d", addr, ErrStaleEpoch, peer.Epoch, me.Epoch)
		}
		if err := c.converge(peer); err != nil {
			return fmt.Errorf("master %s: %w", addr, err)
		}
		me.MaxOffset = c.s.MaxPhysicalOffset()
	}
	switch {
	case me.MaxOffset > peer.MaxOffset:
		return fmt.Errorf("master %s: %w: slave ends at %d, master at %d", addr, ErrSlaveAhead, me.MaxOffset, peer.MaxOffset)
	case me.MaxOffset != 0 && me.MaxOffset < peer.MinOffset:
		return fmt.Errorf("master %s: %w: slave ends at %d, master starts at %d", addr, ErrSlaveBehind, me.MaxOffset, peer.MinOffset)
	}
	c.masterAddr.Store(&peer.BrokerAddr)
	c.masterMax.Store(peer.MaxOffset)
	_ = conn.SetDeadline(time.Time{})

	var wmu sync.Mutex
	report := func() error {
		wmu.Lock()
		defer wmu.Unlock()
		_ = conn.SetWriteDeadline(time.Now().Add(c.opts.IdleTimeout))
		_, err := conn.Write(AppendReport(nil, c.s.MaxPhysicalOffset()))
		return err
	}
	if err := report(); err != nil {
		return fmt.Errorf("ha: report: %w", err)
	}
	c.connected.Store(true)
	c.sessions.Add(1)
	if c.opts.OnConnected != nil {
		c.opts.OnConnected()
	}
	c.lastContact.Store(time.Now().UnixMilli())
	c.log.Info("ha: connected to master", "master", addr, "masterAddr", peer.BrokerAddr,
		"slaveEnd", me.MaxOffset, "masterEnd", peer.MaxOffset)

	// Heartbeat reports, owned by this session.
	hbDone := make(chan struct{})
	var hbWG sync.WaitGroup
	hbWG.Add(1)
	go func() {
		defer hbWG.Done()
		t := time.NewTicker(c.opts.HeartbeatInterval)
		defer t.Stop()
		for {
			select {
			case <-hbDone:
				return
			case <-t.C:
				if report() != nil {
					_ = conn.Close()
					return
				}
			}
		}
	}()
	defer func() {
		close(hbDone)
		hbWG.Wait()
	}()
	return c.receive(conn, report)
}

// receive reads chunks and applies them until the connection fails.
func (c *Client) receive(conn net.Conn, report func() error) error {
	buf := make([]byte, ChunkHeaderSize+MaxChunk)
	n := 0
	for {
		_ = conn.SetReadDeadline(time.Now().Add(c.opts.IdleTimeout))
		m, err := conn.Read(buf[n:])
		if m > 0 {
			c.lastContact.Store(time.Now().UnixMilli())
		}
		n += m
		applied := false
		used, perr := ParseChunks(buf[:n], func(off int64, data []byte) error {
			if err := c.apply(off, data); err != nil {
				return err
			}
			applied = applied || len(data) > 0
			return nil
		})
		copy(buf, buf[used:n])
		n -= used
		if applied {
			if err := report(); err != nil {
				return fmt.Errorf("ha: report: %w", err)
			}
		}
		if perr != nil {
			return perr
		}
		if err != nil {
			return fmt.Errorf("ha: read: %w", err)
		}
	}
}

// apply appends one chunk (or checks a heartbeat) at the slave's end.
func (c *Client) apply(off int64, data []byte) error {
	end := c.s.MaxPhysicalOffset()
	if end != 0 && off != end {
		return fmt.Errorf("%w: chunk at %d, slave ends at %d", ErrOffsetMismatch, off, end)
	}
	if e := off + int64(len(data)); e > c.masterMax.Load() {
		c.masterMax.Store(e)
	}
	if len(data) == 0 {
		return nil
	}
	if err := c.s.AppendRaw(off, data); err != nil {
		return fmt.Errorf("ha: append %d bytes at %d: %w", len(data), off, err)
	}
	return c.recordEpochs()
}

// converge (controlled mode) cuts this log where it stops matching the
// master's (the tail an old master wrote that this one never had), then
// records the master's epochs the log covers and lets consumers see all of
// it: a slave's log is its master's.
func (c *Client) converge(peer Hello) error {
	local, end := c.s.Epochs(), c.s.MaxPhysicalOffset()
	point := store.ConsistentOffset(local, end, peer.Epochs, peer.MaxOffset)
	if point < end {
		if point < c.s.MinPhysicalOffset() {
			return fmt.Errorf("%w: logs agree up to %d, this log starts at %d", ErrDiverged, point, c.s.MinPhysicalOffset())
		}
		c.log.Warn("ha: cutting the log tail the new master does not have", "at", point, "end", end, "bytes", end-point,
			"masterEpoch", peer.Epoch, "localEpochs", local, "masterEpochs", peer.Epochs)
		if err := c.s.TruncateTail(point); err != nil {
			return fmt.Errorf("ha: truncate to %d: %w", point, err)
		}
		c.truncations.Add(1)
		if c.opts.OnTruncate != nil {
			if err := c.opts.OnTruncate(point); err != nil {
				return fmt.Errorf("ha: after truncating to %d: %w", point, err)
			}
		}
	}
	c.s.SetDispatchLimit(math.MaxInt64)
	c.masterEpochs, c.recorded = peer.Epochs, 0
	return c.recordEpochs()
}

// recordEpochs adds the master's epochs this log has reached to its own
// history (controlled mode).
func (c *Client) recordEpochs() error {
	end := c.s.MaxPhysicalOffset()
	for c.recorded < len(c.masterEpochs) && c.masterEpochs[c.recorded].StartOffset <= end {
		if err := c.s.RecordEpoch(c.masterEpochs[c.recorded]); err != nil {
			return fmt.Errorf("ha: record epoch: %w", err)
		}
		c.recorded++
	}
	return nil
}

// Truncations returns how many times the client cut the log to match a
// master (controlled mode).
func (c *Client) Truncations() int64 { return c.truncations.Load() }
