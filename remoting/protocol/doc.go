// Package protocol is SmartGo's RocketMQ 4.x remoting protocol: the frame
// codec, the command model, both header encodings, typed request and
// response headers, JSON bodies, and the code tables. It is pure: bytes in,
// bytes out, no sockets. Every format below is frozen (it is what RocketMQ
// clients speak) and pinned by tests in codec_test.go.
//
// # Frame
//
// All integers are big-endian.
//
//	+----------------+----------------------------+------------+---------+
//	| length  uint32 | serType u8 | headerLen u24 | header     | body    |
//	+----------------+----------------------------+------------+---------+
//	  0..3             4            5..7            8..8+hl      ..4+length
//
// length counts every byte after itself: 4 + headerLen + bodyLen. The
// high byte of the second word is the header's serialize type (0 = JSON,
// 1 = ROCKETMQ); its low 24 bits are the header length. A frame whose
// length word plus 4 exceeds the limit (16 MiB by default) is rejected
// before anything is allocated for it (FrameLength).
//
// # JSON header (serialize type 0)
//
// A UTF-8 JSON object. SmartGo writes keys in alphabetical order, like
// Java's fastjson:
//
//	{"code":105,"extFields":{"topic":"T"},"flag":0,"language":"GO",
//	 "opaque":7,"remark":"...","serializeTypeCurrentRPC":"JSON","version":409}
//
//	code       int     request code, or response code in a response
//	extFields  object  string -> string; every value is a string
//	flag       int     bit 0 response, bit 1 oneway
//	language   string  JAVA CPP DOTNET PYTHON DELPHI ERLANG RUBY OTHER HTTP GO PHP OMS RUST
//	opaque     int     request id, copied into the response
//	remark     string  omitted when empty
//	version    int     sender's MQVersion ordinal
//
// extFields is written when set and always (at least {}) on responses;
// remark only when non-empty. The decoder ignores unknown keys, tolerates
// missing ones, nulls, numbers sent as strings and non-string extFields
// values (kept as their JSON text).
//
// # ROCKETMQ binary header (serialize type 1)
//
//	offset size
//	0      2    code       int16
//	2      1    language   uint8 (index in the list above)
//	3      2    version    int16
//	5      4    opaque     int32
//	9      4    flag       int32
//	13     4    remarkLen  int32 (0 = no remark)
//	17     rl   remark     UTF-8
//	..     4    extLen     int32, bytes of the entries that follow
//	..     el   entries    keyLen int16 | key | valLen int32 | value, repeated
//
// The fixed part is 21 bytes. SmartGo writes entries sorted by key.
//
// # Headers and bodies
//
// Typed headers map to and from ExtFields with EncodeFields and
// DecodeFields methods generated (headers_gen.go) from one table,
// internal/headergen/table.go, which gives each field's key, kind and
// presence rule; the structs stay hand-written with their documentation.
// Edit the table and run go generate; TestHeadersGenerated fails on a
// stale headers_gen.go. A decoding error wraps ErrMissingField or
// ErrBadField and names the header type and key.
//
// The hot headers (a send, a pull and their answers; Direct in the table)
// also get a generated decoder that reads a received command's field list
// straight into the struct, and a writer that appends their fields
// straight into a frame, so the per-message path builds no map:
// DecodeFrameWith keeps a request's extFields as a field list for the
// codes its caller names (the remoting server does so for processors
// registered with TypedHeader): the members read once, in the same pass
// over the frame's bytes as the rest of the header, their strings
// unescaped and written over the header's own bytes when the frame is in
// a shared receive buffer, so that they are valid until Recycle
// (fieldlist.go, Command.Recycle), else into one allocation. A
// connection's reader decodes through HeaderShapes (headershape.go): a
// client writes its sends' and pulls' headers with the same keys in the
// same order each time, so the shape of one (the text between its
// values) is learned and later headers of that shape are read by
// comparing that text and reading only the values; the values that stay
// the same from one header to the next are compared with the text around
// them as runs, one piece each, and a send's list leaves the constant
// members out (its header decoded from the shape's template; the whole
// list built only for whoever asks for it: headershape_send.go).
// FuzzHeaderShapes holds all of it to the one pass. DecodeHeader then decodes
// from the list, and Command.WithHeader keeps a response's typed header
// until the frame is written. Both produce exactly what the map would
// (same values, same errors, same bytes; tests, FuzzRawFields and
// FuzzJSONHeaderFast compare them); a decoder that meets anything else (a
// missing or malformed field) falls back to the map for the error. Command.Fields builds the map on demand. Bodies are JSON (see
// bodies.go); DecodeJSON accepts fastjson's bare numeric map keys
// ({0:"addr"}), EncodeJSON always quotes them. Like fastjson, DecodeJSON
// converts scalars to the kind the field wants (rocketmq-client-go writes
// a subscription's codeSet as ["2598919"]; see jsonlenient.go and the
// client's captured bodies in testdata/clientgo).
package protocol
