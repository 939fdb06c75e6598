package protocol

import (
	"encoding/binary"
	"fmt"
	"strconv"
)

// StateStoreInvoke is SmartGo's own request code (not RocketMQ's; RocketMQ
// codes stay far below it): one state store command for one shard, sent by
// the MQTT front (bridge) to the broker that owns the shard. Header
// field shard! (decimal); body: StateStoreRequest, answered by Success with
// a StateStoreResponse body, or by an error code (ServiceNotAvailable when
// the broker does not own the shard, e.g. a slave or a wrong route;
// SystemError when the shard is stopped after a failure).
const StateStoreInvoke RequestCode = 9100

// StateStoreNotify (SmartGo only) is a one-way request from a broker to the
// front end whose connection last carried a request of a watching client:
// body a StateStoreResponse with an empty REPLY and VERSION whose
// notifications the front end pushes into the clients' sessions. Every
// change's notifications arrive this way, whichever front end's request
// (this one's included) or expiry made it, in the shard's log order and
// ahead of the response to the request that made it, a KEYNOTIFY ...
// SINCE's backlog too (ahead of its response, before any later change's);
// a response carries none, except from a broker of an earlier version (a
// SINCE backlog, those of the requester's own front end).
const StateStoreNotify RequestCode = 9101

// StateStoreDropClient (SmartGo only) tells a broker that an MQTT client
// disconnected: header field clientId!; the broker drops the client's
// KEYNOTIFY registrations on every shard it owns and answers Success.
const StateStoreDropClient RequestCode = 9102

// StateStoreFormat is the version byte that starts a state store request
// and response body.
const StateStoreFormat = 1

// maxStateStoreField bounds one length-prefixed field (the statestore
// engine's own limit for keys and values is far lower).
const maxStateStoreField = 256 << 20

// Flags of a StateStoreRequest body.
const (
	stsFlagTimestamp = 0x01
	stsFlagFencing   = 0x02
	stsFlagProtVer   = 0x04
	stsFlagsKnown    = stsFlagTimestamp | stsFlagFencing | stsFlagProtVer
)

// StateStoreRequest is one state store command as the MQTT front forwards
// it. Body layout (format 1; integers big-endian, a field is a uint32
// length then that many bytes):
//
//	size  field
//	   1  FORMAT     1
//	   1  FLAGS      0x01 TS, 0x02 FT, 0x04 PROTVER; other bits 0
//	 4+n  CLIENTID   MQTT client id of the requester
//	 4+n  TS         the __ts user property          if FLAGS&TS
//	 4+n  FT         the __ft user property          if FLAGS&FT
//	 4+n  PROTVER    the __protVer user property     if FLAGS&PROTVER
//	 4+n  DEDUP      statestore.DedupKey(correlation data, response topic); may be empty
//	   8  DEDUPTTL   int64 ms the reply stays cached (the message expiry); 0 = none
//	 4+n  PAYLOAD    the RESP3 request
//
// Nothing follows PAYLOAD. The shard travels in the header field "shard".
// TestStateStoreWireBytesPinned pins an example.
type StateStoreRequest struct {
	Shard           int32
	ClientID        string
	Timestamp       string
	HasTimestamp    bool
	FencingToken    string
	HasFencingToken bool
	ProtVer         string
	HasProtVer      bool
	DedupKey        []byte
	DedupTTLMillis  int64
	Payload         []byte
}

// StateStoreNotification is one KEYNOTIFY notification carried back in a
// StateStoreResponse for the front end to push into ClientID's session.
type StateStoreNotification struct {
	ClientID string
	Key      []byte
	Op       uint8 // 1 SET, 2 DELETE (statestore.Op)
	Value    []byte
	Version  string // HLC string form
}

// StateStoreResponse is the answer to a StateStoreRequest. Body layout
// (format 1, conventions as for the request):
//
//	size  field
//	   1  FORMAT     1
//	 4+n  REPLY      the RESP3 reply payload
//	 4+n  VERSION    the reply's __ts (HLC string form); empty = none. For
//	                 a KEYNOTIFY registration (+OK) the shard's clock, kept
//	                 by the front end (not sent to the client) to register
//	                 the watch again on another master with SINCE
//	   4  NNOTIF     uint32, then per notification:
//	        4+n CLIENTID, 4+n KEY, 1 OP (1 SET, 2 DELETE), 4+n VALUE, 4+n VERSION
//
// Nothing follows the last notification.
type StateStoreResponse struct {
	Reply         []byte
	Version       string
	Notifications []StateStoreNotification
}

// StateStoreSink receives the notifications a broker pushes to an
// in-process front end: the counterpart of StateStoreNotify for a front end
// that calls the broker's state store directly instead of over a
// connection. The broker remembers the sink a watching client's last
// request came through, as it remembers the connection, and compares
// sinks with ==, so a sink must be a comparable value (a pointer). The
// method is called on the goroutine of whichever change routes the
// notifications, with the shard's later ones held back until it
// returns: it must not block and must not call back into the broker.
type StateStoreSink interface {
	PushStateStoreNotifications([]StateStoreNotification)
}

// NewStateStoreRequest builds the StateStoreInvoke command for r.
func NewStateStoreRequest(r *StateStoreRequest) *Command {
	c := NewRequest(StateStoreInvoke, nil, r.AppendBody(nil))
	if c.ExtFields == nil {
		c.ExtFields = ExtFields{}
	}
	c.ExtFields["shard"] = strconv.FormatInt(int64(r.Shard), 10)
	return c
}

// AppendBody appends the request body (without the shard) to dst.
func (r *StateStoreRequest) AppendBody(dst []byte) []byte {
	var flags byte
	if r.HasTimestamp {
		flags |= stsFlagTimestamp
	}
	if r.HasFencingToken {
		flags |= stsFlagFencing
	}
	if r.HasProtVer {
		flags |= stsFlagProtVer
	}
	dst = append(dst, StateStoreFormat, flags)
	dst = appendSTSField(dst, []byte(r.ClientID))
	if r.HasTimestamp {
		dst = appendSTSField(dst, []byte(r.Timestamp))
	}
	if r.HasFencingToken {
		dst = appendSTSField(dst, []byte(r.FencingToken))
	}
	if r.HasProtVer {
		dst = appendSTSField(dst, []byte(r.ProtVer))
	}
	dst = appendSTSField(dst, r.DedupKey)
	dst = binary.BigEndian.AppendUint64(dst, uint64(r.DedupTTLMillis))
	return appendSTSField(dst, r.Payload)
}

// DecodeStateStoreRequest decodes a StateStoreInvoke command: the shard
// header field and the body. Byte slices alias c.Body. Errors wrap
// ErrMissingField, ErrBadField or ErrBadBody.
func DecodeStateStoreRequest(c *Command) (*StateStoreRequest, error) {
	fr := fieldReader{f: c.ExtFields, hdr: "StateStoreRequest"}
	shard := fr.i32("shard", true)
	if fr.err != nil {
		return nil, fr.err
	}
	r, err := DecodeStateStoreRequestBody(c.Body)
	if err != nil {
		return nil, err
	}
	r.Shard = shard
	return r, nil
}

// DecodeStateStoreRequestBody decodes a request body (the shard is left
// 0). Byte slices alias b. Errors wrap ErrBadBody; it never panics.
func DecodeStateStoreRequestBody(b []byte) (*StateStoreRequest, error) {
	d := stsDecoder{b: b}
	if v := d.byte(); d.err == nil && v != StateStoreFormat {
		return nil, fmt.Errorf("%w: state store request format %d", ErrBadBody, v)
	}
	flags := d.byte()
	if d.err == nil && flags&^stsFlagsKnown != 0 {
		return nil, fmt.Errorf("%w: state store request flags %#x", ErrBadBody, flags)
	}
	r := &StateStoreRequest{}
	r.ClientID = string(d.field())
	if flags&stsFlagTimestamp != 0 {
		r.Timestamp, r.HasTimestamp = string(d.field()), true
	}
	if flags&stsFlagFencing != 0 {
		r.FencingToken, r.HasFencingToken = string(d.field()), true
	}
	if flags&stsFlagProtVer != 0 {
		r.ProtVer, r.HasProtVer = string(d.field()), true
	}
	r.DedupKey = d.field()
	r.DedupTTLMillis = int64(d.u64())
	r.Payload = d.field()
	if d.err == nil && r.DedupTTLMillis < 0 {
		d.fail("negative dedup ttl")
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

// AppendBody appends the response body to dst.
func (r *StateStoreResponse) AppendBody(dst []byte) []byte {
	dst = append(dst, StateStoreFormat)
	dst = appendSTSField(dst, r.Reply)
	dst = appendSTSField(dst, []byte(r.Version))
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(r.Notifications)))
	for _, n := range r.Notifications {
		dst = appendSTSField(dst, []byte(n.ClientID))
		dst = appendSTSField(dst, n.Key)
		dst = append(dst, n.Op)
		dst = appendSTSField(dst, n.Value)
		dst = appendSTSField(dst, []byte(n.Version))
	}
	return dst
}

// DecodeStateStoreResponse decodes a response body. Byte slices alias b.
// Errors wrap ErrBadBody; it never panics.
func DecodeStateStoreResponse(b []byte) (*StateStoreResponse, error) {
	d := stsDecoder{b: b}
	if v := d.byte(); d.err == nil && v != StateStoreFormat {
		return nil, fmt.Errorf("%w: state store response format %d", ErrBadBody, v)
	}
	r := &StateStoreResponse{}
	r.Reply = d.field()
	r.Version = string(d.field())
	n := d.u32()
	// Each notification takes at least 17 bytes: bound n by what is left
	// before allocating.
	if d.err == nil && uint64(n) > uint64(len(d.b))/17 {
		d.fail("notification count exceeds body")
	}
	if d.err == nil && n > 0 {
		r.Notifications = make([]StateStoreNotification, 0, n)
	}
	for i := uint32(0); d.err == nil && i < n; i++ {
		var x StateStoreNotification
		x.ClientID = string(d.field())
		x.Key = d.field()
		x.Op = d.byte()
		x.Value = d.field()
		x.Version = string(d.field())
		if d.err == nil && x.Op != 1 && x.Op != 2 {
			d.fail("notification op " + strconv.Itoa(int(x.Op)))
		}
		r.Notifications = append(r.Notifications, x)
	}
	if d.err == nil && len(d.b) != 0 {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, d.err
	}
	return r, nil
}

func appendSTSField(dst, v []byte) []byte {
	dst = binary.BigEndian.AppendUint32(dst, uint32(len(v)))
	return append(dst, v...)
}

// stsDecoder reads the state store bodies; after the first error every
// read returns zero values.
type stsDecoder struct {
	b   []byte
	err error
}

func (d *stsDecoder) fail(what string) {
	if d.err == nil {
		d.err = fmt.Errorf("%w: state store body: %s", ErrBadBody, what)
	}
}

func (d *stsDecoder) byte() byte {
	if d.err != nil || len(d.b) < 1 {
		d.fail("truncated")
		return 0
	}
	v := d.b[0]
	d.b = d.b[1:]
	return v
}

func (d *stsDecoder) u32() uint32 {
	if d.err != nil || len(d.b) < 4 {
		d.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint32(d.b)
	d.b = d.b[4:]
	return v
}

func (d *stsDecoder) u64() uint64 {
	if d.err != nil || len(d.b) < 8 {
		d.fail("truncated")
		return 0
	}
	v := binary.BigEndian.Uint64(d.b)
	d.b = d.b[8:]
	return v
}

func (d *stsDecoder) field() []byte {
	n := d.u32()
	if d.err != nil {
		return nil
	}
	if n > maxStateStoreField || uint64(n) > uint64(len(d.b)) {
		d.fail("field length " + strconv.FormatUint(uint64(n), 10))
		return nil
	}
	v := d.b[:n:n]
	d.b = d.b[n:]
	return v
}
