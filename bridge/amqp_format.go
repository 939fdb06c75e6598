package bridge

import (
	"crypto/sha256"
	"encoding/binary"
	"encoding/hex"
	"errors"
	"fmt"
	"hash/crc32"
	"strings"

	"github.com/smartgo/smartgo/amqp"
)

// ErrBadAMQPRecord means a broker message of an AMQP queue's topic, or a
// definitions snapshot, could not be decoded.
var ErrBadAMQPRecord = errors.New("bridge: bad AMQP record")

// Broker topics of the AMQP backend.
const (
	// AMQPDefinitionsTopic holds the snapshots of the durable AMQP
	// definitions, newest last (one queue).
	AMQPDefinitionsTopic = "AMQP_DEFINITIONS"
	// AMQPOffsetGroup is the consumer group whose committed offset on
	// a queue's topic is the AMQP queue's committed offset (the topic is
	// the queue's own, so one group serves them all).
	AMQPOffsetGroup = "AMQP_QUEUES"
	// AMQPQueuePrefix starts the topic of every durable AMQP queue.
	// The brokers' retention keeps such a topic's messages from
	// AMQPOffsetGroup's committed offset on (broker.Options.Retained).
	AMQPQueuePrefix = "AMQP_Q_"
	// amqpReadableMax bounds the readable part of a queue's topic name:
	// prefix (7) + readable (100) + "_" + 16 hex digits = 124 <= 127.
	amqpReadableMax = 100
)

// AMQPQueueTopic returns the broker topic that holds the messages of the
// durable queue name in vhost: "AMQP_Q_", the vhost (left out for the
// default vhost "/") and name joined by "_" with every byte outside
// [A-Za-z0-9_-] replaced by "_" and cut to 100 bytes, "_", and the first
// 8 bytes of SHA-256(vhost, 0x00, name) in hex. The hash tells apart the
// names the readable part makes alike; the real names stay in the
// definitions.
func AMQPQueueTopic(vhost, name string) string {
	readable := name
	if vhost != "/" {
		readable = vhost + "_" + name
	}
	var b strings.Builder
	b.WriteString(AMQPQueuePrefix)
	for i := 0; i < len(readable) && i < amqpReadableMax; i++ {
		c := readable[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_' || c == '-' {
			b.WriteByte(c)
		} else {
			b.WriteByte('_')
		}
	}
	h := sha256.New()
	h.Write([]byte(vhost))
	h.Write([]byte{0})
	h.Write([]byte(name))
	b.WriteByte('_')
	b.WriteString(hex.EncodeToString(h.Sum(nil)[:8]))
	return b.String()
}

// The body of each broker message of an AMQP queue's topic (one AMQP
// message; the broker message has no tags, keys or properties of its own
// beyond the producer's), big-endian:
//
//	byte    version (1)
//	byte    len(exchange), exchange bytes   (AMQP short strings: <= 255)
//	byte    len(routing key), routing key bytes
//	uint32  len(properties), properties     (the content header's property
//	                                         flags and list as published)
//	...     the message body (the rest)
//
// Pinned by TestAMQPRecordBytes; decodeAMQPRecord has a fuzz target.
const amqpRecordVersion = 1

func encodeAMQPRecord(m *amqp.StoredMessage) ([]byte, error) {
	return appendAMQPRecord(make([]byte, 0, amqpRecordLen(m)), m)
}

// amqpRecordLen is the length of m's record.
func amqpRecordLen(m *amqp.StoredMessage) int {
	return 1 + 1 + len(m.Exchange) + 1 + len(m.RoutingKey) + 4 + len(m.Properties) + len(m.Body)
}

// appendAMQPRecord appends m's record to b.
func appendAMQPRecord(b []byte, m *amqp.StoredMessage) ([]byte, error) {
	if len(m.Exchange) > 255 || len(m.RoutingKey) > 255 {
		return b, fmt.Errorf("%w: exchange or routing key over 255 bytes", ErrBadAMQPRecord)
	}
	b = append(b, amqpRecordVersion, byte(len(m.Exchange)))
	b = append(b, m.Exchange...)
	b = append(b, byte(len(m.RoutingKey)))
	b = append(b, m.RoutingKey...)
	b = binary.BigEndian.AppendUint32(b, uint32(len(m.Properties)))
	b = append(b, m.Properties...)
	return append(b, m.Body...), nil
}

func decodeAMQPRecord(b []byte) (amqp.StoredMessage, error) {
	var m amqp.StoredMessage
	if len(b) < 1 || b[0] != amqpRecordVersion {
		return m, fmt.Errorf("%w: unknown version", ErrBadAMQPRecord)
	}
	r := amqpReader{b: b[1:]}
	m.Exchange = string(r.bytes(int(r.u8())))
	m.RoutingKey = string(r.bytes(int(r.u8())))
	m.Properties = r.bytes(int(r.u32()))
	if r.err != nil {
		return amqp.StoredMessage{}, fmt.Errorf("%w: message: %w", ErrBadAMQPRecord, r.err)
	}
	if len(r.b) > 0 {
		m.Body = r.b
	}
	return m, nil
}

// A definitions snapshot (one broker message of AMQPDefinitionsTopic;
// the newest is the definitions), big-endian:
//
//	4 bytes  magic "AQDF"
//	byte     version (1)
//	uint32   CRC-32 (IEEE) of the payload
//	payload:
//	  uint32 exchange count, each:
//	    str vhost, str name, str type, byte flags (1 auto-delete,
//	    2 internal), str arguments
//	  uint32 queue count, each:
//	    str vhost, str name, byte flags (1 auto-delete), str arguments
//	  uint32 binding count, each:
//	    str vhost, str source, str destination, byte flags (1 the
//	    destination is an exchange), str routing key, str arguments
//
// where str is a uint32 length and that many bytes. Pinned by
// TestAMQPDefinitionsBytes; decodeAMQPDefinitions has a fuzz target.
const (
	amqpDefsMagic   = "AQDF"
	amqpDefsVersion = 1
	amqpDefsHeader  = 4 + 1 + 4
)

func encodeAMQPDefinitions(d amqp.Definitions) []byte {
	p := make([]byte, amqpDefsHeader, 256)
	p = binary.BigEndian.AppendUint32(p, uint32(len(d.Exchanges)))
	for _, e := range d.Exchanges {
		p = appendStr(p, e.VHost)
		p = appendStr(p, e.Name)
		p = appendStr(p, e.Type)
		p = append(p, flagBits(e.AutoDelete, e.Internal))
		p = appendStr(p, string(e.Arguments))
	}
	p = binary.BigEndian.AppendUint32(p, uint32(len(d.Queues)))
	for _, q := range d.Queues {
		p = appendStr(p, q.VHost)
		p = appendStr(p, q.Name)
		p = append(p, flagBits(q.AutoDelete, false))
		p = appendStr(p, string(q.Arguments))
	}
	p = binary.BigEndian.AppendUint32(p, uint32(len(d.Bindings)))
	for _, bd := range d.Bindings {
		p = appendStr(p, bd.VHost)
		p = appendStr(p, bd.Source)
		p = appendStr(p, bd.Destination)
		p = append(p, flagBits(bd.ToExchange, false))
		p = appendStr(p, bd.RoutingKey)
		p = appendStr(p, string(bd.Arguments))
	}
	copy(p, amqpDefsMagic)
	p[4] = amqpDefsVersion
	binary.BigEndian.PutUint32(p[5:9], crc32.ChecksumIEEE(p[amqpDefsHeader:]))
	return p
}

func decodeAMQPDefinitions(b []byte) (amqp.Definitions, error) {
	var d amqp.Definitions
	if len(b) < amqpDefsHeader || string(b[:4]) != amqpDefsMagic {
		return d, fmt.Errorf("%w: definitions: no snapshot header", ErrBadAMQPRecord)
	}
	if b[4] != amqpDefsVersion {
		return d, fmt.Errorf("%w: definitions: unknown version %d", ErrBadAMQPRecord, b[4])
	}
	if got, want := crc32.ChecksumIEEE(b[amqpDefsHeader:]), binary.BigEndian.Uint32(b[5:9]); got != want {
		return d, fmt.Errorf("%w: definitions: checksum %08x, want %08x", ErrBadAMQPRecord, got, want)
	}
	r := amqpReader{b: b[amqpDefsHeader:]}
	// An entry takes at least 13 bytes (three empty strs and a flag byte),
	// so a count larger than the bytes left is refused before allocating.
	for n := r.count(13); n > 0 && r.err == nil; n-- {
		e := amqp.ExchangeDef{VHost: r.str(), Name: r.str(), Type: r.str()}
		f := r.flags(3)
		e.AutoDelete, e.Internal = f&1 != 0, f&2 != 0
		e.Arguments = r.bytes(int(r.u32()))
		d.Exchanges = append(d.Exchanges, e)
	}
	for n := r.count(13); n > 0 && r.err == nil; n-- {
		q := amqp.QueueDef{VHost: r.str(), Name: r.str()}
		q.AutoDelete = r.flags(1) != 0
		q.Arguments = r.bytes(int(r.u32()))
		d.Queues = append(d.Queues, q)
	}
	for n := r.count(21); n > 0 && r.err == nil; n-- {
		bd := amqp.BindingDef{VHost: r.str(), Source: r.str(), Destination: r.str()}
		bd.ToExchange = r.flags(1) != 0
		bd.RoutingKey = r.str()
		bd.Arguments = r.bytes(int(r.u32()))
		d.Bindings = append(d.Bindings, bd)
	}
	if r.err == nil && len(r.b) != 0 {
		r.err = fmt.Errorf("%d bytes after the bindings", len(r.b))
	}
	if r.err != nil {
		return amqp.Definitions{}, fmt.Errorf("%w: definitions: %w", ErrBadAMQPRecord, r.err)
	}
	return d, nil
}

func flagBits(a, b bool) byte {
	var f byte
	if a {
		f |= 1
	}
	if b {
		f |= 2
	}
	return f
}

func appendStr(b []byte, s string) []byte {
	b = binary.BigEndian.AppendUint32(b, uint32(len(s)))
	return append(b, s...)
}

var errAMQPShort = errors.New("truncated")

// amqpReader reads the fields of a record; the first short read sets err
// and every later read returns zero values.
type amqpReader struct {
	b   []byte
	err error
}

func (r *amqpReader) bytes(n int) []byte {
	if r.err != nil {
		return nil
	}
	if n < 0 || n > len(r.b) {
		r.err = errAMQPShort
		return nil
	}
	out := r.b[:n:n]
	r.b = r.b[n:]
	if n == 0 {
		return nil
	}
	return out
}

func (r *amqpReader) u8() byte {
	if b := r.bytes(1); b != nil {
		return b[0]
	}
	return 0
}

func (r *amqpReader) u32() uint32 {
	if b := r.bytes(4); b != nil {
		return binary.BigEndian.Uint32(b)
	}
	return 0
}

// flags reads a flag byte and refuses bits outside mask.
func (r *amqpReader) flags(mask byte) byte {
	f := r.u8()
	if r.err == nil && f&^mask != 0 {
		r.err = fmt.Errorf("unknown flags %#x", f)
	}
	return f
}

func (r *amqpReader) str() string { return string(r.bytes(int(r.u32()))) }

// count reads an entry count and refuses one that the bytes left cannot
// hold at minSize bytes an entry.
func (r *amqpReader) count(minSize int) int {
	n := r.u32()
	if r.err == nil && uint64(n)*uint64(minSize) > uint64(len(r.b)) {
		r.err = fmt.Errorf("count %d larger than the %d bytes left hold", n, len(r.b))
		return 0
	}
	return int(n)
}
