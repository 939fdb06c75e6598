package protocol

import (
	"fmt"
	"strconv"
)

// fieldReader decodes extFields values into typed header fields. It keeps
// the first error, which names the header and the field, so DecodeFields
// methods read as a flat list of assignments.
type fieldReader struct {
	f   ExtFields
	hdr string
	err error
}

func (r *fieldReader) missing(key string) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s.%s", ErrMissingField, r.hdr, key)
	}
}

func (r *fieldReader) bad(key, val string, cause error) {
	if r.err == nil {
		r.err = fmt.Errorf("%w: %s.%s=%q: %w", ErrBadField, r.hdr, key, val, cause)
	}
}

// str returns the value of key; a required key must be present (an empty
// string is allowed, as in Java).
func (r *fieldReader) str(key string, required bool) string {
	v, ok := r.f[key]
	if !ok && required {
		r.missing(key)
	}
	return v
}

func (r *fieldReader) i32(key string, required bool) int32 {
	v, ok := r.f[key]
	if !ok {
		if required {
			r.missing(key)
		}
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 32)
	if err != nil {
		r.bad(key, v, err)
	}
	return int32(n)
}

// optI32 returns the value and whether it was present.
func (r *fieldReader) optI32(key string) (int32, bool) {
	if _, ok := r.f[key]; !ok {
		return 0, false
	}
	return r.i32(key, false), true
}

// optI64 returns the value and whether it was present.
func (r *fieldReader) optI64(key string) (int64, bool) {
	if _, ok := r.f[key]; !ok {
		return 0, false
	}
	return r.i64(key, false), true
}

// optBool returns the value and whether it was present.
func (r *fieldReader) optBool(key string) (bool, bool) {
	v, ok := r.f[key]
	if !ok {
		return false, false
	}
	return parseBool(v), true
}

func (r *fieldReader) i64(key string, required bool) int64 {
	v, ok := r.f[key]
	if !ok {
		if required {
			r.missing(key)
		}
		return 0
	}
	n, err := strconv.ParseInt(v, 10, 64)
	if err != nil {
		r.bad(key, v, err)
	}
	return n
}

// boolean parses like Java's Boolean.parseBoolean: "true" in any case is
// true, anything else false. A required key must be present.
func (r *fieldReader) boolean(key string, required bool) bool {
	v, ok := r.f[key]
	if !ok {
		if required {
			r.missing(key)
		}
		return false
	}
	return parseBool(v)
}

// parseBool is Java's Boolean.parseBoolean: "true" in any case.
func parseBool(v string) bool {
	return len(v) == 4 && (v[0]|0x20) == 't' && (v[1]|0x20) == 'r' && (v[2]|0x20) == 'u' && (v[3]|0x20) == 'e'
}

// parseI32 and parseI64 read a decimal field as fieldReader does
// (strconv.ParseInt with base 10: an optional sign, digits, in range).
func parseI32(v string) (int32, bool) {
	n, ok := parseDec(v, 32)
	return int32(n), ok
}

func parseI64(v string) (int64, bool) { return parseDec(v, 64) }

// parseDec is strconv.ParseInt(v, 10, bits) reduced to its outcome,
// without building an error: the header's integers are parsed per
// request. FuzzParseDec checks it against strconv.
func parseDec(v string, bits uint) (int64, bool) {
	neg := false
	if len(v) > 0 && (v[0] == '-' || v[0] == '+') {
		neg = v[0] == '-'
		v = v[1:]
	}
	if len(v) == 0 || len(v) > 19 {
		if len(v) > 19 {
			return parseDecSlow(v, neg, bits)
		}
		return 0, false
	}
	var u uint64
	for i := 0; i < len(v); i++ {
		d := v[i] - '0'
		if d > 9 {
			return 0, false
		}
		u = u*10 + uint64(d) // 19 digits never overflow a uint64
	}
	limit := uint64(1) << (bits - 1) // -limit .. limit-1
	if neg {
		if u > limit {
			return 0, false
		}
		return -int64(u), true
	}
	if u >= limit {
		return 0, false
	}
	return int64(u), true
}

// parseDecSlow is parseDec for more than 19 digits (leading zeros, or out
// of range).
func parseDecSlow(v string, neg bool, bits uint) (int64, bool) {
	if neg {
		v = "-" + v
	}
	n, err := strconv.ParseInt(v, 10, int(bits))
	return n, err == nil
}

// The generated appendJSONFields methods write the values as
// appendExtFieldsJSON writes the strings EncodeFields puts in the map.

// appendFieldSep appends the comma before a member unless dst has none
// since start.
func appendFieldSep(dst []byte, start int) []byte {
	if len(dst) > start {
		return append(dst, ',')
	}
	return dst
}

func appendJSONInt(dst []byte, v int64) []byte {
	dst = append(dst, '"')
	dst = strconv.AppendInt(dst, v, 10)
	return append(dst, '"')
}

func appendJSONBool(dst []byte, v bool) []byte {
	if v {
		return append(dst, `"true"`...)
	}
	return append(dst, `"false"`...)
}

func putI32(f ExtFields, key string, v int32) { f[key] = strconv.FormatInt(int64(v), 10) }
func putI64(f ExtFields, key string, v int64) { f[key] = strconv.FormatInt(v, 10) }
func putBool(f ExtFields, key string, v bool) { f[key] = strconv.FormatBool(v) }

// putStr writes a string field; optional empty strings are left out (Java
// sends no key for a null field).
func putOptStr(f ExtFields, key, v string) {
	if v != "" {
		f[key] = v
	}
}

// The typed headers' EncodeFields and DecodeFields methods are generated
// from the table in internal/headergen (TestHeadersGenerated keeps them
// equal).
//go:generate go run ./internal/headergen/cmd/headergen -o headers_gen.go
