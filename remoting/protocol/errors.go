package protocol

import "errors"

// Sentinel errors. Callers test with errors.Is; returned errors wrap these
// with the detail (field name, sizes, offsets).
var (
	// ErrFrameTooLarge reports a frame whose length word exceeds the limit.
	// It is detected before any allocation for the frame.
	ErrFrameTooLarge = errors.New("protocol: frame too large")
	// ErrBadFrame reports a frame whose length words are inconsistent
	// (length < 4, header length larger than the frame).
	ErrBadFrame = errors.New("protocol: malformed frame")
	// ErrUnknownSerializeType reports a header-length word whose high byte
	// is neither JSON (0) nor ROCKETMQ (1).
	ErrUnknownSerializeType = errors.New("protocol: unknown serialize type")
	// ErrBadHeader reports a JSON or binary header that cannot be decoded.
	ErrBadHeader = errors.New("protocol: malformed header")
	// ErrHeaderTooLarge reports a header that does not fit the 24-bit
	// header length.
	ErrHeaderTooLarge = errors.New("protocol: header too large")
	// ErrMissingField reports a required extFields key that is absent.
	ErrMissingField = errors.New("protocol: missing header field")
	// ErrBadField reports an extFields value that does not parse as the
	// field's type.
	ErrBadField = errors.New("protocol: bad header field")
	// ErrBadBody reports a body that cannot be decoded.
	ErrBadBody = errors.New("protocol: malformed body")
)
