package filter

import (
	"fmt"
	"math"
	"strconv"
	"strings"
)

// Limits of Compile.
const (
	// MaxLength is the longest selector Compile accepts, in bytes.
	MaxLength = 64 << 10
	// MaxDepth bounds the nesting of parentheses and unary operators.
	MaxDepth = 100
)

// parser is a recursive-descent parser over the token list.
type parser struct {
	toks  []token
	pos   int
	depth int
}

func (p *parser) peek() token { return p.toks[p.pos] }

// peek2 is the token after the next one.
func (p *parser) peek2() token {
	if p.pos+1 < len(p.toks) {
		return p.toks[p.pos+1]
	}
	return p.toks[len(p.toks)-1]
}

func (p *parser) next() token {
	t := p.toks[p.pos]
	if t.kind != tEOF {
		p.pos++
	}
	return t
}

func (p *parser) expect(k tokKind) (token, error) {
	t := p.next()
	if t.kind != k {
		return t, unexpected(t, k.String())
	}
	return t, nil
}

func unexpected(t token, want string) error {
	got := t.kind.String()
	if t.kind != tEOF && t.text != "" {
		got = fmt.Sprintf("%s %q", got, t.text)
	}
	return syntaxErr(t.pos, fmt.Sprintf("expected %s, found %s", want, got))
}

// parse parses a whole selector.
func parse(src string) (node, error) {
	if len(src) > MaxLength {
		return nil, syntaxErr(MaxLength, fmt.Sprintf("selector of %d bytes is longer than %d", len(src), MaxLength))
	}
	toks, err := lex(src)
	if err != nil {
		return nil, err
	}
	p := &parser{toks: toks}
	if p.peek().kind == tEOF {
		return nil, syntaxErr(0, "empty selector")
	}
	n, err := p.or()
	if err != nil {
		return nil, err
	}
	if t := p.peek(); t.kind != tEOF {
		return nil, unexpected(t, "an operator or the end of the selector")
	}
	return asBoolean(n, 0)
}

// asBoolean makes n usable as a condition: boolean expressions as they
// are, a property through a boolean cast; anything else is an error.
func asBoolean(n node, pos int) (node, error) {
	switch {
	case n.boolean():
		return n, nil
	case isProp(n):
		return &boolCast{x: n}, nil
	}
	return nil, syntaxErr(pos, fmt.Sprintf("%s will not result in a boolean value", n))
}

func (p *parser) or() (node, error)  { return p.chain(tOr, opOr, p.and) }
func (p *parser) and() (node, error) { return p.chain(tAnd, opAnd, p.equality) }

// chain parses operand { tok operand }, folding to the left into logic
// nodes whose operands must be conditions.
func (p *parser) chain(tok tokKind, op logicOp, operand func() (node, error)) (node, error) {
	l, err := operand()
	if err != nil {
		return nil, err
	}
	for p.peek().kind == tok {
		t := p.next()
		r, err := operand()
		if err != nil {
			return nil, err
		}
		if l, err = asBoolean(l, t.pos); err != nil {
			return nil, err
		}
		if r, err = asBoolean(r, t.pos); err != nil {
			return nil, err
		}
		l = &logic{op: op, l: l, r: r}
	}
	return l, nil
}

func (p *parser) equality() (node, error) {
	l, err := p.comparison()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		switch t.kind {
		case tEq, tNe:
			p.next()
			r, err := p.comparison()
			if err != nil {
				return nil, err
			}
			if err := checkEqual(l, r, t.pos); err != nil {
				return nil, err
			}
			l = &equal{l: l, r: r}
			if t.kind == tNe {
				l = &not{x: l}
			}
		case tIs:
			p.next()
			neg := false
			if p.peek().kind == tNot {
				p.next()
				neg = true
			}
			if _, err := p.expect(tNull); err != nil {
				return nil, err
			}
			l = &isNull{x: l, not: neg}
		default:
			return l, nil
		}
	}
}

func (p *parser) comparison() (node, error) {
	l, err := p.unary()
	if err != nil {
		return nil, err
	}
	for {
		t := p.peek()
		neg := false
		switch t.kind {
		case tGt, tGe, tLt, tLe:
			p.next()
			r, err := p.unary()
			if err != nil {
				return nil, err
			}
			if l, err = newCompare(cmpOps[t.kind], l, r, t.pos); err != nil {
				return nil, err
			}
			continue
		case tNot:
			if k := p.peek2().kind; k != tBetween && k != tIn {
				return l, nil
			}
			p.next()
			neg = true
		case tBetween, tIn:
		default:
			return l, nil
		}
		if p.next().kind == tBetween {
			if l, err = p.between(l, neg, t.pos); err != nil {
				return nil, err
			}
		} else if l, err = p.in(l, neg, t.pos); err != nil {
			return nil, err
		}
	}
}

var cmpOps = map[tokKind]cmpOp{tGt: opGt, tGe: opGe, tLt: opLt, tLe: opLe}

// between parses "low AND high" after BETWEEN.
func (p *parser) between(x node, neg bool, pos int) (node, error) {
	lo, err := p.unary()
	if err != nil {
		return nil, err
	}
	if _, err := p.expect(tAnd); err != nil {
		return nil, err
	}
	hi, err := p.unary()
	if err != nil {
		return nil, err
	}
	if neg {
		a, err := newCompare(opLt, x, lo, pos)
		if err != nil {
			return nil, err
		}
		b, err := newCompare(opGt, x, hi, pos)
		if err != nil {
			return nil, err
		}
		return &logic{op: opOr, l: a, r: b}, nil
	}
	lc, lok := lo.(*constant)
	hc, hok := hi.(*constant)
	if lok && hok {
		if lc.v.k == kNull || hc.v.k == kNull {
			return nil, syntaxErr(pos, "the bounds of BETWEEN cannot be NULL")
		}
		if c, err := compareValues(hc.v, lc.v); err == nil && c < 0 {
			return nil, syntaxErr(pos, fmt.Sprintf("BETWEEN %s AND %s: the low bound is above the high bound", lc, hc))
		}
	}
	a, err := newCompare(opGe, x, lo, pos)
	if err != nil {
		return nil, err
	}
	b, err := newCompare(opLe, x, hi, pos)
	if err != nil {
		return nil, err
	}
	return &logic{op: opAnd, l: a, r: b}, nil
}

// in parses "( 'a', 'b', ... )" after IN.
func (p *parser) in(x node, neg bool, pos int) (node, error) {
	prop, ok := x.(*property)
	if !ok {
		return nil, syntaxErr(pos, fmt.Sprintf("IN needs a property on its left, found %s", x))
	}
	if _, err := p.expect(tLParen); err != nil {
		return nil, err
	}
	n := &inSet{prop: prop, not: neg, set: map[string]struct{}{}}
	for {
		t, err := p.expect(tString)
		if err != nil {
			return nil, err
		}
		if _, dup := n.set[t.text]; !dup {
			n.set[t.text] = struct{}{}
			n.list = append(n.list, t.text)
		}
		if p.peek().kind != tComma {
			break
		}
		p.next()
	}
	if _, err := p.expect(tRParen); err != nil {
		return nil, err
	}
	return n, nil
}

func (p *parser) unary() (node, error) {
	p.depth++
	defer func() { p.depth-- }()
	t := p.peek()
	if p.depth > MaxDepth {
		return nil, syntaxErr(t.pos, fmt.Sprintf("selector nested deeper than %d", MaxDepth))
	}
	switch t.kind {
	case tPlus:
		p.next()
		return p.unary()
	case tMinus:
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		if c, ok := x.(*constant); ok && (c.v.k == kInt || c.v.k == kFloat) {
			return &constant{v: negate(c.v)}, nil
		}
		return &negation{x: x}, nil
	case tNot:
		p.next()
		x, err := p.unary()
		if err != nil {
			return nil, err
		}
		if x, err = asBoolean(x, t.pos); err != nil {
			return nil, err
		}
		return &not{x: x}, nil
	}
	return p.primary()
}

func (p *parser) primary() (node, error) {
	t := p.next()
	switch t.kind {
	case tString:
		return &constant{v: value{k: kString, s: t.text}}, nil
	case tInt:
		digits := strings.TrimRight(t.text, "lL")
		i, err := strconv.ParseInt(digits, 10, 64)
		if err != nil {
			return nil, syntaxErr(t.pos, fmt.Sprintf("integer %s does not fit 64 bits", t.text))
		}
		return &constant{v: value{k: kInt, i: i}}, nil
	case tFloat:
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil || math.IsInf(f, 0) {
			return nil, syntaxErr(t.pos, fmt.Sprintf("float %s is out of range", t.text))
		}
		return &constant{v: value{k: kFloat, f: f}}, nil
	case tTrue, tFalse:
		return &constant{v: value{k: kBool, b: t.kind == tTrue}}, nil
	case tNull:
		return &constant{v: value{}}, nil
	case tIdent:
		return &property{name: t.text}, nil
	case tLParen:
		n, err := p.or()
		if err != nil {
			return nil, err
		}
		if _, err := p.expect(tRParen); err != nil {
			return nil, err
		}
		return n, nil
	}
	return nil, unexpected(t, "a value, a property or '('")
}

// newCompare builds <, <=, > or >= with RocketMQ's operand checks: a
// literal must be a number, and no operand may be a boolean expression.
func newCompare(op cmpOp, l, r node, pos int) (node, error) {
	for _, x := range []node{l, r} {
		if c, ok := x.(*constant); ok {
			if c.v.k != kInt && c.v.k != kFloat {
				return nil, syntaxErr(pos, fmt.Sprintf("%s cannot be compared with %s", c, op))
			}
			continue
		}
		if x.boolean() {
			return nil, syntaxErr(pos, fmt.Sprintf("%s cannot be compared with %s", x, op))
		}
	}
	return &compare{op: op, l: l, r: r}, nil
}

// checkEqual applies RocketMQ's checks of = and <>: NULL is compared with
// IS NULL, and a boolean literal only with a boolean one.
func checkEqual(l, r node, pos int) error {
	lc, lok := l.(*constant)
	rc, rok := r.(*constant)
	if lok && lc.v.k == kNull || rok && rc.v.k == kNull {
		return syntaxErr(pos, "NULL cannot be compared with = or <>; use IS NULL or IS NOT NULL")
	}
	if lok && rok && lc.boolean() && !rc.boolean() {
		return syntaxErr(pos, fmt.Sprintf("%s cannot be compared with %s", lc, rc))
	}
	return nil
}
