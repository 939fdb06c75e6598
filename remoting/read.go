package remoting

import (
	"context"
	"encoding/binary"
	"errors"
	"fmt"
	"io"
	"os"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/remoting/protocol"
)

// readLoop is the read side of a server connection: its own goroutine reads
// and serves frames until the connection fails.
func (c *Conn) readLoop() error {
	max := int(c.opts.MaxFrameSize)
	idle := c.opts.IdleTimeout
	if idle > 0 {
		c.touchIdle(time.Now())
	}
	for {
		if _, _, err := c.serveBuffered(max); err != nil {
			return err
		}
		if idle > 0 && !c.idleAt.Equal(c.dlSet) {
			if err := c.nc.SetReadDeadline(c.idleAt); err != nil {
				return err
			}
			c.dlSet = c.idleAt
		}
		if err := c.rb.fill(c.nc, max); err != nil {
			return c.readErr(err, c.rb.partial())
		}
	}
}

// Socket deadlines are moved lazily: setting one costs about as much as a
// small read, so a deadline for timeout d is set to now + d + slack and
// left alone until less than d remains. Timeouts thus fire between d and
// d + slack after the last activity, and the deadline moves at most once
// per slack instead of once per frame.
func deadlineSlack(d time.Duration) time.Duration { return min(d/16, 100*time.Millisecond) }

// touchIdle moves the idle deadline after frames completed at now.
func (c *Conn) touchIdle(now time.Time) {
	d := c.opts.IdleTimeout
	if now.Add(d).After(c.idleAt) {
		c.idleAt = now.Add(d + deadlineSlack(d))
	}
}

// Received frames are read straight into chunks of at least readChunk
// bytes and decoded in place: a received Body aliases its chunk. A chunk is
// reference counted: the reader holds one reference while it reads into
// it, and every command decoded from it holds one until Recycle (see
// protocol.Command.Recycle). Commands nobody recycles keep their chunk
// from ever being reused; it is then garbage collected like any slice.
//
// Bytes of a chunk that the reader has consumed are written again only
// when no command holds a reference: then a chunk of the standard size is
// reused in place (read from its start again, or its partial frame moved
// to the front), and a chunk whose last reference is dropped elsewhere
// goes back to chunkPool. Otherwise a frame that does not fit the rest of
// the chunk moves, with its bytes read so far, to another chunk from the
// pool (a new one sized for it if it is larger than readChunk).
const (
	readChunk   = 64 << 10
	readMinRoom = 4 << 10 // below this much room, room is made before reading
)

// chunk is a reference-counted read buffer.
type chunk struct {
	buf  []byte
	refs atomic.Int32
}

// chunkPool holds chunks of readChunk bytes whose references were all
// dropped.
var chunkPool sync.Pool

// chunksMade counts the chunks allocated (not taken from chunkPool), for
// tests.
var chunksMade atomic.Int64

// getChunk returns a chunk of at least size bytes holding one reference.
func getChunk(size int) *chunk {
	if size <= readChunk {
		if k, ok := chunkPool.Get().(*chunk); ok {
			k.refs.Store(1)
			return k
		}
		size = readChunk
	}
	chunksMade.Add(1)
	k := &chunk{buf: make([]byte, size)}
	k.refs.Store(1)
	return k
}

// Unref drops one reference; the last one returns a standard-size chunk to
// the pool. It implements protocol.BufferRef.
func (k *chunk) Unref() {
	switch n := k.refs.Add(-1); {
	case n == 0:
		if len(k.buf) == readChunk {
			chunkPool.Put(k)
		}
	case n < 0:
		panic("remoting: read chunk released more often than referenced")
	}
}

// readBuf is the read loop's buffer: buf[r:w] of chunk k are read but not
// consumed.
type readBuf struct {
	k    *chunk // the reader holds one reference; nil before the first fill
	buf  []byte // k.buf
	r, w int
}

// partial reports whether part of a frame is buffered.
func (b *readBuf) partial() bool { return b.w > b.r }

// next returns the next whole buffered frame without its length word, or
// nil if none is complete. The length word is checked against max before
// anything is allocated for it.
func (b *readBuf) next(max int) ([]byte, error) {
	avail := b.w - b.r
	if avail < 4 {
		return nil, nil
	}
	n, err := protocol.FrameLength(binary.BigEndian.Uint32(b.buf[b.r:]), max)
	if err != nil {
		return nil, err
	}
	if avail-4 < n {
		return nil, nil
	}
	start := b.r + 4
	b.r = start + n
	return b.buf[start:b.r:b.r], nil
}

// decode decodes a frame returned by next; the command holds a reference
// to the chunk until it is recycled.
func (b *readBuf) decode(frame []byte) (*protocol.Command, error) {
	cmd, err := protocol.DecodeFrameRef(frame, b.k)
	if err == nil {
		b.k.refs.Add(1)
	}
	return cmd, err
}

// sole reports whether the reader holds the only reference to a
// standard-size chunk, whose consumed bytes may then be overwritten. Only
// the reader adds references, so the answer cannot turn false until it
// decodes again; the atomic load orders the releasers' last reads before
// the reader's next writes.
func (b *readBuf) sole() bool {
	return b.k != nil && len(b.buf) == readChunk && b.k.refs.Load() == 1
}

// fill reads at least one byte, first making room for the frame under way:
// in place when no command references the chunk, else by moving the
// unconsumed bytes to another chunk.
func (b *readBuf) fill(r io.Reader, max int) error {
	need := readMinRoom // room wanted after w
	if avail := b.w - b.r; avail >= 4 {
		// A partial frame whose length was checked by next: make room for
		// all of it.
		n, err := protocol.FrameLength(binary.BigEndian.Uint32(b.buf[b.r:]), max)
		if err != nil {
			return err
		}
		need = 4 + n - avail
	}
	if b.r > 0 && (b.r == b.w || len(b.buf)-b.w < need) && b.sole() {
		keep := b.w - b.r
		if keep+need <= len(b.buf) {
			b.w = copy(b.buf, b.buf[b.r:b.w])
			b.r = 0
		}
	}
	if len(b.buf)-b.w < need {
		nk := getChunk(b.w - b.r + need)
		b.w = copy(nk.buf, b.buf[b.r:b.w])
		b.r = 0
		if b.k != nil {
			b.k.Unref()
		}
		b.k, b.buf = nk, nk.buf
	}
	n, err := r.Read(b.buf[b.w:])
	b.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// release drops the reader's reference; the buffer is not used again.
func (b *readBuf) release() {
	if b.k != nil {
		b.k.Unref()
	}
	*b = readBuf{}
}

func (c *Conn) readErr(err error, midFrame bool) error {
	if errors.Is(err, os.ErrDeadlineExceeded) {
		if midFrame {
			return fmt.Errorf("%w: frame not complete within %v", ErrIdle, c.opts.IdleTimeout)
		}
		return fmt.Errorf("%w: no frame for %v", ErrIdle, c.opts.IdleTimeout)
	}
	if midFrame && errors.Is(err, io.EOF) {
		return io.ErrUnexpectedEOF
	}
	return err
}

// Shared reading (client connections).
//
// A dedicated reader hands every response to its caller, which costs a
// goroutine wake-up per call. On client connections the right to read is a
// token instead: a caller that finds no one reading after sending its
// request reads itself (the "leader") and is woken by its own response,
// serving whatever else arrives meanwhile. A leader done with its own call
// passes the token to the longest-waiting caller, or else releases it; the
// background goroutine (serveShared) reads whenever no caller does: at
// once when async calls are pending, otherwise after standbyDelay without a
// leader, so that a caller calling again soon finds the token free. Server
// requests and the peer's close are thus noticed within standbyDelay at
// worst while callers come and go.
const standbyDelay = 500 * time.Microsecond

// errKicked reports a read interrupted without a reason of the reader's
// own (a stale cancellation kick); the reader checks its state and reads
// on.
var errKicked = errors.New("remoting: read interrupted")

// serveShared is the background reader of a shared connection.
func (c *Conn) serveShared() error {
	for {
		c.mu.Lock()
		if c.pending == nil { // closed
			c.mu.Unlock()
			return nil
		}
		if c.reading {
			c.mu.Unlock()
			if !c.backgroundWait() {
				return nil
			}
			continue
		}
		c.reading = true
		c.mu.Unlock()
		for {
			syncDone, err := c.readBatch(time.Time{}, nil)
			if errors.Is(err, errKicked) {
				continue
			}
			if err != nil {
				return err
			}
			if syncDone { // callers are active: let them read
				break
			}
		}
		if c.releaseToken() && !c.backgroundWait() {
			return nil
		}
	}
}

// backgroundWait parks the background reader until it is woken, the
// standby timer fires or the connection closes (false).
func (c *Conn) backgroundWait() bool {
	select {
	case <-c.bgWake:
	case <-c.standby.C:
	case <-c.done:
		return false
	}
	return true
}

func (c *Conn) wakeBackground() {
	select {
	case c.bgWake <- struct{}{}:
	default:
	}
}

// releaseToken passes the read token to the first waiting caller, or frees
// it and has the background reader take over (at once when async calls
// wait for responses, after standbyDelay otherwise). It reports whether the
// token was freed.
func (c *Conn) releaseToken() bool {
	c.mu.Lock()
	if n := len(c.waiters); n > 0 {
		cl := c.waiters[0]
		copy(c.waiters, c.waiters[1:])
		c.waiters[n-1] = nil
		c.waiters = c.waiters[:n-1]
		cl.waiting = false
		cl.promoted = true
		c.mu.Unlock()
		cl.done <- struct{}{} // cap 2: promotion and completion never block
		return false
	}
	c.reading = false
	async := c.asyncN > 0
	c.mu.Unlock()
	if async {
		c.wakeBackground()
	} else {
		c.standby.Reset(standbyDelay)
	}
	return true
}

// kickReader interrupts a blocked read (the leader's context was
// cancelled).
func (c *Conn) kickReader() { _ = c.nc.SetReadDeadline(time.Unix(1, 0)) }

// readBatch serves the whole frames buffered or, if there are none, reads
// once and serves those that arrived. It runs with the read token. dl is
// the leader's call deadline (zero: none); ctx, if not nil, is checked
// after the deadline is set, so that a cancellation kick is never lost. It
// reports whether a synchronous call was completed; errKicked means the
// read was interrupted for no reason of the connection's own.
func (c *Conn) readBatch(dl time.Time, ctx context.Context) (bool, error) {
	max := int(c.opts.MaxFrameSize)
	idle := c.opts.IdleTimeout
	syncDone, n, err := c.serveBuffered(max)
	if err != nil || n > 0 {
		return syncDone, err
	}
	want := dl
	if idle > 0 {
		if c.idleAt.IsZero() {
			c.touchIdle(time.Now())
		}
		if want.IsZero() || c.idleAt.Before(want) {
			want = c.idleAt
		}
	}
	// A deadline set for an earlier call that falls a little before want
	// is kept: if it fires first, the read is retried (errKicked).
	keep := c.dlKnown && (want.Equal(c.dlSet) ||
		!c.dlSet.IsZero() && !want.IsZero() && !c.dlSet.After(want) && want.Sub(c.dlSet) < deadlineSlack(c.opts.RequestTimeout))
	if !keep {
		if err := c.nc.SetReadDeadline(want); err != nil {
			return false, err
		}
		c.dlSet, c.dlKnown = want, true
	}
	if ctx != nil && ctx.Err() != nil {
		return false, errKicked
	}
	if err := c.rb.fill(c.nc, max); err != nil {
		if !errors.Is(err, os.ErrDeadlineExceeded) {
			return false, c.readErr(err, c.rb.partial())
		}
		c.dlKnown = false // a kick may have moved it
		if idle > 0 && !time.Now().Before(c.idleAt) {
			return false, c.readErr(err, c.rb.partial())
		}
		return false, errKicked
	}
	syncDone, _, err = c.serveBuffered(max)
	return syncDone, err
}

// errHandedOff ends a server connection's read loop on a goroutine that
// handed the reading to another one and ran a processor.
var errHandedOff = errors.New("remoting: reading handed off")

// serveBuffered serves the whole frames in c.rb and then writes the answers
// inline processors queued. On a server connection, a request for a pool
// with a free slot and nothing pending is run by the reader itself (it
// leads, see mux.lead); if the reading was handed to another goroutine
// meanwhile, serveBuffered returns errHandedOff once the processor
// returned, and this goroutine stops reading for good. It returns whether
// a synchronous call was completed and how many frames were served.
func (c *Conn) serveBuffered(max int) (syncDone bool, n int, err error) {
	for {
		frame, err := c.rb.next(max)
		if err != nil {
			return syncDone, n, err
		}
		if frame == nil {
			break
		}
		n++
		cmd, err := c.rb.decode(frame)
		if err != nil {
			return syncDone, n, err
		}
		if cmd.IsResponse() {
			if c.complete(cmd) {
				syncDone = true
			}
		} else if t, lead := c.disp.dispatch(c, cmd); lead {
			if c.disp.lead(c, t) {
				return syncDone, n, errHandedOff
			}
		}
	}
	if n > 0 && c.opts.IdleTimeout > 0 {
		c.touchIdle(time.Now())
	}
	if c.lazy {
		c.lazy = false
		c.flushQueued()
	}
	return syncDone, n, nil
}

// awaitShared waits for the response to cl on a shared connection: as the
// leader when the token is free (or handed over), else like Invoke on a
// dedicated reader.
func (c *Conn) awaitShared(ctx context.Context, req *protocol.Command, cl *call) (*protocol.Command, error) {
	opaque := req.Opaque
	deadline, hasDeadline := ctx.Deadline()
	if !hasDeadline {
		deadline = time.Now().Add(c.opts.RequestTimeout)
	}
	c.mu.Lock()
	lead := false
	if c.pending[opaque] == cl {
		if !c.reading {
			c.reading, lead = true, true
		} else {
			cl.waiting = true
			c.waiters = append(c.waiters, cl)
		}
	}
	c.mu.Unlock()
	if !lead {
		var timeout <-chan time.Time
		if !hasDeadline {
			t := getTimer(c.opts.RequestTimeout)
			defer putTimer(t)
			timeout = t.C
		}
		select {
		case <-cl.done:
			c.mu.Lock()
			promoted := cl.promoted
			c.mu.Unlock()
			if !promoted {
				return takeCall(cl)
			}
		case <-ctx.Done():
			return c.abandon(ctx, req, cl, true)
		case <-timeout:
			return c.abandon(ctx, req, cl, true)
		}
	}
	c.lead(ctx, cl, deadline)
	select {
	case <-cl.done:
		return takeCall(cl)
	default:
		return c.abandon(ctx, req, cl, false)
	}
}

// lead reads with the token until cl's result is there, ctx is done or the
// deadline passed, then passes the token on.
func (c *Conn) lead(ctx context.Context, cl *call, deadline time.Time) {
	if ctx.Done() != nil {
		stop := context.AfterFunc(ctx, c.kickReader)
		defer stop()
	}
	defer c.releaseToken()
	for {
		if len(cl.done) > 0 || ctx.Err() != nil || !time.Now().Before(deadline) {
			return
		}
		_, err := c.readBatch(deadline, ctx)
		if err != nil && !errors.Is(err, errKicked) {
			c.logClose(err)
			c.closeWith(err) // fails cl too
			return
		}
	}
}

// abandon ends a call whose caller stops waiting (timeout or
// cancellation), unless its result got there first. waiting says the
// caller did not lead: it may have been handed the token meanwhile, and
// then passes it on.
func (c *Conn) abandon(ctx context.Context, req *protocol.Command, cl *call, waiting bool) (*protocol.Command, error) {
	c.mu.Lock()
	promoted := waiting && cl.promoted
	ok := c.pending[cl.opaque] == cl
	if ok {
		c.removeLocked(cl) // no promotion from now on
	}
	c.mu.Unlock()
	if promoted {
		<-cl.done // the promotion
		c.releaseToken()
	}
	if !ok {
		<-cl.done // the result is there or on its way
		return takeCall(cl)
	}
	putCall(cl)
	if err := ctx.Err(); err != nil {
		if errors.Is(err, context.DeadlineExceeded) {
			return nil, fmt.Errorf("%w: code %d to %s: %w", ErrTimeout, req.Code, c.peer, err)
		}
		return nil, err
	}
	return nil, fmt.Errorf("%w: code %d to %s after %v", ErrTimeout, req.Code, c.peer, c.opts.RequestTimeout)
}
