package wire

import (
	"encoding/binary"
	"fmt"
	"math"
	"slices"
	"time"
)

// Table is a field table (AMQP 0-9-1 §4.2.5.5 with RabbitMQ's type
// letters): exchange and queue arguments, message headers, the peers'
// properties.
type Table map[string]any

// Decimal is a field table's decimal value: Value / 10^Scale.
type Decimal struct {
	Scale uint8
	Value int32
}

// MaxTableDepth bounds how deep tables and arrays may nest, so that
// hostile input cannot exhaust the stack.
const MaxTableDepth = 64

// AppendTable appends t with its leading uint32 length. The values it
// encodes, by Go type (type letter in brackets): bool ('t'), int8 ('b'),
// uint8 ('B'), int16 ('s'), uint16 ('u'), int32 ('I'), uint32 ('i'),
// int64 and int ('l'), uint64 and uint ('l', when below 2^63),
// float32 ('f'), float64 ('d'), Decimal ('D'), string ('S'), []byte
// ('x'), []any ('A'), time.Time ('T', whole seconds), Table and
// map[string]any ('F'), nil ('V'). Keys are written in sorted order, so
// equal tables encode to equal bytes. Any other type, a key longer than 255
// bytes or nesting deeper than MaxTableDepth is an error, and dst is
// returned unchanged.
func AppendTable(dst []byte, t Table) ([]byte, error) {
	out, err := appendTable(dst, t, 0, false)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// appendTableLenient is AppendTable with unknown values written as void
// and over-long keys cut; it cannot fail.
func appendTableLenient(dst []byte, t Table) []byte {
	out, _ := appendTable(dst, t, 0, true)
	return out
}

func appendTable(dst []byte, t Table, depth int, lenient bool) ([]byte, error) {
	if depth >= MaxTableDepth && !lenient {
		return dst, fmt.Errorf("wire: table nested deeper than %d", MaxTableDepth)
	}
	start := len(dst)
	dst = append(dst, 0, 0, 0, 0)
	keys := make([]string, 0, 16)
	for k := range t {
		keys = append(keys, k)
	}
	slices.Sort(keys)
	for _, k := range keys {
		v := t[k]
		if len(k) > maxShortstr && !lenient {
			return dst, fmt.Errorf("wire: table key %.20q... longer than 255 bytes", k)
		}
		dst = appendShortstr(dst, k)
		var err error
		if dst, err = appendValue(dst, v, depth, lenient); err != nil {
			return dst, fmt.Errorf("wire: table key %q: %w", k, err)
		}
	}
	binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
	return dst, nil
}

func appendValue(dst []byte, v any, depth int, lenient bool) ([]byte, error) {
	switch v := v.(type) {
	case bool:
		b := byte(0)
		if v {
			b = 1
		}
		return append(dst, 't', b), nil
	case int8:
		return append(dst, 'b', byte(v)), nil
	case uint8:
		return append(dst, 'B', v), nil
	case int16:
		return appendShort(append(dst, 's'), uint16(v)), nil
	case uint16:
		return appendShort(append(dst, 'u'), v), nil
	case int32:
		return appendLong(append(dst, 'I'), uint32(v)), nil
	case uint32:
		return appendLong(append(dst, 'i'), v), nil
	case int64:
		return appendLonglong(append(dst, 'l'), uint64(v)), nil
	case int:
		return appendLonglong(append(dst, 'l'), uint64(v)), nil
	case uint64:
		if v > math.MaxInt64 && !lenient {
			return dst, fmt.Errorf("uint64 %d does not fit a signed 64-bit field", v)
		}
		return appendLonglong(append(dst, 'l'), v), nil
	case uint:
		if uint64(v) > math.MaxInt64 && !lenient {
			return dst, fmt.Errorf("uint %d does not fit a signed 64-bit field", v)
		}
		return appendLonglong(append(dst, 'l'), uint64(v)), nil
	case float32:
		return appendLong(append(dst, 'f'), math.Float32bits(v)), nil
	case float64:
		return appendLonglong(append(dst, 'd'), math.Float64bits(v)), nil
	case Decimal:
		return appendLong(append(dst, 'D', v.Scale), uint32(v.Value)), nil
	case string:
		return appendLongstr(append(dst, 'S'), v), nil
	case []byte:
		dst = appendLong(append(dst, 'x'), uint32(len(v)))
		return append(dst, v...), nil
	case []any:
		if depth+1 >= MaxTableDepth && !lenient {
			return dst, fmt.Errorf("array nested deeper than %d", MaxTableDepth)
		}
		dst = append(dst, 'A')
		start := len(dst)
		dst = append(dst, 0, 0, 0, 0)
		for i, e := range v {
			var err error
			if dst, err = appendValue(dst, e, depth+1, lenient); err != nil {
				return dst, fmt.Errorf("array element %d: %w", i, err)
			}
		}
		binary.BigEndian.PutUint32(dst[start:], uint32(len(dst)-start-4))
		return dst, nil
	case time.Time:
		return appendLonglong(append(dst, 'T'), uint64(v.Unix())), nil
	case Table:
		return appendTable(append(dst, 'F'), v, depth+1, lenient)
	case map[string]any:
		return appendTable(append(dst, 'F'), Table(v), depth+1, lenient)
	case nil:
		return append(dst, 'V'), nil
	default:
		if lenient {
			return append(dst, 'V'), nil
		}
		return dst, fmt.Errorf("unsupported Go type %T", v)
	}
}

// DecodeTable reads a field table with its leading uint32 length from the
// start of b and returns it with the number of bytes it took. Strings and
// byte arrays are copies. An empty table decodes as nil. Type letters are
// RabbitMQ's (see AppendTable), and 'u' decodes as uint16.
func DecodeTable(b []byte) (Table, int, error) {
	return decodeTable(b, 0)
}

func decodeTable(b []byte, depth int) (Table, int, error) {
	if depth >= MaxTableDepth {
		return nil, 0, fmt.Errorf("%w: table nested deeper than %d", ErrMalformed, MaxTableDepth)
	}
	if len(b) < 4 {
		return nil, 0, fmt.Errorf("%w: table length: truncated", ErrMalformed)
	}
	n := binary.BigEndian.Uint32(b)
	if uint64(n) > uint64(len(b)-4) {
		return nil, 0, fmt.Errorf("%w: table of %d bytes, %d left", ErrMalformed, n, len(b)-4)
	}
	d := decoder{b: b[4 : 4+int(n)]}
	var t Table
	for len(d.b) > 0 && d.err == nil {
		k := d.shortstr()
		v := d.value(depth)
		if d.err != nil {
			return nil, 0, fmt.Errorf("table key %q: %w", k, d.err)
		}
		if t == nil {
			t = make(Table)
		}
		t[k] = v
	}
	if d.err != nil {
		return nil, 0, d.err
	}
	return t, 4 + int(n), nil
}

// value reads one type letter and its value.
func (d *decoder) value(depth int) any {
	typ := d.octet()
	if d.err != nil {
		return nil
	}
	switch typ {
	case 't':
		return d.octet() != 0
	case 'b':
		return int8(d.octet())
	case 'B':
		return d.octet()
	case 's':
		return int16(d.short())
	case 'u':
		return d.short()
	case 'I':
		return int32(d.long())
	case 'i':
		return d.long()
	case 'l':
		return int64(d.longlong())
	case 'f':
		return math.Float32frombits(d.long())
	case 'd':
		return math.Float64frombits(d.longlong())
	case 'D':
		scale := d.octet()
		return Decimal{Scale: scale, Value: int32(d.long())}
	case 'S':
		return d.longstr()
	case 'x':
		n := d.long()
		if d.err == nil && uint64(n) > uint64(len(d.b)) {
			d.fail(errTruncated)
			return nil
		}
		v := d.take(int(n))
		if d.err != nil {
			return nil
		}
		return append([]byte{}, v...)
	case 'A':
		return d.array(depth + 1)
	case 'T':
		return time.Unix(int64(d.longlong()), 0).UTC()
	case 'F':
		t, n, err := decodeTable(d.b, depth+1)
		if err != nil {
			d.fail(err)
			return nil
		}
		d.b = d.b[n:]
		if t == nil {
			t = Table{}
		}
		return t
	case 'V':
		return nil
	default:
		d.fail(fmt.Errorf("%w: unknown field type %q", ErrMalformed, typ))
		return nil
	}
}

func (d *decoder) array(depth int) []any {
	if depth >= MaxTableDepth {
		d.fail(fmt.Errorf("%w: array nested deeper than %d", ErrMalformed, MaxTableDepth))
		return nil
	}
	n := d.long()
	if d.err == nil && uint64(n) > uint64(len(d.b)) {
		d.fail(errTruncated)
		return nil
	}
	body := d.take(int(n))
	if d.err != nil {
		return nil
	}
	a := decoder{b: body}
	out := []any{}
	for len(a.b) > 0 && a.err == nil {
		out = append(out, a.value(depth))
	}
	if a.err != nil {
		d.fail(fmt.Errorf("array element %d: %w", len(out)-1, a.err))
		return nil
	}
	return out
}

// skipTable checks the structure of the table at the start of b, as
// decodeTable does, without building it, and returns its length.
func skipTable(b []byte, depth int) (int, error) {
	if depth >= MaxTableDepth {
		return 0, fmt.Errorf("%w: table nested deeper than %d", ErrMalformed, MaxTableDepth)
	}
	d := decoder{b: b}
	n := d.long()
	if d.err == nil && uint64(n) > uint64(len(d.b)) {
		return 0, fmt.Errorf("%w: table of %d bytes, %d left", ErrMalformed, n, len(d.b))
	}
	if d.err != nil {
		return 0, d.err
	}
	in := decoder{b: d.b[:n]}
	for len(in.b) > 0 && in.err == nil {
		in.take(int(in.octet()))
		in.skipValue(depth)
	}
	if in.err != nil {
		return 0, in.err
	}
	return 4 + int(n), nil
}

// skipValue checks one type letter and its value without building it.
func (d *decoder) skipValue(depth int) {
	typ := d.octet()
	if d.err != nil {
		return
	}
	switch typ {
	case 't', 'b', 'B':
		d.take(1)
	case 's', 'u':
		d.take(2)
	case 'I', 'i', 'f':
		d.take(4)
	case 'l', 'd', 'T':
		d.take(8)
	case 'D':
		d.take(5)
	case 'S', 'x':
		n := d.long()
		if d.err == nil && uint64(n) > uint64(len(d.b)) {
			d.fail(errTruncated)
			return
		}
		d.take(int(n))
	case 'A':
		if depth+1 >= MaxTableDepth {
			d.fail(fmt.Errorf("%w: array nested deeper than %d", ErrMalformed, MaxTableDepth))
			return
		}
		n := d.long()
		if d.err == nil && uint64(n) > uint64(len(d.b)) {
			d.fail(errTruncated)
			return
		}
		a := decoder{b: d.take(int(n))}
		for len(a.b) > 0 && a.err == nil {
			a.skipValue(depth + 1)
		}
		d.fail(a.err)
	case 'F':
		n, err := skipTable(d.b, depth+1)
		if err != nil {
			d.fail(err)
			return
		}
		d.b = d.b[n:]
	case 'V':
	default:
		d.fail(fmt.Errorf("%w: unknown field type %q", ErrMalformed, typ))
	}
}

// AsInt64 returns a decoded table value of any integer type as an int64.
// Clients pick the integer type freely (amqplib sends 10 as int8, pika as
// int32, amqp091-go an int as int32), so an argument such as
// x-max-length must be read with it. It also takes the Go integers
// AppendTable encodes (int, and uint64 up to math.MaxInt64). It reports
// false for any other type.
func AsInt64(v any) (int64, bool) {
	switch v := v.(type) {
	case int8:
		return int64(v), true
	case uint8:
		return int64(v), true
	case int16:
		return int64(v), true
	case uint16:
		return int64(v), true
	case int32:
		return int64(v), true
	case uint32:
		return int64(v), true
	case int64:
		return v, true
	case int:
		return int64(v), true
	case uint64:
		if v <= math.MaxInt64 {
			return int64(v), true
		}
	}
	return 0, false
}
