package record

import (
	"encoding/binary"
	"unicode/utf8"
)

// JavaHashCode returns Java's String.hashCode of the UTF-8 text s: the sum
// of s[i]*31^(n-1-i) over its UTF-16 code units, in 32-bit signed
// arithmetic. Characters outside the Basic Multilingual Plane count as two
// units (a surrogate pair). Each byte of an invalid UTF-8 sequence counts as
// one U+FFFD, Go's decoding convention (Java may merge a truncated sequence
// into a single U+FFFD; RocketMQ clients never produce invalid UTF-8).
// The index uses it for topic+"#"+key. It does not allocate.
func JavaHashCode(s []byte) int32 { return JavaHashCodeFrom(0, s) }

// JavaHashCodeFrom continues JavaHashCode(p) (h) over s: it is
// JavaHashCode of p followed by s whenever p ends with a whole character
// or an ASCII byte follows it (a character never spans the two), such as
// the index's topic+"#" and key.
func JavaHashCodeFrom(h int32, s []byte) int32 {
	for i := 0; i < len(s); {
		if len(s)-i >= 8 {
			// Eight ASCII bytes at once: h*31^8 plus each byte times its
			// power, products that do not wait for one another (byte by
			// byte, each step waits for the last multiply).
			if w := binary.LittleEndian.Uint64(s[i:]); w&0x8080808080808080 == 0 {
				h = hash8(h, w)
				i += 8
				continue
			}
		}
		c := s[i]
		if c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		r, size := utf8.DecodeRune(s[i:])
		i += size
		h = hashRune(h, r)
	}
	return h
}

// JavaHashCodeString is JavaHashCode for a string.
func JavaHashCodeString(s string) int32 {
	var h int32
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			h = 31*h + int32(c)
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		i += size
		h = hashRune(h, r)
	}
	return h
}

// Powers of 31 (mod 2^32) for hash8.
const (
	p31x1 uint32 = 31         // 31^1
	p31x2 uint32 = 961        // 31^2
	p31x3 uint32 = 29791      // 31^3
	p31x4 uint32 = 923521     // 31^4
	p31x5 uint32 = 28629151   // 31^5
	p31x6 uint32 = 887503681  // 31^6
	p31x7 uint32 = 1742810335 // 31^7
	p31x8 uint32 = 2487512833 // 31^8
)

// hash8 is eight steps of h = 31*h + c for the bytes of w, first byte
// lowest, all below 0x80.
func hash8(h int32, w uint64) int32 {
	u := uint32(h)*p31x8 +
		uint32(w&0xFF)*p31x7 + uint32(w>>8&0xFF)*p31x6 + uint32(w>>16&0xFF)*p31x5 + uint32(w>>24&0xFF)*p31x4 +
		uint32(w>>32&0xFF)*p31x3 + uint32(w>>40&0xFF)*p31x2 + uint32(w>>48&0xFF)*p31x1 + uint32(w>>56)
	return int32(u)
}

func hashRune(h int32, r rune) int32 {
	if r < 0x10000 {
		return 31*h + r
	}
	r -= 0x10000
	h = 31*h + (0xD800 + (r>>10)&0x3FF) // high surrogate
	return 31*h + (0xDC00 + r&0x3FF)    // low surrogate
}

// TagsHash returns the consume-queue tagsCode of a TAGS value: Java's
// String.hashCode widened to int64 (0 for the empty tag).
func TagsHash(tag string) int64 { return int64(JavaHashCodeString(tag)) }

// TagsHashBytes is TagsHash for UTF-8 bytes. It does not allocate.
func TagsHashBytes(tag []byte) int64 { return int64(JavaHashCode(tag)) }
