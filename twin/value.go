package twin

import (
	"math"
	"sort"
	"strconv"
	"unicode/utf16"
	"unicode/utf8"
)

// Kind is the JSON type of a value.
type Kind uint8

// The kinds, FROZEN: their numbers are the KIND byte of the binary value
// encoding (doc.go).
const (
	KindNull   Kind = 0
	KindFalse  Kind = 1
	KindTrue   Kind = 2
	KindNumber Kind = 3
	KindString Kind = 4
	KindObject Kind = 5
	KindArray  Kind = 6
)

// node is one JSON value of a twin section. An object keeps its members in
// kids sorted by key (byte order, no duplicates); an array keeps its
// elements in kids with empty keys. upd and ver are the $lastUpdated (Unix
// ms) and $lastUpdatedVersion metadata of an object or member of desired
// and reported; they stay 0 in tags, array elements and patches.
type node struct {
	key  string
	kind Kind
	num  float64 // KindNumber
	str  string  // KindString
	kids []node  // KindObject members, KindArray elements
	upd  int64
	ver  int64
}

// Integer limits of the document rules: integers within ±2^52.
const (
	minInt = -(1 << 52)
	maxInt = 1<<52 - 1
)

// maxParseNesting bounds the nesting of any JSON the package parses (the
// stack of the recursive parser); sections allow far less (MaxDepth).
const maxParseNesting = 64

// find returns the index of key among an object's members, and whether it
// is there (else the index where it would go).
func (n *node) find(key string) (int, bool) {
	kids := n.kids
	i := sort.Search(len(kids), func(i int) bool { return kids[i].key >= key })
	return i, i < len(kids) && kids[i].key == key
}

// get returns the member key of an object, or nil.
func (n *node) get(key string) *node {
	if n.kind != KindObject {
		return nil
	}
	if i, ok := n.find(key); ok {
		return &n.kids[i]
	}
	return nil
}

// set puts v (its key replaced by key) into an object and returns the
// member.
func (n *node) set(key string, v node) *node {
	v.key = key
	i, ok := n.find(key)
	if ok {
		n.kids[i] = v
		return &n.kids[i]
	}
	n.kids = append(n.kids, node{})
	copy(n.kids[i+1:], n.kids[i:])
	n.kids[i] = v
	return &n.kids[i]
}

// del removes key from an object and reports whether it was there.
func (n *node) del(key string) bool {
	i, ok := n.find(key)
	if !ok {
		return false
	}
	copy(n.kids[i:], n.kids[i+1:])
	n.kids[len(n.kids)-1] = node{}
	n.kids = n.kids[:len(n.kids)-1]
	if len(n.kids) == 0 {
		n.kids = nil
	}
	return true
}

// equal reports whether two values are the same JSON (metadata ignored).
func (n *node) equal(o *node) bool {
	if n.kind != o.kind {
		return false
	}
	switch n.kind {
	case KindNumber:
		return n.num == o.num
	case KindString:
		return n.str == o.str
	case KindObject, KindArray:
		if len(n.kids) != len(o.kids) {
			return false
		}
		for i := range n.kids {
			if n.kids[i].key != o.kids[i].key || !n.kids[i].equal(&o.kids[i]) {
				return false
			}
		}
	}
	return true
}

// clone returns a deep copy.
func (n *node) clone() node {
	c := *n
	if n.kids != nil {
		c.kids = make([]node, len(n.kids))
		for i := range n.kids {
			c.kids[i] = n.kids[i].clone()
		}
	}
	return c
}

// ---- JSON parsing ----

// parseJSON parses one JSON document (RFC 8259) into a node tree. It is
// strict: valid UTF-8 only, no duplicate member names, no trailing bytes,
// integer literals (no fraction or exponent) within ±2^52, every number
// finite, nesting at most maxParseNesting. Errors are 400 MalformedJson
// (syntax) or ArgumentInvalid (a rule), with the byte offset.
func parseJSON(b []byte) (node, error) {
	p := jsonParser{b: b}
	p.ws()
	v, err := p.value(0)
	if err != nil {
		return node{}, err
	}
	p.ws()
	if p.i != len(p.b) {
		return node{}, p.syntax("trailing bytes after the document")
	}
	return v, nil
}

type jsonParser struct {
	b []byte
	i int
}

func (p *jsonParser) syntax(what string) *Error {
	return errf(StatusBadRequest, CodeMalformedJSON, "malformed JSON at offset %d: %s", p.i, what)
}

func (p *jsonParser) ws() {
	for p.i < len(p.b) {
		switch p.b[p.i] {
		case ' ', '\t', '\n', '\r':
			p.i++
		default:
			return
		}
	}
}

func (p *jsonParser) value(depth int) (node, error) {
	if p.i >= len(p.b) {
		return node{}, p.syntax("unexpected end of input")
	}
	switch c := p.b[p.i]; {
	case c == '{':
		return p.object(depth + 1)
	case c == '[':
		return p.array(depth + 1)
	case c == '"':
		s, err := p.string()
		return node{kind: KindString, str: s}, err
	case c == 't':
		return node{kind: KindTrue}, p.literal("true")
	case c == 'f':
		return node{kind: KindFalse}, p.literal("false")
	case c == 'n':
		return node{kind: KindNull}, p.literal("null")
	case c == '-' || (c >= '0' && c <= '9'):
		return p.number()
	default:
		return node{}, p.syntax("unexpected character " + strconv.QuoteRune(rune(c)))
	}
}

func (p *jsonParser) literal(s string) error {
	if len(p.b)-p.i < len(s) || string(p.b[p.i:p.i+len(s)]) != s {
		return p.syntax("invalid literal")
	}
	p.i += len(s)
	return nil
}

func (p *jsonParser) object(depth int) (node, error) {
	if depth > maxParseNesting {
		return node{}, invalidf("depth: JSON nested more than %d levels", maxParseNesting)
	}
	p.i++ // {
	n := node{kind: KindObject}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == '}' {
		p.i++
		return n, nil
	}
	sorted := true
	for {
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != '"' {
			return node{}, p.syntax("expected a member name")
		}
		key, err := p.string()
		if err != nil {
			return node{}, err
		}
		p.ws()
		if p.i >= len(p.b) || p.b[p.i] != ':' {
			return node{}, p.syntax("expected ':'")
		}
		p.i++
		p.ws()
		v, err := p.value(depth)
		if err != nil {
			return node{}, err
		}
		v.key = key
		if l := len(n.kids); l > 0 && n.kids[l-1].key >= key {
			sorted = false
		}
		n.kids = append(n.kids, v)
		p.ws()
		if p.i >= len(p.b) {
			return node{}, p.syntax("unterminated object")
		}
		if p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.b[p.i] != '}' {
			return node{}, p.syntax("expected ',' or '}'")
		}
		p.i++
		break
	}
	if !sorted {
		sort.SliceStable(n.kids, func(i, j int) bool { return n.kids[i].key < n.kids[j].key })
		for i := 1; i < len(n.kids); i++ {
			if n.kids[i].key == n.kids[i-1].key {
				return node{}, errf(StatusBadRequest, CodeMalformedJSON, "malformed JSON: duplicate member %q", n.kids[i].key)
			}
		}
	}
	return n, nil
}

func (p *jsonParser) array(depth int) (node, error) {
	if depth > maxParseNesting {
		return node{}, invalidf("depth: JSON nested more than %d levels", maxParseNesting)
	}
	p.i++ // [
	n := node{kind: KindArray}
	p.ws()
	if p.i < len(p.b) && p.b[p.i] == ']' {
		p.i++
		n.kids = []node{}
		return n, nil
	}
	for {
		p.ws()
		v, err := p.value(depth)
		if err != nil {
			return node{}, err
		}
		n.kids = append(n.kids, v)
		p.ws()
		if p.i >= len(p.b) {
			return node{}, p.syntax("unterminated array")
		}
		if p.b[p.i] == ',' {
			p.i++
			continue
		}
		if p.b[p.i] != ']' {
			return node{}, p.syntax("expected ',' or ']'")
		}
		p.i++
		return n, nil
	}
}

func (p *jsonParser) number() (node, error) {
	start := p.i
	integer := true
	if p.b[p.i] == '-' {
		p.i++
	}
	switch {
	case p.i < len(p.b) && p.b[p.i] == '0':
		p.i++
	case p.i < len(p.b) && p.b[p.i] >= '1' && p.b[p.i] <= '9':
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
	default:
		return node{}, p.syntax("invalid number")
	}
	if p.i < len(p.b) && p.b[p.i] == '.' {
		integer = false
		p.i++
		d := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		if p.i == d {
			return node{}, p.syntax("invalid number")
		}
	}
	if p.i < len(p.b) && (p.b[p.i] == 'e' || p.b[p.i] == 'E') {
		integer = false
		p.i++
		if p.i < len(p.b) && (p.b[p.i] == '+' || p.b[p.i] == '-') {
			p.i++
		}
		d := p.i
		for p.i < len(p.b) && p.b[p.i] >= '0' && p.b[p.i] <= '9' {
			p.i++
		}
		if p.i == d {
			return node{}, p.syntax("invalid number")
		}
	}
	lit := string(p.b[start:p.i])
	if integer {
		v, err := strconv.ParseInt(lit, 10, 64)
		if err != nil || v < minInt || v > maxInt {
			return node{}, invalidf("integer range: %s is outside -4503599627370496..4503599627370495", truncate(lit, 40))
		}
		return node{kind: KindNumber, num: float64(v)}, nil
	}
	f, err := strconv.ParseFloat(lit, 64)
	if err != nil || math.IsInf(f, 0) || math.IsNaN(f) {
		return node{}, invalidf("number range: %s is not a finite number", truncate(lit, 40))
	}
	if f == 0 {
		f = 0 // no negative zero
	}
	return node{kind: KindNumber, num: f}, nil
}

// string reads a JSON string at p.i (the opening quote).
func (p *jsonParser) string() (string, error) {
	p.i++ // "
	start := p.i
	// Fast path: no escapes.
	for p.i < len(p.b) {
		c := p.b[p.i]
		if c == '"' {
			s := p.b[start:p.i]
			p.i++
			if !utf8.Valid(s) {
				return "", invalidf("malformed JSON: string at offset %d is not valid UTF-8", start)
			}
			return string(s), nil
		}
		if c == '\\' {
			break
		}
		if c < 0x20 {
			return "", p.syntax("control character in a string")
		}
		p.i++
	}
	buf := append([]byte(nil), p.b[start:p.i]...)
	for {
		if p.i >= len(p.b) {
			return "", p.syntax("unterminated string")
		}
		c := p.b[p.i]
		switch {
		case c == '"':
			p.i++
			if !utf8.Valid(buf) {
				return "", invalidf("malformed JSON: string at offset %d is not valid UTF-8", start)
			}
			return string(buf), nil
		case c < 0x20:
			return "", p.syntax("control character in a string")
		case c != '\\':
			buf = append(buf, c)
			p.i++
			continue
		}
		p.i++
		if p.i >= len(p.b) {
			return "", p.syntax("unterminated escape")
		}
		e := p.b[p.i]
		p.i++
		switch e {
		case '"', '\\', '/':
			buf = append(buf, e)
		case 'b':
			buf = append(buf, '\b')
		case 'f':
			buf = append(buf, '\f')
		case 'n':
			buf = append(buf, '\n')
		case 'r':
			buf = append(buf, '\r')
		case 't':
			buf = append(buf, '\t')
		case 'u':
			r, ok := p.hex4()
			if !ok {
				return "", p.syntax("invalid \\u escape")
			}
			if utf16.IsSurrogate(r) {
				if r >= 0xDC00 || p.i+1 >= len(p.b) || p.b[p.i] != '\\' || p.b[p.i+1] != 'u' {
					return "", p.syntax("lone surrogate in \\u escape")
				}
				p.i += 2
				r2, ok := p.hex4()
				if !ok || r2 < 0xDC00 || r2 > 0xDFFF {
					return "", p.syntax("lone surrogate in \\u escape")
				}
				r = utf16.DecodeRune(r, r2)
			}
			buf = utf8.AppendRune(buf, r)
		default:
			return "", p.syntax("invalid escape")
		}
	}
}

func (p *jsonParser) hex4() (rune, bool) {
	if len(p.b)-p.i < 4 {
		return 0, false
	}
	var r rune
	for _, c := range p.b[p.i : p.i+4] {
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
	p.i += 4
	return r, true
}

func truncate(s string, n int) string {
	if len(s) <= n {
		return s
	}
	return s[:n] + "..."
}

// ---- JSON rendering ----

// appendValue appends v as compact JSON, members in key order, without
// metadata.
func appendValue(dst []byte, v *node) []byte {
	switch v.kind {
	case KindNull:
		return append(dst, "null"...)
	case KindFalse:
		return append(dst, "false"...)
	case KindTrue:
		return append(dst, "true"...)
	case KindNumber:
		return appendNumber(dst, v.num)
	case KindString:
		return appendString(dst, v.str)
	case KindArray:
		dst = append(dst, '[')
		for i := range v.kids {
			if i > 0 {
				dst = append(dst, ',')
			}
			dst = appendValue(dst, &v.kids[i])
		}
		return append(dst, ']')
	default:
		dst = append(dst, '{')
		dst = appendMembers(dst, v)
		return append(dst, '}')
	}
}

// appendMembers appends an object's members, "name":value separated by
// commas, without the braces.
func appendMembers(dst []byte, v *node) []byte {
	for i := range v.kids {
		if i > 0 {
			dst = append(dst, ',')
		}
		dst = appendString(dst, v.kids[i].key)
		dst = append(dst, ':')
		dst = appendValue(dst, &v.kids[i])
	}
	return dst
}

// appendNumber writes a number the way JavaScript (and encoding/json)
// does: integers without a fraction, exponent form below 1e-6 and from
// 1e21.
func appendNumber(dst []byte, f float64) []byte {
	abs := math.Abs(f)
	if abs != 0 && (abs < 1e-6 || abs >= 1e21) {
		dst = strconv.AppendFloat(dst, f, 'e', -1, 64)
		// e-07 -> e-7
		n := len(dst)
		if n >= 4 && dst[n-4] == 'e' && dst[n-3] == '-' && dst[n-2] == '0' {
			dst[n-2] = dst[n-1]
			dst = dst[:n-1]
		}
		return dst
	}
	return strconv.AppendFloat(dst, f, 'f', -1, 64)
}

const hexDigits = "0123456789abcdef"

// appendString writes s as a JSON string: ", \ and control characters
// escaped (\n style where JSON has one, else \u00XX), U+2028 and U+2029
// escaped, everything else as is.
func appendString(dst []byte, s string) []byte {
	dst = append(dst, '"')
	start := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != '"' && c != '\\' {
				i++
				continue
			}
			dst = append(dst, s[start:i]...)
			switch c {
			case '"', '\\':
				dst = append(dst, '\\', c)
			case '\n':
				dst = append(dst, '\\', 'n')
			case '\r':
				dst = append(dst, '\\', 'r')
			case '\t':
				dst = append(dst, '\\', 't')
			case '\b':
				dst = append(dst, '\\', 'b')
			case '\f':
				dst = append(dst, '\\', 'f')
			default:
				dst = append(dst, '\\', 'u', '0', '0', hexDigits[c>>4], hexDigits[c&0xF])
			}
			i++
			start = i
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if r == '\u2028' || r == '\u2029' {
			dst = append(dst, s[start:i]...)
			dst = append(dst, '\\', 'u', '2', '0', '2', hexDigits[r&0xF])
			i += size
			start = i
			continue
		}
		i += size
	}
	dst = append(dst, s[start:]...)
	return append(dst, '"')
}
