package remoting

import (
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

// readLoop is the reader goroutine of a connection: it reads and serves
// frames until the connection fails.
func (c *Conn) readLoop() error {
	max := int(c.opts.MaxFrameSize)
	idle := c.opts.IdleTimeout
	if idle > 0 {
		c.touchIdle(time.Now())
	}
	for {
		served, err := c.serveBuffered(max)
		if err != nil {
			return err
		}
		if idle > 0 && !c.idleAt.Equal(c.dlSet) {
			if err := c.nc.SetReadDeadline(c.idleAt); err != nil {
				return err
			}
			c.dlSet = c.idleAt
		}
		if c.co.wait > 0 && c.coalesceBeforeRead(served, c.rb.full) {
			if err := c.rb.makeRoom(max); err != nil {
				return c.readErr(err, c.rb.partial())
			}
			n, err := c.sock.readNow(c.rb.buf[c.rb.w:])
			if err != errWouldBlock {
				if err := c.rb.took(n, err); err != nil {
					return c.readErr(err, c.rb.partial())
				}
				continue
			}
			c.coalesceStop() // nothing came: block with a low-water mark of one byte
		}
		if err := c.rb.fill(c.sock, max); err != nil {
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
	// full: the last read filled the room it had (more may wait).
	full bool
	// shapes are the header shapes the peer writes its requests in,
	// learned by the reader (see protocol.HeaderShapes).
	shapes protocol.HeaderShapes
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
func (b *readBuf) decode(frame []byte, raw protocol.RawFields) (*protocol.Command, error) {
	cmd, err := b.shapes.DecodeFrame(frame, b.k, raw)
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

// fill reads at least one byte, first making room for the frame under way
// (makeRoom).
func (b *readBuf) fill(r io.Reader, max int) error {
	if err := b.makeRoom(max); err != nil {
		return err
	}
	n, err := r.Read(b.buf[b.w:])
	return b.took(n, err)
}

// took accounts for a read of n bytes into b.buf[b.w:].
func (b *readBuf) took(n int, err error) error {
	b.full = n == len(b.buf)-b.w
	b.w += n
	if n > 0 {
		return nil
	}
	if err == nil {
		err = io.ErrNoProgress
	}
	return err
}

// makeRoom makes room for the frame under way: in place when no command
// references the chunk, else by moving the unconsumed bytes to another
// chunk.
func (b *readBuf) makeRoom(max int) error {
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
	return nil
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

// serveBuffered serves the whole frames in c.rb: responses go to their
// callers, requests to the dispatcher (which runs inline processors right
// here). Then the BatchEnd of the processors that ran runs, and the
// answers queued meanwhile are written (flushQueued).
func (c *Conn) serveBuffered(max int) (int, error) {
	c.batchAt = time.Time{} // a new batch: BatchTime reads the clock again
	n, err := c.serveFrames(max)
	if len(c.ends) > 0 {
		c.runBatchEnds() // also after a bad frame: what the batch deferred is done
	}
	if err != nil {
		return n, err
	}
	if n > 0 && c.opts.IdleTimeout > 0 {
		// The batch's clock when a processor read it (a broker's sends
		// do): at most the batch's length old, which the deadline's
		// slack covers; else one reading here.
		now := c.batchAt
		if now.IsZero() {
			now = time.Now()
		}
		c.touchIdle(now)
		c.batchAt = now
	}
	if c.queued {
		c.queued = false
		c.flushQueued()
	}
	return n, nil
}

// serveFrames serves the whole frames in c.rb and returns how many.
func (c *Conn) serveFrames(max int) (int, error) {
	n := 0
	for {
		frame, err := c.rb.next(max)
		if err != nil || frame == nil {
			return n, err
		}
		n++
		cmd, err := c.rb.decode(frame, c.raw)
		if err != nil {
			return n, err
		}
		if cmd.IsResponse() {
			c.complete(cmd)
		} else {
			c.disp.dispatch(c, cmd)
		}
	}
}

// BatchTime is a clock reading (time.Now, with its monotonic part) taken
// once for the reader's current batch, the frames of one read, at its
// first call in the batch: the processors of a batch's requests can share
// it instead of each reading the clock (a broker's sends time their puts
// by it). It is at most as old as the batch, which the reader serves
// without waiting (a reader held back by a full write queue waits before
// its next read, not within a batch).
//
// Only the reader may call it: inline processors and BatchEnd (a
// processor served by a pool must read the clock itself).
func (c *Conn) BatchTime() time.Time {
	if c.batchAt.IsZero() {
		c.batchAt = time.Now()
	}
	return c.batchAt
}

// atBatchEnd has r's BatchEnd run at the end of the reader's batch.
func (c *Conn) atBatchEnd(r *route) {
	for _, e := range c.ends {
		if e == r {
			return
		}
	}
	c.ends = append(c.ends, r)
}

// runBatchEnds runs the BatchEnd of the batch's processors. Until the
// reader's flushQueued, answers to this connection from any goroutine are
// queued without waking the writer: the reader writes them with its own.
func (c *Conn) runBatchEnds() {
	c.wmu.Lock()
	c.batchEnd = true
	c.wmu.Unlock()
	for i, r := range c.ends {
		r.batchEnd(c)
		c.ends[i] = nil
	}
	c.ends = c.ends[:0]
	c.queued = true
}
