package protocol

import "math"

// Most clients write the JSON headers of their sends (and pulls) with the
// same keys in the same order every time (the Java client's
// SEND_MESSAGE_V2 members "a".."m", SmartGo's own client): only the
// values change. (rocketmq-client-go v2.1.2 does not: it writes its
// extFields in Go's map order; see headershape_members.go.) HeaderShapes
// learns such a header's shape from one that the one pass
// (scanHeaderFast) read: the text between its values (keys, punctuation,
// whitespace) and what each value is. A later header of the
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
//
// Runs of values that are the same in every request (see shapeRun) are
// compared as one piece: for rocketmq-client-go's send, all but the born
// time, the properties, the queue and the opaque.
type headerShape struct {
	text, consts   []byte
	slots          []shapeSlot
	tail           int32
	ext, codeFirst bool
	send           *sendTemplate // its constant members decoded (headershape_send.go)
	// The runs and their text (runText), and the values of the header
	// the shape was learned from that a run may hold.
	runs                []shapeRun
	runText             []byte
	learned             []byte  // the header the shape was learned from
	ends                []int32 // where each of its values ends in learned
	vary                uint64  // the slots seen to vary, in no run
	code, version, flag int32
	lang                LanguageCode
	remark              string
}

type shapeSlot struct {
	kind       slotKind
	f0, f1, k1 int32
	c0, c1, c2 int32
	run        int32 // 1 + the index of the run starting at this slot, or 0
	// props: an extFields string whose key names a send's properties
	// ("properties", V2's "i"); a lazy list may keep its value escaped
	// (headershape_send.go).
	props bool
}

// shapeRun is a run of consecutive values that can be learned as constants
// (extFields strings, and every top-level value but the opaque), with the
// text before each: the learned header's bytes from the text before the
// first to the end of the last (runText[r0:r1]), and its delimiter when
// the last is a number (a number read there ends where it ends). A header
// with those bytes reads each of the run's values as learned: each slot's
// own constant (c0:c1 for an extFields string) or value is a part of the
// run's bytes. adv is how many bytes the run reads (without the
// delimiter), runText[r1:l1] the list bytes of its extFields members, took
// their slots (for a lazy list), top the top-level values it holds (a
// bit per slotKind).
type shapeRun struct {
	end        int32 // one past its last slot
	r0, r1, l1 int32
	adv        int32
	took       uint64
	top        uint16
}

// runnable reports whether slot s can be part of a run: not one seen to
// vary, not the opaque, not an extFields scalar, and an extFields string
// only when its constant form was learned.
func (t *headerShape) runnable(s int) bool {
	sl := &t.slots[s]
	if t.vary&(1<<s) != 0 {
		return false
	}
	switch sl.kind {
	case slotCode, slotVersion, slotFlag, slotLanguage, slotRemark, slotIgnored:
		return true
	case slotExtString:
		return sl.c2 > sl.c1
	}
	return false
}

// HeaderShapes decodes the JSON request headers of one connection,
// learning the shapes its client writes them in (see above). The zero
// value is ready; it is not safe for concurrent use (a connection's
// reader owns it).
type HeaderShapes struct {
	s    [shapeSlots]headerShape
	last int // the shape that matched last, tried first
	next int // the shape the next one learned replaces
	// Learning pays only when a client repeats its headers' shape, and
	// not every client does: rocketmq-client-go v2.1.2 writes a send's
	// extFields in Go's map order, different in almost every request, so
	// a shape learned from one is hardly ever matched again, and learning
	// it costs more than the one pass that read the header. matched notes
	// the shapes that matched since they were learned; wasted counts the
	// shapes replaced in a row without one match. From shapeSlots of them
	// on, learning pauses for a number of headers that doubles with each
	// further waste (learnPause), and the shapes are not tried while it
	// does (they have not matched); one match ends it all.
	matched [shapeSlots]bool
	wasted  int
	pause   int // headers left to read without shapes or learning
	// While learning pauses, sends are read through a member table
	// (headershape_members.go).
	members memberShape
	// scratch is where a header's list is built before apply copies it
	// (kept: a stack array would be zeroed for every header).
	scratch []byte
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
	if cap(s.scratch) < 512 {
		s.scratch = make([]byte, 0, 512)
	}
	scratch := s.scratch[:0]
	if s.pause > 0 {
		return s.decodeMembers(b, c, raw, lend, scratch)
	}
	// Read into h in place: a header returned by value is copied with
	// 16-byte loads over the narrower stores that just wrote it, which
	// the CPU does not forward (a wait for its store buffer to drain).
	var h fastHeader
	for k := range shapeSlots {
		n := (s.last + k) % shapeSlots
		t := s.s[n].send
		// A send's list leaves the shape's constant members out (see
		// headershape_send.go); never under SetPoisonRecycled, where the
		// whole list must be in the receive buffer, nor for a shape
		// learned from another code (a pull), whose list would only be
		// made whole again below.
		lazy := t != nil && sendCode(s.s[n].code) && !poisonRecycled.Load()
		list, ok := s.s[n].read(&h, b, scratch, lazy)
		if !ok {
			continue
		}
		if cap(list) > cap(s.scratch) && cap(list) <= maxShapeHeader*2 {
			s.scratch = list[:0] // grown: kept for the next (apply copies it)
		}
		s.last = n
		s.matched[n], s.wasted = true, 0
		if lazy && (!sendCode(h.code) || int(h.nvary) > maxShapedVary || !h.keepsList(raw) || (h.esc != 0 && !escapedCode(h.code))) {
			// Not a send DecodeSendHeader reads from the template: the
			// whole list, after the members read.
			// Its vary offsets are the read members', so no template.
			list, lazy, t = t.appendWhole(list[len(list):], fieldList(list), h.took, h.esc), false, nil
		}
		h.apply(b, list, c, raw, lend)
		if t != nil && c.list != "" && int(h.nvary) <= maxShapedVary {
			// Set in place, as h (apply zeroed it).
			sh := &c.shaped
			sh.tmpl, sh.vary, sh.n, sh.took, sh.lazy, sh.esc = t, h.vary, h.nvary, h.took, lazy, h.esc
		}
		return true
	}
	return s.decodeOnePass(b, c, raw, lend, scratch)
}

// decodeOnePass reads b with the one pass (scanHeaderFast) and learns its
// shape if that is worth it: a request that keeps its list (a send, a
// pull), and not a header too big to keep a copy of per connection. A
// shape replaced before it matched once may start a pause of learning
// (learnPause).
func (s *HeaderShapes) decodeOnePass(b []byte, c *Command, raw RawFields, lend bool, scratch []byte) bool {
	var rec shapeRec
	h, list, ok := scanHeaderFast(b, scratch, &rec)
	if !ok {
		return false
	}
	if !rec.over && len(b) <= maxShapeHeader && h.keepsList(raw) {
		n := s.next
		if s.s[n].text != nil && !s.matched[n] {
			s.wasted++
		}
		s.s[n].learn(b, &rec, &h)
		s.matched[n] = false
		s.last, s.next = n, (n+1)%shapeSlots
		s.pause = learnPause(s.wasted)
	}
	h.apply(b, list, c, raw, lend)
	return true
}

// maxLearnPause bounds how many headers a connection reads without
// shapes before it learns one again.
const maxLearnPause = 4096

// learnPause is how many headers are read without shapes after wasted
// shapes in a row were replaced unmatched: none below shapeSlots, then
// 16, doubling with each further waste, up to maxLearnPause.
func learnPause(wasted int) int {
	if wasted < shapeSlots {
		return 0
	}
	return min(16<<min(wasted-shapeSlots, 12), maxLearnPause)
}

// learn makes t the shape of b, whose values rec noted and which the one
// pass read as h.
func (t *headerShape) learn(b []byte, rec *shapeRec, h *fastHeader) {
	t.text, t.consts, t.slots = t.text[:0], t.consts[:0], t.slots[:0]
	t.learned, t.ends, t.vary = append(t.learned[:0], b...), t.ends[:0], 0
	t.code, t.version, t.flag, t.lang, t.remark = h.code, h.version, h.flag, h.lang, h.remark
	prev := int32(0)
	for _, v := range rec.v[:rec.n] {
		t.ends = append(t.ends, v.end)
		sl := shapeSlot{kind: v.kind, f0: int32(len(t.text))}
		t.text = append(t.text, b[prev:v.start]...)
		sl.f1 = int32(len(t.text))
		if v.kind == slotExtString || v.kind == slotExtScalar {
			t.text = appendListString(t.text, b[v.k0:v.k1])
		}
		sl.k1 = int32(len(t.text))
		if v.kind == slotExtString {
			k := string(b[v.k0:v.k1])
			sl.props = k == "properties" || k == "i"
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
	t.ext, t.codeFirst = true, h.codeFirst
	t.learnRuns()
	t.send = newSendTemplate(t)
}

// learnRuns finds t's runs (see shapeRun) in the header it was learned
// from: each longest sequence of runnable slots.
func (t *headerShape) learnRuns() {
	t.runs, t.runText = t.runs[:0], t.runText[:0]
	for s := range t.slots {
		t.slots[s].run = 0
	}
	b := t.learned
	for s := 0; s < len(t.slots); {
		if !t.runnable(s) {
			s++
			continue
		}
		e := s
		for e < len(t.slots) && t.runnable(e) {
			e++
		}
		from, to := int32(0), t.ends[e-1]
		if s > 0 {
			from = t.ends[s-1]
		}
		r := shapeRun{end: int32(e), r0: int32(len(t.runText)), adv: to - from}
		t.runText = append(t.runText, b[from:to]...)
		switch t.slots[e-1].kind {
		case slotCode, slotVersion, slotFlag:
			t.runText = append(t.runText, b[to]) // the one pass read a number there: a delimiter follows
		}
		r.r1 = int32(len(t.runText))
		for k := s; k < e; k++ {
			sl := &t.slots[k]
			if sl.kind == slotExtString {
				t.runText = append(t.runText, t.consts[sl.c1:sl.c2]...)
				r.took |= 1 << k
			} else {
				r.top |= 1 << sl.kind
			}
		}
		r.l1 = int32(len(t.runText))
		t.runs = append(t.runs, r)
		t.slots[s].run = int32(len(t.runs))
		s = e
	}
}

// setLearned sets the top-level values of top (a bit per slotKind) to
// t's learned ones.
func (h *fastHeader) setLearned(t *headerShape, top uint16) {
	if top&(1<<slotCode) != 0 {
		h.code = t.code
	}
	if top&(1<<slotVersion) != 0 {
		h.version = t.version
	}
	if top&(1<<slotFlag) != 0 {
		h.flag = t.flag
	}
	if top&(1<<slotLanguage) != 0 {
		h.lang = t.lang
	}
	if top&(1<<slotRemark) != 0 {
		h.remark = t.remark
	}
}

// read reads b as a header of shape t into h, appending its field list
// to list; false where b is not of that shape (or t is empty), h then
// undefined. With lazy, the constant members that b has as learned are
// left out of the list and noted in the header's took instead
// (headershape_send.go).
func (t *headerShape) read(h *fastHeader, b []byte, list []byte, lazy bool) ([]byte, bool) {
	*h = fastHeader{}
	h.ext, h.codeFirst = t.ext, t.codeFirst
	if !t.ext {
		return nil, false
	}
	list = append(list, fieldListMarker)
	i := 0
	text := t.text
	var nv uint64 // the slots whose values differ from the learned ones
	for s := 0; s < len(t.slots); s++ {
		sl := &t.slots[s]
		if sl.run > 0 {
			r := &t.runs[sl.run-1]
			if fixed := t.runText[r.r0:r.r1]; len(b)-i >= len(fixed) && string(b[i:i+len(fixed)]) == string(fixed) {
				if lazy {
					h.took |= r.took
				} else {
					list = append(list, t.runText[r.r1:r.l1]...)
				}
				if r.top != 0 {
					h.setLearned(t, r.top)
				}
				i += int(r.adv)
				s = int(r.end) - 1
				continue
			}
		}
		if sl.c2 > sl.c1 && t.vary&(1<<s) == 0 {
			nv |= 1 << s // unless it is as learned
			if fixed := t.consts[sl.c0:sl.c1]; len(b)-i >= len(fixed) && string(b[i:i+len(fixed)]) == string(fixed) {
				nv &^= 1 << s
				if lazy {
					h.took |= 1 << s
				} else {
					list = append(list, t.consts[sl.c1:sl.c2]...)
				}
				i += len(fixed)
				continue
			}
		}
		frag := text[sl.f0:sl.f1]
		if len(b)-i < len(frag) || string(b[i:i+len(frag)]) != string(frag) {
			return nil, false
		}
		i += len(frag)
		ok, differs := true, false
		switch sl.kind {
		case slotExtString:
			at := len(list)
			h.noteVary(at)
			list = append(list, text[sl.f1:sl.k1]...)
			if lazy && sl.props && h.esc == 0 && at < math.MaxUint16 && escapedCode(t.code) {
				if end, sep := separatorsOnly(b, i); sep {
					h.esc = uint16(at) + 1
					list = appendListString(list, b[i:end-1])
					i = end
					break
				}
			}
			list, i, ok = fastValue(b, i, list)
		case slotExtScalar:
			h.noteVary(len(list))
			list = append(list, text[sl.f1:sl.k1]...)
			list, i, ok = fastExtScalar(b, i, list)
		case slotCode:
			h.code, i, ok = fastInt32(b, i)
			differs = h.code != t.code
		case slotVersion:
			h.version, i, ok = fastInt32(b, i)
			differs = h.version != t.version
		case slotOpaque:
			h.opaque, i, ok = fastInt32(b, i)
		case slotFlag:
			h.flag, i, ok = fastInt32(b, i)
			differs = h.flag != t.flag
		case slotLanguage:
			h.lang, i, ok = fastLanguage(b, i)
			differs = h.lang != t.lang
		case slotRemark:
			h.remark, i, ok = fastRemark(b, i)
			differs = h.remark != t.remark
		case slotIgnored:
			_, i, ok = fastPlainString(b, i)
		}
		if !ok {
			return nil, false
		}
		if differs {
			nv |= 1 << s
		}
	}
	if string(b[i:]) != string(text[t.tail:]) {
		return nil, false
	}
	if nv&^t.vary != 0 {
		// Values seen to vary leave the runs: found again without them.
		t.vary |= nv
		t.learnRuns()
	}
	return list, true
}
