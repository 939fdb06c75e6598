// Package packets is SmartGo's MQTT 3.1, 3.1.1 and 5.0 control packet codec:
// pure functions from bytes to packets and back, with no sockets, built for
// a server that reads each connection into a growable buffer from an event
// loop and decodes whole packets out of it.
//
// # Decoding
//
// DecodeFixedHeader looks at the front of a buffer and says how long the
// packet is (or ErrIncomplete), rejecting oversized packets
// (ErrPacketTooLarge) before anything is allocated. Decoder.Next decodes
// one whole packet and says how many bytes it used; Decode wants exactly one
// packet. Every failure is an *Error wrapping one sentinel (ErrMalformed,
// ErrProtocol, ErrTopicNameInvalid, ...), and ReasonCodeOf turns it into the
// MQTT 5 reason code for DISCONNECT or CONNACK. Decoders never panic on any
// input (FuzzDecodeV311, FuzzDecodeV5, FuzzFixedHeader).
//
// By default decoded packets own their memory (at most two allocations for
// all strings and byte slices of a packet, plus the packet itself). With
// Options.Alias they point into the input buffer instead; Detach copies them
// out when the packet must outlive the buffer.
//
// # Encoding
//
// AppendPacket appends a packet to a caller's buffer without allocating
// when the buffer has room; Size gives the encoded size first, to respect a
// peer's Maximum Packet Size. The version argument switches the wire form:
// below 5 there are no properties and most reason codes are not sent.
//
// # Wire format (MQTT 3.1.1 section 2, MQTT 5.0 sections 1.5 and 2; frozen)
//
// Every packet starts with a fixed header of 2 to 5 bytes:
//
//	byte 0      bits 7-4: packet type (1 CONNECT ... 14 DISCONNECT, 15 AUTH
//	            in v5 only; 0 reserved)
//	            bits 3-0: flags. PUBLISH: DUP(3) QoS(2-1) RETAIN(0), QoS 3 is
//	            malformed; PUBREL, SUBSCRIBE, UNSUBSCRIBE: 0010; all others
//	            0000. Any other value is a malformed packet.
//	byte 1..4   remaining length: variable byte integer, the number of bytes
//	            after the fixed header (variable header + payload)
//
// A variable byte integer holds 7 bits per byte, least significant group
// first; bit 7 set means another byte follows. At most 4 bytes (maximum
// 268,435,455) and always the shortest form:
//
//	0          00
//	127        7F
//	128        80 01
//	16,383     FF 7F
//	16,384     80 80 01
//	2,097,151  FF FF 7F
//	2,097,152  80 80 80 01
//	268,435,455 FF FF FF 7F
//
// Two-byte and four-byte integers are big-endian. A UTF-8 string and a
// binary field are a two-byte length followed by that many bytes; strings
// must be valid UTF-8 without U+0000 (surrogates are invalid UTF-8).
//
// In MQTT 5 most packets carry a property block: a variable byte integer
// length, then properties, each an identifier (a variable byte integer, in
// practice one byte) followed by a value of the identifier's type:
//
//	byte            01 payload format, 17 request problem info, 19 request
//	                response info, 24 maximum QoS, 25 retain available,
//	                28 wildcard/29 subscription id/2A shared subscription
//	                available
//	two-byte int    13 server keep alive, 21 receive maximum, 22 topic alias
//	                maximum, 23 topic alias
//	four-byte int   02 message expiry, 11 session expiry, 18 will delay,
//	                27 maximum packet size
//	varint          0B subscription identifier (repeatable in PUBLISH)
//	string          03 content type, 08 response topic, 12 assigned client
//	                id, 15 authentication method, 1A response information,
//	                1C server reference, 1F reason string
//	binary          09 correlation data, 16 authentication data
//	string pair     26 user property (repeatable, order kept)
//
// Which identifiers each packet (and CONNECT's separate will property block)
// allows is in AllowedProperties and AllowedWillProperties; any other is a
// malformed packet, a repeated single-valued one a protocol error. This
// encoder writes properties in ascending identifier order.
//
// Example: PUBLISH QoS 1, topic "a/b", packet id 10, payload "hi".
//
//	3.1.1: 32 09 | 00 03 61 2F 62 | 00 0A | 68 69
//	5.0:   32 16 | 00 03 61 2F 62 | 00 0A | 0C 02 00 00 00 3C 26 00 01 6B 00 01 76 | 68 69
//	                                        props: message expiry 60,
//	                                        user property "k"="v"
//
// Short forms in MQTT 5: PUBACK, PUBREC, PUBREL and PUBCOMP of 2 bytes mean
// reason 0 and no properties, of 3 bytes a reason without properties;
// DISCONNECT and AUTH of 0 bytes mean reason 0, a DISCONNECT of 1 byte a
// reason without properties. The encoder always picks the shortest form.
//
// CONNECT's variable header is the protocol name ("MQIsdp" for level 3,
// "MQTT" for 4 and 5), the level byte, the connect flags (7 user name,
// 6 password, 5 will retain, 4-3 will QoS, 2 will, 1 clean start, 0 reserved
// and zero) and the keep alive; then (v5) properties, client id, (if will)
// will properties (v5), will topic and will payload, user name, password.
package packets
