package filter

import (
	"errors"
	"math"
	"strconv"
	"strings"
)

// kind is the type of a value.
type kind uint8

const (
	kNull kind = iota
	kBool
	kInt
	kFloat
	kString
)

// value is the result of evaluating a node: NULL (also "unknown" for
// conditions), a boolean, a 64-bit integer, a float or a string.
type value struct {
	k kind
	b bool
	i int64
	f float64
	s string
}

var (
	vNull  = value{}
	vTrue  = value{k: kBool, b: true}
	vFalse = value{k: kBool}
)

func boolValue(b bool) value {
	if b {
		return vTrue
	}
	return vFalse
}

// errConvert is an evaluation error: a value that does not convert to
// the type it is compared with. The message then does not match.
var errConvert = errors.New("filter: value does not convert for comparison")

// node is one compiled expression.
type node interface {
	eval(p props) (value, error)
	// boolean reports whether the node yields a condition (RocketMQ's
	// BooleanExpression).
	boolean() bool
	String() string
}

type constant struct{ v value }

func (c *constant) eval(props) (value, error) { return c.v, nil }
func (c *constant) boolean() bool             { return c.v.k == kNull || c.v.k == kBool }
func (c *constant) String() string {
	switch c.v.k {
	case kNull:
		return "NULL"
	case kBool:
		if c.v.b {
			return "TRUE"
		}
		return "FALSE"
	case kInt:
		return strconv.FormatInt(c.v.i, 10)
	case kFloat:
		s := strconv.FormatFloat(c.v.f, 'g', -1, 64)
		if !strings.ContainsAny(s, ".eEnN") {
			s += ".0"
		}
		return s
	}
	return quote(c.v.s)
}

func quote(s string) string { return "'" + strings.ReplaceAll(s, "'", "''") + "'" }

type property struct{ name string }

func (n *property) eval(p props) (value, error) {
	if s, ok := p.get(n.name); ok {
		return value{k: kString, s: s}, nil
	}
	return vNull, nil
}
func (p *property) boolean() bool  { return false }
func (p *property) String() string { return p.name }

func isProp(n node) bool {
	_, ok := n.(*property)
	return ok
}

// negation is arithmetic minus of a non-constant: NULL for anything but a
// number.
type negation struct{ x node }

func (n *negation) eval(p props) (value, error) {
	v, err := n.x.eval(p)
	if err != nil {
		return vNull, err
	}
	if v.k == kInt || v.k == kFloat {
		return negate(v), nil
	}
	return vNull, nil
}
func (n *negation) boolean() bool  { return false }
func (n *negation) String() string { return "(-" + n.x.String() + ")" }

func negate(v value) value {
	if v.k == kInt {
		v.i = -v.i
	} else {
		v.f = -v.f
	}
	return v
}

// boolCast uses a property as a condition: NULL when missing, TRUE only
// for a boolean value (never, for a string property).
type boolCast struct{ x node }

func (n *boolCast) eval(p props) (value, error) {
	v, err := n.x.eval(p)
	if err != nil || v.k == kNull {
		return vNull, err
	}
	return boolValue(v.k == kBool && v.b), nil
}
func (n *boolCast) boolean() bool  { return true }
func (n *boolCast) String() string { return n.x.String() }

type not struct{ x node }

func (n *not) eval(p props) (value, error) {
	v, err := n.x.eval(p)
	if err != nil || v.k != kBool {
		return vNull, err
	}
	return boolValue(!v.b), nil
}
func (n *not) boolean() bool  { return true }
func (n *not) String() string { return "(NOT " + n.x.String() + ")" }

type logicOp uint8

const (
	opAnd logicOp = iota
	opOr
)

// logic is AND or OR in three-valued logic; the right side is evaluated
// only when the left one does not decide.
type logic struct {
	op   logicOp
	l, r node
}

func (n *logic) eval(p props) (value, error) {
	decide := n.op == opOr // OR is decided by TRUE, AND by FALSE
	lv, err := n.l.eval(p)
	if err != nil {
		return vNull, err
	}
	if lv.k == kBool && lv.b == decide {
		return lv, nil
	}
	rv, err := n.r.eval(p)
	if err != nil {
		return vNull, err
	}
	if rv.k == kBool && rv.b == decide {
		return rv, nil
	}
	if lv.k != kBool || rv.k != kBool {
		return vNull, nil
	}
	return boolValue(!decide), nil
}
func (n *logic) boolean() bool { return true }
func (n *logic) String() string {
	op := " AND "
	if n.op == opOr {
		op = " OR "
	}
	return "(" + n.l.String() + op + n.r.String() + ")"
}

type cmpOp uint8

const (
	opGt cmpOp = iota
	opGe
	opLt
	opLe
)

func (o cmpOp) String() string { return [...]string{">", ">=", "<", "<="}[o] }

// compare is <, <=, > or >=: unknown when a side is NULL; two strings are
// compared as numbers.
type compare struct {
	op   cmpOp
	l, r node
}

func (n *compare) eval(p props) (value, error) {
	lv, err := n.l.eval(p)
	if err != nil || lv.k == kNull {
		return vNull, err
	}
	rv, err := n.r.eval(p)
	if err != nil || rv.k == kNull {
		return vNull, err
	}
	if lv.k == kString && rv.k == kString {
		if lv, err = toFloat(lv); err != nil {
			return vNull, err
		}
		if rv, err = toFloat(rv); err != nil {
			return vNull, err
		}
	}
	c, err := compareValues(lv, rv)
	if err != nil {
		return vNull, err
	}
	switch n.op {
	case opGt:
		return boolValue(c > 0), nil
	case opGe:
		return boolValue(c >= 0), nil
	case opLt:
		return boolValue(c < 0), nil
	}
	return boolValue(c <= 0), nil
}
func (n *compare) boolean() bool { return true }
func (n *compare) String() string {
	return "(" + n.l.String() + " " + n.op.String() + " " + n.r.String() + ")"
}

// equal is =: NULL = x is unknown, x = NULL is FALSE; otherwise equal
// values, or values equal after conversion.
type equal struct{ l, r node }

func (n *equal) eval(p props) (value, error) {
	lv, err := n.l.eval(p)
	if err != nil {
		return vNull, err
	}
	rv, err := n.r.eval(p)
	if err != nil {
		return vNull, err
	}
	switch {
	case lv.k == kNull && rv.k == kNull:
		return vTrue, nil
	case lv.k == kNull:
		return vNull, nil
	case rv.k == kNull:
		return vFalse, nil
	case lv == rv:
		return vTrue, nil
	}
	c, err := compareValues(lv, rv)
	if err != nil {
		return vNull, err
	}
	return boolValue(c == 0), nil
}
func (n *equal) boolean() bool  { return true }
func (n *equal) String() string { return "(" + n.l.String() + " = " + n.r.String() + ")" }

// isNull is IS NULL / IS NOT NULL; never unknown.
type isNull struct {
	x   node
	not bool
}

func (n *isNull) eval(p props) (value, error) {
	v, err := n.x.eval(p)
	if err != nil {
		return vNull, err
	}
	return boolValue((v.k == kNull) != n.not), nil
}
func (n *isNull) boolean() bool { return true }
func (n *isNull) String() string {
	if n.not {
		return "(" + n.x.String() + " IS NOT NULL)"
	}
	return "(" + n.x.String() + " IS NULL)"
}

// inSet is [NOT] IN over string literals; unknown for a missing property.
type inSet struct {
	prop *property
	not  bool
	set  map[string]struct{}
	list []string // in the order written, without duplicates
}

func (n *inSet) eval(p props) (value, error) {
	s, ok := p.get(n.prop.name)
	if !ok {
		return vNull, nil
	}
	_, in := n.set[s]
	return boolValue(in != n.not), nil
}
func (n *inSet) boolean() bool { return true }
func (n *inSet) String() string {
	var sb strings.Builder
	sb.WriteString("(" + n.prop.name)
	if n.not {
		sb.WriteString(" NOT")
	}
	sb.WriteString(" IN (")
	for i, s := range n.list {
		if i > 0 {
			sb.WriteString(", ")
		}
		sb.WriteString(quote(s))
	}
	sb.WriteString("))")
	return sb.String()
}

// compareValues orders two non-NULL values, converting across types as
// RocketMQ does: a number compared with a string parses the string as
// that kind of number, a boolean compared with a string parses the string
// as a boolean; a boolean and a number are unequal (-1).
func compareValues(lv, rv value) (int, error) {
	var err error
	if lv.k != rv.k {
		switch {
		case lv.k == kBool:
			if rv.k == kString {
				return 0, errConvert
			}
			return -1, nil
		case rv.k == kBool:
			if lv.k != kString {
				return -1, nil
			}
			lv = boolValue(strings.EqualFold(lv.s, "true"))
		case lv.k == kInt && rv.k == kFloat:
			lv = value{k: kFloat, f: float64(lv.i)}
		case lv.k == kFloat && rv.k == kInt:
			rv = value{k: kFloat, f: float64(rv.i)}
		case lv.k == kString:
			if lv, err = convert(lv, rv.k); err != nil {
				return 0, err
			}
		case rv.k == kString:
			if rv, err = convert(rv, lv.k); err != nil {
				return 0, err
			}
		}
		// A string taken as a float against an integer.
		if lv.k == kFloat && rv.k == kInt {
			rv = value{k: kFloat, f: float64(rv.i)}
		} else if lv.k == kInt && rv.k == kFloat {
			lv = value{k: kFloat, f: float64(lv.i)}
		}
	}
	switch lv.k {
	case kBool:
		return boolCompare(lv.b, rv.b), nil
	case kInt:
		switch {
		case lv.i < rv.i:
			return -1, nil
		case lv.i > rv.i:
			return 1, nil
		}
		return 0, nil
	case kFloat:
		return floatCompare(lv.f, rv.f), nil
	}
	return strings.Compare(lv.s, rv.s), nil
}

// convert parses a string as an integer or a float. A string compared
// with an integer that is not one but is a float (2.5 > 2) is taken as
// a float (RocketMQ fails such a comparison).
func convert(v value, to kind) (value, error) {
	if to == kInt {
		if i, err := strconv.ParseInt(v.s, 10, 64); err == nil {
			return value{k: kInt, i: i}, nil
		}
	}
	return toFloat(v)
}

// toFloat parses a string the way Java's Double.valueOf does: blanks
// around it and a d/f suffix are allowed.
func toFloat(v value) (value, error) {
	s := strings.TrimSpace(v.s)
	if n := len(s); n > 1 && strings.ContainsRune("dDfF", rune(s[n-1])) {
		s = s[:n-1]
	}
	f, err := strconv.ParseFloat(s, 64)
	if err != nil && !errors.Is(err, strconv.ErrRange) {
		return vNull, errConvert
	}
	return value{k: kFloat, f: f}, nil
}

func boolCompare(a, b bool) int {
	switch {
	case a == b:
		return 0
	case b:
		return -1
	}
	return 1
}

// floatCompare orders floats as Java's Double.compareTo: -0.0 below 0.0,
// NaN above everything and equal to itself.
func floatCompare(a, b float64) int {
	switch {
	case a < b:
		return -1
	case a > b:
		return 1
	}
	an, bn := math.IsNaN(a), math.IsNaN(b)
	switch {
	case an && bn:
		return 0
	case an:
		return 1
	case bn:
		return -1
	}
	as, bs := math.Signbit(a), math.Signbit(b)
	switch {
	case as == bs:
		return 0
	case as:
		return -1
	}
	return 1
}
