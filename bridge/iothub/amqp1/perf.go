package amqp1

import (
	"fmt"
	"time"
)

// Descriptor codes (the low 32 bits; the domain, 0x00000000, is AMQP's).
const (
	CodeOpen        = 0x10
	CodeBegin       = 0x11
	CodeAttach      = 0x12
	CodeFlow        = 0x13
	CodeTransfer    = 0x14
	CodeDisposition = 0x15
	CodeDetach      = 0x16
	CodeEnd         = 0x17
	CodeClose       = 0x18
	CodeError       = 0x1d

	CodeAccepted = 0x24
	CodeRejected = 0x25
	CodeReleased = 0x26
	CodeModified = 0x27
	CodeSource   = 0x28
	CodeTarget   = 0x29

	CodeSASLMechanisms = 0x40
	CodeSASLInit       = 0x41
	CodeSASLOutcome    = 0x44

	CodeHeader                = 0x70
	CodeDeliveryAnnotations   = 0x71
	CodeMessageAnnotations    = 0x72
	CodeProperties            = 0x73
	CodeApplicationProperties = 0x74
	CodeData                  = 0x75
	CodeAMQPSequence          = 0x76
	CodeAMQPValue             = 0x77
	CodeFooter                = 0x78
)

// Link roles (attach and disposition).
const (
	RoleSender   = false
	RoleReceiver = true
)

// Error conditions used by the hub.
const (
	CondInternalError      Symbol = "amqp:internal-error"
	CondNotFound           Symbol = "amqp:not-found"
	CondUnauthorized       Symbol = "amqp:unauthorized-access"
	CondDecodeError        Symbol = "amqp:decode-error"
	CondResourceLimit      Symbol = "amqp:resource-limit-exceeded"
	CondNotAllowed         Symbol = "amqp:not-allowed"
	CondInvalidField       Symbol = "amqp:invalid-field"
	CondNotImplemented     Symbol = "amqp:not-implemented"
	CondFramingError       Symbol = "amqp:connection:framing-error"
	CondMessageSize        Symbol = "amqp:link:message-size-exceeded"
	CondDetachForced       Symbol = "amqp:link:detach-forced"
	CondArgumentError      Symbol = "com.microsoft:argument-error"
	CondThrottled          Symbol = "com.microsoft:device-container-throttled"
	CondTimeout            Symbol = "com.microsoft:timeout"
	CondPreconditionFailed Symbol = "com.microsoft:precondition-failed"
)

// Field accessors: a list's field i, read as a type; a missing or null
// field gives the zero value and false.

func field(f []any, i int) any {
	if i < len(f) {
		return f[i]
	}
	return nil
}

// Uint returns an unsigned field as a uint64.
func Uint(f []any, i int) (uint64, bool) {
	switch x := field(f, i).(type) {
	case uint8:
		return uint64(x), true
	case uint16:
		return uint64(x), true
	case uint32:
		return uint64(x), true
	case uint64:
		return x, true
	}
	return 0, false
}

// Bool returns a boolean field.
func Bool(f []any, i int) (bool, bool) {
	b, ok := field(f, i).(bool)
	return b, ok
}

// String returns a string or symbol field.
func String(f []any, i int) (string, bool) {
	switch x := field(f, i).(type) {
	case string:
		return x, true
	case Symbol:
		return string(x), true
	}
	return "", false
}

// Binary returns a binary field.
func Binary(f []any, i int) ([]byte, bool) {
	b, ok := field(f, i).([]byte)
	return b, ok
}

// Field returns field i as it was decoded (nil if absent).
func Field(f []any, i int) any { return field(f, i) }

// Terminus is a source's or target's address (the rest of it is echoed
// back as it came).
func Terminus(f []any, i int) (addr string, raw *Described) {
	d, ok := field(f, i).(*Described)
	if !ok {
		return "", nil
	}
	if l, ok := d.Value.([]any); ok {
		addr, _ = String(l, 0)
	}
	return addr, d
}

// Perf builds a described list with a numeric code, dropping
// trailing nulls.
func Perf(code uint64, fields ...any) *Described {
	for len(fields) > 0 && fields[len(fields)-1] == nil {
		fields = fields[:len(fields)-1]
	}
	if fields == nil {
		fields = []any{}
	}
	return &Described{Descriptor: code, Value: fields}
}

// Error builds an error (0x1d) with a condition and description.
func Error(cond Symbol, description string) *Described {
	return Perf(CodeError, cond, description)
}

// ErrorOf reads an error field (of detach, end, close or rejected) as
// "condition: description"; "" when there is none.
func ErrorOf(v any) string {
	d, ok := v.(*Described)
	if !ok {
		return ""
	}
	l, _ := d.Value.([]any)
	c, _ := String(l, 0)
	desc, _ := String(l, 1)
	if desc == "" {
		return c
	}
	return c + ": " + desc
}

// Message is a message's sections as the hub reads them.
type Message struct {
	MessageID     any // string, UUID, uint64 or []byte, as sent
	UserID        []byte
	To            string
	Subject       string
	ReplyTo       string
	CorrelationID any
	ContentType   string
	Encoding      string
	Expiry        time.Time // absolute-expiry-time; zero when absent
	// Annotations are the message annotations; Properties the
	// application properties (keys are strings).
	Annotations *Map
	Properties  *Map
	// Data is the body's data sections, joined; Value the amqp-value
	// section's value when the body is one.
	Data  []byte
	Value any
}

// IDString formats a message-id or correlation-id as text: a string as
// it is, a UUID in its canonical form, a number in decimal, binary in
// hex.
func IDString(v any) string {
	switch x := v.(type) {
	case nil:
		return ""
	case string:
		return x
	case UUID:
		return x.String()
	case uint64:
		return fmt.Sprint(x)
	case []byte:
		return fmt.Sprintf("%x", x)
	}
	return fmt.Sprint(v)
}

// DecodeMessage decodes a message's sections (a transfer's payload,
// joined over its frames).
func DecodeMessage(b []byte) (*Message, error) {
	m := &Message{}
	for len(b) > 0 {
		v, rest, err := Decode(b)
		if err != nil {
			return nil, err
		}
		b = rest
		d, ok := v.(*Described)
		if !ok {
			return nil, fmt.Errorf("%w: message section is a %T", ErrMalformed, v)
		}
		code, _ := d.Code()
		switch code {
		case CodeHeader, CodeDeliveryAnnotations, CodeFooter, CodeAMQPSequence:
		case CodeMessageAnnotations:
			m.Annotations, _ = d.Value.(*Map)
		case CodeApplicationProperties:
			p, ok := d.Value.(*Map)
			if !ok {
				return nil, fmt.Errorf("%w: application properties are a %T", ErrMalformed, d.Value)
			}
			m.Properties = p
		case CodeProperties:
			f, ok := d.Value.([]any)
			if !ok {
				return nil, fmt.Errorf("%w: properties are a %T", ErrMalformed, d.Value)
			}
			m.MessageID = field(f, 0)
			m.UserID, _ = Binary(f, 1)
			m.To, _ = String(f, 2)
			m.Subject, _ = String(f, 3)
			m.ReplyTo, _ = String(f, 4)
			m.CorrelationID = field(f, 5)
			m.ContentType, _ = String(f, 6)
			m.Encoding, _ = String(f, 7)
			if t, ok := field(f, 8).(time.Time); ok {
				m.Expiry = t
			}
		case CodeData:
			p, ok := d.Value.([]byte)
			if !ok {
				return nil, fmt.Errorf("%w: data section is a %T", ErrMalformed, d.Value)
			}
			m.Data = append(m.Data, p...)
		case CodeAMQPValue:
			m.Value = d.Value
		default:
			return nil, fmt.Errorf("%w: message section %v", ErrMalformed, d.Descriptor)
		}
	}
	return m, nil
}
