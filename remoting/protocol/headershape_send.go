package protocol

import (
	"encoding/binary"
	"math"
	"math/bits"
	"strings"
	"unsafe"
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

// A send's list leaves those constant members out altogether (a lazy
// list): its header is read from the shape's text into the receive
// buffer as the members read by value only, and the shape's constant
// ones it had as learned are noted (took) and taken from the template.
// Whoever needs the whole list (Fields, DecodeHeader, an encoder) gets it
// built from the template and the members read (wholeList), the members'
// order kept, in an allocation of its own (unlazy): the members read stay
// where they are, and so do the strings decoded from them. A header that
// is not a send read from the template (another code, a list kept as a
// map, too many members read by value) gets its whole list at once.

// A send's properties, read by value into a lazy list, are kept there as
// the JSON header wrote them when their only escapes are \u0001 and
// \u0002 (the separators, which every producer's JSON escapes): checked
// as fastValue reads a value, not copied piece by piece around each
// escape. DecodeSendHeaderEscaped hands them on so, and the broker writes
// their stored form from them in one pass; DecodeSendHeader, and a list
// made whole, unescape them (appendSeparatorsUnescaped). A value with any
// other escape is read by fastValue as before.

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
	// For a lazy list: the shape's slots, which are extFields members
	// (a bit per slot), and each constant member's list bytes.
	nslots int
	ext    uint64
	member [maxShapeValues]string
}

// shapedList is what a command read by a shape keeps for
// DecodeSendHeader: the shape's template and where the members read by
// value start in the command's list.
type shapedList struct {
	tmpl *sendTemplate
	vary [maxShapedVary]uint16
	n    uint8
	lazy bool   // the list has only the members read by value
	took uint64 // the template's members a lazy list left out
	esc  uint16 // 1 + where the member kept escaped starts (0: none)
}

// newSendTemplate decodes t's constant members; nil when t has none, or
// its extFields keys repeat.
func newSendTemplate(t *headerShape) *sendTemplate {
	var keys [maxShapeValues]string
	nk, nconst := 0, 0
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
			nconst++
		}
	}
	if nconst == 0 {
		return nil
	}
	st := &sendTemplate{longOK: true, v2OK: true, nslots: len(t.slots)}
	consts := string(t.consts) // a copy: t.consts is written again when t is learned anew
	for s, sl := range t.slots {
		if sl.kind == slotExtString || sl.kind == slotExtScalar {
			st.ext |= 1 << s
		}
		if sl.c2 <= sl.c1 {
			continue
		}
		member := fieldList(consts[sl.c1:sl.c2])
		st.member[s] = string(member)
		st.add(member)
	}
	return st
}

// add decodes one constant member (its list bytes) into both of t's
// headers.
func (t *sendTemplate) add(member fieldList) {
	k, i := member.str(0)
	v, _ := member.str(i)
	s, ok := t.long.setListField(k, v)
	t.longSeen, t.longOK = t.longSeen|s, t.longOK && ok
	s, ok = t.v2.setListField(k, v)
	t.v2Seen, t.v2OK = t.v2Seen|s, t.v2OK && ok
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
// With esc not nil, properties kept escaped are left so: *esc is their
// text and h.Properties empty.
func (c *Command) decodeSendShaped(h *SendMessageRequestHeader, v2 bool, esc *string) bool {
	t := c.shaped.tmpl
	if t == nil || c.ExtFields != nil || c.listErr != nil || c.list == "" || poisonRecycled.Load() {
		return false
	}
	if v2 {
		hv := (*SendMessageRequestHeaderV2)(h)
		*hv = t.v2
		return t.v2OK && c.setVary(hv, t.v2Seen, "i", esc)
	}
	*h = t.long
	return t.longOK && c.setVary(h, t.longSeen, "properties", esc)
}

// listSetter is a Shaped header (headergen): one member at a time.
type listSetter interface {
	setListField(key, val string) (seen uint64, ok bool)
	listRequired() uint64
}

// setVary decodes the members c's shape read by value onto h, whose
// template saw the required fields of seen: false when one does not parse
// or a required field is missing. A value kept escaped is unescaped,
// unless its key is h's properties key (props) and esc is not nil: then
// *esc is its text and the field is set empty.
func (c *Command) setVary(h listSetter, seen uint64, props string, esc *string) bool {
	sh := &c.shaped
	for _, at := range sh.vary[:sh.n] {
		k, i := c.list.str(int(at))
		v, _ := c.list.str(i)
		if int(at)+1 == int(sh.esc) {
			if esc != nil && k == props {
				*esc, v = v, ""
			} else {
				b := appendSeparatorsUnescaped(make([]byte, 0, 3+len(v)), v)
				v = unsafe.String(unsafe.SliceData(b[3:]), len(b)-3) // b is not written again
			}
		}
		s, ok := h.setListField(k, v)
		if !ok {
			return false
		}
		seen |= s
	}
	return seen == h.listRequired()
}

// sendCode reports whether DecodeSendHeader reads code's header from a
// shape's template: the send codes whose list is left lazy.
func sendCode(code int32) bool {
	switch code {
	case SendMessage, SendMessageV2, SendBatchMessage, SendReplyMessage, SendReplyMessageV2:
		return true
	}
	return false
}

// escapedCode reports whether a lazy list of code's header keeps its
// properties escaped: the sends the broker reads with
// DecodeSendHeaderEscaped (a reply's are read unescaped: no allocation
// to unescape them).
func escapedCode(code int32) bool {
	switch code {
	case SendMessage, SendMessageV2, SendBatchMessage:
		return true
	}
	return false
}

// appendWhole appends the whole field list of a header whose lazy list
// read is: its members in the shape's order, the ones in took from the
// template, the one at esc-1 (esc not 0) with its value unescaped.
func (t *sendTemplate) appendWhole(dst []byte, read fieldList, took uint64, esc uint16) []byte {
	dst = append(dst, fieldListMarker)
	i := 1
	for s := range t.nslots {
		switch {
		case took&(1<<s) != 0:
			dst = append(dst, t.member[s]...)
		case t.ext&(1<<s) != 0:
			_, v := read.str(i)
			val, j := read.str(v)
			if i+1 == int(esc) {
				dst = append(dst, read[i:v]...)
				dst = appendSeparatorsUnescaped(dst, val)
			} else {
				dst = append(dst, read[i:j]...)
			}
			i = j
		}
	}
	return dst
}

// separatorsOnly reports whether the JSON string value whose first byte
// is at b[i] (after its opening quote) has no escapes but \u0001 and
// \u0002 and reads as fastValue reads it, and the offset after its
// closing quote.
func separatorsOnly(b []byte, i int) (int, bool) {
	for {
		// plainRun's scan, in line: the properties' pieces between
		// separators are short, and a call for each cost more than its
		// first word's test (a send's properties have six or more).
		found := false
		for len(b)-i >= 8 {
			x := binary.LittleEndian.Uint64(b[i:])
			q, bs := x^(ones*'"'), x^(ones*'\\')
			if m := ((x - ones*0x20) | (q - ones) | (bs - ones)) &^ x & highs; m != 0 {
				i += bits.TrailingZeros64(m) >> 3 // (jsonRun's test, bytes above 0x7F let through)
				found = true
				break
			}
			i += 8
		}
		if !found {
			i += plainRun(unsafe.String(unsafe.SliceData(b[i:]), len(b)-i))
		}
		if i >= len(b) {
			return i, false
		}
		switch {
		case b[i] == '"':
			return i + 1, true
		case b[i] == '\\' && isSeparatorEscape(b[i:]):
			i += 6
		default:
			return i, false
		}
	}
}

// isSeparatorEscape reports whether b starts with \u0001 or \u0002.
func isSeparatorEscape[T string | []byte](b T) bool {
	return len(b) >= 6 && b[1] == 'u' && b[2] == '0' && b[3] == '0' && b[4] == '0' && (b[5] == '1' || b[5] == '2')
}

// appendSeparatorsUnescaped appends the length and the unescaped bytes of
// esc, a value kept escaped (AppendSeparatorsUnescaped).
func appendSeparatorsUnescaped(dst []byte, esc string) []byte {
	at := len(dst)
	dst = AppendSeparatorsUnescaped(append(dst, 0, 0, 0), esc)
	n := len(dst) - at - 3
	dst[at], dst[at+1], dst[at+2] = byte(n>>16), byte(n>>8), byte(n)
	return dst
}

// AppendSeparatorsUnescaped appends esc, properties as
// DecodeSendHeaderEscaped hands them on (no escapes but \u0001 and
// \u0002), unescaped to dst.
func AppendSeparatorsUnescaped(dst []byte, esc string) []byte {
	for {
		k := strings.IndexByte(esc, '\\')
		if k < 0 || !isSeparatorEscape(esc[k:]) {
			return append(dst, esc...) // (a backslash not an escape cannot be in a value kept escaped)
		}
		dst = append(dst, esc[:k]...)
		dst = append(dst, esc[k+5]-'0')
		esc = esc[k+6:]
	}
}

// wholeList is c's field list, a lazy one made whole (in an allocation
// of its own; c is not changed).
func (c *Command) wholeList() fieldList {
	if !c.shaped.lazy || c.list == "" {
		return c.list
	}
	t, n := c.shaped.tmpl, len(c.list)
	for s := range t.nslots {
		if c.shaped.took&(1<<s) != 0 {
			n += len(t.member[s])
		}
	}
	b := t.appendWhole(make([]byte, 0, n), c.list, c.shaped.took, c.shaped.esc)
	return fieldList(unsafe.String(unsafe.SliceData(b), len(b))) // b is not written again
}

// unlazy makes c's list whole when it is lazy (see wholeList); the
// members read stay in the receive buffer, and the strings decoded from
// them stay valid as before.
func (c *Command) unlazy() {
	if c.shaped.lazy {
		if c.list != "" {
			c.list, c.lent = c.wholeList(), false
		}
		c.shaped = shapedList{}
	}
}
