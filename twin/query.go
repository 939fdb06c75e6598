package twin

import (
	"fmt"
	"slices"
	"strconv"
	"strings"
	"unicode/utf8"
)

// Query limits.
const (
	MaxQueryBytes   = 8 << 10 // the text of a query
	maxQueryNesting = 32      // parentheses and NOT
	maxInList       = 100     // literals in one IN list
	// MaxQueryTop bounds n of SELECT TOP n (the largest page).
	MaxQueryTop = DefaultMaxPageSize
)

// Query is a parsed twin query (see ../docs/twins.md for the language):
//
//	SELECT [TOP n] * | item [, item]... FROM devices | devices.modules
//	    [WHERE condition] [GROUP BY path]
//	item := path [AS alias] | COUNT() [AS alias]
type Query struct {
	Top     int          // TOP n: at most n results, in one page; 0: no bound
	Modules bool         // FROM devices.modules
	Star    bool         // SELECT *
	Items   []SelectItem // otherwise
	Where   Expr         // nil: every twin
	GroupBy []string     // path; nil: none
}

// SelectItem is one item of the select list.
type SelectItem struct {
	Path  []string // nil for COUNT()
	Count bool
	Alias string // the output member name
}

// Aggregate reports whether the query counts (COUNT(), with or without
// GROUP BY) rather than listing twins.
func (q *Query) Aggregate() bool {
	for _, it := range q.Items {
		if it.Count {
			return true
		}
	}
	return false
}

// Expr is a WHERE condition.
type Expr interface{ exprNode() }

// The condition nodes.
type (
	// AndExpr and OrExpr combine two conditions.
	AndExpr struct{ L, R Expr }
	OrExpr  struct{ L, R Expr }
	// NotExpr negates (undefined stays undefined).
	NotExpr struct{ X Expr }
	// CmpExpr compares a field with a literal.
	CmpExpr struct {
		Path []string
		Op   string // = != < > <= >=
		Lit  Literal
	}
	// InExpr is true when the field equals one of the literals.
	InExpr struct {
		Path []string
		Lits []Literal
	}
	// FuncExpr is IS_DEFINED(path), STARTSWITH(path, 's') or
	// ENDSWITH(path, 's').
	FuncExpr struct {
		Name string // IS_DEFINED, STARTSWITH, ENDSWITH
		Path []string
		Arg  string
	}
)

func (*AndExpr) exprNode()  {}
func (*OrExpr) exprNode()   {}
func (*NotExpr) exprNode()  {}
func (*CmpExpr) exprNode()  {}
func (*InExpr) exprNode()   {}
func (*FuncExpr) exprNode() {}

// Literal is a constant of a condition.
type Literal struct{ v node }

// String renders the literal as JSON.
func (l Literal) String() string { return string(appendValue(nil, &l.v)) }

// ParseQuery parses a query. Errors are 400 InvalidQuery naming the
// position and what was expected.
func ParseQuery(text string) (*Query, error) {
	if len(text) > MaxQueryBytes {
		return nil, errf(StatusBadRequest, CodeBadQuery, "query: %d bytes (at most %d)", len(text), MaxQueryBytes)
	}
	if !utf8.ValidString(text) {
		return nil, errf(StatusBadRequest, CodeBadQuery, "query: not valid UTF-8")
	}
	p := &qparser{lx: qlexer{s: text}}
	p.next()
	q, err := p.query()
	if err != nil {
		return nil, err
	}
	return q, nil
}

type qparser struct {
	lx    qlexer
	tok   qtoken
	depth int
}

func (p *qparser) next() { p.tok = p.lx.next() }

func (p *qparser) errf(format string, args ...any) *Error {
	return errf(StatusBadRequest, CodeBadQuery, "query: at %d: %s", p.tok.pos+1, strings.TrimSpace(sprintf(format, args...)))
}

func (p *qparser) keyword(kw string) bool {
	if p.tok.kind == tIdent && strings.EqualFold(p.tok.text, kw) {
		p.next()
		return true
	}
	return false
}

func (p *qparser) punct(s string) bool {
	if p.tok.kind == tPunct && p.tok.text == s {
		p.next()
		return true
	}
	return false
}

func (p *qparser) found() string {
	switch p.tok.kind {
	case tEOF:
		return "end of query"
	case tError:
		return p.tok.text
	}
	return strconv.Quote(p.tok.text)
}

func (p *qparser) query() (*Query, error) {
	q := &Query{}
	if !p.keyword("SELECT") {
		return nil, p.errf("expected SELECT, found %s", p.found())
	}
	if p.keyword("TOP") {
		n, err := strconv.Atoi(p.tok.text)
		if p.tok.kind != tNumber || err != nil || n < 1 || n > MaxQueryTop {
			return nil, p.errf("expected a whole number from 1 to %d after TOP, found %s", MaxQueryTop, p.found())
		}
		q.Top = n
		p.next()
	}
	if p.punct("*") {
		q.Star = true
	} else {
		for {
			it, err := p.selectItem()
			if err != nil {
				return nil, err
			}
			q.Items = append(q.Items, it)
			if !p.punct(",") {
				break
			}
		}
	}
	if !p.keyword("FROM") {
		return nil, p.errf("expected FROM, found %s", p.found())
	}
	if !p.keyword("devices") {
		return nil, p.errf("expected devices or devices.modules after FROM, found %s", p.found())
	}
	if p.punct(".") {
		if !p.keyword("modules") {
			return nil, p.errf("expected modules after devices., found %s", p.found())
		}
		q.Modules = true
	}
	if p.keyword("WHERE") {
		w, err := p.or()
		if err != nil {
			return nil, err
		}
		q.Where = w
	}
	if p.keyword("GROUP") {
		if !p.keyword("BY") {
			return nil, p.errf("expected BY after GROUP, found %s", p.found())
		}
		path, err := p.path()
		if err != nil {
			return nil, err
		}
		q.GroupBy = path
	}
	if p.tok.kind != tEOF {
		return nil, p.errf("unexpected %s", p.found())
	}
	return q, q.check()
}

// check applies the rules between clauses.
func (q *Query) check() error {
	bad := func(format string, args ...any) error {
		return errf(StatusBadRequest, CodeBadQuery, "query: "+format, args...)
	}
	counts := 0
	seen := map[string]bool{}
	for _, it := range q.Items {
		if it.Count {
			counts++
		}
		if seen[it.Alias] {
			return bad("duplicate output name %q (use AS)", it.Alias)
		}
		seen[it.Alias] = true
	}
	switch {
	case counts > 1:
		return bad("at most one COUNT()")
	case q.GroupBy != nil && counts == 0:
		return bad("GROUP BY needs COUNT() in the select list")
	}
	if counts == 1 {
		for _, it := range q.Items {
			if !it.Count && (q.GroupBy == nil || !slices.Equal(it.Path, q.GroupBy)) {
				return bad("with COUNT(), the select list may only hold the GROUP BY field, not %s", strings.Join(it.Path, "."))
			}
		}
	}
	return nil
}

func (p *qparser) selectItem() (SelectItem, error) {
	var it SelectItem
	if p.tok.kind == tIdent && strings.EqualFold(p.tok.text, "COUNT") {
		p.next()
		if !p.punct("(") || !p.punct(")") {
			return it, p.errf("expected COUNT()")
		}
		it.Count, it.Alias = true, "$1"
	} else {
		path, err := p.path()
		if err != nil {
			return it, err
		}
		it.Path, it.Alias = path, path[len(path)-1]
	}
	if p.keyword("AS") {
		if p.tok.kind != tIdent || reserved(p.tok.text) {
			return it, p.errf("expected a name after AS, found %s", p.found())
		}
		it.Alias = p.tok.text
		p.next()
	}
	return it, nil
}

func reserved(s string) bool {
	switch strings.ToUpper(s) {
	case "SELECT", "FROM", "WHERE", "AND", "OR", "NOT", "IN", "AS", "GROUP", "BY":
		return true
	}
	return false
}

// path := name ('.' name)*; a name may start with $ ($version).
func (p *qparser) path() ([]string, error) {
	if p.tok.kind != tIdent || reserved(p.tok.text) {
		return nil, p.errf("expected a field, found %s", p.found())
	}
	path := []string{p.tok.text}
	p.next()
	for p.punct(".") {
		if p.tok.kind != tIdent {
			return nil, p.errf("expected a name after '.', found %s", p.found())
		}
		path = append(path, p.tok.text)
		p.next()
	}
	return path, nil
}

func (p *qparser) enter() error {
	p.depth++
	if p.depth > maxQueryNesting {
		return p.errf("condition nested more than %d levels", maxQueryNesting)
	}
	return nil
}

func (p *qparser) or() (Expr, error) {
	l, err := p.and()
	if err != nil {
		return nil, err
	}
	for p.keyword("OR") {
		r, err := p.and()
		if err != nil {
			return nil, err
		}
		l = &OrExpr{l, r}
	}
	return l, nil
}

func (p *qparser) and() (Expr, error) {
	l, err := p.not()
	if err != nil {
		return nil, err
	}
	for p.keyword("AND") {
		r, err := p.not()
		if err != nil {
			return nil, err
		}
		l = &AndExpr{l, r}
	}
	return l, nil
}

func (p *qparser) not() (Expr, error) {
	if p.keyword("NOT") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		x, err := p.not()
		p.depth--
		if err != nil {
			return nil, err
		}
		return &NotExpr{x}, nil
	}
	return p.primary()
}

func (p *qparser) primary() (Expr, error) {
	if p.punct("(") {
		if err := p.enter(); err != nil {
			return nil, err
		}
		x, err := p.or()
		p.depth--
		if err != nil {
			return nil, err
		}
		if !p.punct(")") {
			return nil, p.errf("expected ')', found %s", p.found())
		}
		return x, nil
	}
	if p.tok.kind == tIdent {
		switch name := strings.ToUpper(p.tok.text); name {
		case "IS_DEFINED", "STARTSWITH", "ENDSWITH":
			save := *p
			p.next()
			if p.punct("(") {
				return p.function(name)
			}
			*p = save
		}
	}
	if p.tok.kind != tIdent {
		// literal op path
		lit, err := p.literal()
		if err != nil {
			return nil, err
		}
		op, ok := p.cmpOp()
		if !ok {
			return nil, p.errf("expected a comparison operator, found %s", p.found())
		}
		path, err := p.path()
		if err != nil {
			return nil, err
		}
		return &CmpExpr{Path: path, Op: flipOp(op), Lit: lit}, nil
	}
	path, err := p.path()
	if err != nil {
		return nil, err
	}
	if p.keyword("IN") {
		return p.inList(path)
	}
	op, ok := p.cmpOp()
	if !ok {
		return nil, p.errf("expected a comparison operator or IN after %s, found %s", strings.Join(path, "."), p.found())
	}
	lit, err := p.literal()
	if err != nil {
		return nil, err
	}
	return &CmpExpr{Path: path, Op: op, Lit: lit}, nil
}

func (p *qparser) function(name string) (Expr, error) {
	path, err := p.path()
	if err != nil {
		return nil, err
	}
	f := &FuncExpr{Name: name, Path: path}
	if name != "IS_DEFINED" {
		if !p.punct(",") {
			return nil, p.errf("expected ',' in %s, found %s", name, p.found())
		}
		if p.tok.kind != tString {
			return nil, p.errf("%s takes a string, found %s", name, p.found())
		}
		f.Arg = p.tok.text
		p.next()
	}
	if !p.punct(")") {
		return nil, p.errf("expected ')' after %s arguments, found %s", name, p.found())
	}
	return f, nil
}

func (p *qparser) inList(path []string) (Expr, error) {
	close := ""
	switch {
	case p.punct("["):
		close = "]"
	case p.punct("("):
		close = ")"
	default:
		return nil, p.errf("expected [ or ( after IN, found %s", p.found())
	}
	in := &InExpr{Path: path}
	for {
		lit, err := p.literal()
		if err != nil {
			return nil, err
		}
		in.Lits = append(in.Lits, lit)
		if len(in.Lits) > maxInList {
			return nil, p.errf("IN lists at most %d values", maxInList)
		}
		if p.punct(close) {
			return in, nil
		}
		if !p.punct(",") {
			return nil, p.errf("expected ',' or %q in the IN list, found %s", close, p.found())
		}
	}
}

func (p *qparser) cmpOp() (string, bool) {
	if p.tok.kind == tPunct {
		switch op := p.tok.text; op {
		case "=", "!=", "<>", "<", ">", "<=", ">=":
			p.next()
			if op == "<>" {
				op = "!="
			}
			return op, true
		}
	}
	return "", false
}

func flipOp(op string) string {
	switch op {
	case "<":
		return ">"
	case ">":
		return "<"
	case "<=":
		return ">="
	case ">=":
		return "<="
	}
	return op
}

func (p *qparser) literal() (Literal, error) {
	t := p.tok
	switch t.kind {
	case tString:
		p.next()
		return Literal{node{kind: KindString, str: t.text}}, nil
	case tNumber:
		p.next()
		f, err := strconv.ParseFloat(t.text, 64)
		if err != nil {
			return Literal{}, errf(StatusBadRequest, CodeBadQuery, "query: at %d: bad number %s", t.pos+1, t.text)
		}
		if f == 0 {
			f = 0
		}
		return Literal{node{kind: KindNumber, num: f}}, nil
	case tIdent:
		switch strings.ToLower(t.text) {
		case "true":
			p.next()
			return Literal{node{kind: KindTrue}}, nil
		case "false":
			p.next()
			return Literal{node{kind: KindFalse}}, nil
		case "null":
			p.next()
			return Literal{node{kind: KindNull}}, nil
		}
	}
	return Literal{}, p.errf("expected a literal (string, number, true, false, null), found %s", p.found())
}

func sprintf(format string, args ...any) string { return fmt.Sprintf(format, args...) }

type qtokKind uint8

const (
	tEOF qtokKind = iota
	tError
	tIdent
	tString
	tNumber
	tPunct
)

type qtoken struct {
	kind qtokKind
	text string
	pos  int
}

// qlexer splits a query into tokens: names (letters, digits, _ and $,
// not starting with a digit), strings in single or double quotes (a
// doubled quote or a backslash escapes), numbers, and punctuation.
type qlexer struct {
	s string
	i int
}

func (l *qlexer) next() qtoken {
	for l.i < len(l.s) && strings.IndexByte(" \t\r\n", l.s[l.i]) >= 0 {
		l.i++
	}
	if l.i >= len(l.s) {
		return qtoken{kind: tEOF, pos: l.i}
	}
	start := l.i
	c := l.s[l.i]
	switch {
	case isNameStart(c):
		for l.i < len(l.s) && (isNameStart(l.s[l.i]) || l.s[l.i] >= '0' && l.s[l.i] <= '9') {
			l.i++
		}
		return qtoken{kind: tIdent, text: l.s[start:l.i], pos: start}
	case c == '\'' || c == '"':
		return l.str(c)
	case c >= '0' && c <= '9' || c == '-' && l.i+1 < len(l.s) && l.s[l.i+1] >= '0' && l.s[l.i+1] <= '9':
		l.i++
		for l.i < len(l.s) && (l.s[l.i] >= '0' && l.s[l.i] <= '9' || l.s[l.i] == '.' ||
			l.s[l.i] == 'e' || l.s[l.i] == 'E' || (l.s[l.i] == '+' || l.s[l.i] == '-') && (l.s[l.i-1] == 'e' || l.s[l.i-1] == 'E')) {
			l.i++
		}
		return qtoken{kind: tNumber, text: l.s[start:l.i], pos: start}
	}
	for _, op := range []string{"!=", "<>", "<=", ">=", "=", "<", ">", "*", ",", ".", "(", ")", "[", "]"} {
		if strings.HasPrefix(l.s[l.i:], op) {
			l.i += len(op)
			return qtoken{kind: tPunct, text: op, pos: start}
		}
	}
	r, _ := utf8.DecodeRuneInString(l.s[l.i:])
	l.i = len(l.s)
	return qtoken{kind: tError, text: "unexpected character " + strconv.QuoteRune(r), pos: start}
}

func isNameStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
}

func (l *qlexer) str(q byte) qtoken {
	start := l.i
	l.i++
	var b strings.Builder
	for l.i < len(l.s) {
		c := l.s[l.i]
		switch {
		case c == q && l.i+1 < len(l.s) && l.s[l.i+1] == q:
			b.WriteByte(q)
			l.i += 2
		case c == q:
			l.i++
			return qtoken{kind: tString, text: b.String(), pos: start}
		case c == '\\' && l.i+1 < len(l.s):
			b.WriteByte(l.s[l.i+1])
			l.i += 2
		default:
			b.WriteByte(c)
			l.i++
		}
	}
	l.i = len(l.s)
	return qtoken{kind: tError, text: "unterminated string", pos: start}
}
