package record

import (
	"encoding/binary"
	"fmt"
	"math"
	"net/netip"
	"slices"
)

// Frozen format constants. Changing any of them breaks every stored
// commitlog and every RocketMQ client; see doc.go.
const (
	MagicMessage     uint32 = 0xDAA320A7 // commitlog record (-626843481 as a Java int)
	MagicBlank       uint32 = 0xCBD43194 // end-of-segment filler (-875286124 as a Java int)
	BlankHeaderSize         = 8          // TOTALSIZE + MAGIC of a filler
	MaxTopicLen             = 127        // TOPICLEN is a signed byte
	MaxPropertiesLen        = 32767      // PROPERTIESLEN is a signed short
)

// Sys flag bits (frozen; protocol section 3.4).
const (
	FlagCompressed  int32 = 0x1
	FlagMultiTags   int32 = 0x2
	TxMask          int32 = 0xC
	TxNotType       int32 = 0x0
	TxPrepared      int32 = 0x4
	TxCommit        int32 = 0x8
	TxRollback      int32 = 0xC
	FlagBornHostV6  int32 = 0x10
	FlagStoreHostV6 int32 = 0x20
	FlagNeedUnwrap  int32 = 0x40
	FlagInnerBatch  int32 = 0x80
	CompressionMask int32 = 0x700
	CompressionLZ4  int32 = 0x100
	CompressionZstd int32 = 0x200
	CompressionZlib int32 = 0x300
)

// Byte offsets of the fixed-position fields of a record (frozen). Fields after
// BORNHOST move by 12 bytes per IPv6 host and are reached through Parse.
const (
	OffsetTotalSize      = 0
	OffsetMagic          = 4
	OffsetBodyCRC        = 8
	OffsetQueueID        = 12
	OffsetFlag           = 16
	OffsetQueueOffset    = 20
	OffsetPhysicalOffset = 28
	OffsetSysFlag        = 36
	OffsetBornTimestamp  = 40
	OffsetBornHost       = 48
)

const (
	hostV4Len = 8  // 4-byte IPv4 address + 4-byte port
	hostV6Len = 20 // 16-byte IPv6 address + 4-byte port

	// MinRecordSize is the size of a record with IPv4 hosts and an empty
	// body, topic and properties string: every fixed-width field once.
	MinRecordSize = 4 + 4 + 4 + 4 + 4 + 8 + 8 + 4 + 8 + hostV4Len + 8 + hostV4Len + 4 + 8 + 4 + 1 + 2 // 91
)

var be = binary.BigEndian

// Message is a decoded (owned) commitlog record.
type Message struct {
	Topic                     string
	QueueID                   int32
	Flag                      int32
	QueueOffset               int64
	PhysicalOffset            int64
	SysFlag                   int32
	BornTimestamp             int64          // ms since the Unix epoch
	BornHost                  netip.AddrPort // IPv6 iff SysFlag&FlagBornHostV6 (Encode derives that bit from the address family)
	StoreTimestamp            int64          // ms since the Unix epoch
	StoreHost                 netip.AddrPort // same rule with FlagStoreHostV6
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	BodyCRC                   uint32 // filled by Decode; Encode always computes it from Body
	Body                      []byte // as stored (possibly compressed)
	Properties                string // the raw 0x01/0x02-encoded properties string
	// Known optionally tells where values of Properties are, found by
	// whoever built it (see KnownProperties); it is not encoded.
	Known KnownProperties
}

// hostLen is the encoded width of a host: IPv4 takes 8 bytes, IPv6 20.
// An IPv4-mapped IPv6 address is an IPv6 address here (so that decoding
// gives back the same netip.Addr); callers that want Java's behaviour of
// storing it as IPv4 call Unmap first.
func hostLen(ap netip.AddrPort) int {
	if ap.Addr().Is6() {
		return hostV6Len
	}
	return hostV4Len
}

// Size returns the encoded record size of m: 91 + body + topic + properties
// with IPv4 hosts, plus 12 per IPv6 host. (Protocol doc section 3.1 states
// 99 as the constant; the field table it gives sums to 91, which is what
// RocketMQ's encoder computes.)
func Size(m *Message) int {
	return MinRecordSize + len(m.Body) + len(m.Topic) + len(m.Properties) +
		hostLen(m.BornHost) - hostV4Len + hostLen(m.StoreHost) - hostV4Len
}

// EncodedSysFlag returns the SYSFLAG value EncodeTo writes for m: m.SysFlag
// with FlagBornHostV6 and FlagStoreHostV6 set from the host address families.
func EncodedSysFlag(m *Message) int32 {
	sys := m.SysFlag &^ (FlagBornHostV6 | FlagStoreHostV6)
	if hostLen(m.BornHost) == hostV6Len {
		sys |= FlagBornHostV6
	}
	if hostLen(m.StoreHost) == hostV6Len {
		sys |= FlagStoreHostV6
	}
	return sys
}

// validate checks everything EncodeTo can reject and returns the size.
func validate(m *Message) (int, error) {
	if len(m.Topic) > MaxTopicLen {
		return 0, fmt.Errorf("%w: %d bytes, max %d", ErrTopicTooLong, len(m.Topic), MaxTopicLen)
	}
	if len(m.Properties) > MaxPropertiesLen {
		return 0, fmt.Errorf("%w: %d bytes, max %d", ErrPropertiesTooLong, len(m.Properties), MaxPropertiesLen)
	}
	if !m.BornHost.Addr().IsValid() {
		return 0, fmt.Errorf("%w: born host %v", ErrBadHost, m.BornHost)
	}
	if !m.StoreHost.Addr().IsValid() {
		return 0, fmt.Errorf("%w: store host %v", ErrBadHost, m.StoreHost)
	}
	if uint64(len(m.Body)) > math.MaxInt32-hostV6Len*2-MinRecordSize-MaxTopicLen-MaxPropertiesLen {
		return 0, fmt.Errorf("%w: body of %d bytes", ErrRecordTooLong, len(m.Body))
	}
	return Size(m), nil
}

// putHost writes address and port of ap at b and returns the width written.
func putHost(b []byte, ap netip.AddrPort) int {
	a := ap.Addr()
	if a.Is4() {
		ip := a.As4()
		copy(b[:4], ip[:])
		be.PutUint32(b[4:8], uint32(ap.Port()))
		return hostV4Len
	}
	ip := a.As16()
	copy(b[:16], ip[:])
	be.PutUint32(b[16:20], uint32(ap.Port()))
	return hostV6Len
}

// BodyCRC returns the BODYCRC of body: CRC32-IEEE & 0x7FFFFFFF.
func BodyCRC(body []byte) uint32 {
	return checksumIEEE(body) & 0x7FFFFFFF
}

// EncodeTo writes the record for m into dst[:Size(m)] (dst may be a mapped
// segment) and returns the number of bytes written. The written SYSFLAG is
// EncodedSysFlag(m); BODYCRC is computed from m.Body (m.BodyCRC is ignored);
// m itself is not modified. Validation errors (ErrTopicTooLong,
// ErrPropertiesTooLong, ErrBadHost, ErrRecordTooLong, ErrShortBuffer) are
// reported before anything is written. It does not allocate.
func EncodeTo(dst []byte, m *Message) (int, error) {
	n, err := validate(m)
	if err != nil {
		return 0, err
	}
	if len(dst) < n {
		return 0, fmt.Errorf("%w: record needs %d bytes, have %d", ErrShortBuffer, n, len(dst))
	}
	return encode(dst[:n], m, n, len(m.Properties))
}

// encode writes m's record into b (len(b) == total) with TOTALSIZE total and
// PROPERTIESLEN propsLen; m.Properties fills the first len(m.Properties)
// bytes of PROPERTIES, the caller the rest (a sealed record's trailer).
func encode(b []byte, m *Message, total, propsLen int) (int, error) {
	be.PutUint32(b[OffsetTotalSize:], uint32(total))
	be.PutUint32(b[OffsetMagic:], MagicMessage)
	be.PutUint32(b[OffsetBodyCRC:], BodyCRC(m.Body))
	be.PutUint32(b[OffsetQueueID:], uint32(m.QueueID))
	be.PutUint32(b[OffsetFlag:], uint32(m.Flag))
	be.PutUint64(b[OffsetQueueOffset:], uint64(m.QueueOffset))
	be.PutUint64(b[OffsetPhysicalOffset:], uint64(m.PhysicalOffset))
	be.PutUint32(b[OffsetSysFlag:], uint32(EncodedSysFlag(m)))
	be.PutUint64(b[OffsetBornTimestamp:], uint64(m.BornTimestamp))
	off := OffsetBornHost
	off += putHost(b[off:], m.BornHost)
	be.PutUint64(b[off:], uint64(m.StoreTimestamp))
	off += 8
	off += putHost(b[off:], m.StoreHost)
	be.PutUint32(b[off:], uint32(m.ReconsumeTimes))
	off += 4
	be.PutUint64(b[off:], uint64(m.PreparedTransactionOffset))
	off += 8
	be.PutUint32(b[off:], uint32(len(m.Body)))
	off += 4
	off += copy(b[off:], m.Body)
	b[off] = byte(len(m.Topic))
	off++
	off += copy(b[off:], m.Topic)
	be.PutUint16(b[off:], uint16(propsLen))
	off += 2
	copy(b[off:], m.Properties)
	return total, nil
}

// AppendRecord appends the encoded record of m to dst, growing it if needed
// (the only allocation).
func AppendRecord(dst []byte, m *Message) ([]byte, error) {
	n, err := validate(m)
	if err != nil {
		return dst, err
	}
	l := len(dst)
	dst = slices.Grow(dst, n)[:l+n]
	if _, err := EncodeTo(dst[l:], m); err != nil {
		return dst[:l], err
	}
	return dst, nil
}

// PutBlank writes an end-of-segment filler [TOTALSIZE=len(dst)][MagicBlank]
// at dst[0:8]. The rest of dst is left as it is.
func PutBlank(dst []byte) error {
	if len(dst) < BlankHeaderSize {
		return fmt.Errorf("%w: filler needs %d bytes, have %d", ErrShortBuffer, BlankHeaderSize, len(dst))
	}
	if uint64(len(dst)) > math.MaxInt32 {
		return fmt.Errorf("%w: filler of %d bytes", ErrRecordTooLong, len(dst))
	}
	be.PutUint32(dst[OffsetTotalSize:], uint32(len(dst)))
	be.PutUint32(dst[OffsetMagic:], MagicBlank)
	return nil
}

// PeekHeader reads only TOTALSIZE and MAGIC at the start of b, for scanning.
// It validates nothing and fails only with ErrShortBuffer when len(b) < 8.
// It does not allocate.
func PeekHeader(b []byte) (size int32, magic uint32, err error) {
	if len(b) < BlankHeaderSize {
		return 0, 0, ErrShortBuffer
	}
	return int32(be.Uint32(b[OffsetTotalSize:])), be.Uint32(b[OffsetMagic:]), nil
}

// View is a zero-copy, zero-allocation parse of one record: scalar fields
// decoded, byte slices point into the input (capacity-limited, so appending
// to them never overwrites the input).
type View struct {
	TotalSize                 int32
	Magic                     uint32
	BodyCRC                   uint32
	QueueID                   int32
	Flag                      int32
	QueueOffset               int64
	PhysicalOffset            int64
	SysFlag                   int32
	BornTimestamp             int64
	BornHost                  []byte // 8 or 20 raw bytes: IP + 4-byte port
	StoreTimestamp            int64
	StoreHost                 []byte // 8 or 20 raw bytes: IP + 4-byte port
	ReconsumeTimes            int32
	PreparedTransactionOffset int64
	Body                      []byte
	Topic                     []byte
	Properties                []byte
}

// Parse decodes the record at the start of b; bytes after TOTALSIZE are
// ignored. For a filler it returns an error wrapping ErrBlank, with
// View.TotalSize and View.Magic set. Malformed input (bad magic, TOTALSIZE
// out of range, lengths that overrun TOTALSIZE or b, or that do not add up
// to TOTALSIZE exactly) yields a *CorruptError, which wraps ErrCorrupt.
// checkCRC also verifies the record's integrity (see Verify: the
// whole-record CRC of a sealed record, BODYCRC of a legacy one). Parse never
// panics and does not allocate unless it fails.
func Parse(b []byte, checkCRC bool) (View, error) {
	var v View
	if len(b) < BlankHeaderSize {
		return v, corrupt(OffsetTotalSize, "TOTALSIZE", "need %d header bytes, have %d", BlankHeaderSize, len(b))
	}
	v.TotalSize = int32(be.Uint32(b[OffsetTotalSize:]))
	v.Magic = be.Uint32(b[OffsetMagic:])
	size := int(v.TotalSize)
	switch v.Magic {
	case MagicMessage:
	case MagicBlank:
		if size < BlankHeaderSize {
			return v, corrupt(OffsetTotalSize, "TOTALSIZE", "filler size %d below %d", size, BlankHeaderSize)
		}
		return v, fmt.Errorf("%w of %d bytes", ErrBlank, size)
	default:
		return v, corrupt(OffsetMagic, "MAGICCODE", "0x%08X is neither message nor blank magic", v.Magic)
	}
	if size < MinRecordSize {
		return v, corrupt(OffsetTotalSize, "TOTALSIZE", "size %d below minimum %d", size, MinRecordSize)
	}
	if size > len(b) {
		return v, corrupt(OffsetTotalSize, "TOTALSIZE", "size %d overruns input of %d bytes", size, len(b))
	}
	r := b[:size:size]
	v.BodyCRC = be.Uint32(r[OffsetBodyCRC:])
	v.QueueID = int32(be.Uint32(r[OffsetQueueID:]))
	v.Flag = int32(be.Uint32(r[OffsetFlag:]))
	v.QueueOffset = int64(be.Uint64(r[OffsetQueueOffset:]))
	v.PhysicalOffset = int64(be.Uint64(r[OffsetPhysicalOffset:]))
	v.SysFlag = int32(be.Uint32(r[OffsetSysFlag:]))
	v.BornTimestamp = int64(be.Uint64(r[OffsetBornTimestamp:]))

	bornLen, storeLen := hostV4Len, hostV4Len
	if v.SysFlag&FlagBornHostV6 != 0 {
		bornLen = hostV6Len
	}
	if v.SysFlag&FlagStoreHostV6 != 0 {
		storeLen = hostV6Len
	}
	if fixed := MinRecordSize - 2*hostV4Len + bornLen + storeLen; size < fixed {
		return v, corrupt(OffsetTotalSize, "TOTALSIZE",
			"size %d below minimum %d for the host widths in SYSFLAG 0x%X", size, fixed, v.SysFlag)
	}
	off := OffsetBornHost
	v.BornHost = r[off : off+bornLen : off+bornLen]
	off += bornLen
	v.StoreTimestamp = int64(be.Uint64(r[off:]))
	off += 8
	v.StoreHost = r[off : off+storeLen : off+storeLen]
	off += storeLen
	v.ReconsumeTimes = int32(be.Uint32(r[off:]))
	off += 4
	v.PreparedTransactionOffset = int64(be.Uint64(r[off:]))
	off += 8

	// Variable part: BODYLEN body TOPICLEN topic PROPERTIESLEN properties.
	// The fixed-size check above guarantees 4+1+2 bytes from off.
	bodyLen := int(int32(be.Uint32(r[off:])))
	if bodyLen < 0 {
		return v, corrupt(off, "BODYLEN", "negative length %d", bodyLen)
	}
	if bodyLen > size-off-4-1-2 {
		return v, corrupt(off, "BODYLEN", "length %d overruns record of %d bytes", bodyLen, size)
	}
	off += 4
	v.Body = r[off : off+bodyLen : off+bodyLen]
	off += bodyLen

	topicLen := int(int8(r[off]))
	if topicLen < 0 {
		return v, corrupt(off, "TOPICLEN", "negative length %d", topicLen)
	}
	if topicLen > size-off-1-2 {
		return v, corrupt(off, "TOPICLEN", "length %d overruns record of %d bytes", topicLen, size)
	}
	off++
	v.Topic = r[off : off+topicLen : off+topicLen]
	off += topicLen

	propsLen := int(int16(be.Uint16(r[off:])))
	if propsLen < 0 {
		return v, corrupt(off, "PROPERTIESLEN", "negative length %d", propsLen)
	}
	if end := off + 2 + propsLen; end != size {
		if end > size {
			return v, corrupt(off, "PROPERTIESLEN", "length %d overruns record of %d bytes", propsLen, size)
		}
		return v, corrupt(off, "PROPERTIESLEN", "length %d leaves %d unused bytes in record of %d bytes", propsLen, size-end, size)
	}
	off += 2
	v.Properties = r[off:size:size]

	if checkCRC {
		if _, err := verify(&v, r); err != nil {
			return v, err
		}
	}
	return v, nil
}

// storeHostOffset is the position of STOREHOST in a parsed view.
func (v *View) storeHostOffset() int { return OffsetBornHost + len(v.BornHost) + 8 }

// BornAddr decodes BornHost. It fails (with a *CorruptError) if the port is
// outside 0..65535 or the field has the wrong width.
func (v *View) BornAddr() (netip.AddrPort, error) {
	return decodeHost(v.BornHost, OffsetBornHost, "BORNHOST")
}

// StoreAddr decodes StoreHost; see BornAddr.
func (v *View) StoreAddr() (netip.AddrPort, error) {
	return decodeHost(v.StoreHost, v.storeHostOffset(), "STOREHOST")
}

func decodeHost(raw []byte, off int, field string) (netip.AddrPort, error) {
	var a netip.Addr
	switch len(raw) {
	case hostV4Len:
		a = netip.AddrFrom4([4]byte(raw[:4]))
	case hostV6Len:
		a = netip.AddrFrom16([16]byte(raw[:16]))
	default:
		return netip.AddrPort{}, corrupt(off, field, "width %d, want 8 or 20", len(raw))
	}
	port := be.Uint32(raw[len(raw)-4:])
	if port > math.MaxUint16 {
		return netip.AddrPort{}, corrupt(off+len(raw)-4, field, "port %d out of range", int32(port))
	}
	return netip.AddrPortFrom(a, uint16(port)), nil
}

// Decode parses the record at the start of b (see Parse) and copies it into
// a new owned Message. It returns the number of bytes the record (or filler,
// together with an ErrBlank error) occupies. Besides the Message, the only
// allocations are the copied topic, properties and body.
func Decode(b []byte, checkCRC bool) (*Message, int, error) {
	m := new(Message)
	n, err := DecodeInto(m, b, checkCRC)
	if err != nil {
		return nil, n, err
	}
	return m, n, nil
}

// DecodeInto is Decode into a caller-owned Message; m.Body's storage is
// reused when large enough. On error m is left in an unspecified state.
func DecodeInto(m *Message, b []byte, checkCRC bool) (int, error) {
	v, err := Parse(b, checkCRC)
	if err != nil {
		n := 0
		if v.Magic == MagicBlank && v.TotalSize >= BlankHeaderSize {
			n = int(v.TotalSize)
		}
		return n, err
	}
	if err := v.copyTo(m); err != nil {
		return 0, err
	}
	return int(v.TotalSize), nil
}

func (v *View) copyTo(m *Message) error {
	born, err := v.BornAddr()
	if err != nil {
		return err
	}
	store, err := v.StoreAddr()
	if err != nil {
		return err
	}
	m.Topic = string(v.Topic)
	m.QueueID = v.QueueID
	m.Flag = v.Flag
	m.QueueOffset = v.QueueOffset
	m.PhysicalOffset = v.PhysicalOffset
	m.SysFlag = v.SysFlag
	m.BornTimestamp = v.BornTimestamp
	m.BornHost = born
	m.StoreTimestamp = v.StoreTimestamp
	m.StoreHost = store
	m.ReconsumeTimes = v.ReconsumeTimes
	m.PreparedTransactionOffset = v.PreparedTransactionOffset
	m.BodyCRC = v.BodyCRC
	if len(v.Body) == 0 {
		m.Body = nil
	} else {
		m.Body = append(m.Body[:0], v.Body...)
	}
	m.Properties = string(v.Properties)
	return nil
}
