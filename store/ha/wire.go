package ha

import (
	"encoding/binary"
	"fmt"

	"github.com/smartgo/smartgo/store"
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
// magic is 0x53474841 ("SGHA"), version 1, flags 0 or FlagControlled
// (then an epoch extension follows, below). segmentSize is the
// commitlog segment size (both sides must agree, or a replicated segment
// would not fit). minOffset/maxOffset are the sender's commitlog bounds at
// the time of sending. brokerName is the broker group name (must be
// equal); brokerAddr is the sender's remoting address: the master's lets a
// slave configured with only an HA address copy the master's metadata,
// the slave's lets the master tell it at once when its topics or groups
// change (NOTIFY_METADATA_CHANGED, broker/metasync.go; slaves before that
// notice send "", and a master ignores the field in older versions).
// Names and addresses are at most 255 bytes.
//
// # Epoch extension (brokers whose master a controller elects)
//
// With FlagControlled set, both hellos go on after brokerAddr with:
//
//	+------------+---------+---------+----------------------------------------+
//	| brokerId 8 | epoch 4 | count 2 | count x (epoch 4 | startOffset 8)     |
//	+------------+---------+---------+----------------------------------------+
//
// brokerId is the sender's controller-assigned broker id. In the slave's
// hello, epoch is the master epoch the controller told it to follow and
// count is 0; in the master's, epoch is its own master epoch and the
// entries are its epoch history (store.EpochEntry, oldest first, at most
// MaxHelloEpochs, the newest ones). Both sides must use the flag or
// neither (ErrMismatch). A master refuses a slave following a newer epoch
// than its own, and a slave a master older than the one it follows
// (ErrStaleEpoch). The slave then cuts its log at
// store.ConsistentOffset of the two histories (the part an old master
// wrote that this master never had), records the master's epochs its log
// now covers, and reports its end; from there on the stream is the classic
// one below, and the slave records each master epoch as its log reaches it.
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
	// FlagControlled marks a hello with the epoch extension.
	FlagControlled uint16 = 0x0001
	// MaxHelloEpochs bounds the epoch history in a hello.
	MaxHelloEpochs = 4096
	epochExtFixed  = 8 + 4 + 2
	epochEntryWire = 4 + 8
	maxHelloSize   = helloFixedSize + 4 + 2*maxString + epochExtFixed + MaxHelloEpochs*epochEntryWire
)

// Hello is the handshake message (see the wire format above). Controlled
// and the fields after it are the epoch extension.
type Hello struct {
	SegmentSize int64
	MinOffset   int64
	MaxOffset   int64
	BrokerName  string
	BrokerAddr  string
	Controlled  bool
	BrokerID    int64
	Epoch       int32
	Epochs      []store.EpochEntry
}

// AppendHello appends the encoded hello to dst. Strings longer than 255
// bytes are an error.
func AppendHello(dst []byte, h Hello) ([]byte, error) {
	if len(h.BrokerName) > maxString || len(h.BrokerAddr) > maxString {
		return dst, fmt.Errorf("%w: name or address longer than %d bytes", ErrProtocol, maxString)
	}
	if len(h.Epochs) > MaxHelloEpochs {
		return dst, fmt.Errorf("%w: %d epochs in a hello, at most %d", ErrProtocol, len(h.Epochs), MaxHelloEpochs)
	}
	var flags uint16
	if h.Controlled {
		flags = FlagControlled
	}
	dst = binary.BigEndian.AppendUint32(dst, Magic)
	dst = binary.BigEndian.AppendUint16(dst, Version)
	dst = binary.BigEndian.AppendUint16(dst, flags)
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.SegmentSize))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.MinOffset))
	dst = binary.BigEndian.AppendUint64(dst, uint64(h.MaxOffset))
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.BrokerName)))
	dst = append(dst, h.BrokerName...)
	dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.BrokerAddr)))
	dst = append(dst, h.BrokerAddr...)
	if h.Controlled {
		dst = binary.BigEndian.AppendUint64(dst, uint64(h.BrokerID))
		dst = binary.BigEndian.AppendUint32(dst, uint32(h.Epoch))
		dst = binary.BigEndian.AppendUint16(dst, uint16(len(h.Epochs)))
		for _, e := range h.Epochs {
			dst = binary.BigEndian.AppendUint32(dst, uint32(e.Epoch))
			dst = binary.BigEndian.AppendUint64(dst, uint64(e.StartOffset))
		}
	}
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
	f := binary.BigEndian.Uint16(b[6:])
	if f&^FlagControlled != 0 {
		return h, 0, fmt.Errorf("%w: unknown flags 0x%04X", ErrProtocol, f)
	}
	h.Controlled = f&FlagControlled != 0
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
	if !h.Controlled {
		return h, pos, nil
	}
	if len(b) < pos+epochExtFixed {
		return h, 0, errShort
	}
	h.BrokerID = int64(binary.BigEndian.Uint64(b[pos:]))
	h.Epoch = int32(binary.BigEndian.Uint32(b[pos+8:]))
	n := int(binary.BigEndian.Uint16(b[pos+12:]))
	pos += epochExtFixed
	if h.BrokerID < 0 || h.Epoch < 0 || n > MaxHelloEpochs {
		return h, 0, fmt.Errorf("%w: implausible epoch extension (broker id %d, epoch %d, %d entries)", ErrProtocol, h.BrokerID, h.Epoch, n)
	}
	if len(b) < pos+n*epochEntryWire {
		return h, 0, errShort
	}
	for i := 0; i < n; i++ {
		e := store.EpochEntry{Epoch: int32(binary.BigEndian.Uint32(b[pos:])), StartOffset: int64(binary.BigEndian.Uint64(b[pos+4:]))}
		if e.Epoch <= 0 || e.StartOffset < 0 || e.StartOffset > h.MaxOffset ||
			(i > 0 && (e.Epoch <= h.Epochs[i-1].Epoch || e.StartOffset < h.Epochs[i-1].StartOffset)) {
			return h, 0, fmt.Errorf("%w: epoch entry %d (%d at %d) out of order or beyond the log", ErrProtocol, i, e.Epoch, e.StartOffset)
		}
		h.Epochs = append(h.Epochs, e)
		pos += epochEntryWire
	}
	return h, pos, nil
}

// helloNeed returns how many bytes the hello whose first len(buf) bytes
// are known needs at least (always more than len(buf) for a short hello).
func helloNeed(buf []byte) int {
	need := helloFixedSize + 2
	if len(buf) >= need {
		need += int(binary.BigEndian.Uint16(buf[helloFixedSize:])) + 2
	}
	if len(buf) >= need {
		need += int(binary.BigEndian.Uint16(buf[need-2:]))
		if len(buf) >= 8 && binary.BigEndian.Uint16(buf[6:])&FlagControlled != 0 {
			need += epochExtFixed
			if len(buf) >= need {
				need += int(binary.BigEndian.Uint16(buf[need-2:])) * epochEntryWire
			}
		}
	}
	return max(need, len(buf)+1)
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
