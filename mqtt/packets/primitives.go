package packets

import (
	"bytes"
	"encoding/binary"
	"strings"
	"unicode/utf8"
	"unsafe"
)

// Wire limits (frozen by the specifications).
const (
	// MaxVarInt is the largest value a variable byte integer can hold
	// (4 bytes): the largest remaining length and subscription identifier.
	MaxVarInt = 268_435_455
	// MaxPacketSizeLimit is the largest possible packet: 1 type byte, 4
	// length bytes and MaxVarInt body bytes.
	MaxPacketSizeLimit = 1 + 4 + MaxVarInt
	// maxString is the longest UTF-8 string or binary field (2-byte length).
	maxString = 65535
)

// varIntLen returns the encoded length of v (v <= MaxVarInt).
func varIntLen(v int) int {
	switch {
	case v < 1<<7:
		return 1
	case v < 1<<14:
		return 2
	case v < 1<<21:
		return 3
	}
	return 4
}

// appendVarInt appends v (0 <= v <= MaxVarInt) in the minimal number of
// bytes: 7 bits per byte, least significant group first, high bit set on
// every byte but the last.
func appendVarInt(dst []byte, v int) []byte {
	for v >= 0x80 {
		dst = append(dst, byte(v)|0x80)
		v >>= 7
	}
	return append(dst, byte(v))
}

// varIntResult is the outcome of parsing a variable byte integer.
type varIntResult int8

const (
	varIntOK         varIntResult = iota
	varIntShort                   // the input ended inside the integer
	varIntTooLong                 // a fifth byte would be needed
	varIntNotMinimal              // a longer encoding than necessary
)

// parseVarInt reads a variable byte integer from the front of b and returns
// its value and length.
func parseVarInt(b []byte) (v, n int, res varIntResult) {
	shift := 0
	for i := 0; i < 4; i++ {
		if i >= len(b) {
			return 0, 0, varIntShort
		}
		c := b[i]
		v |= int(c&0x7F) << shift
		if c&0x80 == 0 {
			if c == 0 && i > 0 {
				return 0, 0, varIntNotMinimal
			}
			return v, i + 1, varIntOK
		}
		shift += 7
	}
	return 0, 0, varIntTooLong
}

func appendUint16(dst []byte, v uint16) []byte { return append(dst, byte(v>>8), byte(v)) }

func appendUint32(dst []byte, v uint32) []byte {
	return append(dst, byte(v>>24), byte(v>>16), byte(v>>8), byte(v))
}

func appendString(dst []byte, s string) []byte {
	dst = appendUint16(dst, uint16(len(s)))
	return append(dst, s...)
}

func appendBinary(dst []byte, b []byte) []byte {
	dst = appendUint16(dst, uint16(len(b)))
	return append(dst, b...)
}

// validUTF8 reports whether b is a well-formed MQTT UTF-8 string: valid
// UTF-8 (which excludes the surrogates U+D800..U+DFFF) and no U+0000.
// Its printable ASCII prefix (nearly every topic, property and key) is
// checked in one pass, eight bytes at a time (plainASCII); only what
// follows it pays the two full scans.
func validUTF8(b []byte) bool {
	b = b[plainASCII(b):]
	return len(b) == 0 || bytes.IndexByte(b, 0) < 0 && utf8.Valid(b)
}

// plainASCII returns the length of s's prefix of bytes 0x01..0x7F, give
// or take: it may stop up to seven bytes short of the first other byte
// (whatever follows it is checked in full). A word of eight such bytes
// has no high bit set, and subtracting 0x01 from each byte borrows from
// none of them; a word holding 0x00 or a byte >= 0x80 shows a high bit
// in w or in w - 0x0101..01 (the lowest such byte gets no borrow from
// below, so it turns 0xFF or keeps its own high bit).
func plainASCII[T string | []byte](s T) int {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	n := len(s)
	for len(s) >= 8 {
		_ = s[7]
		w := uint64(s[0]) | uint64(s[1])<<8 | uint64(s[2])<<16 | uint64(s[3])<<24 |
			uint64(s[4])<<32 | uint64(s[5])<<40 | uint64(s[6])<<48 | uint64(s[7])<<56
		if (w|(w-ones))&highs != 0 {
			return n - len(s)
		}
		s = s[8:]
	}
	for len(s) > 0 && s[0] != 0 && s[0] < utf8.RuneSelf {
		s = s[1:]
	}
	return n - len(s)
}

// plainTopic reports whether b is 1..n bytes of 0x01..0x7F with neither
// wildcard ('+', '#'): a valid topic name, whose UTF-8 and wildcard checks
// it makes in one pass, eight bytes at a time. False means only that the
// full checks (validUTF8, hasWildcard) must decide. A word whose bytes are
// all below 0x80 and not 0x00 shows no high bit in w - 0x0101..01 (as in
// plainASCII); w ^ 0x2B2B..2B then has a zero byte exactly where w holds
// '+', and (w ^ 0x2B..) - 0x01.. shows a high bit iff it has one (every
// byte is below 0x80, so a byte gets its high bit only by a borrow chain
// that starts at a zero byte); the same for '#'.
func plainTopic(b []byte) bool {
	const ones, highs = 0x0101010101010101, 0x8080808080808080
	const plus, hash = '+' * ones, '#' * ones
	if len(b) == 0 {
		return false
	}
	for len(b) >= 8 {
		w := binary.LittleEndian.Uint64(b)
		if (w|(w-ones)|((w^plus)-ones)|((w^hash)-ones))&highs != 0 {
			return false
		}
		b = b[8:]
	}
	for _, c := range b {
		if c == 0 || c >= utf8.RuneSelf || c == '+' || c == '#' {
			return false
		}
	}
	return true
}

// aliasString returns a string sharing b's memory. The caller guarantees b
// is not modified while the string is in use (see Options.Alias and Detach).
func aliasString(b []byte) string {
	if len(b) == 0 {
		return ""
	}
	return unsafe.String(&b[0], len(b))
}

// reader walks a packet body. Every read is bounds-checked; a failed read
// sets r.bad and returns zero values, so decoders check once per field group
// and never index out of range.
type reader struct {
	b   []byte
	off int
	// users, when not nil, is the array the user property list decodes
	// into instead of a new one (decodeProperties).
	users *[]UserProperty
}

func (r *reader) remaining() int { return len(r.b) - r.off }

func (r *reader) u8() (byte, bool) {
	if r.off >= len(r.b) {
		return 0, false
	}
	c := r.b[r.off]
	r.off++
	return c, true
}

func (r *reader) u16() (uint16, bool) {
	if len(r.b)-r.off < 2 {
		return 0, false
	}
	v := uint16(r.b[r.off])<<8 | uint16(r.b[r.off+1])
	r.off += 2
	return v, true
}

func (r *reader) u32() (uint32, bool) {
	if len(r.b)-r.off < 4 {
		return 0, false
	}
	b := r.b[r.off:]
	v := uint32(b[0])<<24 | uint32(b[1])<<16 | uint32(b[2])<<8 | uint32(b[3])
	r.off += 4
	return v, true
}

// binary reads a 2-byte length and that many bytes. The result aliases the
// input and has its capacity clipped, so an append by the user cannot run
// into the next field.
func (r *reader) binary() ([]byte, bool) {
	n, ok := r.u16()
	if !ok || int(n) > len(r.b)-r.off {
		return nil, false
	}
	if n == 0 {
		return nil, true // empty binary fields decode as nil
	}
	s := r.b[r.off : r.off+int(n) : r.off+int(n)]
	r.off += int(n)
	return s, true
}

// str reads a UTF-8 string. ok is false when the input is short; valid is
// false when the bytes are not a well-formed MQTT string.
func (r *reader) str() (s string, ok, valid bool) {
	b, ok := r.binary()
	if !ok {
		return "", false, false
	}
	if !validUTF8(b) {
		return "", true, false
	}
	return aliasString(b), true, true
}

func (r *reader) varInt() (int, varIntResult) {
	v, n, res := parseVarInt(r.b[r.off:])
	if res == varIntOK {
		r.off += n
	}
	return v, res
}

// rest returns the unread bytes (capacity clipped) and consumes them.
func (r *reader) rest() []byte {
	if r.off == len(r.b) {
		return nil
	}
	s := r.b[r.off:len(r.b):len(r.b)]
	r.off = len(r.b)
	return s
}

// validUTF8String is validUTF8 for a string.
func validUTF8String(s string) bool {
	s = s[plainASCII(s):]
	return len(s) == 0 || strings.IndexByte(s, 0) < 0 && utf8.ValidString(s)
}
