package wire

import (
	"encoding/binary"
	"fmt"
	"time"
)

// Property flags of the basic class, in the first flag word of a content
// header: bit 15 is the first property (content-type), bit 2 the last
// (cluster-id). Bit 1 is unused; bit 0 says another flag word follows.
const (
	FlagContentType     = 1 << 15
	FlagContentEncoding = 1 << 14
	FlagHeaders         = 1 << 13
	FlagDeliveryMode    = 1 << 12
	FlagPriority        = 1 << 11
	FlagCorrelationID   = 1 << 10
	FlagReplyTo         = 1 << 9
	FlagExpiration      = 1 << 8
	FlagMessageID       = 1 << 7
	FlagTimestamp       = 1 << 6
	FlagType            = 1 << 5
	FlagUserID          = 1 << 4
	FlagAppID           = 1 << 3
	FlagClusterID       = 1 << 2
	flagReserved        = 1 << 1
	flagContinuation    = 1 << 0
)

// Properties are the basic class's content properties (§4.2.6).
type Properties struct {
	ContentType, ContentEncoding string
	Headers                      Table
	DeliveryMode                 uint8
	Priority                     uint8
	CorrelationID, ReplyTo       string
	Expiration, MessageID        string
	Timestamp                    time.Time
	Type, UserID, AppID          string
	ClusterID                    string
	// Flags says which properties are present (the Flag constants). On
	// decode it is the first flag word without the continuation bit. On
	// encode, when non-zero, exactly the flagged properties are written
	// (zero values included); when zero, the non-zero fields are.
	Flags uint16
}

// ContentHeader is a content header frame's payload, its properties left
// encoded.
type ContentHeader struct {
	ClassID  uint16
	BodySize uint64
	// Raw is the property flags and property list exactly as received
	// (aliasing the frame payload: copy before the next ReadFrame); the
	// engine stores and forwards it without re-encoding.
	Raw []byte
}

// contentHeaderFixed is the class id, weight and body size before the
// property flags.
const contentHeaderFixed = 12

// DecodeContentHeader decodes a content header frame's payload: class id,
// weight (ignored; the spec says it is zero), body size and the property
// flags and list, whose structure it checks without decoding the values.
// Flag words after the first (continuation bit set) are accepted only
// when they flag no property, since no property is defined for them; a
// flag for the unused bit 1 is malformed as well.
func DecodeContentHeader(payload []byte) (ContentHeader, error) {
	if len(payload) < contentHeaderFixed+2 {
		return ContentHeader{}, fmt.Errorf("wire: content header: %w", errTruncated)
	}
	h := ContentHeader{
		ClassID:  binary.BigEndian.Uint16(payload),
		BodySize: binary.BigEndian.Uint64(payload[4:]),
		Raw:      payload[contentHeaderFixed:],
	}
	if err := walkProperties(h.Raw, nil); err != nil {
		return ContentHeader{}, fmt.Errorf("wire: content header: %w", err)
	}
	return h, nil
}

// DecodeProperties decodes a content header's property flags and list (a
// ContentHeader's Raw). Strings and tables are copies.
func DecodeProperties(raw []byte) (Properties, error) {
	var p Properties
	if err := walkProperties(raw, &p); err != nil {
		return Properties{}, fmt.Errorf("wire: properties: %w", err)
	}
	return p, nil
}

// walkProperties checks raw's structure and, when p is not nil, decodes
// the properties into it.
func walkProperties(raw []byte, p *Properties) error {
	d := decoder{b: raw}
	flags := d.short()
	if d.err != nil {
		return d.err
	}
	if flags&flagReserved != 0 {
		return fmt.Errorf("%w: property flag bit 1 is not a property", ErrMalformed)
	}
	for w := flags; w&flagContinuation != 0; {
		w = d.short()
		if d.err != nil {
			return d.err
		}
		if w&^flagContinuation != 0 {
			return fmt.Errorf("%w: property flags 0x%04x in a continuation word", ErrMalformed, w)
		}
	}
	decoding := p != nil
	var sink Properties
	if decoding {
		p.Flags = flags &^ flagContinuation
	} else {
		p = &sink
	}
	str := func(flag uint16, dst *string) {
		if flags&flag == 0 {
			return
		}
		if !decoding {
			d.take(int(d.octet()))
			return
		}
		*dst = d.shortstr()
	}
	q := p
	str(FlagContentType, &q.ContentType)
	str(FlagContentEncoding, &q.ContentEncoding)
	if flags&FlagHeaders != 0 && d.err == nil {
		if decoding {
			q.Headers = d.table()
		} else {
			n, err := skipTable(d.b, 0)
			if err != nil {
				return err
			}
			d.b = d.b[n:]
		}
	}
	if flags&FlagDeliveryMode != 0 {
		q.DeliveryMode = d.octet()
	}
	if flags&FlagPriority != 0 {
		q.Priority = d.octet()
	}
	str(FlagCorrelationID, &q.CorrelationID)
	str(FlagReplyTo, &q.ReplyTo)
	str(FlagExpiration, &q.Expiration)
	str(FlagMessageID, &q.MessageID)
	if flags&FlagTimestamp != 0 {
		ts := d.longlong()
		if decoding {
			q.Timestamp = time.Unix(int64(ts), 0).UTC()
		}
	}
	str(FlagType, &q.Type)
	str(FlagUserID, &q.UserID)
	str(FlagAppID, &q.AppID)
	str(FlagClusterID, &q.ClusterID)
	return d.finish()
}

// AppendProperties appends p's property flags and list: what a
// ContentHeader's Raw holds. A string longer than 255 bytes, a header of
// a Go type tables cannot hold, or Flags with bit 0 or 1 set is an error
// (dst is returned unchanged).
func AppendProperties(dst []byte, p Properties) ([]byte, error) {
	flags := p.Flags
	if flags&(flagReserved|flagContinuation) != 0 {
		return dst, fmt.Errorf("wire: property flags 0x%04x set bit 0 or 1", flags)
	}
	if flags == 0 {
		flags = p.presentFlags()
	}
	out := appendShort(dst, flags)
	var err error
	str := func(flag uint16, name, s string) {
		if flags&flag == 0 || err != nil {
			return
		}
		if len(s) > maxShortstr {
			err = fmt.Errorf("wire: property %s: %d bytes, at most 255", name, len(s))
			return
		}
		out = appendShortstr(out, s)
	}
	str(FlagContentType, "content-type", p.ContentType)
	str(FlagContentEncoding, "content-encoding", p.ContentEncoding)
	if flags&FlagHeaders != 0 && err == nil {
		if out, err = AppendTable(out, p.Headers); err != nil {
			err = fmt.Errorf("wire: property headers: %w", err)
		}
	}
	if flags&FlagDeliveryMode != 0 {
		out = append(out, p.DeliveryMode)
	}
	if flags&FlagPriority != 0 {
		out = append(out, p.Priority)
	}
	str(FlagCorrelationID, "correlation-id", p.CorrelationID)
	str(FlagReplyTo, "reply-to", p.ReplyTo)
	str(FlagExpiration, "expiration", p.Expiration)
	str(FlagMessageID, "message-id", p.MessageID)
	if flags&FlagTimestamp != 0 {
		out = appendLonglong(out, uint64(p.Timestamp.Unix()))
	}
	str(FlagType, "type", p.Type)
	str(FlagUserID, "user-id", p.UserID)
	str(FlagAppID, "app-id", p.AppID)
	str(FlagClusterID, "cluster-id", p.ClusterID)
	if err != nil {
		return dst, err
	}
	return out, nil
}

// presentFlags flags p's non-zero fields.
func (p *Properties) presentFlags() uint16 {
	var f uint16
	set := func(flag uint16, present bool) {
		if present {
			f |= flag
		}
	}
	set(FlagContentType, p.ContentType != "")
	set(FlagContentEncoding, p.ContentEncoding != "")
	set(FlagHeaders, len(p.Headers) > 0)
	set(FlagDeliveryMode, p.DeliveryMode != 0)
	set(FlagPriority, p.Priority != 0)
	set(FlagCorrelationID, p.CorrelationID != "")
	set(FlagReplyTo, p.ReplyTo != "")
	set(FlagExpiration, p.Expiration != "")
	set(FlagMessageID, p.MessageID != "")
	set(FlagTimestamp, !p.Timestamp.IsZero())
	set(FlagType, p.Type != "")
	set(FlagUserID, p.UserID != "")
	set(FlagAppID, p.AppID != "")
	set(FlagClusterID, p.ClusterID != "")
	return f
}

// ContentHeaderFrameSize is the size of the frame AppendContentHeaderFrame
// writes for raw: the 7-byte frame header, class id, weight and body
// size (12 bytes), the properties (at least the 2-byte flag word) and the
// frame-end octet. A peer's frame-max bounds it: a content header is
// never split across frames (AMQP 0-9-1 §4.2.6).
func ContentHeaderFrameSize(raw []byte) int { return 7 + 12 + max(len(raw), 2) + 1 }

// AppendContentHeaderFrame appends a content header frame carrying raw
// properties (flags and list, as in ContentHeader.Raw); an empty raw is
// written as a zero flag word, no properties.
func AppendContentHeaderFrame(dst []byte, channel uint16, classID uint16, bodySize uint64, raw []byte) []byte {
	dst, start := beginFrame(dst, FrameHeader, channel)
	dst = appendShort(dst, classID)
	dst = appendShort(dst, 0)
	dst = appendLonglong(dst, bodySize)
	if len(raw) == 0 {
		dst = appendShort(dst, 0)
	} else {
		dst = append(dst, raw...)
	}
	return endFrame(dst, start)
}
