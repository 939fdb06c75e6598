package ha

import (
	"encoding/binary"
	"fmt"
)

// HA (master-slave replication) wire format.
//
// One TCP connection per slave, opened by the slave to the master's HA
// port. All integers are big-endian. The format is frozen: Version
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
// chunks, and at least every Options.HeartbeatInterval (5 s):
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
// size <= TransferBatch (32 KiB) when SmartGo sends, and a receiver
// refuses anything above MaxChunk. A chunk never crosses a segment end,
// but may split a record. A chunk with size 0 is a heartbeat, sent after
// HeartbeatInterval without data. The first chunk starts at the slave's
// first report, or, when that report is 0 (an empty slave), at the start of
// the master's last segment. A slave whose end is not 0 drops the
// connection when physOffset differs from its end. Either side closes a
// connection that was silent for Options.IdleTimeout (20 s).
const (
	Magic           uint32 = 0x53474841 // "SGHA"
	Version         uint16 = 1
	ReportSize             = 8
	ChunkHeaderSize        = 12
	TransferBatch          = 32 << 10 // largest chunk a master sends
	MaxChunk               = 1 << 20  // largest chunk a slave accepts
	helloFixedSize         = 32
	maxString              = 255
)

// Hello is the handshake message (see the wire format above).
type Hello struct {
	SegmentSize int64
	MinOffset   int64
	MaxOffset   int64
	BrokerName  string
	BrokerAddr  string
}

// AppendHello appends the encoded hello to dst. Strings longer than 255
// bytes are an error.
func AppendHello(dst []byte, h Hello) ([]byte, error) {
	if len(h.BrokerName) > maxString || len(h.BrokerAddr) > maxString {
		return dst, fmt.Errorf("%w: name or address longer than %d bytes", ErrProtocol, maxString)
	}
	dst = binary.BigEndian.AppendUint32(dst, Magic)
	dst = binary.BigEndian.AppendUint16(dst, Version)
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

// DecodeHello decodes a hello at the start of b and returns it with the
// number of bytes used. An incomplete hello returns errShort (tested with
// errors.Is by callers that read more); malformed bytes return ErrProtocol.
func DecodeHello(b []byte) (Hello, int, error) {
	var h Hello
	if len(b) < 4 {
		return h, 0, errShort
	}
	if m := binary.BigEndian.Uint32(b); m != Magic {
		return h, 0, fmt.Errorf("%w: bad magic 0x%08X (not a SmartGo HA peer)", ErrProtocol, m)
	}
	if len(b) < helloFixedSize+2 {
		return h, 0, errShort
	}
	if v := binary.BigEndian.Uint16(b[4:]); v != Version {
		return h, 0, fmt.Errorf("%w: version %d, want %d", ErrProtocol, v, Version)
	}
	if f := binary.BigEndian.Uint16(b[6:]); f != 0 {
		return h, 0, fmt.Errorf("%w: unknown flags 0x%04X", ErrProtocol, f)
	}
	h.SegmentSize = int64(binary.BigEndian.Uint64(b[8:]))
	h.MinOffset = int64(binary.BigEndian.Uint64(b[16:]))
	h.MaxOffset = int64(binary.BigEndian.Uint64(b[24:]))
	if h.SegmentSize <= 0 || h.MinOffset < 0 || h.MaxOffset < h.MinOffset {
		return h, 0, fmt.Errorf("%w: implausible hello (segment %d, offsets %d..%d)", ErrProtocol, h.SegmentSize, h.MinOffset, h.MaxOffset)
	}
	pos := helloFixedSize
	var strs [2]string
	for i := range strs {
		if len(b) < pos+2 {
			return h, 0, errShort
		}
		n := int(binary.BigEndian.Uint16(b[pos:]))
		if n > maxString {
			return h, 0, fmt.Errorf("%w: string of %d bytes", ErrProtocol, n)
		}
		pos += 2
		if len(b) < pos+n {
			return h, 0, errShort
		}
		strs[i] = string(b[pos : pos+n])
		pos += n
	}
	h.BrokerName, h.BrokerAddr = strs[0], strs[1]
	return h, pos, nil
}

// AppendReport appends a slave report (its commitlog end).
func AppendReport(dst []byte, maxOffset int64) []byte {
	return binary.BigEndian.AppendUint64(dst, uint64(maxOffset))
}

// AppendChunkHeader appends a chunk header.
func AppendChunkHeader(dst []byte, offset int64, size int) []byte {
	dst = binary.BigEndian.AppendUint64(dst, uint64(offset))
	return binary.BigEndian.AppendUint32(dst, uint32(size))
}

// ParseChunks calls fn for every complete chunk at the start of b (data
// aliases b) and returns the bytes consumed. It stops at an incomplete
// chunk (returning what it consumed so far and a nil error), at fn's first
// error, or at a malformed header (ErrProtocol: negative offset, size
// above MaxChunk). It never panics on any input.
func ParseChunks(b []byte, fn func(offset int64, data []byte) error) (int, error) {
	used := 0
	for len(b)-used >= ChunkHeaderSize {
		h := b[used:]
		off := int64(binary.BigEndian.Uint64(h))
		size := binary.BigEndian.Uint32(h[8:])
		if off < 0 {
			return used, fmt.Errorf("%w: negative chunk offset %d", ErrProtocol, off)
		}
		if size > MaxChunk {
			return used, fmt.Errorf("%w: chunk of %d bytes > %d", ErrProtocol, size, MaxChunk)
		}
		end := ChunkHeaderSize + int(size)
		if len(h) < end {
			break
		}
		if err := fn(off, h[ChunkHeaderSize:end:end]); err != nil {
			return used, err
		}
		used += end
	}
	return used, nil
}
