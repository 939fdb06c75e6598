// Package wire is the byte-level codec of AMQP 0-9-1 in RabbitMQ's
// dialect: frames, methods, field tables and content headers. It knows
// nothing of connections or state; package amqp builds the engine on it.
//
// # Using it
//
// Every method is a struct named after its class and method
// (BasicPublish, ConnectionTuneOk, ...) whose pointer implements Method:
// write &BasicAck{DeliveryTag: 1} and type-switch on *BasicAck.
// DecodeMethod returns such a pointer. Methods with the same arguments
// share a layout (type ChannelClose ConnectionClose; ConnectionTuneOk,
// ChannelFlowOk, ExchangeUnbind, QueueDeleteOk, BasicCancelOk and
// BasicRecover likewise), and methods without arguments are empty
// structs. Reserved fields (ticket,
// out-of-band, capabilities, insist, known-hosts, channel-id, get-empty's
// cluster-id) are not fields: they are written zero or empty and skipped
// when read. The close methods' class-id and method-id are the fields
// FailingClassID and FailingMethodID. A short string longer than 255
// bytes is cut to 255 when a method is written; a table value of a Go
// type the encoding does not know is written as void (check a table with
// AppendTable when it comes from outside). Decoded strings and tables are
// copies; a Frame's Payload and a ContentHeader's Raw alias the Reader's
// buffer and are valid until the next ReadFrame.
//
// Beyond the brief's API the package has AsInt64, AppendMethodPayload,
// AppendBodyFrames, MethodName and Name, the Flag constants of the basic
// properties and MaxTableDepth.
//
// # Protocol header
//
// A client opens with the 8 bytes "AMQP" 0 0 9 1. On anything else the
// server writes these 8 bytes and closes (ReadProtocolHeader returns
// ErrBadProtocolHeader).
//
// # Frames
//
// All integers are big-endian.
//
//	type     uint8   1 method, 2 content header, 3 content body, 8 heartbeat
//	channel  uint16  0 for the connection's own methods and heartbeats
//	size     uint32  payload length
//	payload  size bytes
//	end      uint8   0xCE
//
// A frame is size + 8 bytes. Before connection.tune-ok each peer accepts
// frames of up to FrameMinSize (4096) bytes; after it, up to the
// negotiated frame-max. Reader rejects a larger frame with
// ErrFrameTooLarge before reading its payload, and a wrong end octet with
// ErrBadFrameEnd. A heartbeat has an empty payload.
//
// # Method frames
//
//	class-id   uint16
//	method-id  uint16
//	arguments  in the order the spec lists them
//
// Argument types: octet (1 byte), short (2), long (4), longlong (8),
// shortstr (uint8 length + bytes), longstr (uint32 length + bytes),
// table (see below). Consecutive bits pack into one octet, the first in
// bit 0; any other field ends the octet. Bytes after the last argument
// are malformed (ErrMalformed), like a truncated argument; an unknown
// class or method id is ErrUnknownMethod. The classes: connection 10,
// channel 20, exchange 40, queue 50, basic 60, confirm 85, tx 90 (access
// 30 is not served; RabbitMQ's clients never send it).
//
// # Content
//
// A method with content (basic.publish, basic.return, basic.deliver,
// basic.get-ok) is followed on its channel by a content header frame and
// body frames carrying body-size bytes in all (none when it is 0). The
// content header's payload:
//
//	class-id   uint16  60
//	weight     uint16  0 (ignored when read)
//	body-size  uint64
//	flags      uint16  bit 15 content-type ... bit 2 cluster-id; bit 0: another flag word follows
//	properties the flagged ones, in flag order
//
// The basic properties, bit and type: 15 content-type shortstr, 14
// content-encoding shortstr, 13 headers table, 12 delivery-mode octet, 11
// priority octet, 10 correlation-id shortstr, 9 reply-to shortstr, 8
// expiration shortstr, 7 message-id shortstr, 6 timestamp longlong (Unix
// seconds), 5 type shortstr, 4 user-id shortstr, 3 app-id shortstr, 2
// cluster-id shortstr. Bit 1 flags no property, so it is malformed. A
// flag word after the first (bit 0 set) is accepted only when it flags
// nothing, since no property is defined for it; its words are kept in
// ContentHeader.Raw and forwarded as they came.
//
// # Field tables
//
// A table is a uint32 byte length followed by entries: a shortstr name,
// one type letter, the value. An array ('A') is a uint32 byte length
// followed by values (letter + value). The letters are RabbitMQ's (which
// every client uses, not the 0-9-1 spec's list), with the Go type a value
// decodes to:
//
//	t  bool      octet 0/1       b  int8      1 byte
//	B  uint8     1 byte          s  int16     2 bytes
//	u  uint16    2 bytes         I  int32     4 bytes
//	i  uint32    4 bytes         l  int64     8 bytes
//	f  float32   4 bytes IEEE    d  float64   8 bytes IEEE
//	D  Decimal   scale octet + int32 value
//	S  string    longstr         x  []byte    uint32 length + bytes
//	A  []any     array           T  time.Time uint64 Unix seconds
//	F  Table     nested table    V  nil       no bytes
//
// # Limits
//
// Tables and arrays nest at most MaxTableDepth (64) deep, decoding and
// encoding. A frame is at most the Reader's maximum. The Reader keeps one
// frame buffer; one grown past 64 KiB is let go at the next frame that
// fits in 64 KiB. Lengths inside a
// frame are checked against the bytes that are there before anything is
// allocated, so a hostile length cannot make the codec allocate more
// than the frame holds.
package wire
