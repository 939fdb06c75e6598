package protocol

import (
	"unicode/utf8"
	"unsafe"
)

// A request decoded by DecodeFrameWith for a code that RawFields keeps
// gets its extFields as a field list instead of the ExtFields map: the
// members read once, while the frame is decoded. The generated decoders of
// the send and pull headers read the list with no JSON left to scan
// (decodeFieldList), Fields builds the map from it.
//
// Where the list lives decides how long the header's strings (the typed
// header's Topic, Properties and so on, which are slices of it) stay
// valid. A frame decoded in a shared receive buffer (DecodeFrameWith with
// a BufferRef) gets its list written over its own JSON header, which the
// list is never longer than for the headers clients write: no allocation,
// no copy into fresh memory, and the list and every string decoded from
// it are valid until the command is recycled, like Body (Command.Recycle;
// OwnFields copies it out for a processor that keeps the request). Without
// a BufferRef, or when the list would not fit, it takes one allocation of
// its own and stays valid for ever.
//
// The list's bytes: a marker byte (so that the list of an empty object is
// not the empty string), then for each member that has a value, in the
// order they came, the key's length (3 bytes, big endian), the key, the
// value's length (3 bytes) and the value: strings unescaped, other
// scalars as their JSON text. Null and nested values are left out, as
// the map leaves them out. A header is shorter than 1<<24 bytes, so every
// length fits.
type fieldList string

const fieldListMarker = 0xFF

// appendListString appends one length-prefixed string of a field list.
func appendListString(dst []byte, s []byte) []byte {
	n := len(s)
	dst = append(dst, byte(n>>16), byte(n>>8), byte(n))
	return append(dst, s...)
}

// listIter reads a field list's members in order.
type listIter struct {
	l        fieldList
	i        int
	key, val string
}

func (l fieldList) iter() listIter { return listIter{l: l, i: 1} }

// next reads the next member; false after the last one.
func (it *listIter) next() bool {
	if it.i >= len(it.l) {
		return false
	}
	it.key, it.i = it.l.str(it.i)
	it.val, it.i = it.l.str(it.i)
	return true
}

// str reads the string at i and returns it and the offset after it.
func (l fieldList) str(i int) (string, int) {
	n := int(l[i])<<16 | int(l[i+1])<<8 | int(l[i+2])
	i += 3
	return string(l[i : i+n]), i + n
}

// fields builds the ExtFields map of the list (the values alias it).
func (l fieldList) fields() ExtFields {
	n := 0
	for it := l.iter(); it.next(); {
		n++
	}
	f := make(ExtFields, min(n, maxFieldsHint))
	for it := l.iter(); it.next(); {
		f[it.key] = it.val
	}
	return f
}

// listFromText builds the field list of extFields text read by fieldIter
// (the decoder's general path); ok is false with it.err set when the
// text is not a well-formed object.
func listFromText(text string) (fieldList, error) {
	out := make([]byte, 1, len(text)+8)
	out[0] = fieldListMarker
	it := fieldIter{s: jsonScanner{s: text}}
	for it.next(true) {
		out = appendListString(out, unsafe.Slice(unsafe.StringData(it.key), len(it.key)))
		out = appendListString(out, unsafe.Slice(unsafe.StringData(it.val), len(it.val)))
	}
	if it.err == nil && it.s.peek() != 0 {
		it.err = it.s.errorf("trailing data after extFields")
	}
	if it.err != nil {
		return "", it.err
	}
	return fieldList(unsafe.String(unsafe.SliceData(out), len(out))), nil // out is not written again
}

// decodeJSONHeaderFast decodes the JSON header b of a frame whose
// extFields the caller may keep as a field list (raw is not nil) in one
// pass over b, straight from the receive buffer: b is not copied, and
// the list (extFields' keys and values, unescaped) is the only
// allocation, of its own size. It handles the headers clients write (Java's, the Go
// client's; any order of the keys, whitespace, escaped values); on
// anything else (an unknown top-level key, a nested or null member, an
// escaped key, a surrogate escape, a duplicate extFields or code, a
// quoted or null integer, malformed JSON) it returns false with c
// untouched, and decodeJSONHeader's general path decides, errors
// included. On success c is as decodeJSONHeader would leave it, with the
// list in c.list where that keeps the text (a request whose code raw
// keeps, "code" before "extFields"), else in c.ExtFields as a map. With
// lend, a kept list that fits is written over b and c.lent is set (see
// fieldList); b is written only once the pass succeeded.
func decodeJSONHeaderFast(b []byte, c *Command, raw RawFields, lend bool) bool {
	// The list is built on the stack while it fits and copied once at
	// the end: over b when lent, else into its own string.
	var scratch [512]byte
	h, list, ok := scanHeaderFast(b, scratch[:0], nil)
	if ok {
		h.apply(b, list, c, raw, lend)
	}
	return ok
}

// fastHeader is what the one pass (or a learned shape, see HeaderShapes)
// read from a header, before it is set on the Command. The field list
// goes beside it, not in it: its remark escapes into the Command, and
// the list, on the caller's stack, must not be seen to.
type fastHeader struct {
	code, version, opaque, flag int32
	lang                        LanguageCode
	remark                      string
	ext, codeFirst              bool // extFields seen; "code" came before it
	// The members a learned shape read by value: where each starts in
	// the list, and how many there were (headershape_send.go).
	vary  [maxShapedVary]uint16
	nvary uint8
	// The shape's constant members it left out of a lazy list: one bit
	// per slot of the shape.
	took uint64
	// 1 + where the member whose value a lazy list keeps escaped starts
	// (0: none; headershape_send.go).
	esc uint16
}

// keepsList reports whether apply keeps h's members as a field list
// rather than a map.
func (h *fastHeader) keepsList(raw RawFields) bool {
	return h.ext && h.codeFirst && h.flag&FlagResponse == 0 && raw(h.code)
}

// apply sets what the pass read (h and its field list) on c, as
// decodeJSONHeaderFast describes.
func (h *fastHeader) apply(b, list []byte, c *Command, raw RawFields, lend bool) {
	c.Code, c.Version, c.Opaque, c.Flag, c.Language, c.Remark = h.code, h.version, h.opaque, h.flag, h.lang, h.remark
	c.ExtFields, c.list, c.listErr, c.lent, c.shaped = nil, "", nil, false, shapedList{}
	switch {
	case !h.ext:
	case !h.keepsList(raw):
		c.ExtFields = fieldList(list).fields() // the map's strings: one allocation of the list's size
	case lend && len(list) <= len(b):
		// The header's bytes are not read again: the list takes their
		// place and lives as long as the receive buffer's reference.
		n := copy(b, list)
		c.list, c.lent = fieldList(unsafe.String(unsafe.SliceData(b), n)), true
	default:
		c.list = fieldList(list) // one allocation of the list's size, not zeroed first
	}
}

// scanHeaderFast is the one pass of decodeJSONHeaderFast: it reads b,
// appending the field list to list, and notes in rec (when not nil)
// where each value it read lies in b, for HeaderShapes to learn from.
func scanHeaderFast(b []byte, list []byte, rec *shapeRec) (fastHeader, []byte, bool) {
	return scanHeaderWith(b, list, rec, nil, nil)
}

// scanHeaderWith is scanHeaderFast reading the extFields members through
// the member table ms (not nil: r too; headershape_members.go).
func scanHeaderWith(b []byte, list []byte, rec *shapeRec, ms *memberShape, r *memberRead) (fastHeader, []byte, bool) {
	if ms != nil && len(ms.head.text) > 0 {
		// The table's head: the header's text up to its extFields, the
		// opaque read by value (headershape_members.go).
		if h, list, ok, whole := ms.headMembers(b, list, r); whole {
			return h, list, ok
		}
		*r = memberRead{} // read again, from the start
	}
	var h fastHeader
	var codeSeen bool
	i := skipWS(b, 0)
	if i >= len(b) || b[i] != '{' {
		return h, nil, false
	}
	i = skipWS(b, i+1)
	if i < len(b) && b[i] == '}' {
		i++
	} else {
		for {
			if i >= len(b) || b[i] != '"' {
				return h, nil, false
			}
			k0 := i + 1
			k1 := k0 + plainRun(unsafe.String(unsafe.SliceData(b[k0:]), len(b)-k0))
			if k1 >= len(b) || b[k1] != '"' {
				return h, nil, false
			}
			key := b[k0:k1]
			if i = skipWS(b, k1+1); i >= len(b) || b[i] != ':' {
				return h, nil, false
			}
			i = skipWS(b, i+1)
			ok := true
			v0, kind := i, slotNone
			if r != nil && h.ext {
				r.extLast = false
			}
			switch string(key) {
			case "code":
				if codeSeen {
					return h, nil, false
				}
				codeSeen = true
				h.code, i, ok = fastInt32(b, i)
				kind = slotCode
			case "version":
				h.version, i, ok = fastInt32(b, i)
				kind = slotVersion
			case "opaque":
				h.opaque, i, ok = fastInt32(b, i)
				kind = slotOpaque
				if r != nil {
					r.op0, r.op1 = int32(v0), int32(i)
				}
			case "flag":
				h.flag, i, ok = fastInt32(b, i)
				kind = slotFlag
			case "language":
				h.lang, i, ok = fastLanguage(b, i)
				kind = slotLanguage
			case "remark":
				h.remark, i, ok = fastRemark(b, i)
				kind = slotRemark
			case "serializeTypeCurrentRPC":
				_, i, ok = fastPlainString(b, i)
				kind = slotIgnored
			case "extFields":
				if h.ext || i >= len(b) || b[i] != '{' {
					return h, nil, false // a second extFields, null, or not an object
				}
				h.ext, h.codeFirst = true, codeSeen
				list = append(list, fieldListMarker)
				if ms != nil {
					r.ext, r.extLast = int32(i), true
					list, i, ok = tableMembers(b, i+1, list, &h, ms, r)
				} else {
					list, i, ok = fastMembers(b, i+1, list, rec)
				}
			default:
				return h, nil, false
			}
			if !ok {
				return h, nil, false
			}
			if rec != nil && kind != slotNone {
				rec.add(kind, v0, i, 0, 0)
			}
			if i = skipWS(b, i); i >= len(b) {
				return h, nil, false
			}
			if b[i] == ',' {
				i = skipWS(b, i+1)
				continue
			}
			if b[i] != '}' {
				return h, nil, false
			}
			i++
			break
		}
	}
	if skipWS(b, i) != len(b) {
		return h, nil, false
	}
	return h, list, true
}

// fastLanguage reads the language's name, a string without escapes, at i.
func fastLanguage(b []byte, i int) (LanguageCode, int, bool) {
	name, i, ok := fastPlainString(b, i)
	var lang LanguageCode
	if ok {
		lang, _ = ParseLanguage(unsafe.String(unsafe.SliceData(name), len(name)))
	}
	return lang, i, ok
}

// fastRemark reads the remark at i: null, or a string without escapes.
func fastRemark(b []byte, i int) (string, int, bool) {
	if i+4 <= len(b) && string(b[i:i+4]) == "null" {
		return "", i + 4, true
	}
	r, i, ok := fastPlainString(b, i)
	if !ok || len(r) == 0 {
		return "", i, ok
	}
	return string(r), i, true
}

// fastScalar returns the end of the scalar at i as rawScalar reads it,
// or false where rawScalar would fail (or reach the end of b).
func fastScalar(b []byte, i int) (int, bool) {
	start := i
	for ; i < len(b); i++ {
		switch b[i] {
		case ',', '}', ']', ' ', '\t', '\r', '\n', ':':
			return i, i > start
		case '"', '{', '[':
			return i, false
		}
	}
	return i, false
}

// fastInt32 reads an unquoted integer at i.
func fastInt32(b []byte, i int) (int32, int, bool) {
	end, ok := fastScalar(b, i)
	if !ok {
		return 0, i, false
	}
	v, ok := parseI32(unsafe.String(unsafe.SliceData(b[i:]), end-i))
	return v, end, ok
}

// fastPlainString reads a string without escapes at i; the result aliases b.
func fastPlainString(b []byte, i int) ([]byte, int, bool) {
	if i >= len(b) || b[i] != '"' {
		return nil, i, false
	}
	i++
	end := i + plainRun(unsafe.String(unsafe.SliceData(b[i:]), len(b)-i))
	if end >= len(b) || b[end] != '"' {
		return nil, i, false
	}
	return b[i:end], end + 1, true
}

// fastMembers reads the members of an extFields object from just after
// its '{' up to and including its '}', appending them to list.
func fastMembers(b []byte, i int, list []byte, rec *shapeRec) ([]byte, int, bool) {
	if i = skipWS(b, i); i < len(b) && b[i] == '}' {
		return list, i + 1, true
	}
	for {
		key, k1, v0, kind, out, end, ok := fastMember(b, i, list)
		if list, i = out, end; !ok {
			return list, i, false
		}
		if rec != nil {
			rec.add(kind, v0, i, k1-len(key), k1)
		}
		var more bool
		if i, more, ok = memberEnd(b, i); !ok || !more {
			return list, i, ok
		}
	}
}

// memberEnd reads what follows an extFields member that ends at b[i]:
// another member (more; i is where it starts) or the object's end (i is
// after its '}'); ok is false on anything else.
func memberEnd(b []byte, i int) (next int, more, ok bool) {
	if i = skipWS(b, i); i >= len(b) {
		return i, false, false
	}
	switch b[i] {
	case ',':
		return skipWS(b, i+1), true, true
	case '}':
		return i + 1, false, true
	}
	return i, false, false
}

// fastMember reads the extFields member whose key's opening quote is at
// b[i], appending its key and value to list: its key (ending at b[k1]),
// where its value starts (after a string's opening quote) and what it is,
// and the offset after it.
func fastMember(b []byte, i int, list []byte) (key []byte, k1, v0 int, kind slotKind, out []byte, end int, ok bool) {
	key, j, ok := fastPlainString(b, i)
	if !ok {
		return nil, 0, 0, 0, list, i, false
	}
	if i = skipWS(b, j); i >= len(b) || b[i] != ':' {
		return nil, 0, 0, 0, list, i, false
	}
	if i = skipWS(b, i+1); i >= len(b) {
		return nil, 0, 0, 0, list, i, false
	}
	list = appendListString(list, key)
	v0, kind = i, slotExtString
	if b[i] == '"' {
		v0++
		list, i, ok = fastValue(b, v0, list)
	} else {
		kind = slotExtScalar
		list, i, ok = fastExtScalar(b, i, list)
	}
	return key, j - 1, v0, kind, list, i, ok
}

// fastExtScalar appends the length and the text of the scalar member
// value (not null) at i and returns the offset after it.
func fastExtScalar(b []byte, i int, list []byte) ([]byte, int, bool) {
	end, ok := fastScalar(b, i)
	if !ok || string(b[i:end]) == "null" {
		return list, i, false
	}
	return appendListString(list, b[i:end]), end, true
}

// fastValue appends the length and the unescaped bytes of the string
// value whose first byte is at i (after the opening quote) and returns
// the offset after its closing quote. Surrogate escapes, control
// characters and bad escapes are not handled (false).
func fastValue(b []byte, i int, list []byte) ([]byte, int, bool) {
	at := len(list)
	list = append(list, 0, 0, 0)
	for {
		n := plainRun(unsafe.String(unsafe.SliceData(b[i:]), len(b)-i))
		list = append(list, b[i:i+n]...)
		i += n
		if i >= len(b) {
			return list, i, false
		}
		switch b[i] {
		case '"':
			n := len(list) - at - 3
			list[at], list[at+1], list[at+2] = byte(n>>16), byte(n>>8), byte(n)
			return list, i + 1, true
		case '\\':
			if i+1 >= len(b) {
				return list, i, false
			}
			var e byte
			switch b[i+1] {
			case '"', '\\', '/':
				e = b[i+1]
			case 'b':
				e = '\b'
			case 'f':
				e = '\f'
			case 'n':
				e = '\n'
			case 'r':
				e = '\r'
			case 't':
				e = '\t'
			case 'u':
				// An ASCII control character (the properties' separators
				// 1 and 2 come as \u0001 and \u0002): one byte.
				if i+5 < len(b) && b[i+2] == '0' && b[i+3] == '0' && b[i+4] <= '1' && b[i+4] >= '0' && hexDigit(b[i+5]) {
					list = append(list, (b[i+4]-'0')<<4|hexValue(b[i+5]))
					i += 6
					continue
				}
				r, ok := parseHex4(unsafe.String(unsafe.SliceData(b[i+2:]), len(b)-i-2))
				if !ok || (r >= 0xD800 && r < 0xE000) {
					return list, i, false
				}
				list = utf8.AppendRune(list, r)
				i += 6
				continue
			default:
				return list, i, false
			}
			list = append(list, e)
			i += 2
		default:
			return list, i, false // a control character
		}
	}
}

// hexDigit reports whether c is a hexadecimal digit; hexValue is its value.
func hexDigit(c byte) bool {
	return c-'0' <= 9 || (c|0x20)-'a' <= 5
}

func hexValue(c byte) byte {
	if c <= '9' {
		return c - '0'
	}
	return (c | 0x20) - 'a' + 10
}
