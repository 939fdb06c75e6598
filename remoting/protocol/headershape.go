package protocol

// A client writes the JSON headers of its sends (and pulls) with the same
// keys in the same order every time: rocketmq-client-go's sorted keys,
// the Java client's SEND_MESSAGE_V2 members "a".."m". Only the values
// change. HeaderShapes learns such a header's shape from one that the one
// pass (scanHeaderFast) read: the text between its values (keys,
// punctuation, whitespace) and what each value is. A later header of the
// same shape is then read by comparing that text and reading only the
// values, with the one pass's own value readers: no key is scanned or
// looked up, and the field list's keys are copied from the shape.
//
// A header matches a shape only when every byte outside its values is the
// shape's and every value reads as the one pass reads it there, so the
// one pass would read it the same way, key by key, and decode it to the
// same Command (FuzzHeaderShapes checks it against the general decoder).
// Anything else falls back to the one pass, which may learn its shape in
// place of an older one.

// slotKind is what a value of a shape is, and how it is read.
type slotKind uint8

const (
	slotNone      slotKind = iota
	slotCode               // "code": an integer
	slotVersion            // "version": an integer
	slotOpaque             // "opaque": an integer
	slotFlag               // "flag": an integer
	slotLanguage           // "language": a string without escapes
	slotRemark             // "remark": null or a string without escapes
	slotIgnored            // "serializeTypeCurrentRPC": a string without escapes
	slotExtString          // an extFields member's string, after its opening quote
	slotExtScalar          // an extFields member's number or boolean
)

const (
	// shapeSlots is how many shapes a connection keeps: a client's sends
	// and its pulls may share one.
	shapeSlots = 2
	// maxShapeValues and maxShapeHeader bound what is learned: more
	// values, or a longer header, and a header is read by the one pass.
	maxShapeValues = 40
	maxShapeHeader = 2048
)

// shapeRec notes where the values of a header lie, as scanHeaderFast
// reads them.
type shapeRec struct {
	n    int
	over bool
	v    [maxShapeValues]recValue
}

// recValue is one value: b[start:end], and b[k0:k1] its member's key for
// extFields members.
type recValue struct {
	kind               slotKind
	start, end, k0, k1 int32
}

func (r *shapeRec) add(kind slotKind, start, end, k0, k1 int) {
	if r.n == len(r.v) {
		r.over = true
		return
	}
	r.v[r.n] = recValue{kind, int32(start), int32(end), int32(k0), int32(k1)}
	r.n++
}

// headerShape is a learned shape: for each value, the text before it
// (text[f0:f1]) and, for an extFields member, its key as a field list
// writes it (length-prefixed, text[f1:k1]); text[tail:] follows the last
// value up to the header's end.
//
// Most of a client's extFields strings are the same in every request
// (its group, the topic, "0", "false"), so for an extFields string the
// shape also keeps the text before it with the value it had when learned,
// closing quote included (consts[c0:c1]), and the field list bytes that
// text reads as (its key and value, consts[c1:c2]). Where a header has
// that text, the member's list bytes are copied, not read again: the
// same bytes read the same way, and the closing quote ends the value.
type headerShape struct {
	text, consts   []byte
	slots          []shapeSlot
	tail           int32
	ext, codeFirst bool
	send           *sendTemplate // its constant members decoded (headershape_send.go)
}

type shapeSlot struct {
	kind       slotKind
	f0, f1, k1 int32
	c0, c1, c2 int32
}

// HeaderShapes decodes the JSON request headers of one connection,
// learning the shapes its client writes them in (see above). The zero
// value is ready; it is not safe for concurrent use (a connection's
// reader owns it).
type HeaderShapes struct {
	s    [shapeSlots]headerShape
	last int // the shape that matched last, tried first
	next int // the shape the next one learned replaces
}

// DecodeFrame is DecodeFrameWith for a frame of the connection s belongs
// to: the same Command, with its header read by a learned shape where it
// matches one. A nil s is DecodeFrameWith.
func (s *HeaderShapes) DecodeFrame(frame []byte, ref BufferRef, raw RawFields) (*Command, error) {
	return decodeFrame(frame, ref, raw, s)
}

// decode is decodeJSONHeaderFast through the shapes: false, with c
// untouched, where the one pass would not read b.
func (s *HeaderShapes) decode(b []byte, c *Command, raw RawFields, lend bool) bool {
	var scratch [512]byte
	for k := range shapeSlots {
		n := (s.last + k) % shapeSlots
		if h, list, ok := s.s[n].read(b, scratch[:0]); ok {
			s.last = n
			h.apply(b, list, c, raw, lend)
			if t := s.s[n].send; t != nil && c.list != "" && int(h.nvary) <= maxShapedVary {
				c.shaped = shapedList{tmpl: t, vary: h.vary, n: h.nvary}
			}
			return true
		}
	}
	var rec shapeRec
	h, list, ok := scanHeaderFast(b, scratch[:0], &rec)
	if !ok {
		return false
	}
	// Learn only what is worth it: a request that keeps its list (a send,
	// a pull), and not a header too big to keep a copy of per connection.
	if !rec.over && len(b) <= maxShapeHeader && h.keepsList(raw) {
		s.s[s.next].learn(b, &rec, h.codeFirst)
		s.last, s.next = s.next, (s.next+1)%shapeSlots
	}
	h.apply(b, list, c, raw, lend)
	return true
}

// learn makes t the shape of b, whose values rec noted.
func (t *headerShape) learn(b []byte, rec *shapeRec, codeFirst bool) {
	t.text, t.consts, t.slots = t.text[:0], t.consts[:0], t.slots[:0]
	prev := int32(0)
	for _, v := range rec.v[:rec.n] {
		sl := shapeSlot{kind: v.kind, f0: int32(len(t.text))}
		t.text = append(t.text, b[prev:v.start]...)
		sl.f1 = int32(len(t.text))
		if v.kind == slotExtString || v.kind == slotExtScalar {
			t.text = appendListString(t.text, b[v.k0:v.k1])
		}
		sl.k1 = int32(len(t.text))
		if v.kind == slotExtString {
			sl.c0 = int32(len(t.consts))
			t.consts = append(t.consts, b[prev:v.end]...)
			sl.c1 = int32(len(t.consts))
			t.consts = append(t.consts, t.text[sl.f1:sl.k1]...)
			var ok bool
			if t.consts, _, ok = fastValue(b, int(v.start), t.consts); !ok {
				t.consts = t.consts[:sl.c1] // not so: the slot is read
			}
			sl.c2 = int32(len(t.consts))
		}
		t.slots = append(t.slots, sl)
		prev = v.end
	}
	t.tail = int32(len(t.text))
	t.text = append(t.text, b[prev:]...)
	t.ext, t.codeFirst = true, codeFirst
	t.send = newSendTemplate(t)
}

// read reads b as a header of shape t, appending its field list to list;
// false where b is not of that shape (or t is empty).
func (t *headerShape) read(b []byte, list []byte) (fastHeader, []byte, bool) {
	h := fastHeader{ext: t.ext, codeFirst: t.codeFirst}
	if !t.ext {
		return h, nil, false
	}
	list = append(list, fieldListMarker)
	i := 0
	text := t.text
	for _, sl := range t.slots {
		if sl.c2 > sl.c1 {
			if fixed := t.consts[sl.c0:sl.c1]; len(b)-i >= len(fixed) && string(b[i:i+len(fixed)]) == string(fixed) {
				list = append(list, t.consts[sl.c1:sl.c2]...)
				i += len(fixed)
				continue
			}
		}
		frag := text[sl.f0:sl.f1]
		if len(b)-i < len(frag) || string(b[i:i+len(frag)]) != string(frag) {
			return h, nil, false
		}
		i += len(frag)
		ok := true
		switch sl.kind {
		case slotExtString:
			h.noteVary(len(list))
			list = append(list, text[sl.f1:sl.k1]...)
			list, i, ok = fastValue(b, i, list)
		case slotExtScalar:
			h.noteVary(len(list))
			list = append(list, text[sl.f1:sl.k1]...)
			list, i, ok = fastExtScalar(b, i, list)
		case slotCode:
			h.code, i, ok = fastInt32(b, i)
		case slotVersion:
			h.version, i, ok = fastInt32(b, i)
		case slotOpaque:
			h.opaque, i, ok = fastInt32(b, i)
		case slotFlag:
			h.flag, i, ok = fastInt32(b, i)
		case slotLanguage:
			h.lang, i, ok = fastLanguage(b, i)
		case slotRemark:
			h.remark, i, ok = fastRemark(b, i)
		case slotIgnored:
			_, i, ok = fastPlainString(b, i)
		}
		if !ok {
			return h, nil, false
		}
	}
	if string(b[i:]) != string(text[t.tail:]) {
		return h, nil, false
	}
	return h, list, true
}
