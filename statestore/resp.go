package statestore

import (
	"fmt"
	"strconv"
)

// This file is the RESP3 subset the protocol uses: requests are arrays of
// bulk strings; replies are simple strings, errors, integers, bulk strings
// (or the null bulk string) and, for notifications, arrays. Decoders are
// strict (lengths without sign or leading zeros, CRLF everywhere, nothing
// after the value) so every accepted input re-encodes to the same bytes.

const (
	// MaxRequestArgs is the largest array ParseRequest accepts. Valid
	// commands need at most 6 elements; the bound keeps a hostile count
	// from costing anything.
	MaxRequestArgs = 16

	// maxReplyDepth bounds array nesting in DecodeReply.
	maxReplyDepth = 8
)

// ParseRequest parses a request payload: "*<n>\r\n" followed by n bulk
// strings "$<len>\r\n<bytes>\r\n", 1 <= n <= MaxRequestArgs, and nothing
// after. The returned slices alias b. Errors wrap ErrBadRESP.
func ParseRequest(b []byte) ([][]byte, error) {
	return parseArgs(b, nil)
}

// parseArgs is ParseRequest appending to dst (so callers can parse into
// an array on their stack).
func parseArgs(b []byte, dst [][]byte) ([][]byte, error) {
	if len(b) == 0 || b[0] != '*' {
		return nil, respErr(0, "request is not an array")
	}
	n, pos, err := parseLength(b, 1)
	if err != nil {
		return nil, err
	}
	if n < 1 || n > MaxRequestArgs {
		return nil, respErr(1, "array of %d elements, want 1..%d", n, MaxRequestArgs)
	}
	args := dst
	if args == nil {
		args = make([][]byte, 0, n)
	}
	for i := 0; i < n; i++ {
		if pos >= len(b) || b[pos] != '$' {
			return nil, respErr(pos, "element %d is not a bulk string", i)
		}
		var l int
		l, pos, err = parseLength(b, pos+1)
		if err != nil {
			return nil, err
		}
		if l > len(b)-pos-2 {
			return nil, respErr(pos, "bulk string of %d bytes overruns the payload", l)
		}
		if b[pos+l] != '\r' || b[pos+l+1] != '\n' {
			return nil, respErr(pos+l, "bulk string not followed by CRLF")
		}
		args = append(args, b[pos:pos+l:pos+l])
		pos += l + 2
	}
	if pos != len(b) {
		return nil, respErr(pos, "%d bytes after the request", len(b)-pos)
	}
	return args, nil
}

// AppendRequest appends args encoded as a request (an array of bulk
// strings) to dst.
func AppendRequest(dst []byte, args ...[]byte) []byte {
	dst = append(dst, '*')
	dst = strconv.AppendInt(dst, int64(len(args)), 10)
	dst = append(dst, '\r', '\n')
	for _, a := range args {
		dst = appendBulk(dst, a)
	}
	return dst
}

func appendBulk(dst, s []byte) []byte {
	dst = append(dst, '$')
	dst = strconv.AppendInt(dst, int64(len(s)), 10)
	dst = append(dst, '\r', '\n')
	dst = append(dst, s...)
	return append(dst, '\r', '\n')
}

// parseLength reads a non-negative decimal length (no sign, no leading
// zero unless it is "0", at most 9 digits) at b[pos:] followed by CRLF and
// returns it with the position after the CRLF.
func parseLength(b []byte, pos int) (int, int, error) {
	start := pos
	n := 0
	for pos < len(b) && b[pos] >= '0' && b[pos] <= '9' {
		if pos-start == 9 {
			return 0, 0, respErr(start, "length has more than 9 digits")
		}
		n = n*10 + int(b[pos]-'0')
		pos++
	}
	switch {
	case pos == start:
		return 0, 0, respErr(start, "missing length")
	case pos-start > 1 && b[start] == '0':
		return 0, 0, respErr(start, "length with a leading zero")
	case pos+1 >= len(b) || b[pos] != '\r' || b[pos+1] != '\n':
		return 0, 0, respErr(pos, "length not followed by CRLF")
	}
	return n, pos + 2, nil
}

func respErr(off int, format string, args ...any) error {
	return fmt.Errorf("%w at offset %d: %s", ErrBadRESP, off, fmt.Sprintf(format, args...))
}

// Kind is the type of a decoded RESP3 value.
type Kind uint8

// The kinds DecodeReply produces.
const (
	KindSimple  Kind = iota + 1 // "+<text>\r\n"
	KindError                   // "-<text>\r\n"
	KindInteger                 // ":<int64>\r\n"
	KindBulk                    // "$<len>\r\n<bytes>\r\n"
	KindNull                    // "$-1\r\n", the null bulk string
	KindArray                   // "*<n>\r\n" then n values
)

// Value is one decoded RESP3 value.
type Value struct {
	Kind  Kind
	Str   []byte  // KindSimple, KindError (text after '-'), KindBulk; aliases the input
	Int   int64   // KindInteger
	Array []Value // KindArray
}

// DecodeReply decodes exactly one RESP3 value filling b: a reply payload
// or a NOTIFY payload. Simple strings and errors may not hold CR or LF;
// integers are "-"? digits without leading zeros (no "-0"); the only null
// is "$-1\r\n"; arrays nest at most 8 deep. Errors wrap ErrBadRESP.
func DecodeReply(b []byte) (Value, error) {
	v, pos, err := decodeValue(b, 0, 0)
	if err != nil {
		return Value{}, err
	}
	if pos != len(b) {
		return Value{}, respErr(pos, "%d bytes after the value", len(b)-pos)
	}
	return v, nil
}

func decodeValue(b []byte, pos, depth int) (Value, int, error) {
	if pos >= len(b) {
		return Value{}, 0, respErr(pos, "missing value")
	}
	switch b[pos] {
	case '+', '-':
		kind := KindSimple
		if b[pos] == '-' {
			kind = KindError
		}
		start := pos + 1
		for i := start; i < len(b); i++ {
			switch b[i] {
			case '\r':
				if i+1 < len(b) && b[i+1] == '\n' {
					return Value{Kind: kind, Str: b[start:i:i]}, i + 2, nil
				}
				return Value{}, 0, respErr(i, "CR without LF")
			case '\n':
				return Value{}, 0, respErr(i, "LF in a simple string")
			}
		}
		return Value{}, 0, respErr(pos, "unterminated simple string")
	case ':':
		n, next, err := parseInteger(b, pos+1)
		if err != nil {
			return Value{}, 0, err
		}
		return Value{Kind: KindInteger, Int: n}, next, nil
	case '$':
		if pos+1 < len(b) && b[pos+1] == '-' {
			if pos+4 < len(b) && b[pos+2] == '1' && b[pos+3] == '\r' && b[pos+4] == '\n' {
				return Value{Kind: KindNull}, pos + 5, nil
			}
			return Value{}, 0, respErr(pos+1, "negative length other than -1")
		}
		l, next, err := parseLength(b, pos+1)
		if err != nil {
			return Value{}, 0, err
		}
		if l > len(b)-next-2 {
			return Value{}, 0, respErr(next, "bulk string of %d bytes overruns the payload", l)
		}
		if b[next+l] != '\r' || b[next+l+1] != '\n' {
			return Value{}, 0, respErr(next+l, "bulk string not followed by CRLF")
		}
		return Value{Kind: KindBulk, Str: b[next : next+l : next+l]}, next + l + 2, nil
	case '*':
		if depth >= maxReplyDepth {
			return Value{}, 0, respErr(pos, "arrays nested deeper than %d", maxReplyDepth)
		}
		n, next, err := parseLength(b, pos+1)
		if err != nil {
			return Value{}, 0, err
		}
		// Every element takes at least 3 bytes ("+\r\n").
		if n > (len(b)-next)/3 {
			return Value{}, 0, respErr(pos, "array of %d elements overruns the payload", n)
		}
		arr := make([]Value, n)
		for i := range arr {
			arr[i], next, err = decodeValue(b, next, depth+1)
			if err != nil {
				return Value{}, 0, err
			}
		}
		return Value{Kind: KindArray, Array: arr}, next, nil
	}
	return Value{}, 0, respErr(pos, "unsupported type byte %q", b[pos])
}

// parseInteger reads "-"? digits CRLF with no leading zeros, no "-0", and
// the value within int64.
func parseInteger(b []byte, pos int) (int64, int, error) {
	start := pos
	neg := false
	if pos < len(b) && b[pos] == '-' {
		neg = true
		pos++
	}
	digits := pos
	var u uint64
	limit := uint64(1<<63 - 1)
	if neg {
		limit++
	}
	for pos < len(b) && b[pos] >= '0' && b[pos] <= '9' {
		d := uint64(b[pos] - '0')
		if u > (limit-d)/10 {
			return 0, 0, respErr(start, "integer overflows int64")
		}
		u = u*10 + d
		pos++
	}
	switch {
	case pos == digits:
		return 0, 0, respErr(start, "missing digits")
	case pos-digits > 1 && b[digits] == '0':
		return 0, 0, respErr(start, "integer with a leading zero")
	case neg && u == 0:
		return 0, 0, respErr(start, "negative zero")
	case pos+1 >= len(b) || b[pos] != '\r' || b[pos+1] != '\n':
		return 0, 0, respErr(pos, "integer not followed by CRLF")
	}
	if neg {
		return int64(-u), pos + 2, nil // -u wraps correctly for MinInt64
	}
	return int64(u), pos + 2, nil
}

// AppendValue appends the encoding of v to dst. For every b that
// DecodeReply accepts, AppendValue(nil, v) == b.
func AppendValue(dst []byte, v Value) []byte {
	switch v.Kind {
	case KindSimple:
		dst = append(dst, '+')
		dst = append(dst, v.Str...)
		return append(dst, '\r', '\n')
	case KindError:
		dst = append(dst, '-')
		dst = append(dst, v.Str...)
		return append(dst, '\r', '\n')
	case KindInteger:
		dst = append(dst, ':')
		dst = strconv.AppendInt(dst, v.Int, 10)
		return append(dst, '\r', '\n')
	case KindBulk:
		return appendBulk(dst, v.Str)
	case KindNull:
		return append(dst, "$-1\r\n"...)
	case KindArray:
		dst = append(dst, '*')
		dst = strconv.AppendInt(dst, int64(len(v.Array)), 10)
		dst = append(dst, '\r', '\n')
		for _, e := range v.Array {
			dst = AppendValue(dst, e)
		}
		return dst
	}
	return dst
}

// Err returns the ServiceError an error reply carries ("-ERR <text>"),
// nil for any other kind, and for an error reply without the "ERR "
// prefix a ServiceError holding the whole text.
func (v Value) Err() error {
	if v.Kind != KindError {
		return nil
	}
	s := string(v.Str)
	if len(s) >= 4 && s[:4] == "ERR " {
		return ServiceError(s[4:])
	}
	return ServiceError(s)
}

// Fixed reply payloads. They are shared: callers must not modify them.
var (
	replyOK       = []byte("+OK\r\n")
	replyNotDone  = []byte(":-1\r\n")
	replyZero     = []byte(":0\r\n")
	replyOne      = []byte(":1\r\n")
	replyNil      = []byte("$-1\r\n")
	notifyDelete  = []byte("*2\r\n$6\r\nNOTIFY\r\n$6\r\nDELETE\r\n")
	notifySetHead = []byte("*4\r\n$6\r\nNOTIFY\r\n$3\r\nSET\r\n$5\r\nVALUE\r\n")
)

// errorReply returns "-ERR <text>\r\n".
func errorReply(e ServiceError) []byte {
	b := make([]byte, 0, len(e)+7)
	b = append(b, "-ERR "...)
	b = append(b, e...)
	return append(b, '\r', '\n')
}

// bulkReply returns "$<len>\r\n<v>\r\n".
func bulkReply(v []byte) []byte {
	return appendBulk(make([]byte, 0, len(v)+16), v)
}
