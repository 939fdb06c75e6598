package wire

import (
	"bufio"
	"encoding/binary"
	"fmt"
	"io"
)

// Frame types, the frame-end octet and the smallest frame-max a peer may
// propose (AMQP 0-9-1 §4.2.3, §4.2.4).
const (
	FrameMethod    = 1
	FrameHeader    = 2
	FrameBody      = 3
	FrameHeartbeat = 8
	FrameEnd       = 0xCE
	FrameMinSize   = 4096
)

// frameOverhead is what a frame adds to its payload: type, channel and
// size before it, the frame-end octet after it.
const frameOverhead = 8

// ProtocolHeader is what a 0-9-1 client sends first: "AMQP\x00\x00\x09\x01".
var ProtocolHeader = [8]byte{'A', 'M', 'Q', 'P', 0, 0, 9, 1}

// Reply codes: the spec's constants and the ones RabbitMQ uses.
const (
	ReplySuccess       = 200
	ContentTooLarge    = 311
	NoRoute            = 312
	NoConsumers        = 313
	ConnectionForced   = 320
	InvalidPath        = 402
	AccessRefused      = 403
	NotFound           = 404
	ResourceLocked     = 405
	PreconditionFailed = 406
	FrameError         = 501
	SyntaxError        = 502
	CommandInvalid     = 503
	ChannelError       = 504
	UnexpectedFrame    = 505
	ResourceError      = 506
	NotAllowed         = 530
	NotImplemented     = 540
	InternalError      = 541
)

// keepBuffer is the largest frame buffer a Reader keeps between frames
// of at most that size.
const keepBuffer = 64 << 10

// Frame is one frame as read.
type Frame struct {
	Type    uint8
	Channel uint16
	Payload []byte // valid until the next ReadFrame
}

// Reader reads frames from a stream. It rejects a frame larger than its
// maximum (payload + 8) with ErrFrameTooLarge before reading its payload,
// and a frame whose last octet is not FrameEnd with ErrBadFrameEnd. It
// reuses one buffer, grown up to the maximum, so reading a frame does not
// allocate; a buffer grown past 64 KiB for large frames is let go at the
// next frame that fits in 64 KiB.
type Reader struct {
	br  *bufio.Reader
	max uint32
	hdr [7]byte
	buf []byte
}

// NewReader returns a Reader of frames from r that accepts frames of up
// to max bytes. A *bufio.Reader of at least 4096 bytes is read as is (its
// Buffered count stays meaningful to the caller); any other r gets a
// 4096-byte buffer. A max below FrameMinSize (including 0) is
// raised to FrameMinSize: every peer may send frames that large before
// tuning.
func NewReader(r io.Reader, max uint32) *Reader {
	rd := &Reader{br: bufio.NewReader(r)}
	rd.SetMax(max)
	return rd
}

// SetMax changes the largest frame accepted, as after connection.tune-ok.
// A value below FrameMinSize is raised to FrameMinSize.
func (r *Reader) SetMax(max uint32) {
	if max < FrameMinSize {
		max = FrameMinSize
	}
	r.max = max
}

// ReadFrame reads the next frame. At a clean end of stream between frames
// it returns io.EOF; a stream that ends inside a frame gives
// io.ErrUnexpectedEOF. After ErrFrameTooLarge or ErrBadFrameEnd the
// stream is out of step (the rest of the bad frame is unread or was
// misread): the connection can only be closed (with 501 FRAME_ERROR).
func (r *Reader) ReadFrame() (Frame, error) {
	if _, err := io.ReadFull(r.br, r.hdr[:]); err != nil {
		return Frame{}, err
	}
	size := binary.BigEndian.Uint32(r.hdr[3:])
	if uint64(size)+frameOverhead > uint64(r.max) {
		return Frame{}, fmt.Errorf("%w: %d byte payload on channel %d, frame-max %d",
			ErrFrameTooLarge, size, binary.BigEndian.Uint16(r.hdr[1:]), r.max)
	}
	need := int(size) + 1
	if cap(r.buf) > keepBuffer && need <= keepBuffer {
		// A large frame's buffer is not kept for the small frames that
		// follow: an idle connection holds at most keepBuffer bytes.
		r.buf = nil
	}
	if cap(r.buf) < need {
		r.buf = make([]byte, need, max(need, min(2*cap(r.buf), int(r.max))))
	}
	b := r.buf[:need]
	if _, err := io.ReadFull(r.br, b); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return Frame{}, err
	}
	if b[size] != FrameEnd {
		return Frame{}, fmt.Errorf("%w: 0x%02x after a type %d frame of %d bytes",
			ErrBadFrameEnd, b[size], r.hdr[0], size)
	}
	return Frame{
		Type:    r.hdr[0],
		Channel: binary.BigEndian.Uint16(r.hdr[1:]),
		Payload: b[:size:size],
	}, nil
}

// ReadProtocolHeader reads the 8 bytes a client opens with. On any other
// header it returns ErrBadProtocolHeader; the server then writes
// ProtocolHeader and closes the connection (§4.2.2). It reads exactly 8
// bytes, so r can be the connection itself.
func ReadProtocolHeader(r io.Reader) error {
	var h [8]byte
	if _, err := io.ReadFull(r, h[:]); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return fmt.Errorf("wire: reading the protocol header: %w", err)
	}
	if h != ProtocolHeader {
		return fmt.Errorf("%w: % x", ErrBadProtocolHeader, h[:])
	}
	return nil
}

// AppendFrame appends a whole frame: type, channel, payload size, payload,
// frame-end.
func AppendFrame(dst []byte, typ uint8, channel uint16, payload []byte) []byte {
	dst = append(dst, typ)
	dst = appendShort(dst, channel)
	dst = appendLong(dst, uint32(len(payload)))
	dst = append(dst, payload...)
	return append(dst, FrameEnd)
}

// AppendHeartbeat appends a heartbeat frame on channel 0.
func AppendHeartbeat(dst []byte) []byte {
	return append(dst, FrameHeartbeat, 0, 0, 0, 0, 0, 0, FrameEnd)
}

// AppendBodyFrames appends body as body frames on channel, each frame at
// most frameMax bytes (payload + 8); frameMax 0 means no limit. An empty
// body appends nothing: a content header with body size 0 has no body
// frames.
func AppendBodyFrames(dst []byte, channel uint16, body []byte, frameMax uint32) []byte {
	chunk := len(body)
	if frameMax > frameOverhead && uint64(frameMax-frameOverhead) < uint64(chunk) {
		chunk = int(frameMax - frameOverhead)
	}
	for len(body) > 0 {
		n := min(chunk, len(body))
		dst = AppendFrame(dst, FrameBody, channel, body[:n])
		body = body[n:]
	}
	return dst
}

// beginFrame appends a frame's first 7 bytes with a zero size; endFrame
// fills the size in and appends frame-end. Between them the caller
// appends the payload.
func beginFrame(dst []byte, typ uint8, channel uint16) ([]byte, int) {
	dst = append(dst, typ)
	dst = appendShort(dst, channel)
	dst = append(dst, 0, 0, 0, 0)
	return dst, len(dst)
}

func endFrame(dst []byte, start int) []byte {
	binary.BigEndian.PutUint32(dst[start-4:], uint32(len(dst)-start))
	return append(dst, FrameEnd)
}
