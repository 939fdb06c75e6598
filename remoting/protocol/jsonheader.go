package protocol

import (
	"bytes"
	"fmt"
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
	if c.ExtFields != nil || c.IsResponse() {
		dst = append(dst, `,"extFields":{`...)
		dst = appendExtFieldsJSON(dst, c.ExtFields)
		dst = append(dst, '}')
	}
	dst = append(dst, `,"flag":`...)
	dst = strconv.AppendInt(dst, int64(c.Flag), 10)
	dst = append(dst, `,"language":"`...)
	dst = append(dst, c.Language.String()...)
	dst = append(dst, `","opaque":`...)
	dst = strconv.AppendInt(dst, int64(c.Opaque), 10)
	if c.Remark != "" {
		dst = append(dst, `,"remark":`...)
		dst = appendJSONString(dst, c.Remark)
	}
	dst = append(dst, `,"serializeTypeCurrentRPC":"JSON","version":`...)
	dst = strconv.AppendInt(dst, int64(c.Version), 10)
	return append(dst, '}')
}

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
	for i := 0; i < len(s); {
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
// reflection, no recursion, never panics.
type jsonScanner struct {
	b []byte
	s string // the same bytes as b: strings without escapes are sliced from it, not allocated
	i int
}

func (s *jsonScanner) errorf(format string, args ...any) error {
	return fmt.Errorf("%w: json at offset %d: %s", ErrBadHeader, s.i, fmt.Sprintf(format, args...))
}

func (s *jsonScanner) ws() {
	for s.i < len(s.b) {
		switch s.b[s.i] {
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
	if s.i < len(s.b) {
		return s.b[s.i]
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
	if len(s.b)-s.i >= len(lit) && string(s.b[s.i:s.i+len(lit)]) == lit {
		s.i += len(lit)
		return true
	}
	return false
}

// str reads a string at the current position (after whitespace).
func (s *jsonScanner) str() (string, error) {
	if s.peek() != '"' {
		return "", s.errorf("expected string")
	}
	s.i++
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
		if c == '"' {
			v := s.s[start:s.i]
			s.i++
			return v, nil
		}
		if c == '\\' {
			return s.strSlow(start)
		}
		if c < 0x20 {
			return "", s.errorf("control character in string")
		}
		s.i++
	}
	return "", s.errorf("unterminated string")
}

func (s *jsonScanner) strSlow(start int) (string, error) {
	// One allocation: the unescaped string is never longer than its
	// escaped form, which ends at the next unescaped quote (or the end).
	var out strings.Builder
	out.Grow(escapedLen(s.b[start:]))
	out.Write(s.b[start:s.i])
	for s.i < len(s.b) {
		c := s.b[s.i]
		switch {
		case c == '"':
			s.i++
			return out.String(), nil
		case c < 0x20:
			return "", s.errorf("control character in string")
		case c != '\\':
			out.WriteByte(c)
			s.i++
			continue
		}
		if s.i+1 >= len(s.b) {
			break
		}
		e := s.b[s.i+1]
		s.i += 2
		switch e {
		case '"', '\\', '/':
			out.WriteByte(e)
		case 'b':
			out.WriteByte('\b')
		case 'f':
			out.WriteByte('\f')
		case 'n':
			out.WriteByte('\n')
		case 'r':
			out.WriteByte('\r')
		case 't':
			out.WriteByte('\t')
		case 'u':
			r, ok := s.hex4()
			if !ok {
				return "", s.errorf("bad \\u escape")
			}
			if utf16.IsSurrogate(r) {
				r2 := rune(-1)
				if s.i+1 < len(s.b) && s.b[s.i] == '\\' && s.b[s.i+1] == 'u' {
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
			out.WriteRune(r)
		default:
			return "", s.errorf("bad escape \\%c", e)
		}
	}
	return "", s.errorf("unterminated string")
}

// escapedLen is the length of the JSON string body at the start of b: up
// to the first quote not escaped by a backslash, or all of b.
func escapedLen(b []byte) int {
	for i := 0; i < len(b); i++ {
		switch b[i] {
		case '\\':
			i++
		case '"':
			return i
		}
	}
	return len(b)
}

func (s *jsonScanner) hex4() (rune, bool) {
	if len(s.b)-s.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range s.b[s.i : s.i+4] {
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
	s.i += 4
	return r, true
}

// rawScalar reads a number, true, false or null and returns its text.
func (s *jsonScanner) rawScalar() (string, error) {
	s.ws()
	start := s.i
	for s.i < len(s.b) {
		c := s.b[s.i]
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
	v, perr := strconv.ParseInt(txt, 10, 32)
	if perr != nil {
		return 0, s.errorf("key %q: bad integer %q", key, txt)
	}
	return int32(v), nil
}

// skip skips one value of any kind, nested containers included, without
// recursion.
func (s *jsonScanner) skip() error {
	depth := 0
	for {
		switch s.peek() {
		case '"':
			if _, err := s.str(); err != nil {
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

func decodeJSONHeader(b []byte, c *Command) error {
	s := jsonScanner{b: b, s: string(b)}
	if err := s.expect('{'); err != nil {
		return err
	}
	if s.peek() == '}' {
		s.i++
		return s.end()
	}
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
			c.ExtFields, err = s.extFields()
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
			return s.end()
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

var quoteColon = []byte(`":`)

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
		s.i++
	default:
		return nil, s.errorf("extFields is not an object")
	}
	// Size the map once: every entry has a `":` after its key. Counting up
	// to the first '}' (the object's end unless a value holds one, when
	// the map just grows) leaves out the header's own keys after
	// extFields: up to 8 entries fit a small map, whose allocations a
	// larger hint would multiply.
	obj := s.b[s.i:]
	if end := bytes.IndexByte(obj, '}'); end >= 0 {
		obj = obj[:end]
	}
	f := make(ExtFields, min(bytes.Count(obj, quoteColon), maxFieldsHint))
	if s.peek() == '}' {
		s.i++
		return f, nil
	}
	for {
		key, err := s.str()
		if err != nil {
			return nil, err
		}
		if err := s.expect(':'); err != nil {
			return nil, err
		}
		switch s.peek() {
		case '"':
			v, err := s.str()
			if err != nil {
				return nil, err
			}
			f[key] = v
		case '{', '[':
			if err := s.skip(); err != nil {
				return nil, err
			}
		default:
			v, err := s.rawScalar()
			if err != nil {
				return nil, err
			}
			if v != "null" {
				f[key] = v
			}
		}
		switch s.peek() {
		case ',':
			s.i++
		case '}':
			s.i++
			return f, nil
		default:
			return nil, s.errorf("expected ',' or '}' in extFields")
		}
	}
}
