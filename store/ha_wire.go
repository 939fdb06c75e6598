package store

import (
	"encoding/binary"
	"errors"
	"fmt"
)

// HA (master-slave replication) wire format.
//
// One TCP connection per slave, opened by the slave to the master's HA
// port. All integers are big-endian. The format is frozen: HAVersion
// changes if it ever has to.
//
// # Handshake (SmartGo addition to RocketMQ's classic HA stream)
//
// Both sides send one hello first: the slave as soon as it is connected,
// the master after reading the slave's. Each side checks the other's and
// closes the connection on a mismatch, so a slave pointed at the wrong
// master never receives (or appends) a byte.
//
//	0         4           6         8                16           24           32
//	+---------+-----------+---------+----------------+------------+------------+
//	| magic 4 | version 2 | flags 2 | segmentSize 8  | minOffset 8| maxOffset 8|
//	+---------+-----------+---------+----------------+------------+------------+
//	| nameLen 2 | brokerName nameLen bytes | addrLen 2 | brokerAddr addrLen bytes |
//	+-----------+--------------------------+-----------+------------------------+
//
// magic is 0x53474841 ("SGHA"), version 1, flags 0. segmentSize is the
// commitlog segment size (both sides must agree, or a replicated segment
// would not fit). minOffset/maxOffset are the sender's commitlog bounds at
// the time of sending. brokerName is the broker group name (must be
// equal); brokerAddr is the master's remoting address (the slave sends "")
// so a slave configured with only an HA address can still copy the
// master's metadata. Names and addresses are at most 255 bytes.
//
// # Stream (RocketMQ 4.x classic HA)
//
// slave -> master, repeated: the slave's commitlog end (max offset), 8
// bytes, sent right after the handshake, after every batch of applied
// chunks, and at least every HAOptions.HeartbeatInterval (5 s):
//
//	+----------------+
//	| maxOffset 8    |
//	+----------------+
//
// master -> slave, repeated chunks:
//
//	0                 8         12
//	+-----------------+---------+----------------------+
//	| physOffset 8    | size 4  | size bytes of log    |
//	+-----------------+---------+----------------------+
//
// size <= HATransferBatch (32 KiB) when SmartGo sends, and a receiver
// refuses anything above HAMaxChunk. A chunk never crosses a segment end,
// but may split a record. A chunk with size 0 is a heartbeat, sent after
// HeartbeatInterval without data. The first chunk starts at the slave's
// first report, or, when that report is 0 (an empty slave), at the start of
// the master's last segment. A slave whose end is not 0 drops the
// connection when physOffset differs from its end. Either side closes a
// connection that was silent for HAOptions.IdleTimeout (20 s).
const (
	HAMagic           uint32 = 0x53474841 // "SGHA"
	HAVersion         uint16 = 1
	HAReportSize             = 8
	HAChunkHeaderSize        = 12
	HATransferBatch          = 32 << 10 // largest chunk a master sends
	HAMaxChunk               = 1 << 20  // largest chunk a slave accepts
	haHelloFixedSize         = 32
	haMaxString              = 255
)

// HA errors. Callers test them with errors.Is.
var (
	// ErrHAProtocol: the peer sent bytes that are not the HA protocol (bad
	// magic, unknown version, oversized chunk or string).
	ErrHAProtocol = errors.New("store: ha: protocol violation")
	// ErrHAMismatch: the peer belongs to another broker group or uses
	// another commitlog segment size; nothing is replicated.
	ErrHAMismatch = errors.New("store: ha: peer is not this broker group's master/slave")
	// ErrHASlaveAhead: the slave's commitlog extends beyond the master's
	// (wrong master, or the master lost data). The slave refuses to
	// replicate rather than truncate its own log.
	ErrHASlaveAhead = errors.New("store: ha: slave commitlog is ahead of the master")
	// ErrHASlaveBehind: the slave's commitlog ends below the master's first
	// stored offset, so it cannot resume; start the slave with an empty store.
	ErrHASlaveBehind = errors.New("store: ha: slave commitlog ends before the master's first segment")
	// ErrHAOffsetMismatch: a chunk does not start at the slave's commitlog
	// end; the slave drops the connection and reconnects.
	ErrHAOffsetMismatch = errors.New("store: ha: chunk offset does not match the slave's end")
	// ErrSlaveNotAvailable: a sync master has no healthy slave (none
	// connected, or the best one is more than HAOptions.FallBehindMax behind).
	ErrSlaveNotAvailable = errors.New("store: ha: no slave available")
	// ErrSlaveAckTimeout: no slave acknowledged the offset in time (the
	// message is stored on the master).
	ErrSlaveAckTimeout = errors.New("store: ha: slave acknowledgement timed out")
	// errHAShort: more bytes are needed (decoders).
	errHAShort = errors.New("store: ha: short buffer")
)

// HAHello is the handshake message (see the wire format above).
type HAHello struct {
	SegmentSize int64
	MinOffset   int64
	MaxOffset   int64
	BrokerName  string
	BrokerAddr  string
}

// AppendHAHello appends the encoded hello to dst. Strings longer than 255
// bytes are an error.
func AppendHAHello(dst []byte, h HAHello) ([]byte, error) {
	if len(h.BrokerName) > haMaxString || len(h.BrokerAddr) > haMaxString {
		return dst, fmt.Errorf("%w: name or address longer than %d bytes", ErrHAProtocol, haMaxString)
	}
	dst = binary.BigEndian.AppendUint32(dst, HAMagic)
	dst = binary.BigEndian.AppendUint16(dst, HAVersion)
	dst = binary.BigEndian.AppendUint16(dst, 0)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.SegmentSize))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.MinOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.MaxOffset))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.BrokerName)))
	dst = append(dst, h.BrokerName...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.BrokerAddr)))
	dst = append(dst, h.BrokerAddr...)
	return dst, nil
}

// DecodeHAHello decodes a hello at the start of b and returns it with the
// number of bytes used. An incomplete hello returns errHAShort (tested with
// errors.Is by callers that read more); malformed bytes return ErrHAProtocol.
func DecodeHAHello(b []byte) (HAHello, int, error) {
	var h HAHello
	if len(b) < 4 {
		return h, 0, errHAShort
	}
	if m := binary.BigEndian.Uint32(b); m != HAMagic {
		return h, 0, fmt.Errorf("%w: bad magic 0x%08X (not a SmartGo HA peer)", ErrHAProtocol, m)
	}
	if len(b) < haHelloFixedSize+2 {
		return h, 0, errHAShort
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != HAVersion {
		return h, 0, fmt.Errorf("%w: version %d, want %d", ErrHAProtocol, v, HAVersion)
	}
	if f := binary.BigEndian.Uint16(b[6:]); f != 0 {
		return h, 0, fmt.Errorf("%w: unknown flags 0x%04X", ErrHAProtocol, f)
	}
	h.SegmentSize = int64(binary.BigEndian.Uint64(b[8:]))
	h.MinOffset = int64(binary.BigEndian.Uint64(b[16:]))
	h.MaxOffset = int64(binary.BigEndian.Uint64(b[24:]))
	if h.SegmentSize <= 0 || h.MinOffset < 0 || h.MaxOffset < h.MinOffset {
		return h, 0, fmt.Errorf("%w: implausible hello (segment %d, offsets %d..%d)", ErrHAProtocol, h.SegmentSize, h.MinOffset, h.MaxOffset)
	}
	pos := haHelloFixedSize
	var strs [2]string
	for i := range strs {
		if len(b) < pos+2 {
			return h, 0, errHAShort
		}
		n := int(binary.BigEndian.Uint16(b[pos:]))
		if n > haMaxString {
			return h, 0, fmt.Errorf("%w: string of %d bytes", ErrHAProtocol, n)
		}
		pos += 2
		if len(b) < pos+n {
			return h, 0, errHAShort
		}
		strs[i] = string(b[pos : pos+n])
		pos += n
	}
	h.BrokerName, h.BrokerAddr = strs[0], strs[1]
	return h, pos, nil
}

// AppendHAReport appends a slave report (its commitlog end).
func AppendHAReport(dst []byte, maxOffset int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(maxOffset))
}

// AppendHAChunkHeader appends a chunk header.
func AppendHAChunkHeader(dst []byte, offset int64, size int) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	return binary.BigEndian.AppendUint32(dst, uint32(size))
}

// ParseHAChunks calls fn for every complete chunk at the start of b (data
// aliases b) and returns the bytes consumed. It stops at an incomplete
// chunk (returning what it consumed so far and a nil error), at fn's first
// error, or at a malformed header (ErrHAProtocol: negative offset, size
// above HAMaxChunk). It never panics on any input.
func ParseHAChunks(b []byte, fn func(offset int64, data []byte) error) (int, error) {
	used := 0
	for len(b)-used >= HAChunkHeaderSize {
		h := b[used:]
		off := int64(binary.BigEndian.Uint64(h))
		size := binary.BigEndian.Uint32(h[8:])
		if off < 0 {
			return used, fmt.Errorf("%w: negative chunk offset %d", ErrHAProtocol, off)
		}
		if size > HAMaxChunk {
			return used, fmt.Errorf("%w: chunk of %d bytes > %d", ErrHAProtocol, size, HAMaxChunk)
		}
		end := HAChunkHeaderSize + int(size)
		if len(h) < end {
			break
		}
		if err := fn(off, h[HAChunkHeaderSize:end:end]); err != nil {
			return used, err
		}
		used += end
	}
	return used, nil
}
