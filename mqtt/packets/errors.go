package packets

import (
	"errors"
	"fmt"
)

// Sentinel errors. Decode failures are returned as *Error values that wrap
// exactly one of them, so callers test with errors.Is and map to the wire
// with ReasonCodeOf.
var (
	// ErrIncomplete means the buffer does not yet hold a whole fixed header
	// or packet: read more bytes and try again. It is returned unwrapped
	// (no allocation) and is not a protocol violation.
	ErrIncomplete = errors.New("packets: incomplete packet")

	// ErrPacketTooLarge means the fixed header announces a packet larger
	// than the decoder's MaxPacketSize (v5 reason 0x95). It is detected from
	// the header alone, before the body is read or anything is allocated.
	ErrPacketTooLarge = errors.New("packets: packet too large")

	// ErrMalformed means the bytes cannot be parsed as the specification
	// says: bad fixed header flags, QoS 3, truncated fields, invalid UTF-8,
	// U+0000 in a string, a property not allowed in the packet, a variable
	// byte integer over 4 bytes, trailing bytes (v5 reason 0x81).
	ErrMalformed = errors.New("packets: malformed packet")

	// ErrProtocol means the packet parses but breaks a protocol rule: a
	// duplicated property, packet identifier 0, an empty SUBSCRIBE, an
	// invalid property value (v5 reason 0x82).
	ErrProtocol = errors.New("packets: protocol error")

	// ErrTopicNameInvalid means a PUBLISH (or will, or response) topic name
	// is empty or holds a wildcard (v5 reason 0x90).
	ErrTopicNameInvalid = errors.New("packets: topic name invalid")

	// ErrTopicFilterInvalid means a SUBSCRIBE or UNSUBSCRIBE topic filter
	// is not a valid filter or shared subscription (v5 reason 0x8F).
	ErrTopicFilterInvalid = errors.New("packets: topic filter invalid")

	// ErrTopicAliasInvalid means a PUBLISH carries Topic Alias 0 (v5
	// reason 0x94).
	ErrTopicAliasInvalid = errors.New("packets: topic alias invalid")

	// ErrUnsupportedProtocol means a CONNECT names a protocol or level this
	// codec does not speak (v5 reason 0x84, 3.1.1 return code 0x01).
	ErrUnsupportedProtocol = errors.New("packets: unsupported protocol name or version")

	// ErrEncode means AppendPacket or Size was given a packet that cannot be
	// encoded at the requested version (a field out of range, a property
	// the packet type does not allow, a string over 65535 bytes).
	ErrEncode = errors.New("packets: cannot encode packet")
)

// Error describes a decode (or encode) failure. It wraps one sentinel error.
type Error struct {
	// Packet is the packet type being decoded; 0 when the fixed header
	// itself is bad.
	Packet Type
	// Version is, for CONNECT, the protocol level read from the packet (0 if
	// the decoder did not get that far); otherwise the version passed in. A
	// server uses it to pick the CONNACK format for its refusal.
	Version Version
	// Detail says what was wrong, for logs.
	Detail string
	err    error
}

func (e *Error) Error() string {
	if e.Packet == 0 {
		return fmt.Sprintf("%s: %s", e.err, e.Detail)
	}
	return fmt.Sprintf("%s: %s: %s", e.err, e.Packet, e.Detail)
}

// Unwrap returns the sentinel error.
func (e *Error) Unwrap() error { return e.err }

// ReasonCode returns the MQTT 5 reason code that reports this error to the
// peer (in DISCONNECT or CONNACK).
func (e *Error) ReasonCode() ReasonCode { return ReasonCodeOf(e.err) }

func newError(sentinel error, t Type, v Version, format string, args ...any) *Error {
	return &Error{Packet: t, Version: v, Detail: fmt.Sprintf(format, args...), err: sentinel}
}

// ReasonCodeOf maps an error of this package onto the MQTT 5 reason code a
// server sends for it: malformed 0x81, protocol error 0x82, topic name
// invalid 0x90, topic filter invalid 0x8F, topic alias invalid 0x94, packet
// too large 0x95, unsupported protocol 0x84 (ErrIncomplete, which a caller
// sees only at end of stream, counts as malformed). nil gives 0x00 and any
// other error 0x80 unspecified error.
func ReasonCodeOf(err error) ReasonCode {
	switch {
	case err == nil:
		return ReasonSuccess
	case errors.Is(err, ErrMalformed), errors.Is(err, ErrIncomplete):
		return ReasonMalformedPacket
	case errors.Is(err, ErrProtocol):
		return ReasonProtocolError
	case errors.Is(err, ErrTopicNameInvalid):
		return ReasonTopicNameInvalid
	case errors.Is(err, ErrTopicFilterInvalid):
		return ReasonTopicFilterInvalid
	case errors.Is(err, ErrTopicAliasInvalid):
		return ReasonTopicAliasInvalid
	case errors.Is(err, ErrPacketTooLarge):
		return ReasonPacketTooLarge
	case errors.Is(err, ErrUnsupportedProtocol):
		return ReasonUnsupportedProtocolVersion
	}
	return ReasonUnspecifiedError
}
