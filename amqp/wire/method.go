package wire

import (
	"encoding/binary"
	"fmt"
)

// Method is one method frame's arguments. Every method type of this
// package implements it with a pointer receiver: *BasicPublish,
// *ConnectionStart and so on.
type Method interface {
	ClassID() uint16
	MethodID() uint16
	// HasContent reports whether a content header and body follow it
	// (basic.publish, basic.return, basic.deliver, basic.get-ok).
	HasContent() bool
	// AppendArgs appends the arguments (after class and method ids).
	AppendArgs(dst []byte) []byte
	decodeArgs(b []byte) error
}

// DecodeMethod decodes a method frame's payload: class id, method id,
// arguments. The result is a pointer to one of this package's method
// types; its strings and tables are copies, so it stays valid after the
// next ReadFrame. An unknown class or method gives ErrUnknownMethod,
// truncated or malformed arguments (or bytes after the last argument)
// ErrMalformed, both wrapped with the method's ids or name.
func DecodeMethod(payload []byte) (Method, error) {
	if len(payload) < 4 {
		return nil, fmt.Errorf("%w: method frame of %d bytes", ErrMalformed, len(payload))
	}
	class := binary.BigEndian.Uint16(payload)
	method := binary.BigEndian.Uint16(payload[2:])
	m := newMethod(methodKey(class, method))
	if m == nil {
		return nil, fmt.Errorf("%w: class %d method %d", ErrUnknownMethod, class, method)
	}
	if err := m.decodeArgs(payload[4:]); err != nil {
		return nil, fmt.Errorf("wire: %s: %w", MethodName(class, method), err)
	}
	return m, nil
}

// AppendMethodPayload appends m's class id, method id and arguments: a
// method frame's payload.
func AppendMethodPayload(dst []byte, m Method) []byte {
	dst = appendShort(dst, m.ClassID())
	dst = appendShort(dst, m.MethodID())
	return m.AppendArgs(dst)
}

// AppendMethodFrame appends a whole method frame for m on channel.
func AppendMethodFrame(dst []byte, channel uint16, m Method) []byte {
	dst, start := beginFrame(dst, FrameMethod, channel)
	dst = AppendMethodPayload(dst, m)
	return endFrame(dst, start)
}

// MethodName returns a method's name as the spec writes it, e.g.
// "basic.publish", or "class 70 method 10" for one this codec does not
// know.
func MethodName(classID, methodID uint16) string {
	if n, ok := methodNames[methodKey(classID, methodID)]; ok {
		return n
	}
	return fmt.Sprintf("class %d method %d", classID, methodID)
}

// Name returns m's name as the spec writes it, e.g. "basic.publish".
func Name(m Method) string { return MethodName(m.ClassID(), m.MethodID()) }

// noArgs gives a method without arguments its AppendArgs and decodeArgs.
type noArgs struct{}

func (noArgs) AppendArgs(dst []byte) []byte { return dst }

func (noArgs) decodeArgs(b []byte) error { return (&decoder{b: b}).finish() }
