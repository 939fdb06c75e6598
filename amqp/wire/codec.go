package wire

import (
	"encoding/binary"
	"errors"
	"fmt"
	"unicode/utf8"
)

// maxShortstr is the longest a short string can be: its length is one
// octet.
const maxShortstr = 255

// appendShortstr appends a short string. A string longer than 255 bytes
// cannot be a short string; it is cut to at most 255 bytes, before a
// UTF-8 sequence that would not fit (the only such strings a server
// writes are its own reply texts, which clients decode as UTF-8).
func appendShortstr(dst []byte, s string) []byte {
	if len(s) > maxShortstr {
		n := maxShortstr
		for i := 0; i < utf8.UTFMax && n > 0 && !utf8.RuneStart(s[n]); i++ {
			n--
		}
		s = s[:n]
	}
	dst = append(dst, byte(len(s)))
	return append(dst, s...)
}

// appendLongstr appends a long string: uint32 length, then the bytes.
func appendLongstr(dst []byte, s string) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(s)))
	return append(dst, s...)
}

func appendShort(dst []byte, v uint16) []byte { return binary.BigEndian.AppendUint16(dst, v) }
func appendLong(dst []byte, v uint32) []byte  { return binary.BigEndian.AppendUint32(dst, v) }
func appendLonglong(dst []byte, v uint64) []byte {
	return binary.BigEndian.AppendUint64(dst, v)
}

// appendBits packs consecutive bit fields into one octet, the first in
// the lowest bit.
func appendBits(dst []byte, bits ...bool) []byte {
	var o byte
	for i, b := range bits {
		if b {
			o |= 1 << i
		}
	}
	return append(dst, o)
}

// appendArgTable appends a table inside a method's arguments, where there
// is no way to return an error: a value of a Go type the table encoding
// does not know is written as void ('V'). Callers that build tables from
// arbitrary values check them first with AppendTable.
func appendArgTable(dst []byte, t Table) []byte {
	start := len(dst)
	out, err := AppendTable(dst, t)
	if err == nil {
		return out
	}
	return appendTableLenient(dst[:start], t)
}

// errTruncated is the detail of an ErrMalformed for input that ends early.
var errTruncated = fmt.Errorf("%w: truncated", ErrMalformed)

// decoder reads fields in order from b; the first failure sticks in err and
// every later read returns zero.
type decoder struct {
	b   []byte
	err error
}

func (d *decoder) fail(err error) {
	if d.err == nil {
		d.err = err
	}
}

func (d *decoder) take(n int) []byte {
	if d.err != nil {
		return nil
	}
	if len(d.b) < n {
		d.fail(errTruncated)
		d.b = nil
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}

func (d *decoder) octet() uint8 {
	if v := d.take(1); v != nil {
		return v[0]
	}
	return 0
}

func (d *decoder) short() uint16 {
	if v := d.take(2); v != nil {
		return binary.BigEndian.Uint16(v)
	}
	return 0
}

func (d *decoder) long() uint32 {
	if v := d.take(4); v != nil {
		return binary.BigEndian.Uint32(v)
	}
	return 0
}

func (d *decoder) longlong() uint64 {
	if v := d.take(8); v != nil {
		return binary.BigEndian.Uint64(v)
	}
	return 0
}

// shortstr returns a copy of a short string.
func (d *decoder) shortstr() string {
	n := d.octet()
	return string(d.take(int(n)))
}

// longstr returns a copy of a long string.
func (d *decoder) longstr() string {
	n := d.long()
	if d.err == nil && uint64(n) > uint64(len(d.b)) {
		d.fail(errTruncated)
		return ""
	}
	return string(d.take(int(n)))
}

func (d *decoder) table() Table {
	if d.err != nil {
		return nil
	}
	t, n, err := decodeTable(d.b, 0)
	if err != nil {
		d.fail(err)
		return nil
	}
	d.b = d.b[n:]
	return t
}

// finish reports the first failure, or bytes left over after the last
// field.
func (d *decoder) finish() error {
	if d.err != nil {
		return d.err
	}
	if len(d.b) != 0 {
		return fmt.Errorf("%w: %d bytes after the last field", ErrMalformed, len(d.b))
	}
	return nil
}

// Sentinel errors; the codec wraps them with context.
var (
	// ErrFrameTooLarge: a frame is larger than the negotiated frame-max.
	ErrFrameTooLarge = errors.New("wire: frame too large")
	// ErrBadFrameEnd: a frame does not end with the frame-end octet 0xCE.
	ErrBadFrameEnd = errors.New("wire: bad frame-end octet")
	// ErrUnknownMethod: a method frame names a class or method this codec
	// does not know.
	ErrUnknownMethod = errors.New("wire: unknown method")
	// ErrMalformed: a method's arguments, a field table or a content
	// header are truncated or do not follow the grammar.
	ErrMalformed = errors.New("wire: malformed")
	// ErrBadProtocolHeader: a client opened with something other than
	// the AMQP 0-9-1 protocol header.
	ErrBadProtocolHeader = errors.New("wire: bad protocol header")
)
