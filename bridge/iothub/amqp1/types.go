// Package amqp1 is the part of AMQP 1.0 (OASIS, 2012) the IoT Hub
// surface needs to take cloud-to-device messages from the service SDKs:
// the type system's encoding, frames, the performatives of a connection,
// a session and a link, SASL's three frames, and a message's sections.
// It knows nothing of IoT Hub; bridge/iothub/amqp.go serves the
// connections.
//
// # Encoding (AMQP 1.0 part 1, "Types")
//
// Every value starts with a constructor byte; multi-byte numbers are
// big-endian:
//
//	0x40 null  0x41 true  0x42 false  0x56 boolean (1 byte)
//	0x50 ubyte  0x60 ushort  0x70 uint (4)  0x52 smalluint (1)  0x43 uint 0
//	0x80 ulong (8)  0x53 smallulong (1)  0x44 ulong 0
//	0x51 byte  0x61 short  0x71 int (4)  0x54 smallint (1)
//	0x81 long (8)  0x55 smalllong (1)  0x72 float  0x82 double
//	0x73 char (UTF-32)  0x83 timestamp (int64 ms since the epoch)  0x98 uuid (16)
//	0x74/0x84/0x94 decimal32/64/128 (kept as raw bytes)
//	0xa0 vbin8  0xb0 vbin32  0xa1 str8-utf8  0xb1 str32-utf8
//	0xa3 sym8  0xb3 sym32 (length, then the bytes)
//	0x45 list0  0xc0 list8  0xd0 list32 (size, count, then the items;
//	     size counts the count field and the items)
//	0xc1 map8  0xd1 map32 (size, count of keys and values, then pairs)
//	0xe0 array8  0xf0 array32 (size, count, one element constructor,
//	     then the elements without constructors)
//	0x00 a described value: the descriptor (a ulong code or a symbol),
//	     then the value
//
// Decoded values are Go values: nil, bool, uint8, uint16, uint32,
// uint64, int8, int16, int32, int64, float32, float64, Char,
// time.Time (timestamp), UUID, []byte (binary), string, Symbol, []any
// (list), *Map, Array, *Described and Decimal.
package amqp1

import (
	"encoding/binary"
	"errors"
	"fmt"
	"math"
	"time"
	"unicode/utf8"
)

// ErrMalformed is the decoders' error for bytes that are not valid AMQP.
var ErrMalformed = errors.New("amqp1: malformed")

// Symbol is an AMQP symbol (ASCII).
type Symbol string

// UUID is an AMQP uuid.
type UUID [16]byte

// String formats the UUID in its canonical 8-4-4-4-12 form.
func (u UUID) String() string {
	const hexd = "0123456789abcdef"
	b := make([]byte, 0, 36)
	for i, c := range u {
		if i == 4 || i == 6 || i == 8 || i == 10 {
			b = append(b, '-')
		}
		b = append(b, hexd[c>>4], hexd[c&15])
	}
	return string(b)
}

// Char is an AMQP char (a UTF-32 code point).
type Char rune

// Decimal is a decimal32, decimal64 or decimal128, kept as its bytes.
type Decimal []byte

// Map is an AMQP map: its pairs in wire order.
type Map struct {
	Keys, Values []any
}

// Get returns the value of the first key equal to k (a string, Symbol or
// number compared with ==).
func (m *Map) Get(k any) (any, bool) {
	if m == nil {
		return nil, false
	}
	for i, key := range m.Keys {
		if key == k {
			return m.Values[i], true
		}
	}
	return nil, false
}

// Array is an AMQP array: its elements, all of one type.
type Array []any

// Described is a described value. Descriptor is a uint64 code or a
// Symbol.
type Described struct {
	Descriptor any
	Value      any
}

// Code returns the descriptor's numeric code, or false when it is a
// symbol.
func (d *Described) Code() (uint64, bool) {
	c, ok := d.Descriptor.(uint64)
	return c, ok
}

// maxDepth bounds the nesting of compound values a decoder follows.
const maxDepth = 32

// Decode decodes one value from b and returns it with the bytes after it.
func Decode(b []byte) (any, []byte, error) {
	d := decoder{b: b}
	v, err := d.value(0)
	if err != nil {
		return nil, nil, err
	}
	return v, d.b, nil
}

type decoder struct {
	b []byte
}

func (d *decoder) need(n int) ([]byte, error) {
	if n < 0 || len(d.b) < n {
		return nil, fmt.Errorf("%w: %d bytes needed, %d left", ErrMalformed, n, len(d.b))
	}
	p := d.b[:n]
	d.b = d.b[n:]
	return p, nil
}

func (d *decoder) u8() (byte, error) {
	p, err := d.need(1)
	if err != nil {
		return 0, err
	}
	return p[0], nil
}

// sized reads a compound's size (one or four bytes) and returns a decoder
// over exactly that many bytes.
func (d *decoder) sized(wide bool) (*decoder, error) {
	var n int
	if wide {
		p, err := d.need(4)
		if err != nil {
			return nil, err
		}
		u := binary.BigEndian.Uint32(p)
		if u > uint32(len(d.b)) {
			return nil, fmt.Errorf("%w: size %d over the %d bytes left", ErrMalformed, u, len(d.b))
		}
		n = int(u)
	} else {
		c, err := d.u8()
		if err != nil {
			return nil, err
		}
		n = int(c)
	}
	p, err := d.need(n)
	if err != nil {
		return nil, err
	}
	return &decoder{b: p}, nil
}

// count reads a compound's element count (one or four bytes).
func (d *decoder) count(wide bool) (int, error) {
	if wide {
		p, err := d.need(4)
		if err != nil {
			return 0, err
		}
		u := binary.BigEndian.Uint32(p)
		if u > 1<<24 {
			return 0, fmt.Errorf("%w: count %d", ErrMalformed, u)
		}
		return int(u), nil
	}
	c, err := d.u8()
	return int(c), err
}

// maxZeroWidth bounds an array of elements that take no bytes (null,
// true, false, uint0, ulong0, list0), whose count the bytes cannot bound.
const maxZeroWidth = 4096

func (d *decoder) value(depth int) (any, error) {
	c, err := d.u8()
	if err != nil {
		return nil, err
	}
	if c == 0x00 {
		if depth >= maxDepth {
			return nil, fmt.Errorf("%w: nested deeper than %d", ErrMalformed, maxDepth)
		}
		desc, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		switch desc.(type) {
		case uint64, Symbol:
		default:
			return nil, fmt.Errorf("%w: descriptor of type %T", ErrMalformed, desc)
		}
		v, err := d.value(depth + 1)
		if err != nil {
			return nil, err
		}
		return &Described{Descriptor: desc, Value: v}, nil
	}
	return d.body(c, depth)
}

// be reads an n-byte big-endian unsigned number.
func (d *decoder) be(n int) (uint64, error) {
	p, err := d.need(n)
	if err != nil {
		return 0, err
	}
	var u uint64
	for _, c := range p {
		u = u<<8 | uint64(c)
	}
	return u, nil
}

// body decodes the value after its constructor c.
func (d *decoder) body(c byte, depth int) (any, error) {
	switch c {
	case 0x40:
		return nil, nil
	case 0x41:
		return true, nil
	case 0x42:
		return false, nil
	case 0x56:
		v, err := d.u8()
		if err == nil && v > 1 {
			return nil, fmt.Errorf("%w: boolean byte %#x", ErrMalformed, v)
		}
		return v == 1, err
	case 0x50:
		return d.u8()
	case 0x60:
		u, err := d.be(2)
		return uint16(u), err
	case 0x70:
		u, err := d.be(4)
		return uint32(u), err
	case 0x52:
		v, err := d.u8()
		return uint32(v), err
	case 0x43:
		return uint32(0), nil
	case 0x80:
		return d.be(8)
	case 0x53:
		v, err := d.u8()
		return uint64(v), err
	case 0x44:
		return uint64(0), nil
	case 0x51:
		v, err := d.u8()
		return int8(v), err
	case 0x61:
		u, err := d.be(2)
		return int16(u), err
	case 0x71:
		u, err := d.be(4)
		return int32(u), err
	case 0x54:
		v, err := d.u8()
		return int32(int8(v)), err
	case 0x81:
		u, err := d.be(8)
		return int64(u), err
	case 0x55:
		v, err := d.u8()
		return int64(int8(v)), err
	case 0x72:
		u, err := d.be(4)
		return math.Float32frombits(uint32(u)), err
	case 0x82:
		u, err := d.be(8)
		return math.Float64frombits(u), err
	case 0x74, 0x84, 0x94:
		n := map[byte]int{0x74: 4, 0x84: 8, 0x94: 16}[c]
		p, err := d.need(n)
		if err != nil {
			return nil, err
		}
		return Decimal(append([]byte(nil), p...)), nil
	case 0x73:
		u, err := d.be(4)
		return Char(u), err
	case 0x83:
		u, err := d.be(8)
		if err != nil {
			return nil, err
		}
		return time.UnixMilli(int64(u)).UTC(), nil
	case 0x98:
		p, err := d.need(16)
		if err != nil {
			return nil, err
		}
		var u UUID
		copy(u[:], p)
		return u, nil
	case 0xa0, 0xb0, 0xa1, 0xb1, 0xa3, 0xb3:
		s, err := d.sized(c&0xf0 == 0xb0)
		if err != nil {
			return nil, err
		}
		switch c {
		case 0xa0, 0xb0:
			return append([]byte(nil), s.b...), nil
		case 0xa1, 0xb1:
			if !utf8.Valid(s.b) {
				return nil, fmt.Errorf("%w: string not UTF-8", ErrMalformed)
			}
			return string(s.b), nil
		}
		return Symbol(s.b), nil
	case 0x45:
		return []any{}, nil
	case 0xc0, 0xd0, 0xc1, 0xd1:
		if depth >= maxDepth {
			return nil, fmt.Errorf("%w: nested deeper than %d", ErrMalformed, maxDepth)
		}
		wide := c&0xf0 == 0xd0
		s, err := d.sized(wide)
		if err != nil {
			return nil, err
		}
		n, err := s.count(wide)
		if err != nil {
			return nil, err
		}
		if n > len(s.b) { // each item has a constructor byte at least
			return nil, fmt.Errorf("%w: count %d over the %d bytes left", ErrMalformed, n, len(s.b))
		}
		items := make([]any, 0, n)
		for range n {
			v, err := s.value(depth + 1)
			if err != nil {
				return nil, err
			}
			items = append(items, v)
		}
		if c == 0xc0 || c == 0xd0 {
			return items, nil
		}
		if n%2 != 0 {
			return nil, fmt.Errorf("%w: map of %d elements", ErrMalformed, n)
		}
		m := &Map{Keys: make([]any, 0, n/2), Values: make([]any, 0, n/2)}
		for i := 0; i < n; i += 2 {
			m.Keys = append(m.Keys, items[i])
			m.Values = append(m.Values, items[i+1])
		}
		return m, nil
	case 0xe0, 0xf0:
		if depth >= maxDepth {
			return nil, fmt.Errorf("%w: nested deeper than %d", ErrMalformed, maxDepth)
		}
		wide := c == 0xf0
		s, err := d.sized(wide)
		if err != nil {
			return nil, err
		}
		n, err := s.count(wide)
		if err != nil {
			return nil, err
		}
		ec, err := s.u8()
		if err != nil {
			return nil, err
		}
		var desc any
		if ec == 0x00 {
			if desc, err = s.value(depth + 1); err != nil {
				return nil, err
			}
			if ec, err = s.u8(); err != nil {
				return nil, err
			}
		}
		if ec == 0x00 {
			return nil, fmt.Errorf("%w: array element constructor", ErrMalformed)
		}
		if zero := ec >= 0x40 && ec <= 0x45; zero && n > maxZeroWidth || !zero && n > len(s.b) {
			return nil, fmt.Errorf("%w: array of %d elements (constructor %#x) in %d bytes", ErrMalformed, n, ec, len(s.b))
		}
		out := make(Array, 0, min(n, 1024))
		for range n {
			v, err := s.body(ec, depth+1)
			if err != nil {
				return nil, err
			}
			if desc != nil {
				v = &Described{Descriptor: desc, Value: v}
			}
			out = append(out, v)
		}
		return out, nil
	}
	return nil, fmt.Errorf("%w: constructor %#x", ErrMalformed, c)
}
