package twin

import "fmt"

// Log entry format (see doc.go). FROZEN once written: a change needs a
// new entryFormat and a decoder for the old one.
const (
	entryMagic  = 0x54 // 'T'
	entryFormat = 1
)

// Entry FLAGS bits.
const (
	flagIfMatch   = 0x01
	flagIfVersion = 0x02
	flagTags      = 0x04
	flagDesired   = 0x08
	flagConnected = 0x10
	flagModelID   = 0x20
	flagsKnown    = 0x3f
)

// logEntry is a decoded log entry.
type logEntry struct {
	op        Op
	deviceID  string
	moduleID  string
	ifMatch   string // normalized; "" = none
	ifVersion int64  // 0 = none

	// Put*
	mode         PutMode
	in           identityInput
	genPrimary   string
	genSecondary string
	generationID string

	// UpdateTwin, ReplaceTwin, PatchReported
	hasTags    bool
	hasDesired bool
	tags       node
	desired    node
	reported   node

	// SetConnection
	connected bool
	connID    string
	modelID   string // "" = none announced

	// EnqueueC2D, AckC2D
	c2dID     string
	c2dExpiry int64 // EnqueueC2D
	c2dMax    int   // EnqueueC2D
}

func (le *logEntry) encode() []byte {
	e := enc{b: make([]byte, 0, 64)}
	var flags byte
	if le.ifMatch != "" {
		flags |= flagIfMatch
	}
	if le.ifVersion != 0 {
		flags |= flagIfVersion
	}
	if le.hasTags {
		flags |= flagTags
	}
	if le.hasDesired {
		flags |= flagDesired
	}
	if le.connected {
		flags |= flagConnected
	}
	if le.modelID != "" {
		flags |= flagModelID
	}
	e.u8(entryMagic)
	e.u8(entryFormat)
	e.u8(byte(le.op))
	e.u8(flags)
	e.str(le.deviceID)
	e.str(le.moduleID)
	if le.ifMatch != "" {
		e.str(le.ifMatch)
	}
	if le.ifVersion != 0 {
		e.uvarint(uint64(le.ifVersion))
	}
	switch le.op {
	case OpPutDevice, OpPutModule:
		in := &le.in
		e.u8(byte(le.mode))
		e.u8(in.status)
		e.u8(in.auth)
		e.boolean(in.iotEdge)
		e.str(in.statusReason)
		e.str(in.managedBy)
		e.str(in.primaryKey)
		e.str(in.secondaryKey)
		e.str(in.primaryThumb)
		e.str(in.secondThumb)
		e.str(le.genPrimary)
		e.str(le.genSecondary)
		e.str(le.generationID)
	case OpUpdateTwin, OpReplaceTwin:
		if le.hasTags {
			e.value(&le.tags)
		}
		if le.hasDesired {
			e.value(&le.desired)
		}
	case OpPatchReported:
		e.value(&le.reported)
	case OpSetConnection:
		e.str(le.connID)
		if le.modelID != "" {
			e.str(le.modelID)
		}
	case OpEnqueueC2D:
		e.str(le.c2dID)
		e.varint(le.c2dExpiry)
		e.uvarint(uint64(le.c2dMax))
	case OpAckC2D:
		e.str(le.c2dID)
	}
	e.crc()
	return e.b
}

// decodeEntry checks and decodes a log entry. Errors wrap ErrCorrupt or
// ErrUnsupportedFormat; it never panics.
func decodeEntry(b []byte) (*logEntry, error) {
	body, err := checkCRC(b)
	if err != nil {
		return nil, fmt.Errorf("log entry: %w", err)
	}
	d := dec{b: body}
	if m := d.u8(); d.err == nil && m != entryMagic {
		return nil, corruptf("log entry: magic %#x", m)
	}
	if f := d.u8(); d.err == nil && f != entryFormat {
		return nil, fmt.Errorf("%w: log entry format %d", ErrUnsupportedFormat, f)
	}
	le := &logEntry{op: Op(d.u8())}
	flags := d.u8()
	if d.err == nil && (!le.op.Logged() || flags&^flagsKnown != 0 || flags&flagModelID != 0 && le.op != OpSetConnection) {
		return nil, corruptf("log entry: op %d flags %#x", le.op, flags)
	}
	le.deviceID = d.str()
	le.moduleID = d.str()
	if flags&flagIfMatch != 0 {
		le.ifMatch = d.str()
	}
	if flags&flagIfVersion != 0 {
		le.ifVersion = int64(d.uvarint())
	}
	le.hasTags, le.hasDesired, le.connected = flags&flagTags != 0, flags&flagDesired != 0, flags&flagConnected != 0
	switch le.op {
	case OpPutDevice, OpPutModule:
		in := &le.in
		le.mode = PutMode(d.u8())
		in.status, in.auth = d.u8(), d.u8()
		in.iotEdge = d.boolean()
		in.statusReason, in.managedBy = d.str(), d.str()
		in.primaryKey, in.secondaryKey = d.str(), d.str()
		in.primaryThumb, in.secondThumb = d.str(), d.str()
		le.genPrimary, le.genSecondary, le.generationID = d.str(), d.str(), d.str()
		if d.err == nil && (le.mode > PutUpdate || in.status > statusDisabled || in.auth > authNone) {
			d.fail("identity field out of range")
		}
	case OpUpdateTwin, OpReplaceTwin:
		if le.hasTags {
			le.tags = d.value()
		}
		if le.hasDesired {
			le.desired = d.value()
		}
		if d.err == nil && (!isObjectOrNull(&le.tags) || !isObjectOrNull(&le.desired)) {
			d.fail("section is not an object")
		}
	case OpPatchReported:
		le.reported = d.value()
		if d.err == nil && le.reported.kind != KindObject {
			d.fail("section is not an object")
		}
	case OpSetConnection:
		le.connID = d.str()
		if flags&flagModelID != 0 {
			le.modelID = d.str()
			if d.err == nil && (le.modelID == "" || !le.connected) {
				d.fail("model id on a close or empty")
			}
		}
	case OpEnqueueC2D, OpAckC2D:
		le.c2dID = d.str()
		if le.op == OpEnqueueC2D {
			le.c2dExpiry = d.varint()
			le.c2dMax = int(min(d.uvarint(), MaxC2DQueueDepth+1))
		}
		if d.err == nil && (le.c2dID == "" || len(le.c2dID) > MaxC2DMessageIDBytes ||
			le.op == OpEnqueueC2D && (le.c2dExpiry <= 0 || le.c2dMax < 1 || le.c2dMax > MaxC2DQueueDepth)) {
			d.fail("cloud-to-device entry field out of range")
		}
	}
	if d.err == nil && d.off != len(d.b) {
		d.fail("trailing bytes")
	}
	if d.err != nil {
		return nil, fmt.Errorf("log entry: %w", d.err)
	}
	if le.deviceID == "" {
		return nil, corruptf("log entry: empty device id")
	}
	return le, nil
}

func isObjectOrNull(n *node) bool { return n.kind == KindObject || n.kind == KindNull }
