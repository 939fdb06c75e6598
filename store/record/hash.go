package record

import "unicode/utf8"

// JavaHashCode returns Java's String.hashCode of the UTF-8 text s: the sum
// of s[i]*31^(n-1-i) over its UTF-16 code units, in 32-bit signed
// arithmetic. Characters outside the Basic Multilingual Plane count as two
// units (a surrogate pair). Each byte of an invalid UTF-8 sequence counts as
// one U+FFFD, Go's decoding convention (Java may merge a truncated sequence
// into a single U+FFFD; RocketMQ clients never produce invalid UTF-8).
// The index uses it for topic+"#"+key. It does not allocate.
func JavaHashCode(s []byte) int32 {
	var h int32
	for i := 0; i < len(s); {
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
