package protocol

import (
	"strconv"
)

// ExtFields carries a command's custom header fields. Every value is a
// string, as on the wire (numbers in decimal, booleans "true"/"false").
type ExtFields map[string]string

// HeaderEncoder is implemented by typed headers: EncodeFields writes the
// header's fields into f (no reflection).
type HeaderEncoder interface {
	EncodeFields(f ExtFields)
}

// HeaderDecoder is implemented by typed headers: DecodeFields fills the
// header from f and names the first missing or malformed field in its error.
type HeaderDecoder interface {
	DecodeFields(f ExtFields) error
}

// Command is one remoting frame: a request or a response. A received
// command's Body aliases the frame buffer it was decoded from and belongs to
// the receiver; its Remark and ExtFields are copies and stay valid for
// ever. A receiver done with Body (and every slice of it) may call Recycle
// so that the buffer can be reused.
type Command struct {
	Code      int32
	Language  LanguageCode
	Version   int32
	Opaque    int32
	Flag      int32
	Remark    string
	ExtFields ExtFields
	Body      []byte

	// BodyBuffers, if set, are written after Body as further parts of the
	// body without being copied (e.g. mapped store slices). Release, if
	// set, runs exactly once after the frame was written or dropped.
	BodyBuffers [][]byte
	Release     func()

	// SerializeType is the header encoding used on the wire: the one the
	// command was received in, or the one to send it in.
	SerializeType SerializeType

	// ref is the receive buffer Body lives in, if the decoder was given
	// one (DecodeFrameRef); Recycle drops it.
	ref BufferRef
}

// BufferRef is one reference to a shared receive buffer: the buffer may be
// reused once every reference to it was dropped with Unref. Unref is called
// at most once per reference.
type BufferRef interface {
	Unref()
}

// Recycle declares that the caller keeps no reference to c.Body, nor to
// any slice of it, from now on: the receive buffer Body was decoded into
// may then be reused for other frames, and c.Body is set to nil. Remark,
// ExtFields and the other fields stay valid. It is a no-op on commands that
// were not decoded into a shared buffer (NewRequest, NewResponse,
// DecodeFrame) and on a second call; it must not race with another use of
// c. A command that is never recycled simply keeps its buffer from being
// reused.
func (c *Command) Recycle() {
	if r := c.ref; r != nil {
		c.ref = nil
		c.Body = nil
		r.Unref()
	}
}

// NewRequest returns a request command with the given code, header fields
// (hdr may be nil) and body, stamped with SmartGo's language and version.
func NewRequest(code int32, hdr HeaderEncoder, body []byte) *Command {
	c := &Command{Code: code, Language: LanguageGo, Version: CurrentVersion, Body: body}
	if hdr != nil {
		c.ExtFields = make(ExtFields, fieldsHint(hdr))
		hdr.EncodeFields(c.ExtFields)
	}
	return c
}

// fieldCounter is implemented by headers with more than 8 fields, so that
// their map is sized once instead of grown.
type fieldCounter interface{ numFields() int }

func fieldsHint(hdr HeaderEncoder) int {
	if fc, ok := hdr.(fieldCounter); ok {
		return fc.numFields()
	}
	return 8
}

// NewResponse returns a response command with the given code and remark.
// Opaque and serialize type are filled in when the response is written for
// a request (see Command.ResponseTo).
func NewResponse(code int32, remark string) *Command {
	return &Command{Code: code, Language: LanguageGo, Version: CurrentVersion, Flag: FlagResponse, Remark: remark}
}

// ResponseTo makes c a response to req: response bit, req's opaque and
// serialize type.
func (c *Command) ResponseTo(req *Command) *Command {
	c.Flag |= FlagResponse
	c.Opaque = req.Opaque
	c.SerializeType = req.SerializeType
	return c
}

// SetHeader encodes hdr into c's extFields (created if nil) and returns c.
func (c *Command) SetHeader(hdr HeaderEncoder) *Command {
	if c.ExtFields == nil {
		c.ExtFields = make(ExtFields, fieldsHint(hdr))
	}
	hdr.EncodeFields(c.ExtFields)
	return c
}

// DecodeHeader decodes c's extFields into hdr. A nil ExtFields decodes as
// an empty map (required fields then fail).
func (c *Command) DecodeHeader(hdr HeaderDecoder) error {
	return hdr.DecodeFields(c.ExtFields)
}

// IsResponse reports whether the response bit is set.
func (c *Command) IsResponse() bool { return c.Flag&FlagResponse != 0 }

// IsOneway reports whether the oneway bit is set.
func (c *Command) IsOneway() bool { return c.Flag&FlagOneway != 0 }

// MarkOneway sets the oneway bit.
func (c *Command) MarkOneway() { c.Flag |= FlagOneway }

// BodyLen is the total body length: Body plus every BodyBuffers part.
func (c *Command) BodyLen() int {
	n := len(c.Body)
	for _, b := range c.BodyBuffers {
		n += len(b)
	}
	return n
}

// ReleaseBody runs and clears the Release callback, if any.
func (c *Command) ReleaseBody() {
	if r := c.Release; r != nil {
		c.Release = nil
		r()
	}
}

// String is a short description for logs (no body).
func (c *Command) String() string {
	kind := "request"
	if c.IsResponse() {
		kind = "response"
	}
	return kind + "{code=" + strconv.Itoa(int(c.Code)) + " opaque=" + strconv.Itoa(int(c.Opaque)) +
		" flag=" + strconv.Itoa(int(c.Flag)) + " remark=" + strconv.Quote(c.Remark) +
		" body=" + strconv.Itoa(c.BodyLen()) + "}"
}
