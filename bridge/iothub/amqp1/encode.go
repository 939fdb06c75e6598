package amqp1

import (
	"encoding/binary"
	"fmt"
	"math"
	"time"
)

// Append appends v's encoding to b. It encodes the Go types Decode
// returns, plus int (as long) and uint (as ulong); lists are []any,
// maps *Map, arrays Array (of one element type, taken from the first
// element). Unsigned and signed numbers take their smallest encoding.
func Append(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return append(b, 0x40)
	case bool:
		if x {
			return append(b, 0x41)
		}
		return append(b, 0x42)
	case uint8:
		return append(b, 0x50, x)
	case uint16:
		return binary.BigEndian.AppendUint16(append(b, 0x60), x)
	case uint32:
		switch {
		case x == 0:
			return append(b, 0x43)
		case x < 256:
			return append(b, 0x52, byte(x))
		}
		return binary.BigEndian.AppendUint32(append(b, 0x70), x)
	case uint64:
		switch {
		case x == 0:
			return append(b, 0x44)
		case x < 256:
			return append(b, 0x53, byte(x))
		}
		return binary.BigEndian.AppendUint64(append(b, 0x80), x)
	case uint:
		return Append(b, uint64(x))
	case int8:
		return append(b, 0x51, byte(x))
	case int16:
		return binary.BigEndian.AppendUint16(append(b, 0x61), uint16(x))
	case int32:
		if x >= -128 && x <= 127 {
			return append(b, 0x54, byte(int8(x)))
		}
		return binary.BigEndian.AppendUint32(append(b, 0x71), uint32(x))
	case int64:
		if x >= -128 && x <= 127 {
			return append(b, 0x55, byte(int8(x)))
		}
		return binary.BigEndian.AppendUint64(append(b, 0x81), uint64(x))
	case int:
		return Append(b, int64(x))
	case float32, float64, Char, Decimal:
		return appendWide(append(b, wideCtor(x)), x)
	case time.Time:
		return binary.BigEndian.AppendUint64(append(b, 0x83), uint64(x.UnixMilli()))
	case UUID:
		return append(append(b, 0x98), x[:]...)
	case []byte:
		return appendVar(b, 0xa0, x)
	case string:
		return appendVar(b, 0xa1, []byte(x))
	case Symbol:
		return appendVar(b, 0xa3, []byte(x))
	case []any:
		if len(x) == 0 {
			return append(b, 0x45)
		}
		var items []byte
		for _, it := range x {
			items = Append(items, it)
		}
		return appendCompound(b, 0xc0, len(x), items)
	case *Map:
		var items []byte
		for i, k := range x.Keys {
			items = Append(Append(items, k), x.Values[i])
		}
		return appendCompound(b, 0xc1, 2*len(x.Keys), items)
	case Array:
		return appendArray(b, x)
	case *Described:
		return Append(Append(append(b, 0x00), x.Descriptor), x.Value)
	}
	panic(fmt.Sprintf("amqp1: cannot encode %T", v))
}

// appendVar appends a binary, string or symbol: the short form (code)
// up to 255 bytes, else the long one (code+0x10).
func appendVar(b []byte, code byte, p []byte) []byte {
	if len(p) < 256 {
		b = append(b, code, byte(len(p)))
	} else {
		b = binary.BigEndian.AppendUint32(append(b, code+0x10), uint32(len(p)))
	}
	return append(b, p...)
}

// appendCompound appends a list (0xc0) or map (0xc1) of count elements
// encoded in items, in the short form when it fits.
func appendCompound(b []byte, code byte, count int, items []byte) []byte {
	if len(items)+1 < 256 && count < 256 {
		b = append(b, code, byte(len(items)+1), byte(count))
	} else {
		b = append(b, code+0x10)
		b = binary.BigEndian.AppendUint32(b, uint32(len(items)+4))
		b = binary.BigEndian.AppendUint32(b, uint32(count))
	}
	return append(b, items...)
}

// appendArray appends an array in its long form (array32). Its elements
// share one constructor, so each takes its type's wide encoding (uint,
// ulong, str32, sym32, vbin32, list32, ...); described elements share
// the first one's descriptor.
func appendArray(b []byte, a Array) []byte {
	var body []byte
	var desc any
	elem := func(v any) any { return v }
	if len(a) > 0 {
		if d, ok := a[0].(*Described); ok {
			desc = d.Descriptor
			elem = func(v any) any {
				if d, ok := v.(*Described); ok {
					return d.Value
				}
				return v
			}
		}
	}
	if desc != nil {
		body = Append(append(body, 0x00), desc)
	}
	ctor := byte(0x40)
	if len(a) > 0 {
		ctor = wideCtor(elem(a[0]))
	}
	body = append(body, ctor)
	for _, e := range a {
		v := elem(e)
		if wideCtor(v) != ctor {
			panic(fmt.Sprintf("amqp1: array of mixed types (%T)", v))
		}
		body = appendWide(body, v)
	}
	b = append(b, 0xf0)
	b = binary.BigEndian.AppendUint32(b, uint32(len(body)+4))
	b = binary.BigEndian.AppendUint32(b, uint32(len(a)))
	return append(b, body...)
}

// wideCtor is the constructor of v's type in its widest fixed form.
func wideCtor(v any) byte {
	switch x := v.(type) {
	case nil:
		return 0x40
	case bool:
		return 0x56
	case uint8:
		return 0x50
	case uint16:
		return 0x60
	case uint32:
		return 0x70
	case uint64:
		return 0x80
	case int8:
		return 0x51
	case int16:
		return 0x61
	case int32:
		return 0x71
	case int64:
		return 0x81
	case float32:
		return 0x72
	case float64:
		return 0x82
	case Char:
		return 0x73
	case time.Time:
		return 0x83
	case UUID:
		return 0x98
	case Decimal:
		switch len(x) {
		case 4:
			return 0x74
		case 8:
			return 0x84
		case 16:
			return 0x94
		}
	case []byte:
		return 0xb0
	case string:
		return 0xb1
	case Symbol:
		return 0xb3
	case []any:
		return 0xd0
	case *Map:
		return 0xd1
	case Array:
		return 0xf0
	}
	panic(fmt.Sprintf("amqp1: cannot encode %T in an array", v))
}

// appendWide appends v's body in the form wideCtor names, without the
// constructor.
func appendWide(b []byte, v any) []byte {
	switch x := v.(type) {
	case nil:
		return b
	case bool:
		if x {
			return append(b, 1)
		}
		return append(b, 0)
	case uint8:
		return append(b, x)
	case uint16:
		return binary.BigEndian.AppendUint16(b, x)
	case uint32:
		return binary.BigEndian.AppendUint32(b, x)
	case uint64:
		return binary.BigEndian.AppendUint64(b, x)
	case int8:
		return append(b, byte(x))
	case int16:
		return binary.BigEndian.AppendUint16(b, uint16(x))
	case int32:
		return binary.BigEndian.AppendUint32(b, uint32(x))
	case int64:
		return binary.BigEndian.AppendUint64(b, uint64(x))
	case float32:
		return binary.BigEndian.AppendUint32(b, math.Float32bits(x))
	case float64:
		return binary.BigEndian.AppendUint64(b, math.Float64bits(x))
	case Char:
		return binary.BigEndian.AppendUint32(b, uint32(x))
	case time.Time:
		return binary.BigEndian.AppendUint64(b, uint64(x.UnixMilli()))
	case UUID:
		return append(b, x[:]...)
	case Decimal:
		return append(b, x...)
	case []byte:
		return append(binary.BigEndian.AppendUint32(b, uint32(len(x))), x...)
	case string:
		return append(binary.BigEndian.AppendUint32(b, uint32(len(x))), x...)
	case Symbol:
		return append(binary.BigEndian.AppendUint32(b, uint32(len(x))), x...)
	case []any:
		var items []byte
		for _, it := range x {
			items = Append(items, it)
		}
		return appendLong(b, len(x), items)
	case *Map:
		var items []byte
		for i, k := range x.Keys {
			items = Append(Append(items, k), x.Values[i])
		}
		return appendLong(b, 2*len(x.Keys), items)
	case Array:
		return append(b, appendArray(nil, x)[1:]...) // always long: drop 0xf0
	}
	panic(fmt.Sprintf("amqp1: cannot encode %T", v))
}

// appendLong appends a list32's or map32's size, count and items.
func appendLong(b []byte, count int, items []byte) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(items)+4))
	b = binary.BigEndian.AppendUint32(b, uint32(count))
	return append(b, items...)
}
