package filter

import (
	"errors"
	"fmt"
	"sort"
	"unsafe"

	"github.com/smartgo/smartgo/store/record"
)

// ErrSyntax is wrapped by every Compile error.
var ErrSyntax = errors.New("filter: invalid SQL92 selector")

// SyntaxError is a Compile error: what is wrong and at which byte offset
// of the selector. errors.Is(err, ErrSyntax) holds for it.
type SyntaxError struct {
	Offset int
	Msg    string
}

func (e *SyntaxError) Error() string {
	return fmt.Sprintf("%v at offset %d: %s", ErrSyntax, e.Offset, e.Msg)
}

// Unwrap returns ErrSyntax.
func (e *SyntaxError) Unwrap() error { return ErrSyntax }

func syntaxErr(pos int, msg string) error { return &SyntaxError{Offset: pos, Msg: msg} }

// TagsProperty is the property holding a message's tag.
const TagsProperty = record.PropertyTags

// Expression is a compiled SQL92 selector. It is immutable and safe for
// concurrent use.
type Expression struct {
	src  string
	root node
	// tags are the tag values a matching message must have (tagsOK), in
	// sorted order; codes their hashes, sorted and unique.
	tags   []string
	codes  []int64
	tagsOK bool
}

// Compile parses a selector. Errors wrap ErrSyntax (a *SyntaxError).
func Compile(src string) (*Expression, error) {
	root, err := parse(src)
	if err != nil {
		return nil, err
	}
	e := &Expression{src: src, root: root}
	if set, ok := requiredTags(root); ok {
		e.tagsOK = true
		for t := range set {
			e.tags = append(e.tags, t)
			e.codes = append(e.codes, record.TagsHash(t))
		}
		sort.Strings(e.tags)
		sort.Slice(e.codes, func(i, j int) bool { return e.codes[i] < e.codes[j] })
		e.codes = compactCodes(e.codes)
	}
	return e, nil
}

func compactCodes(c []int64) []int64 {
	out := c[:0]
	for i, v := range c {
		if i == 0 || v != c[i-1] {
			out = append(out, v)
		}
	}
	return out
}

// Source returns the selector as given to Compile.
func (e *Expression) Source() string { return e.src }

// String returns the selector fully parenthesised, keywords in upper
// case; compiling it gives the same expression.
func (e *Expression) String() string { return e.root.String() }

// Result is the three-valued outcome of a selector.
type Result int8

const (
	Unknown Result = iota // a comparison with NULL decided it
	False
	True
)

func (r Result) String() string { return [...]string{"UNKNOWN", "FALSE", "TRUE"}[r] }

// props is what evaluation reads properties from: the encoded properties
// of a record, or a map. Passed by value so evaluation does not allocate.
type props struct {
	raw []byte
	m   map[string]string
}

func (p props) get(name string) (string, bool) {
	if p.m != nil {
		v, ok := p.m[name]
		return v, ok
	}
	v, ok := record.LookupProperty(p.raw, name)
	if !ok {
		return "", false
	}
	if len(v) == 0 {
		return "", true
	}
	// A view, not a copy: evaluation keeps no string past its return.
	return unsafe.String(&v[0], len(v)), true
}

// Match reports whether a message with the given encoded properties (the
// 0x01/0x02 string of a record) matches: the selector is TRUE and its
// evaluation did not fail. raw is only read during the call.
func (e *Expression) Match(raw []byte) bool {
	v, err := e.root.eval(props{raw: raw})
	return err == nil && v.k == kBool && v.b
}

// MatchMap is Match over a property map.
func (e *Expression) MatchMap(m map[string]string) bool {
	if m == nil {
		m = map[string]string{}
	}
	v, err := e.root.eval(props{m: m})
	return err == nil && v.k == kBool && v.b
}

// Evaluate returns the selector's value for a property map, and the
// evaluation error (a value that does not convert for a comparison) if
// there is one.
func (e *Expression) Evaluate(m map[string]string) (Result, error) {
	if m == nil {
		m = map[string]string{}
	}
	v, err := e.root.eval(props{m: m})
	switch {
	case err != nil:
		return Unknown, err
	case v.k != kBool:
		return Unknown, nil
	case v.b:
		return True, nil
	}
	return False, nil
}

// Tags returns the tag values a matching message must carry, sorted, and
// whether the selector implies such a set at all (ok=false: any tag, or
// none, may match). An empty set with ok=true means nothing matches.
func (e *Expression) Tags() (tags []string, ok bool) {
	return append([]string(nil), e.tags...), e.tagsOK
}

// TagCodes is Tags as the tag hashes of consume-queue entries (Java's
// String.hashCode), sorted and unique.
func (e *Expression) TagCodes() (codes []int64, ok bool) {
	return append([]int64(nil), e.codes...), e.tagsOK
}

// requiredTags derives the set of TAGS values any match must have:
// TAGS = 'x' and TAGS IN (...) give one, AND intersects, OR unites (when
// both sides have one).
func requiredTags(n node) (map[string]struct{}, bool) {
	switch n := n.(type) {
	case *equal:
		p, c := n.l, n.r
		if _, ok := p.(*constant); ok {
			p, c = c, p
		}
		pp, pok := p.(*property)
		cc, cok := c.(*constant)
		if pok && cok && pp.name == TagsProperty && cc.v.k == kString {
			return map[string]struct{}{cc.v.s: {}}, true
		}
	case *inSet:
		if n.prop.name == TagsProperty && !n.not {
			set := make(map[string]struct{}, len(n.set))
			for s := range n.set {
				set[s] = struct{}{}
			}
			return set, true
		}
	case *logic:
		l, lok := requiredTags(n.l)
		r, rok := requiredTags(n.r)
		if n.op == opOr {
			if !lok || !rok {
				return nil, false
			}
			for s := range r {
				l[s] = struct{}{}
			}
			return l, true
		}
		switch {
		case lok && rok:
			for s := range l {
				if _, both := r[s]; !both {
					delete(l, s)
				}
			}
			return l, true
		case lok:
			return l, true
		case rok:
			return r, true
		}
	}
	return nil, false
}
