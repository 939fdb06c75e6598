package protocol

import (
	"bytes"
	"encoding/binary"
	"unsafe"
)

// Members in any order.
//
// A learned shape is the header's text with its members in one order, and
// rocketmq-client-go v2.1.2 writes a send's extFields in Go's map order:
// the same thirteen members, each the same text request after request
// but for the queue, the born time and the properties, in a different
// order almost every time. While a connection's learning pauses (see
// HeaderShapes) its sends are read with a member table instead: the
// extFields members of one send header, each by its text (from its key's
// opening quote to its value's end) and its field list bytes, in no
// order, with a sendTemplate of all of them.
//
// The one pass reads the header as always, but at each extFields member
// it first looks for the member in the table (a hash of its first four
// bytes, then its key, then its whole text): a member found whole is
// copied to the list from the table, not read. A member not found is read as the one pass reads
// it, and noted as read by value when its key is the table's. When every
// member of the table was found or read once, and no other member came,
// the command keeps the template and where the members read by value
// start, as a shape's does (shapedList, not lazy: the list is whole), and
// DecodeSendHeader decodes the template and those members. A member's text
// reads the same wherever it stands in a header (a scalar's end is
// checked), so the list, and every field, is the one pass's.
//
// A send the table does not fit (other keys, a key twice, a member's
// escapes the one pass does not read) is read without the template; the
// table is learned again from such a send at the first, second, fourth...
// of them in a row (every maxLearnPause-th at most), so a client that
// changes its keys for good is followed and one that sends odd headers
// among its usual ones costs few learns.

// maxMembers bounds the members a table keeps; a header with more is
// read without one.
const maxMembers = 16

// memberShape is a connection's member table.
type memberShape struct {
	buf   []byte // the members' texts, keys and list bytes
	e     [maxMembers]memberEntry
	n     int
	slot  [1 << memberSlotBits]int8 // 1 + the first entry of each hash's chain
	head  memberHead
	tmpl  *sendTemplate // of all the members; nil while none is learned
	fails int           // sends in a row the table did not fit
}

// memberEntry is one member of a table: buf[t0:t1] its text, buf[k0:k1]
// its key, buf[l0:l1] its list bytes; next is 1 + the next entry in its
// slot's chain (0: none).
type memberEntry struct {
	t0, t1, k0, k1 int32
	l0, l1         int32
	next           int8
	scalar         bool // its value is not a string: a match must end there
}

// memberHead is the text of a send header before its extFields object,
// around its opaque (text[:op] before the opaque's value, text[op:] after
// it, up to the extFields' '{'), and what the one pass read of the rest
// (h, its opaque aside): learned from a header whose extFields come last
// and whose opaque and code come before them, as rocketmq-client-go
// writes its headers. Empty: the header is read from its start.
type memberHead struct {
	text []byte
	op   int
	h    fastHeader
}

// memberRead is what one header's pass through a table found: the
// members found or read by a key of the table (hit), whether another
// member came or one came twice (bad), and where each member lies, in
// the header (t0:t1) and in the list (l0:l1), to learn from.
type memberRead struct {
	// Where the header's opaque value lies and its extFields' '{' is, and
	// whether those come last (the head's conditions).
	op0, op1, ext int32
	extLast       bool
	n             int
	hit           uint64
	bad           bool
	over          bool // more members than a table keeps
	pos           [maxMembers]struct{ t0, t1, l0, l1 int32 }
}

// fits reports whether the header read as r takes ms's template: every
// member of the table found or read once, and no other.
func (r *memberRead) fits(ms *memberShape) bool {
	return ms.tmpl != nil && !r.bad && !r.over && r.n == ms.n && r.hit == 1<<ms.n-1
}

// lookup returns the entry whose key the member at b[i] (its key's
// opening quote) has, or -1, and whether the member is that entry's text
// (exact: copied, not read).
func (ms *memberShape) lookup(b []byte, i int) (k int, exact bool) {
	if len(b)-i < 4 {
		return -1, false
	}
	for k := int(ms.slot[memberHash(b[i:])]) - 1; k >= 0; k = int(ms.e[k].next) - 1 {
		e := &ms.e[k]
		if bytes.HasPrefix(b[i:], ms.buf[e.t0:e.t1]) { // most are: one comparison
			if j := i + int(e.t1-e.t0); !e.scalar || j >= len(b) {
				return k, true
			} else {
				switch b[j] {
				case ',', '}', ' ', '\t', '\r', '\n':
					return k, true
				}
			}
			return k, false // a longer scalar
		}
		if bytes.HasPrefix(b[i:], ms.buf[e.t0:e.k1+1]) { // its key, both quotes
			return k, false
		}
	}
	return -1, false
}

// memberHash is the table slot of a member's text by its first four bytes
// (its key's quote and first three bytes, or a short key's whole).
func memberHash(b []byte) uint32 {
	return binary.LittleEndian.Uint32(b) * 0x9E3779B1 >> (32 - memberSlotBits)
}

// memberSlotBits sizes a table's slots: 64 for at most 16 members.
const memberSlotBits = 6

// note notes in r that the member at b[t0:t1], list[l0:l1], was found
// or read as entry k (-1: not the table's).
func (r *memberRead) note(k, t0, t1, l0, l1 int) {
	if r.n == maxMembers {
		r.over = true
		return
	}
	r.pos[r.n] = struct{ t0, t1, l0, l1 int32 }{int32(t0), int32(t1), int32(l0), int32(l1)}
	r.n++
	switch {
	case k < 0 || r.hit&(1<<k) != 0:
		r.bad = true
	default:
		r.hit |= 1 << k
	}
}

// learn makes ms the table of the members r noted in b (a send header the
// one pass read) with their list bytes in list; the template is nil when
// a key repeats or there are too many members.
func (ms *memberShape) learn(b, list []byte, h *fastHeader, r *memberRead) {
	ms.n, ms.tmpl, ms.buf, ms.slot = 0, nil, ms.buf[:0], [1 << memberSlotBits]int8{}
	ms.head.text = ms.head.text[:0]
	if r.over || r.n == 0 {
		return
	}
	if r.extLast && r.op0 > 0 && r.op1 < r.ext && h.codeFirst {
		hd := &ms.head
		hd.text = append(append(hd.text, b[:r.op0]...), b[r.op1:r.ext]...)
		hd.op, hd.h = int(r.op0), *h
		hd.h.opaque, hd.h.vary, hd.h.nvary, hd.h.took, hd.h.esc = 0, [maxShapedVary]uint16{}, 0, 0, 0
	}
	for _, p := range r.pos[:r.n] {
		text := b[p.t0:p.t1]
		k1 := 1 + plainRunBytes(text[1:]) // a key the one pass read has no escapes
		e := memberEntry{t0: int32(len(ms.buf))}
		ms.buf = append(ms.buf, text...)
		e.t1 = int32(len(ms.buf))
		e.k0, e.k1 = e.t0+1, e.t0+int32(k1)
		e.l0 = int32(len(ms.buf))
		ms.buf = append(ms.buf, list[p.l0:p.l1]...)
		e.l1 = int32(len(ms.buf))
		e.scalar = text[len(text)-1] != '"'
		if len(text) >= 4 { // else never looked up: the member is read
			h := memberHash(text)
			e.next, ms.slot[h] = ms.slot[h], int8(ms.n+1)
		}
		ms.e[ms.n] = e
		ms.n++
	}
	ms.tmpl = ms.template()
}

// template decodes every member of ms into a sendTemplate; nil when a key
// repeats.
func (ms *memberShape) template() *sendTemplate {
	consts := string(ms.buf) // a copy: the template outlives the table's next learn
	st := &sendTemplate{longOK: true, v2OK: true}
	for k := range ms.n {
		e := &ms.e[k]
		for j := range k {
			if consts[ms.e[j].k0:ms.e[j].k1] == consts[e.k0:e.k1] {
				return nil
			}
		}
		st.add(fieldList(consts[e.l0:e.l1]))
	}
	return st
}

// headMembers reads b through ms's head and members when b starts with
// the head: whole reports whether it did (else nothing was read, and the
// header is read from its start); ok whether the one pass reads b.
func (ms *memberShape) headMembers(b []byte, list []byte, r *memberRead) (h fastHeader, out []byte, ok, whole bool) {
	hd := &ms.head
	if !bytes.HasPrefix(b, hd.text[:hd.op]) {
		return h, nil, false, false
	}
	opaque, i, ok := fastInt32(b, hd.op)
	if !ok || !bytes.HasPrefix(b[i:], hd.text[hd.op:]) {
		return h, nil, false, false
	}
	i += len(hd.text) - hd.op
	if i >= len(b) || b[i] != '{' {
		return h, nil, false, false
	}
	h = hd.h
	h.opaque = opaque
	start := len(list)
	list = append(list, fieldListMarker)
	if list, i, ok = tableMembers(b, i+1, list, &h, ms, r); !ok {
		return h, nil, false, false // the one pass decides
	}
	// The head's header ended with its extFields: one that goes on is
	// read from its start.
	if i = skipWS(b, i); i >= len(b) || b[i] != '}' || skipWS(b, i+1) != len(b) {
		return h, list[:start], false, false
	}
	return h, list, true, true
}

// plainRunBytes is plainRun of b.
func plainRunBytes(b []byte) int { return plainRun(unsafe.String(unsafe.SliceData(b), len(b))) }

// tableMembers is fastMembers through the table ms: it reads the members
// of an extFields object from just after its '{' up to and including its
// '}', appending them to list, copying those found in ms, noting in h
// where the ones read by a key of ms start and in r what it found.
func tableMembers(b []byte, i int, list []byte, h *fastHeader, ms *memberShape, r *memberRead) ([]byte, int, bool) {
	if i = skipWS(b, i); i < len(b) && b[i] == '}' {
		return list, i + 1, true
	}
	for {
		if i >= len(b) || b[i] != '"' {
			return list, i, false
		}
		t0, l0 := i, len(list)
		if k, exact := ms.lookup(b, i); exact {
			e := &ms.e[k]
			list = append(list, ms.buf[e.l0:e.l1]...)
			i += int(e.t1 - e.t0)
			r.note(k, t0, i, l0, len(list))
		} else {
			// Read as the one pass reads it; k is the table's entry of
			// its key, if any.
			_, _, _, _, out, end, ok := fastMember(b, i, list)
			if list, i = out, end; !ok {
				return list, i, false
			}
			if k >= 0 {
				h.noteVary(l0)
			}
			r.note(k, t0, i, l0, len(list))
		}
		next, more, ok := memberEnd(b, i)
		if i = next; !ok || !more {
			return list, i, ok
		}
	}
}

// decodeMembers is the one pass of a header read while learning pauses,
// through the member table for a send (see above).
func (s *HeaderShapes) decodeMembers(b []byte, c *Command, raw RawFields, lend bool, scratch []byte) bool {
	ms := &s.members
	var r memberRead
	h, list, ok := scanHeaderWith(b, scratch, nil, ms, &r)
	if !ok {
		return false
	}
	s.pause--
	send := sendCode(h.code) && h.keepsList(raw)
	fits := send && r.fits(ms) && int(h.nvary) <= maxShapedVary
	if send && !fits {
		ms.fails++
		if f := ms.fails; f&(f-1) == 0 || f%maxLearnPause == 0 {
			ms.learn(b, list, &h, &r) // before apply writes the list over b
		}
	}
	h.apply(b, list, c, raw, lend)
	if fits {
		ms.fails = 0
		if c.list != "" && !poisonRecycled.Load() {
			sh := &c.shaped
			sh.tmpl, sh.vary, sh.n = ms.tmpl, h.vary, h.nvary
		}
	}
	return true
}
