package amqp1

import (
	"encoding/binary"
	"fmt"
	"io"
)

// Frames (AMQP 1.0 part 2, "Transport"). A connection starts with an
// eight-byte protocol header, "AMQP", then the protocol id (0: AMQP, 3:
// SASL) and the version 1.0.0:
//
//	41 4d 51 50 00 01 00 00   AMQP
//	41 4d 51 50 03 01 00 00   SASL, before the AMQP header
//
// Then frames:
//
//	size     uint32  the whole frame, these 8 bytes included (at least 8)
//	doff     uint8   where the body starts, in 4-byte words (at least 2)
//	type     uint8   0 AMQP, 1 SASL
//	channel  uint16  the session's channel (AMQP frames)
//	...      (doff*4 - 8 bytes of extended header, ignored)
//	body     a performative (a described list), then for a transfer the
//	         message's bytes; an empty body is a heartbeat
var (
	HeaderAMQP = [8]byte{'A', 'M', 'Q', 'P', 0, 1, 0, 0}
	HeaderSASL = [8]byte{'A', 'M', 'Q', 'P', 3, 1, 0, 0}
)

// Frame types.
const (
	TypeAMQP = 0
	TypeSASL = 1
)

// MinMaxFrameSize is the smallest max-frame-size a peer may set (part 2,
// 2.7.1: 512).
const MinMaxFrameSize = 512

// Frame is one frame: its type, channel and body (after the extended
// header). Body aliases the reader's buffer until the next ReadFrame.
type Frame struct {
	Type    byte
	Channel uint16
	Body    []byte
}

// FrameReader reads frames of at most Max bytes.
type FrameReader struct {
	R   io.Reader
	Max uint32
	buf []byte
}

// ReadFrame reads the next frame. A frame larger than Max, or whose
// size or data offset is impossible, is an ErrMalformed error.
func (fr *FrameReader) ReadFrame() (Frame, error) {
	var hdr [8]byte
	if _, err := io.ReadFull(fr.R, hdr[:]); err != nil {
		return Frame{}, err
	}
	size := binary.BigEndian.Uint32(hdr[:4])
	doff := uint32(hdr[4]) * 4
	if size < 8 || doff < 8 || doff > size {
		return Frame{}, fmt.Errorf("%w: frame size %d, data offset %d", ErrMalformed, size, doff)
	}
	if size > fr.Max {
		return Frame{}, fmt.Errorf("%w: frame of %d bytes over the %d agreed", ErrMalformed, size, fr.Max)
	}
	n := int(size - 8)
	if cap(fr.buf) < n {
		fr.buf = make([]byte, n)
	}
	b := fr.buf[:n]
	if _, err := io.ReadFull(fr.R, b); err != nil {
		return Frame{}, fmt.Errorf("amqp1: frame body: %w", io.ErrUnexpectedEOF)
	}
	return Frame{Type: hdr[5], Channel: binary.BigEndian.Uint16(hdr[6:8]), Body: b[doff-8:]}, nil
}

// AppendFrame appends a frame (data offset 2) holding the performative
// perf (nil: a heartbeat) and then payload.
func AppendFrame(b []byte, typ byte, channel uint16, perf *Described, payload []byte) []byte {
	start := len(b)
	b = append(b, 0, 0, 0, 0, 2, typ, byte(channel>>8), byte(channel))
	if perf != nil {
		b = Append(b, perf)
	}
	b = append(b, payload...)
	binary.BigEndian.PutUint32(b[start:], uint32(len(b)-start))
	return b
}

// Performative reads a frame body's performative: a described list whose
// descriptor is a numeric code. It returns the code, the list's fields
// and the bytes after it (a transfer's payload).
func Performative(body []byte) (code uint64, fields []any, rest []byte, err error) {
	v, rest, err := Decode(body)
	if err != nil {
		return 0, nil, nil, err
	}
	d, ok := v.(*Described)
	if !ok {
		return 0, nil, nil, fmt.Errorf("%w: frame body is a %T, not a performative", ErrMalformed, v)
	}
	code, ok = d.Code()
	if !ok {
		return 0, nil, nil, fmt.Errorf("%w: performative named %v", ErrMalformed, d.Descriptor)
	}
	fields, ok = d.Value.([]any)
	if !ok {
		return 0, nil, nil, fmt.Errorf("%w: performative %#x holds a %T, not a list", ErrMalformed, code, d.Value)
	}
	return code, fields, rest, nil
}
