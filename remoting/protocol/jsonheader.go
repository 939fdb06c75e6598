package protocol

import (
	"fmt"
	"math/bits"
	"sort"
	"strconv"
	"strings"
	"unicode/utf16"
	"unicode/utf8"
)

// The JSON header is written by hand, keys in fastjson's alphabetical
// order, so a SmartGo response looks like a Java one byte for byte:
//
//	{"code":0,"extFields":{...},"flag":1,"language":"JAVA","opaque":7,
//	 "remark":"...","serializeTypeCurrentRPC":"JSON","version":409}
//
// remark is omitted when empty; extFields is written when non-nil and
// always (as {} at least) on responses.

func appendJSONHeader(dst []byte, c *Command) []byte {
	dst = append(dst, `{"code":`...)
	dst = strconv.AppendInt(dst, int64(c.Code), 10)
	if c.hdr != nil && c.ExtFields == nil {
		dst = append(dst, `,"extFields":{`...)
		dst = c.hdr.appendJSONFields(dst)
		dst = append(dst, '}')
	} else if f := c.fieldsMap(); f != nil || c.IsResponse() {
		dst = append(dst, `,"extFields":{`...)
		dst = appendExtFieldsJSON(dst, f)
		dst = append(dst, '}')
	}
	if c.Flag == FlagResponse && c.Language == LanguageGo {
		dst = append(dst, goResponseMiddle...) // a SmartGo answer's flag and language
	} else {
		dst = append(dst, `,"flag":`...)
		dst = strconv.AppendInt(dst, int64(c.Flag), 10)
		dst = append(dst, `,"language":"`...)
		dst = append(dst, c.Language.String()...)
		dst = append(dst, `","opaque":`...)
	}
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	if c.Remark != "" {
		dst = append(dst, `,"remark":`...)
		dst = appendJSONString(dst, c.Remark)
	}
	if c.Version == CurrentVersion {
		return append(dst, currentVersionTail...)
	}
	dst = append(dst, `,"serializeTypeCurrentRPC":"JSON","version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	return append(dst, '}')
}

// The text around the opaque of a SmartGo response (flag 1, language GO,
// this version), written as two pieces instead of eight appends and two
// integer formats: the broker writes one per answered send.
var (
	goResponseMiddle   = `,"flag":` + strconv.Itoa(int(FlagResponse)) + `,"language":"` + LanguageGo.String() + `","opaque":`
	currentVersionTail = `,"serializeTypeCurrentRPC":"JSON","version":` + strconv.Itoa(int(CurrentVersion)) + `}`
)

// appendExtFieldsJSON writes the map entries sorted by key (deterministic
// bytes; Java does not care about the order).
func appendExtFieldsJSON(dst []byte, f ExtFields) []byte {
	var stack [24]string
	for i, k := range sortedFieldKeys(f, stack[:0]) {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendJSONString(dst, k)
		dst = append(dst, ':')
		dst = appendJSONString(dst, f[k])
	}
	return dst
}

// sortedFieldKeys appends f's keys to keys (usually a stack array, so small
// maps cost no allocation) and sorts them.
func sortedFieldKeys(f ExtFields, keys []string) []string {
	for k := range f {
		keys = append(keys, k)
	}
	if len(keys) <= 24 {
		for i := 1; i < len(keys); i++ { // insertion sort: small maps
			for j := i; j > 0 && keys[j] < keys[j-1]; j-- {
				keys[j], keys[j-1] = keys[j-1], keys[j]
			}
		}
	} else {
		sort.Strings(keys)
	}
	return keys
}

const hexDigits = "0123456789abcdef"

// appendJSONString writes s as a JSON string. Invalid UTF-8 bytes become
// U+FFFD so the output is always valid JSON.
func appendJSONString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := asciiRun(s); i < len(s); {
		b := s[i]
		if b < utf8.RuneSelf {
			if b >= 0x20 && b != '"' && b != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch b {
			case '"', '\\':
				dst = append(dst, '\\', b)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[b>>4], hexDigits[b&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == utf8.RuneError && size == 1 {
			dst = append(dst, s[start:i]...)
			dst = append(dst, `\ufffd`...)
			i++
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}

// jsonScanner is a small tolerant JSON reader for the command header: no
// reflection, no recursion, never panics. It reads a string (the header
// copied once out of the frame): strings without escapes are slices of it.
type jsonScanner struct {
	s string
	i int
}

func (s *jsonScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: json at offset %d: %s", ErrBadHeader, s.i, fmt.Sprintf(format, args...))
}

func (s *jsonScanner) ws() {
	for s.i < len(s.s) {
		switch s.s[s.i] {
		case ' ', '\t', '\r', '\n':
			s.i++
		default:
			return
		}
	}
}

// peek returns the next non-space byte or 0 at the end.
func (s *jsonScanner) peek() byte {
	s.ws()
	if s.i < len(s.s) {
		return s.s[s.i]
	}
	return 0
}

func (s *jsonScanner) expect(c byte) error {
	if s.peek() != c {
		return s.errorf("expected %q", c)
	}
	s.i++
	return nil
}

func (s *jsonScanner) literal(lit string) bool {
	if len(s.s)-s.i >= len(lit) && s.s[s.i:s.i+len(lit)] == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// str reads a string at the current position (after whitespace).
func (s *jsonScanner) str() (string, error) { return s.strMode(true) }

// strMode is str; with build false a string with escapes is checked as
// str would check it but not unescaped (the result is then empty), so
// checking costs no allocation.
func (s *jsonScanner) strMode(build bool) (string, error) {
	if s.peek() != '"' {
		return "", s.errorf("expected string")
	}
	s.i++
	start := s.i
	s.i += plainRun(s.s[s.i:])
	if s.i < len(s.s) {
		switch c := s.s[s.i]; {
		case c == '"':
			v := s.s[start:s.i]
			s.i++
			return v, nil
		case c == '\\':
			return s.strSlow(start, build)
		default:
			return "", s.errorf("control character in string")
		}
	}
	return "", s.errorf("unterminated string")
}

// plainRun is the length of the longest prefix of b without a quote, a
// backslash or a control character: the bytes a JSON string holds as they
// are. It looks at eight bytes at a time.
func plainRun(b string) int { return jsonRun(b, highs) }

// asciiRun is plainRun that also stops at the first byte above 0x7F: the
// bytes appendJSONString copies as they are without looking at them again.
func asciiRun(b string) int { return jsonRun(b, 0) }

const (
	ones  = 0x0101010101010101
	highs = 0x8080808080808080
)

// jsonRun is plainRun, which lets through the bytes above 0x7F whose high
// bit is set in allowHigh (highs or 0).
func jsonRun(b string, allowHigh uint64) int {
	i := 0
	for rest := b; len(rest) >= 8; rest = rest[8:] {
		x := uint64(rest[0]) | uint64(rest[1])<<8 | uint64(rest[2])<<16 | uint64(rest[3])<<24 |
			uint64(rest[4])<<32 | uint64(rest[5])<<40 | uint64(rest[6])<<48 | uint64(rest[7])<<56
		q := x ^ (ones * '"')
		bs := x ^ (ones * '\\')
		// A byte below 0x20, or equal to '"' or '\\' (zero after the
		// xor), sets its high bit here, as does a byte >= 0x80 unless
		// allowHigh masks it out. A borrow can set the bit of a later
		// byte too, but only after a byte that is set itself: the lowest
		// bit set is the first such byte.
		if m := ((x - ones*0x20) | (q - ones) | (bs - ones) | x) &^ (x & allowHigh) & highs; m != 0 {
			return i + bits.TrailingZeros64(m)>>3
		}
		i += 8
	}
	for ; i < len(b); i++ {
		if c := b[i]; c == '"' || c == '\\' || c < 0x20 || (c >= 0x80 && allowHigh == 0) {
			return i
		}
	}
	return i
}

func (s *jsonScanner) strSlow(start int, build bool) (string, error) {
	// One allocation: the unescaped string is never longer than its
	// escaped form, which ends at the next unescaped quote (or the end).
	var out strings.Builder
	if build {
		out.Grow(escapedLen(s.s[start:]))
		out.WriteString(s.s[start:s.i])
	}
	for s.i < len(s.s) {
		if n := plainRun(s.s[s.i:]); n > 0 {
			if build {
				out.WriteString(s.s[s.i : s.i+n])
			}
			s.i += n
			continue
		}
		c := s.s[s.i]
		switch {
		case c == '"':
			s.i++
			return out.String(), nil
		case c < 0x20:
			return "", s.errorf("control character in string")
		}
		// c is a backslash
		if s.i+1 >= len(s.s) {
			break
		}
		e := s.s[s.i+1]
		s.i += 2
		var r rune
		switch e {
		case '"', '\\', '/':
			r = rune(e)
		case 'b':
			r = '\b'
		case 'f':
			r = '\f'
		case 'n':
			r = '\n'
		case 'r':
			r = '\r'
		case 't':
			r = '\t'
		case 'u':
			var ok bool
			if r, ok = s.hex4(); !ok {
				return "", s.errorf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.i+1 < len(s.s) && s.s[s.i] == '\\' && s.s[s.i+1] == 'u' {
					save := s.i
					s.i += 2
					if v, ok := s.hex4(); ok {
						r2 = v
					} else {
						s.i = save
					}
				}
				r = utf16.DecodeRune(r, r2)
			}
		default:
			return "", s.errorf("bad escape \\%c", e)
		}
		if build {
			if r < utf8.RuneSelf {
				out.WriteByte(byte(r))
			} else {
				out.WriteRune(r)
			}
		}
	}
	return "", s.errorf("unterminated string")
}

// escapedLen is the length of the JSON string body at the start of b: up
// to the first quote not escaped by a backslash, or all of b.
func escapedLen(b string) int {
	for i := 0; ; {
		i += plainRun(b[i:])
		switch {
		case i >= len(b):
			return len(b)
		case b[i] == '"':
			return i
		case b[i] == '\\':
			i += 2
		default:
			i++ // a control character
		}
		if i >= len(b) {
			return len(b)
		}
	}
}

func (s *jsonScanner) hex4() (rune, bool) {
	r, ok := parseHex4(s.s[s.i:])
	if ok {
		s.i += 4
	}
	return r, ok
}

// parseHex4 reads the four hex digits at the start of s.
func parseHex4(s string) (rune, bool) {
	if len(s) < 4 {
		return 0, false
	}
	var r rune
	for _, c := range []byte(s[:4]) {
		r <<= 4
		switch {
		case c >= '0' && c <= '9':
			r |= rune(c - '0')
		case c >= 'a' && c <= 'f':
			r |= rune(c - 'a' + 10)
		case c >= 'A' && c <= 'F':
			r |= rune(c - 'A' + 10)
		default:
			return 0, false
		}
	}
	return r, true
}

// rawScalar reads a number, true, false or null and returns its text.
func (s *jsonScanner) rawScalar() (string, error) {
	s.ws()
	start := s.i
	for s.i < len(s.s) {
		c := s.s[s.i]
		if c == ',' || c == '}' || c == ']' || c == ' ' || c == '\t' || c == '\r' || c == '\n' || c == ':' {
			break
		}
		if c == '"' || c == '{' || c == '[' {
			return "", s.errorf("unexpected %q", c)
		}
		s.i++
	}
	if s.i == start {
		return "", s.errorf("expected value")
	}
	return s.s[start:s.i], nil
}

// int32Value reads an integer: a JSON number, a quoted number (tolerated)
// or null (0).
func (s *jsonScanner) int32Value(key string) (int32, error) {
	var txt string
	var err error
	switch s.peek() {
	case '"':
		txt, err = s.str()
	default:
		txt, err = s.rawScalar()
		if txt == "null" {
			return 0, nil
		}
	}
	if err != nil {
		return 0, err
	}
	v, ok := parseI32(txt)
	if !ok {
		return 0, s.errorf("key %q: bad integer %q", key, txt)
	}
	return v, nil
}

// skip skips one value of any kind, nested containers included, without
// recursion.
func (s *jsonScanner) skip() error {
	depth := 0
	for {
		switch s.peek() {
		case '"':
			if _, err := s.strMode(false); err != nil {
				return err
			}
		case '{', '[':
			depth++
			s.i++
			continue
		case '}', ']':
			if depth == 0 {
				return s.errorf("unexpected close")
			}
			depth--
			s.i++
		case ',', ':':
			if depth == 0 {
				return s.errorf("unexpected separator")
			}
			s.i++
			continue
		case 0:
			return s.errorf("unexpected end")
		default:
			if _, err := s.rawScalar(); err != nil {
				return err
			}
		}
		if depth == 0 {
			return nil
		}
	}
}

// RawFields decides, per request code, whether DecodeFrameWith keeps a
// JSON request header's extFields as text instead of building the
// ExtFields map (see Command.Fields).
type RawFields func(code int32) bool

// decodeJSONHeader decodes the JSON header b into c; with lend, a field
// list kept for raw may be written over b (see fieldList). shapes, when
// not nil, are the connection's learned header shapes (HeaderShapes).
func decodeJSONHeader(b []byte, c *Command, raw RawFields, lend bool, shapes *HeaderShapes) error {
	if raw != nil {
		if shapes != nil {
			if shapes.decode(b, c, raw, lend) {
				return nil
			}
		} else if decodeJSONHeaderFast(b, c, raw, lend) {
			return nil
		}
	}
	return decodeJSONHeaderScan(b, c, raw)
}

// decodeJSONHeaderScan is decodeJSONHeader's general path: any JSON, its
// errors, a copy of the header that every string is a slice of.
func decodeJSONHeaderScan(b []byte, c *Command, raw RawFields) error {
	s := jsonScanner{s: string(b)} // one allocation: every string is a slice of it
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return s.end()
	}
	codeSeen := false
	var text string // the extFields text of a request that may keep its field list
	for {
		key, err := s.str()
		if err != nil {
			return err
		}
		if err := s.expect(':'); err != nil {
			return err
		}
		switch key {
		case "code":
			c.Code, err = s.int32Value(key)
			codeSeen = true
		case "version":
			c.Version, err = s.int32Value(key)
		case "opaque":
			c.Opaque, err = s.int32Value(key)
		case "flag":
			c.Flag, err = s.int32Value(key)
		case "language":
			c.Language, err = s.language()
		case "remark":
			c.Remark, err = s.optString()
		case "extFields":
			if codeSeen && raw != nil && raw(c.Code) {
				c.ExtFields = nil
				text, err = s.rawExtFields()
			} else {
				text = ""
				c.ExtFields, err = s.extFields()
			}
		default:
			err = s.skip()
		}
		if err != nil {
			return err
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			if err := s.end(); err != nil {
				return err
			}
			switch {
			case text == "":
			case c.IsResponse() || !raw(c.Code):
				// Only requests keep a field list, and only of the code it
				// was kept for (a response's flag follows extFields; so
				// may a second "code").
				f, err := parseRawFields(text)
				if err != nil {
					return err
				}
				c.ExtFields = f
			default:
				// Members that are not a well-formed object are an error of
				// the header (DecodeHeader), not of the frame.
				if c.list, err = listFromText(text); err != nil {
					c.listErr = fmt.Errorf("extFields: %w", err)
				}
			}
			return nil
		default:
			return s.errorf("expected ',' or '}'")
		}
	}
}

func (s *jsonScanner) end() error {
	if s.peek() != 0 {
		return s.errorf("trailing data")
	}
	return nil
}

func (s *jsonScanner) optString() (string, error) {
	if s.peek() == 'n' && s.literal("null") {
		return "", nil
	}
	return s.str()
}

func (s *jsonScanner) language() (LanguageCode, error) {
	switch s.peek() {
	case '"':
		name, err := s.str()
		if err != nil {
			return 0, err
		}
		l, _ := ParseLanguage(name)
		return l, nil
	default:
		txt, err := s.rawScalar()
		if err != nil {
			return 0, err
		}
		if n, perr := strconv.ParseUint(txt, 10, 8); perr == nil {
			return LanguageCode(n), nil
		}
		return LanguageOther, nil
	}
}

// extFields reads an object of string values. Non-string scalars are kept
// as their JSON text; null values are dropped; nested values are skipped.
func (s *jsonScanner) extFields() (ExtFields, error) {
	switch s.peek() {
	case 'n':
		if s.literal("null") {
			return nil, nil
		}
		return nil, s.errorf("bad extFields")
	case '{':
	default:
		return nil, s.errorf("extFields is not an object")
	}
	// Size the map once: every entry has a `":` after its key. Counting up
	// to the first '}' (the object's end unless a value holds one, when
	// the map just grows) leaves out the header's own keys after
	// extFields: up to 8 entries fit a small map, whose allocations a
	// larger hint would multiply.
	obj := s.s[s.i:]
	if end := strings.IndexByte(obj, '}'); end >= 0 {
		obj = obj[:end]
	}
	f := make(ExtFields, min(strings.Count(obj, `":`), maxFieldsHint))
	it := fieldIter{s: *s}
	for it.next(true) {
		f[it.key] = it.val
	}
	s.i = it.s.i
	return f, it.err
}

// rawExtFields returns the text of the extFields value (empty for null)
// without reading its members: skip finds its end, and the members are
// read and checked when they are decoded (DecodeHeader, Fields), where a
// malformed object is an error of the header, not of the frame.
func (s *jsonScanner) rawExtFields() (string, error) {
	switch s.peek() {
	case 'n':
		if s.literal("null") {
			return "", nil
		}
		return "", s.errorf("bad extFields")
	case '{':
	default:
		return "", s.errorf("extFields is not an object")
	}
	start := s.i
	end, ok := objectEnd(s.s[start:])
	if !ok {
		return "", s.errorf("extFields object not terminated")
	}
	s.i += end
	return s.s[start:s.i], nil
}

// objectEnd returns the length of the JSON object or array at the start
// of b, following only strings (escapes included) and nesting: where skip
// would end a well-formed value, in one quick pass. What it does not check
// (separators, scalars, matching brackets, the contents of strings) is
// checked when the members are read (fieldIter).
func objectEnd(b string) (int, bool) {
	depth := 0
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '"':
			for i++; ; {
				if i < len(b) {
					i += plainRun(b[i:])
				}
				if i >= len(b) {
					return 0, false
				}
				if c := b[i]; c == '"' {
					break
				} else if c == '\\' {
					i += 2 // the next byte is escaped
				} else {
					i++ // a control character: refused when the members are read
				}
			}
		case '{', '[':
			depth++
		case '}', ']':
			if depth--; depth == 0 {
				return i + 1, true
			}
		}
	}
	return 0, false
}

// fieldIter reads the members of an extFields object, starting at its
// '{', the way the ExtFields map holds them: string values unescaped,
// other scalars as their JSON text; null and nested values are dropped.
// next reports false at the closing '}' (consumed) or at the first error
// (then err is set).
type fieldIter struct {
	s        jsonScanner
	key, val string
	n        int // members read
	err      error
}

// next reads up to the next member that has a value; with build false
// escaped strings are checked but not unescaped (key and val are then
// not meaningful).
func (it *fieldIter) next(build bool) bool {
	s := &it.s
	for it.err == nil {
		if it.n == 0 {
			if it.err = s.expect('{'); it.err != nil {
				return false
			}
			if s.peek() == '}' {
				s.i++
				return false
			}
		} else {
			switch s.peek() {
			case ',':
				s.i++
			case '}':
				s.i++
				return false
			default:
				it.err = s.errorf("expected ',' or '}' in extFields")
				return false
			}
		}
		it.n++
		if it.key, it.err = s.strMode(build); it.err != nil {
			return false
		}
		if it.err = s.expect(':'); it.err != nil {
			return false
		}
		switch s.peek() {
		case '"':
			it.val, it.err = s.strMode(build)
			if it.err == nil {
				return true
			}
		case '{', '[':
			it.err = s.skip()
		default:
			it.val, it.err = s.rawScalar()
			if it.err == nil && it.val != "null" {
				return true
			}
		}
	}
	return false
}
