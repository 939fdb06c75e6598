package twin

import (
	"strconv"
	"strings"
	"unicode"
	"unicode/utf8"
)

// The document rules (IoT Hub's, as ../docs/twins.md states them). They
// are part of the replicated state's meaning: FROZEN.
const (
	MaxKeyBytes     = 1024      // a member name, UTF-8 bytes
	MaxStringBytes  = 4096      // a string value, UTF-8 bytes
	MaxDepth        = 10        // objects and arrays nested below a section's root
	MaxTagsSize     = 8 << 10   // tags, counted by sectionSize
	MaxDesiredSize  = 32 << 10  // properties.desired
	MaxReportedSize = 32 << 10  // properties.reported
	MaxBodyBytes    = 256 << 10 // a request's JSON body
	MaxIDBytes      = 128       // a device or module id
	MaxModelIDBytes = 2048      // an IoT Plug and Play model id (DTMI)
)

// Section names one part of a twin document.
type Section uint8

// The sections.
const (
	SectionTags Section = iota
	SectionDesired
	SectionReported
)

func (s Section) String() string {
	switch s {
	case SectionTags:
		return "tags"
	case SectionDesired:
		return "properties.desired"
	default:
		return "properties.reported"
	}
}

func (s Section) maxSize() int {
	switch s {
	case SectionTags:
		return MaxTagsSize
	case SectionDesired:
		return MaxDesiredSize
	default:
		return MaxReportedSize
	}
}

// checkKey applies the key rules to a member name: 1..1024 bytes of
// UTF-8 (the parser already checked the encoding), no control characters
// (C0, DEL, C1), no '.', '$' or space.
func checkKey(key, where string) *Error {
	switch {
	case key == "":
		return invalidf("key rules: empty key at %s", where)
	case len(key) > MaxKeyBytes:
		return invalidf("key rules: key %q at %s is %d bytes (at most %d)", truncate(key, 32), where, len(key), MaxKeyBytes)
	case !utf8.ValidString(key):
		return invalidf("key rules: key at %s is not valid UTF-8", where)
	}
	for _, r := range key {
		switch {
		case r == '.' || r == '$' || r == ' ':
			return invalidf("key rules: key %q at %s contains %q (no '.', '$' or space)", truncate(key, 64), where, r)
		case unicode.IsControl(r):
			return invalidf("key rules: key %q at %s contains control character %U", truncate(key, 64), where, r)
		}
	}
	return nil
}

// checkSection applies the key, string and depth rules to every member of
// a section value (an object). Nulls are allowed (in a patch they delete).
func checkSection(root *node, sec Section) *Error {
	if root.kind != KindObject {
		return invalidf("%s must be a JSON object", sec)
	}
	return checkTree(root, sec.String(), 0)
}

func checkTree(n *node, where string, depth int) *Error {
	switch n.kind {
	case KindString:
		if len(n.str) > MaxStringBytes {
			return invalidf("string length: value at %s is %d bytes (at most %d)", where, len(n.str), MaxStringBytes)
		}
	case KindObject, KindArray:
		if depth > MaxDepth {
			return invalidf("depth: %s is nested %d levels below the section (at most %d)", where, depth, MaxDepth)
		}
		for i := range n.kids {
			k := &n.kids[i]
			var at string
			if n.kind == KindObject {
				if err := checkKey(k.key, where); err != nil {
					return err
				}
				at = where + "." + k.key
			} else {
				at = where + "[" + strconv.Itoa(i) + "]"
			}
			if err := checkTree(k, at, depth+1); err != nil {
				return err
			}
		}
	}
	return nil
}

// sectionSize is the size a section counts against its limit: per member
// its key's length plus its value's; a string counts its characters
// (runes) excluding control characters, a number 8, a boolean 4, a null 4,
// an object or array the sum of its contents. $metadata and $version are
// not part of the tree, so they do not count.
func sectionSize(n *node) int {
	switch n.kind {
	case KindString:
		return countChars(n.str)
	case KindNumber:
		return 8
	case KindTrue, KindFalse, KindNull:
		return 4
	}
	s := 0
	for i := range n.kids {
		k := &n.kids[i]
		s += countChars(k.key) + sectionSize(k)
	}
	return s
}

func countChars(s string) int {
	n := 0
	for i := 0; i < len(s); {
		c := s[i]
		if c < utf8.RuneSelf {
			if c >= 0x20 && c != 0x7f {
				n++
			}
			i++
			continue
		}
		r, size := utf8.DecodeRuneInString(s[i:])
		if !unicode.IsControl(r) {
			n++
		}
		i += size
	}
	return n
}

// checkSize fails with 413 when a section is over its limit.
func checkSize(n *node, sec Section) *Error {
	if s := sectionSize(n); s > sec.maxSize() {
		return errf(StatusTooLarge, CodeTooLarge, "%s size: %d bytes after the change (at most %d)", sec, s, sec.maxSize())
	}
	return nil
}

// CheckID applies IoT Hub's rules for a device or module id: 1..128
// ASCII characters out of letters, digits and - . + % _ # * ? ! ( ) , : = @ $ '.
// what names the id in the error ("deviceId", "moduleId").
func CheckID(id, what string) error {
	if id == "" {
		return invalidf("%s: empty", what)
	}
	if len(id) > MaxIDBytes {
		return invalidf("%s: %d characters (at most %d)", what, len(id), MaxIDBytes)
	}
	for i := 0; i < len(id); i++ {
		c := id[i]
		if c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || strings.IndexByte("-.+%_#*?!(),:=@$'", c) >= 0 {
			continue
		}
		return invalidf("%s: %q contains %q (letters, digits and -.+%%_#*?!(),:=@$' only)", what, truncate(id, 64), rune(c))
	}
	return nil
}

// CheckModelID applies the Digital Twin Model Identifier syntax to the
// IoT Plug and Play model id a device announces when it connects:
// "dtmi:" and one or more path segments separated by ':', each a letter
// followed by letters, digits and underscores and not ending with an
// underscore, then optionally ';' and a version (digits, at most 9, not
// starting with 0, optionally "." and a minor version), at most
// MaxModelIDBytes in all ("dtmi:com:example:Thermostat;1").
func CheckModelID(id string) error {
	if len(id) > MaxModelIDBytes {
		return invalidf("model id: %d bytes (at most %d)", len(id), MaxModelIDBytes)
	}
	path, ok := strings.CutPrefix(id, "dtmi:")
	if !ok {
		return invalidf("model id %q does not start with dtmi:", truncate(id, 64))
	}
	path, version, versioned := strings.Cut(path, ";")
	for seg := range strings.SplitSeq(path, ":") {
		if !dtmiSegment(seg) {
			return invalidf("model id %q: path segment %q (a letter, then letters, digits or _, not ending with _)",
				truncate(id, 64), truncate(seg, 64))
		}
	}
	if versioned {
		major, minor, hasMinor := strings.Cut(version, ".")
		if !dtmiVersion(major) || hasMinor && !dtmiVersion(minor) {
			return invalidf("model id %q: version %q (1 to 999999999, optionally .minor)", truncate(id, 64), truncate(version, 32))
		}
	}
	return nil
}

func dtmiSegment(s string) bool {
	if s == "" || !(s[0] >= 'a' && s[0] <= 'z' || s[0] >= 'A' && s[0] <= 'Z') || s[len(s)-1] == '_' {
		return false
	}
	for i := 1; i < len(s); i++ {
		c := s[i]
		if !(c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c >= '0' && c <= '9' || c == '_') {
			return false
		}
	}
	return true
}

func dtmiVersion(s string) bool {
	if s == "" || len(s) > 9 || s[0] == '0' {
		return false
	}
	for i := 0; i < len(s); i++ {
		if s[i] < '0' || s[i] > '9' {
			return false
		}
	}
	return true
}
