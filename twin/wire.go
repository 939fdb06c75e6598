package twin

import "fmt"

// WireFormat is the version byte that starts every twin wire body
// (request, reply, notification push, watch). FROZEN.
const WireFormat = 1

// Request FLAGS bits on the wire.
const (
	wireFlagConnected = 0x01
	wireFlagsKnown    = 0x01
)

// AppendBinary appends the wire form of a request (doc.go, "Wire
// request") to dst.
func (r *Request) AppendBinary(dst []byte) []byte {
	e := enc{b: dst}
	var flags byte
	if r.Connected {
		flags |= wireFlagConnected
	}
	e.u8(WireFormat)
	e.u8(byte(r.Op))
	e.u8(flags)
	e.u8(byte(r.Mode))
	e.str(r.DeviceID)
	e.str(r.ModuleID)
	e.str(r.IfMatch)
	e.varint(r.IfVersion)
	e.str(r.ConnID)
	e.str(r.After)
	e.varint(int64(r.Limit))
	e.uvarint(uint64(len(r.Body)))
	e.b = append(e.b, r.Body...)
	return e.b
}

// DecodeRequest decodes a wire request. Body aliases b. Errors wrap
// ErrCorrupt (malformed) or ErrUnsupportedFormat; it never panics. The
// fields' meaning is checked by Engine.Prepare, not here.
func DecodeRequest(b []byte) (*Request, error) {
	d := dec{b: b}
	if f := d.u8(); d.err == nil && f != WireFormat {
		return nil, fmt.Errorf("%w: twin request format %d", ErrUnsupportedFormat, f)
	}
	r := &Request{Op: Op(d.u8())}
	flags := d.u8()
	r.Mode = PutMode(d.u8())
	if d.err == nil && flags&^wireFlagsKnown != 0 {
		d.fail(fmt.Sprintf("flags %#x", flags))
	}
	r.Connected = flags&wireFlagConnected != 0
	r.DeviceID, r.ModuleID, r.IfMatch = d.str(), d.str(), d.str()
	r.IfVersion = d.varint()
	r.ConnID, r.After = d.str(), d.str()
	limit := d.varint()
	if d.err == nil && (limit < 0 || limit > 1<<30) {
		d.fail(fmt.Sprintf("limit %d", limit))
	}
	r.Limit = int(limit)
	r.Body = d.bytes()
	if d.err == nil && d.off != len(d.b) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("twin request: %w", d.err)
	}
	return r, nil
}

// AppendBinary appends the wire form of a reply (doc.go, "Wire reply").
func (r *Reply) AppendBinary(dst []byte) []byte {
	e := enc{b: dst}
	e.u8(WireFormat)
	e.uvarint(uint64(r.Status))
	if r.Err != nil {
		e.str(r.Err.Code)
		e.str(r.Err.Msg)
	} else {
		e.str("")
		e.str("")
	}
	e.str(r.Etag)
	e.varint(r.Version)
	e.str(r.Next)
	e.uvarint(uint64(len(r.Body)))
	e.b = append(e.b, r.Body...)
	return e.b
}

// DecodeReply decodes a wire reply; Err is set when CODE is not empty.
// Body aliases b.
func DecodeReply(b []byte) (*Reply, error) {
	d := dec{b: b}
	if f := d.u8(); d.err == nil && f != WireFormat {
		return nil, fmt.Errorf("%w: twin reply format %d", ErrUnsupportedFormat, f)
	}
	r := &Reply{}
	st := d.uvarint()
	if d.err == nil && (st < 100 || st > 599) {
		d.fail(fmt.Sprintf("status %d", st))
	}
	r.Status = int(st)
	code, msg := d.str(), d.str()
	r.Etag = d.str()
	r.Version = d.varint()
	r.Next = d.str()
	r.Body = d.bytes()
	if d.err == nil && d.off != len(d.b) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("twin reply: %w", d.err)
	}
	if code != "" {
		r.Err = &Error{Status: r.Status, Code: code, Msg: msg}
	}
	return r, nil
}

// AppendDesiredChanges appends the wire form of a notification push (doc.go,
// "Wire notification").
func AppendDesiredChanges(dst []byte, list []DesiredChange) []byte {
	e := enc{b: dst}
	e.u8(WireFormat)
	e.uvarint(uint64(len(list)))
	for i := range list {
		c := &list[i]
		e.str(c.DeviceID)
		e.str(c.ModuleID)
		e.varint(c.Version)
		e.uvarint(uint64(len(c.Patch)))
		e.b = append(e.b, c.Patch...)
	}
	return e.b
}

// DecodeDesiredChanges decodes a notification push. Patches alias b.
func DecodeDesiredChanges(b []byte) ([]DesiredChange, error) {
	d := dec{b: b}
	if f := d.u8(); d.err == nil && f != WireFormat {
		return nil, fmt.Errorf("%w: twin notification format %d", ErrUnsupportedFormat, f)
	}
	n := d.count(4)
	out := make([]DesiredChange, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		c := DesiredChange{DeviceID: d.str(), ModuleID: d.str(), Version: d.varint()}
		c.Patch = d.bytes()
		out = append(out, c)
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("twin notification: %w", d.err)
	}
	return out, nil
}

// WatchAction is what a watch request does (FROZEN values).
type WatchAction uint8

const (
	WatchAdd     WatchAction = 1 // watch the keys (in addition)
	WatchRemove  WatchAction = 2 // stop watching the keys
	WatchReplace WatchAction = 3 // the connection watches exactly the keys
	WatchPing    WatchAction = 4 // no change; the reply's epoch tells a restart
)

// AppendWatch appends the wire form of a watch request (doc.go, "Wire
// watch").
func AppendWatch(dst []byte, action WatchAction, keys []string) []byte {
	e := enc{b: dst}
	e.u8(WireFormat)
	e.u8(byte(action))
	e.uvarint(uint64(len(keys)))
	for _, k := range keys {
		e.str(k)
	}
	return e.b
}

// DecodeWatch decodes a watch request.
func DecodeWatch(b []byte) (WatchAction, []string, error) {
	d := dec{b: b}
	if f := d.u8(); d.err == nil && f != WireFormat {
		return 0, nil, fmt.Errorf("%w: twin watch format %d", ErrUnsupportedFormat, f)
	}
	a := WatchAction(d.u8())
	if d.err == nil && (a < WatchAdd || a > WatchPing) {
		d.fail(fmt.Sprintf("watch action %d", a))
	}
	n := d.count(1)
	keys := make([]string, 0, n)
	for i := 0; i < n && d.err == nil; i++ {
		keys = append(keys, d.str())
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return 0, nil, fmt.Errorf("twin watch: %w", d.err)
	}
	return a, keys, nil
}

// ShardOf returns the shard (0..n-1) of a device: FNV-1a (32 bit) of the
// device id modulo n. A module lives in its device's shard. FROZEN: it
// places every twin in the log.
func ShardOf(deviceID string, n int) int {
	if n <= 1 {
		return 0
	}
	h := uint32(2166136261)
	for i := 0; i < len(deviceID); i++ {
		h ^= uint32(deviceID[i])
		h *= 16777619
	}
	return int(h % uint32(n))
}

// AppendWatchReply appends the body of a TwinWatch answer: FORMAT, then
// the broker's EPOCH (uint64 big-endian).
func AppendWatchReply(dst []byte, epoch uint64) []byte {
	e := enc{b: dst}
	e.u8(WireFormat)
	e.u64(epoch)
	return e.b
}

// DecodeWatchReply decodes the body of a TwinWatch answer.
func DecodeWatchReply(b []byte) (uint64, error) {
	d := dec{b: b}
	if f := d.u8(); d.err == nil && f != WireFormat {
		return 0, fmt.Errorf("%w: twin watch reply format %d", ErrUnsupportedFormat, f)
	}
	epoch := d.u64()
	if d.err == nil && d.off != len(d.b) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return 0, fmt.Errorf("twin watch reply: %w", d.err)
	}
	return epoch, nil
}

// Sink receives the desired changes of watched twins in process: a front
// end in the broker's own process (standalone) watches through a Sink
// instead of a connection. Sinks are compared with ==, so a Sink must be
// comparable (a pointer). PushDesired must not block long nor call back
// into the broker.
type Sink interface {
	PushDesired([]DesiredChange)
}
