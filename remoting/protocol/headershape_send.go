package protocol

import (
	"math"
	"strings"
)

// A send's header read by a learned shape is decoded without its field
// list being read back member by member. When a shape is learned, its
// constant extFields members (the ones it copies as learned: a producer's
// group, the topic, "0", "false") are decoded once, with either key set
// of a send header (SendMessageRequestHeader's names, V2's letters), into
// a sendTemplate. A header read by the shape notes where in its list the
// members it read as values start (the queue, the born time, the
// properties, and any constant that differed this time), and
// DecodeSendHeader copies the template and decodes just those members
// (setListField).
//
// That is what decodeFieldList makes of the whole list: the shape's keys
// are distinct (no template otherwise), so each field is set by one member
// either way, a member read as a value sets its field over the template's,
// and the required fields seen are the template's and the values'. Any
// member that does not parse, a required field missing, or a command whose
// list has gone (Fields, Recycle) takes the general decode, which reports
// the error as before. Under SetPoisonRecycled nothing is decoded this way:
// the template's strings are not in the receive buffer, so a kept header
// string would not show.

// maxShapedVary bounds the members a command notes as read by value;
// with more, DecodeSendHeader reads the whole list.
const maxShapedVary = 6

// sendTemplate is what a shape's constant members decode to. It is never
// changed once built: commands read by the shape keep a pointer to it
// while the shape may be learned anew.
type sendTemplate struct {
	long             SendMessageRequestHeader
	v2               SendMessageRequestHeaderV2
	longSeen, v2Seen uint64
	longOK, v2OK     bool
}

// shapedList is what a command read by a shape keeps for
// DecodeSendHeader: the shape's template and where the members read by
// value start in the command's list.
type shapedList struct {
	tmpl *sendTemplate
	vary [maxShapedVary]uint16
	n    uint8
}

// newSendTemplate decodes t's constant members; nil when t has none, or
// its extFields keys repeat.
func newSendTemplate(t *headerShape) *sendTemplate {
	var keys [maxShapeValues]string
	nk, consts := 0, 0
	for _, sl := range t.slots {
		if sl.kind != slotExtString && sl.kind != slotExtScalar {
			continue
		}
		k, _ := fieldList(t.text[sl.f1:sl.k1]).str(0)
		for _, seen := range keys[:nk] {
			if seen == k {
				return nil
			}
		}
		keys[nk] = k
		nk++
		if sl.c2 > sl.c1 {
			consts++
		}
	}
	if consts == 0 {
		return nil
	}
	st := &sendTemplate{longOK: true, v2OK: true}
	for _, sl := range t.slots {
		if sl.c2 <= sl.c1 {
			continue
		}
		member := fieldList(t.consts[sl.c1:sl.c2])
		k, i := member.str(0)
		v, _ := member.str(i)
		v = strings.Clone(v) // t.consts is written again when t is learned anew
		s, ok := st.long.setListField(k, v)
		st.longSeen, st.longOK = st.longSeen|s, st.longOK && ok
		s, ok = st.v2.setListField(k, v)
		st.v2Seen, st.v2OK = st.v2Seen|s, st.v2OK && ok
	}
	return st
}

// noteVary notes that a member read by value starts at list offset at.
// One past where an offset can be noted (a long value before it) counts
// as too many.
func (h *fastHeader) noteVary(at int) {
	switch {
	case at > math.MaxUint16:
		h.nvary = maxShapedVary + 1
	case int(h.nvary) < maxShapedVary:
		h.vary[h.nvary] = uint16(at)
		fallthrough
	default:
		h.nvary = min(h.nvary+1, maxShapedVary+1)
	}
}

// decodeSendShaped decodes c's send header from its shape's template and
// the members read by value (see above); false where the general decode
// must do it (h is then partly written).
func (c *Command) decodeSendShaped(h *SendMessageRequestHeader, v2 bool) bool {
	t := c.shaped.tmpl
	if t == nil || c.ExtFields != nil || c.listErr != nil || c.list == "" || poisonRecycled.Load() {
		return false
	}
	if v2 {
		hv := (*SendMessageRequestHeaderV2)(h)
		*hv = t.v2
		return t.v2OK && c.setVary(hv, t.v2Seen)
	}
	*h = t.long
	return t.longOK && c.setVary(h, t.longSeen)
}

// listSetter is a Shaped header (headergen): one member at a time.
type listSetter interface {
	setListField(key, val string) (seen uint64, ok bool)
	listRequired() uint64
}

// setVary decodes the members c's shape read by value onto h, whose
// template saw the required fields of seen: false when one does not parse
// or a required field is missing.
func (c *Command) setVary(h listSetter, seen uint64) bool {
	sh := &c.shaped
	for _, at := range sh.vary[:sh.n] {
		k, i := c.list.str(int(at))
		v, _ := c.list.str(i)
		s, ok := h.setListField(k, v)
		if !ok {
			return false
		}
		seen |= s
	}
	return seen == h.listRequired()
}
