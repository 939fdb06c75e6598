package protocol

import (
	"fmt"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"unsafe"
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
// ever. A request decoded by DecodeFrameWith may carry its extFields as a
// field list instead, with ExtFields nil: read them with DecodeHeader or
// Fields. When it was decoded in a shared receive buffer the list lives
// in that buffer, and the strings DecodeHeader puts into a typed header
// with a generated decoder (a send's Topic, Properties, ...) are slices
// of it, valid until Recycle like Body (see Recycle). A receiver done
// with Body (and every slice of it) may call Recycle so that the buffer
// can be reused.
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

	// list holds a received command's extFields members when the decoder
	// was asked not to build ExtFields (DecodeFrameWith; see fieldList),
	// listErr what was wrong with them if they are not a well-formed
	// object; hdr is the typed header of a command built with WithHeader.
	// Each stands for ExtFields while it is nil (Fields).
	list    fieldList
	listErr error
	hdr     jsonFieldsAppender
	// lent: list lives in the receive buffer of ref (fieldList), so it
	// goes with Recycle.
	lent bool
	// shaped: list was read by a learned shape, whose constant members
	// DecodeSendHeader takes decoded (headershape_send.go).
	shaped shapedList
}

// jsonFieldsDecoder is implemented by the typed headers that have a
// generated decoder reading a received command's field list directly:
// it reports false when it cannot decode exactly as DecodeFields would
// from the map (a missing or malformed field: DecodeFields then says
// which).
type jsonFieldsDecoder interface {
	decodeFieldList(l fieldList) bool
}

// jsonFieldsAppender is implemented by the typed headers that have a
// generated writer of their extFields: the members of the JSON object
// (without braces) with the keys sorted, the bytes EncodeFields and
// appendExtFieldsJSON would write.
type jsonFieldsAppender interface {
	HeaderEncoder
	appendJSONFields(dst []byte) []byte
}

// Fields returns c's extFields as a map: ExtFields, built first (and kept
// in ExtFields) from the field list a received command kept
// (DecodeFrameWith) or the typed header it was built with (WithHeader).
// Members that are not a well-formed object give nil (DecodeHeader
// reports the error). The map owns its strings: they stay valid after
// Recycle. Like Recycle it must not race with another use of c.
func (c *Command) Fields() ExtFields {
	if c.ExtFields == nil {
		c.OwnFields()
		c.ExtFields = c.fieldsMap()
	}
	c.list, c.listErr, c.hdr = "", nil, nil
	return c.ExtFields
}

// BufferRef is one reference to a shared receive buffer: the buffer may be
// reused once every reference to it was dropped with Unref. Unref is called
// at most once per reference.
type BufferRef interface {
	Unref()
}

// Recycle declares that the caller keeps no reference to c.Body, nor to
// any slice of it, nor to a string DecodeHeader decoded from a field list
// kept in the receive buffer (see Command), from now on: the receive
// buffer c was decoded into may then be reused for other frames, and
// c.Body is set to nil, as is such a field list (DecodeHeader then finds
// no fields; OwnFields before Recycle keeps them). Remark, ExtFields and
// the other fields stay valid. Whoever keeps a header string beyond
// Recycle (a map key, a callback run later) keeps a copy
// (strings.Clone). It is a no-op on commands that were not decoded into a
// shared buffer (NewRequest, NewResponse, DecodeFrame) and on a second
// call; it must not race with another use of c. A command that is never
// recycled simply keeps its buffer from being reused.
func (c *Command) Recycle() {
	if r := c.ref; r != nil {
		if poisonRecycled.Load() {
			c.poison()
		}
		c.ref = nil
		c.Body = nil
		if c.lent {
			c.list, c.lent = "", false
		}
		r.Unref()
	}
}

// Done declares that nobody uses c any more, neither its fields nor
// anything Recycle releases: it recycles c and, for a command decoded in
// a shared receive buffer (DecodeFrameWith with a BufferRef), hands the
// Command itself to a later decode. It is for whoever owns c last (the
// remoting connection, for processors registered with
// RegisterOptions.NoKeep); a command nobody calls Done on is garbage
// collected as any other. With SetPoisonRecycled, c is not reused but
// left with poisoned fields (an opaque nobody waits for), so that a
// stale reference shows.
func (c *Command) Done() {
	if c.ref == nil {
		return // not decoded in a shared buffer, or Done already
	}
	c.Recycle()
	if poisonRecycled.Load() {
		*c = Command{Code: poisonCode, Opaque: poisonCode, Flag: FlagResponse, Remark: "protocol: command used after Done"}
		return
	}
	*c = Command{}
	commandPool.Put(c)
}

// commandPool holds the Commands of requests that are Done, for the
// decoding of later frames in shared receive buffers.
var commandPool = sync.Pool{New: func() any { return new(Command) }}

// poisonCode is the code and opaque of a poisoned Command (Done).
const poisonCode = -0x24242425

// OwnFields copies a field list kept in the receive buffer (see Command)
// into an allocation of its own, so that DecodeHeader and Fields still
// read it after Recycle: for a processor that keeps the request beyond
// it (a held pull). The strings a typed header decoded before are not
// changed: decode again after OwnFields. A no-op on other commands.
func (c *Command) OwnFields() {
	c.unlazy()
	if c.lent {
		c.list, c.lent = fieldList(strings.Clone(string(c.list))), false
	}
}

// poisonRecycled makes Recycle overwrite the bytes it releases (Body and
// a field list in the receive buffer) with poisonByte, so that a test
// sees at once what kept a slice of them (SetPoisonRecycled).
var poisonRecycled atomic.Bool

const poisonByte = 0xDB

// SetPoisonRecycled turns the poisoning of released receive-buffer bytes
// on or off, for tests (also on with the build tag smartgo_poison): a
// string or slice of a request kept beyond Recycle then reads as 0xDB
// bytes instead of, some time later, another frame's bytes. It returns
// the previous setting.
func SetPoisonRecycled(on bool) bool { return poisonRecycled.Swap(on) }

func (c *Command) poison() {
	for i := range c.Body {
		c.Body[i] = poisonByte
	}
	if c.lent && c.list != "" {
		// The list's bytes are the receive buffer's (a []byte).
		b := unsafe.Slice(unsafe.StringData(string(c.list)), len(c.list))
		for i := range b {
			b[i] = poisonByte
		}
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

// fieldsMap is Fields for an encoder: the map is built on the side, c is
// not changed.
func (c *Command) fieldsMap() ExtFields {
	switch {
	case c.ExtFields != nil:
		return c.ExtFields
	case c.list != "":
		return c.wholeList().fields()
	case c.hdr != nil:
		f := make(ExtFields, fieldsHint(c.hdr))
		c.hdr.EncodeFields(f)
		return f
	}
	return nil
}

// SetHeader encodes hdr into c's extFields (created if nil) and returns c.
func (c *Command) SetHeader(hdr HeaderEncoder) *Command {
	c.Fields() // a header kept by WithHeader goes into the map first
	if c.ExtFields == nil {
		c.ExtFields = make(ExtFields, fieldsHint(hdr))
	}
	hdr.EncodeFields(c.ExtFields)
	return c
}

// WithHeader is SetHeader for a command whose extFields are only hdr's:
// a header with a generated JSON writer (SendMessageResponseHeader,
// PullMessageResponseHeader) is kept as it is, and its fields are written
// straight into the frame, without the ExtFields map, which stays nil
// (Fields builds it on demand). hdr must not change until c was written.
// Other headers, and commands that have extFields already, get SetHeader.
func (c *Command) WithHeader(hdr HeaderEncoder) *Command {
	if a, ok := hdr.(jsonFieldsAppender); ok && c.ExtFields == nil && c.list == "" && c.listErr == nil && c.hdr == nil {
		c.hdr = a
		return c
	}
	return c.SetHeader(hdr)
}

// DecodeHeader decodes c's extFields into hdr. A nil ExtFields decodes as
// an empty map (required fields then fail). The field list of a command
// decoded by DecodeFrameWith is read straight into headers that have a
// generated decoder (the send and pull requests), without building the
// map.
func (c *Command) DecodeHeader(hdr HeaderDecoder) error {
	if c.ExtFields == nil {
		if c.listErr != nil {
			return c.listErr
		}
		c.unlazy()
		if d, ok := hdr.(jsonFieldsDecoder); ok && c.list != "" && d.decodeFieldList(c.list) {
			return nil
		}
	}
	return hdr.DecodeFields(c.Fields())
}

// parseRawFields reads extFields text found by rawExtFields into a map.
// The text is a whole JSON value (skip found its end) but its members
// were not checked: a malformed object is an error here.
func parseRawFields(raw string) (ExtFields, error) {
	s := jsonScanner{s: raw}
	f, err := s.extFields()
	if err == nil && s.peek() != 0 {
		err = s.errorf("trailing data after extFields")
	}
	if err != nil {
		return nil, fmt.Errorf("extFields: %w", err)
	}
	return f, nil
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
