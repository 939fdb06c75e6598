package record

import (
	"errors"
	"fmt"
)

// Sentinel errors of the record package. Callers test them with errors.Is.
var (
	// ErrCorrupt is wrapped by every *CorruptError: the bytes are not a
	// well-formed record, batch item or filler.
	ErrCorrupt = errors.New("record: corrupt")

	// ErrBlank is returned (wrapped, with the filler size) by Parse and Decode
	// when the bytes hold an end-of-segment filler instead of a message.
	ErrBlank = errors.New("record: blank filler")

	// ErrShortBuffer means a destination (or, for PeekHeader, source) buffer
	// is too small for the operation.
	ErrShortBuffer = errors.New("record: short buffer")

	// ErrTopicTooLong means a topic exceeds MaxTopicLen bytes.
	ErrTopicTooLong = errors.New("record: topic too long")

	// ErrPropertiesTooLong means an encoded properties string exceeds
	// MaxPropertiesLen bytes.
	ErrPropertiesTooLong = errors.New("record: properties too long")

	// ErrRecordTooLong means a body, record or filler does not fit the signed
	// 32-bit length fields of the format.
	ErrRecordTooLong = errors.New("record: record too long")

	// ErrBadHost means a born or store host address is not a valid IPv4 or
	// IPv6 address.
	ErrBadHost = errors.New("record: invalid host address")

	// ErrBadProperties means a property set cannot be encoded faithfully
	// (empty key or value, or a key or value holding 0x01 or 0x02).
	ErrBadProperties = errors.New("record: bad properties")

	// ErrBadMessageID means a string is not a well-formed offset message id
	// or unique message id.
	ErrBadMessageID = errors.New("record: bad message id")

	// ErrUnsupportedCompression means a body uses a compression type this
	// package does not implement (LZ4) or an unknown one.
	ErrUnsupportedCompression = errors.New("record: unsupported compression")

	// ErrDecompressedTooLarge means a compressed body inflates beyond the
	// caller's bound (zip-bomb guard).
	ErrDecompressedTooLarge = errors.New("record: decompressed body too large")
)

// CorruptError describes malformed input: which field is wrong and where.
// It wraps ErrCorrupt.
type CorruptError struct {
	Offset int    // byte offset of the field within the input given to the decoder
	Field  string // field name as in the format diagrams (e.g. "BODYLEN", "MAGICCODE")
	Reason string // what is wrong with it
}

// Error implements error, e.g.
// "record: corrupt BODYLEN at offset 84: length 5000 overruns record of 120 bytes".
func (e *CorruptError) Error() string {
	return fmt.Sprintf("record: corrupt %s at offset %d: %s", e.Field, e.Offset, e.Reason)
}

// Unwrap makes errors.Is(err, ErrCorrupt) true.
func (e *CorruptError) Unwrap() error { return ErrCorrupt }

func corrupt(off int, field, format string, args ...any) error {
	return &CorruptError{Offset: off, Field: field, Reason: fmt.Sprintf(format, args...)}
}
