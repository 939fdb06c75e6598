package protocol

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Frame sizes.
const (
	// DefaultMaxFrameSize is the largest frame accepted by default,
	// counting the 4-byte length word (Java's frameMaxLength).
	DefaultMaxFrameSize = 16 << 20
	// MaxHeaderLen is the largest header the 24-bit length can carry.
	MaxHeaderLen = 1<<24 - 1
	// frameOverhead is the length word plus the header-length word.
	frameOverhead = 8
)

// FrameLength validates the length word of a frame (the first 4 bytes) and
// returns the number of bytes that follow it. max is the largest whole frame
// (length word included); max <= 0 means DefaultMaxFrameSize. It never
// allocates, so callers check it before reading the rest.
func FrameLength(word uint32, max int) (int, error) {
	if max <= 0 {
		max = DefaultMaxFrameSize
	}
	if uint64(word)+4 > uint64(max) {
		if other := otherProtocol(word); other != "" {
			return 0, fmt.Errorf("%w: %d bytes, limit %d: the peer sent %s, not RocketMQ remoting (wrong port?)",
				ErrFrameTooLarge, uint64(word)+4, max, other)
		}
		return 0, fmt.Errorf("%w: %d bytes, limit %d", ErrFrameTooLarge, uint64(word)+4, max)
	}
	if word < 4 {
		return 0, fmt.Errorf("%w: length %d is below 4", ErrBadFrame, word)
	}
	return int(word), nil
}

// otherProtocol names the protocol whose first 4 bytes read as word when
// they are taken for a frame's length: HTTP (a browser, curl or Prometheus
// given a broker's or registry's port; an HTTP server or proxy given as
// one) or TLS (a client with TLS on, talking to a plain port). "" when
// word looks like none of them.
func otherProtocol(word uint32) string {
	var b [4]byte
	binary.BigEndian.PutUint32(b[:], word)
	switch string(b[:]) {
	case "HTTP":
		return "an HTTP response"
	case "GET ", "POST", "PUT ", "HEAD", "DELE", "OPTI", "PATC", "CONN", "TRAC", "PRI ":
		return "an HTTP request"
	}
	if b[0] == 0x16 && b[1] == 0x03 { // handshake record, TLS 1.x
		return "a TLS handshake"
	}
	return ""
}

// DecodeFrame decodes a frame without its leading length word: the
// header-length word, the header and the body. The returned command's Body
// aliases frame; everything else is copied out of it.
func DecodeFrame(frame []byte) (*Command, error) { return DecodeFrameRef(frame, nil) }

// DecodeFrameRef is DecodeFrame for a frame in a shared receive buffer: on
// success the command holds ref (the caller took it for this command) and
// drops it in Recycle; on error ref is not kept. The frame's bytes belong
// to the command from then on: the decoder may write over its header.
func DecodeFrameRef(frame []byte, ref BufferRef) (*Command, error) {
	return DecodeFrameWith(frame, ref, nil)
}

// DecodeFrameWith is DecodeFrameRef that keeps the extFields of a JSON
// request header as a field list (see fieldList), without building the
// ExtFields map, when raw reports true for the command's code (a nil raw
// never does; the "code" key must come before "extFields", as every known
// client writes them). Such a command's ExtFields is nil: its fields are
// read with DecodeHeader (straight from the list for the headers that
// have a generated decoder) or Fields. With a raw, the header of the
// forms clients write is read in one pass, straight from frame. With a
// ref, the field list is written over the frame's header and it, and the
// strings DecodeHeader decodes from it, are valid only until Recycle
// (see Command.Recycle), and the Command may be one a Done handed back.
func DecodeFrameWith(frame []byte, ref BufferRef, raw RawFields) (*Command, error) {
	return decodeFrame(frame, ref, raw, nil)
}

// decodeFrame is DecodeFrameWith, reading JSON headers through shapes
// when not nil (see HeaderShapes).
func decodeFrame(frame []byte, ref BufferRef, raw RawFields, shapes *HeaderShapes) (*Command, error) {
	if len(frame) < 4 {
		return nil, fmt.Errorf("%w: %d bytes, need at least 4", ErrBadFrame, len(frame))
	}
	word := binary.BigEndian.Uint32(frame)
	st := SerializeType(word >> 24)
	hlen := int(word & 0xFFFFFF)
	if hlen > len(frame)-4 {
		return nil, fmt.Errorf("%w: header length %d exceeds frame of %d bytes", ErrBadFrame, hlen, len(frame)-4)
	}
	hdr := frame[4 : 4+hlen]
	var c *Command
	if ref != nil {
		c = commandPool.Get().(*Command) // zeroed by Done
		c.SerializeType = st
	} else {
		c = &Command{SerializeType: st}
	}
	var err error
	switch st {
	case SerializeJSON:
		err = decodeJSONHeader(hdr, c, raw, ref != nil, shapes)
	case SerializeRocketMQ:
		err = decodeBinaryHeader(hdr, c)
	default:
		return nil, fmt.Errorf("%w: %d", ErrUnknownSerializeType, st)
	}
	if err != nil {
		return nil, err
	}
	if body := frame[4+hlen:]; len(body) > 0 {
		c.Body = body[:len(body):len(body)]
	}
	c.ref = ref
	return c, nil
}

// ReadFrame reads one frame from r into buf (grown if too small) and
// decodes it. max bounds the whole frame as in FrameLength. The returned
// command's Body aliases the returned buffer.
func ReadFrame(r io.Reader, buf []byte, max int) (*Command, []byte, error) {
	var lw [4]byte
	if _, err := io.ReadFull(r, lw[:]); err != nil {
		return nil, buf, err
	}
	n, err := FrameLength(binary.BigEndian.Uint32(lw[:]), max)
	if err != nil {
		return nil, buf, err
	}
	if cap(buf) < n {
		buf = make([]byte, n)
	}
	buf = buf[:n]
	if _, err := io.ReadFull(r, buf); err != nil {
		if err == io.EOF {
			err = io.ErrUnexpectedEOF
		}
		return nil, buf, err
	}
	c, err := DecodeFrame(buf)
	return c, buf, err
}

// AppendHeader appends c's header in c.SerializeType's encoding.
func AppendHeader(dst []byte, c *Command) ([]byte, error) {
	switch c.SerializeType {
	case SerializeJSON:
		return appendJSONHeader(dst, c), nil
	case SerializeRocketMQ:
		return appendBinaryHeader(dst, c), nil
	}
	return dst, fmt.Errorf("%w: %d", ErrUnknownSerializeType, c.SerializeType)
}

// AppendFramePrefix appends the length word, the header-length word and
// the header, but no body. The length word counts c.Body and every
// c.BodyBuffers part, which the caller writes right after (copied or as
// further net.Buffers parts).
func AppendFramePrefix(dst []byte, c *Command) ([]byte, error) {
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0, 0, 0, 0, 0)
	dst, err := AppendHeader(dst, c)
	if err != nil {
		return dst[:start], err
	}
	hlen := len(dst) - start - frameOverhead
	if hlen > MaxHeaderLen {
		return dst[:start], fmt.Errorf("%w: %d bytes", ErrHeaderTooLarge, hlen)
	}
	total := uint64(4 + hlen + c.BodyLen())
	if total > 0xFFFFFFFF-4 {
		return dst[:start], fmt.Errorf("%w: %d bytes", ErrFrameTooLarge, total)
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(total))
	binary.BigEndian.PutUint32(dst[start+4:], uint32(c.SerializeType)<<24|uint32(hlen))
	return dst, nil
}

// AppendFrameHead is AppendFramePrefix followed by c.Body (not
// c.BodyBuffers).
func AppendFrameHead(dst []byte, c *Command) ([]byte, error) {
	dst, err := AppendFramePrefix(dst, c)
	if err != nil {
		return dst, err
	}
	return append(dst, c.Body...), nil
}

// EncodeFrame returns the complete frame of c, BodyBuffers included.
func EncodeFrame(c *Command) ([]byte, error) {
	b, err := AppendFrameHead(make([]byte, 0, 256+c.BodyLen()), c)
	if err != nil {
		return nil, err
	}
	for _, p := range c.BodyBuffers {
		b = append(b, p...)
	}
	return b, nil
}
