package filter

import (
	"fmt"
	"strings"
)

// tokKind is the kind of a lexical token.
type tokKind uint8

const (
	tEOF tokKind = iota
	tIdent
	tString
	tInt
	tFloat
	tNot
	tAnd
	tOr
	tBetween
	tIn
	tTrue
	tFalse
	tNull
	tIs
	tEq     // =
	tNe     // <>
	tGt     // >
	tGe     // >=
	tLt     // <
	tLe     // <=
	tLParen // (
	tRParen // )
	tComma  // ,
	tPlus   // +
	tMinus  // -
)

var tokNames = [...]string{tEOF: "end of selector", tIdent: "identifier", tString: "string", tInt: "integer",
	tFloat: "float", tNot: "NOT", tAnd: "AND", tOr: "OR", tBetween: "BETWEEN", tIn: "IN", tTrue: "TRUE",
	tFalse: "FALSE", tNull: "NULL", tIs: "IS", tEq: "'='", tNe: "'<>'", tGt: "'>'", tGe: "'>='", tLt: "'<'",
	tLe: "'<='", tLParen: "'('", tRParen: "')'", tComma: "','", tPlus: "'+'", tMinus: "'-'"}

func (k tokKind) String() string { return tokNames[k] }

var keywords = map[string]tokKind{"NOT": tNot, "AND": tAnd, "OR": tOr, "BETWEEN": tBetween, "IN": tIn,
	"TRUE": tTrue, "FALSE": tFalse, "NULL": tNull, "IS": tIs}

// token is one lexical token: its kind, its text (the decoded value for a
// string, the image for numbers and identifiers) and its byte offset.
type token struct {
	kind tokKind
	text string
	pos  int
}

// lex splits src into tokens, ending with tEOF.
func lex(src string) ([]token, error) {
	var out []token
	i := 0
	for {
		i = skipSpace(src, i)
		if i < 0 {
			return nil, syntaxErr(len(src), "unterminated /* comment")
		}
		if i >= len(src) {
			return append(out, token{kind: tEOF, pos: i}), nil
		}
		c := src[i]
		start := i
		switch {
		case isIdentStart(c):
			for i < len(src) && isIdentPart(src[i]) {
				i++
			}
			word := src[start:i]
			if k, ok := keywords[strings.ToUpper(word)]; ok {
				out = append(out, token{kind: k, text: word, pos: start})
			} else {
				out = append(out, token{kind: tIdent, text: word, pos: start})
			}
		case c >= '0' && c <= '9' || c == '.' && i+1 < len(src) && src[i+1] >= '0' && src[i+1] <= '9':
			t, next, err := lexNumber(src, i)
			if err != nil {
				return nil, err
			}
			out = append(out, t)
			i = next
		case c == '\'':
			s, next, err := lexString(src, i)
			if err != nil {
				return nil, err
			}
			out = append(out, token{kind: tString, text: s, pos: start})
			i = next
		default:
			k, n := punct(src[i:])
			if n == 0 {
				return nil, syntaxErr(i, fmt.Sprintf("unexpected character %q", rune(c)))
			}
			out = append(out, token{kind: k, text: src[i : i+n], pos: start})
			i += n
		}
	}
}

// skipSpace skips blanks and comments from i; -1 means an unterminated
// block comment.
func skipSpace(src string, i int) int {
	for i < len(src) {
		switch c := src[i]; {
		case c == ' ' || c == '\t' || c == '\n' || c == '\r' || c == '\f':
			i++
		case strings.HasPrefix(src[i:], "--"):
			j := strings.IndexAny(src[i:], "\r\n")
			if j < 0 {
				return len(src)
			}
			i += j
		case strings.HasPrefix(src[i:], "/*"):
			j := strings.Index(src[i+2:], "*/")
			if j < 0 {
				return -1
			}
			i += j + 4
		default:
			return i
		}
	}
	return i
}

func isIdentStart(c byte) bool {
	return c >= 'a' && c <= 'z' || c >= 'A' && c <= 'Z' || c == '_' || c == '$'
}

func isIdentPart(c byte) bool { return isIdentStart(c) || c >= '0' && c <= '9' }

func isDigit(c byte) bool { return c >= '0' && c <= '9' }

// lexNumber reads an integer or float literal at i.
func lexNumber(src string, i int) (token, int, error) {
	start := i
	for i < len(src) && isDigit(src[i]) {
		i++
	}
	intEnd := i
	float := false
	if i < len(src) && src[i] == '.' {
		float = true
		i++
		for i < len(src) && isDigit(src[i]) {
			i++
		}
	}
	if i < len(src) && (src[i] == 'e' || src[i] == 'E') {
		j := i + 1
		if j < len(src) && (src[j] == '+' || src[j] == '-') {
			j++
		}
		if j < len(src) && isDigit(src[j]) {
			for j < len(src) && isDigit(src[j]) {
				j++
			}
			float, i = true, j
		}
	}
	if float {
		return token{kind: tFloat, text: src[start:i], pos: start}, i, nil
	}
	if intEnd-start > 1 && src[start] == '0' {
		return token{}, 0, syntaxErr(start, fmt.Sprintf("integer %q has a leading zero", src[start:intEnd]))
	}
	if i < len(src) && (src[i] == 'l' || src[i] == 'L') && src[start] != '0' {
		i++
	}
	return token{kind: tInt, text: src[start:i], pos: start}, i, nil
}

// lexString reads a quoted string at i (” inside is one quote) and
// returns its value.
func lexString(src string, i int) (string, int, error) {
	start := i
	i++
	var sb strings.Builder
	for {
		j := strings.IndexByte(src[i:], '\'')
		if j < 0 {
			return "", 0, syntaxErr(start, "unterminated string literal")
		}
		sb.WriteString(src[i : i+j])
		i += j + 1
		if i < len(src) && src[i] == '\'' {
			sb.WriteByte('\'')
			i++
			continue
		}
		return sb.String(), i, nil
	}
}

// punct recognises an operator or punctuation at the start of s.
func punct(s string) (tokKind, int) {
	if len(s) >= 2 {
		switch s[:2] {
		case "<>":
			return tNe, 2
		case ">=":
			return tGe, 2
		case "<=":
			return tLe, 2
		}
	}
	switch s[0] {
	case '=':
		return tEq, 1
	case '>':
		return tGt, 1
	case '<':
		return tLt, 1
	case '(':
		return tLParen, 1
	case ')':
		return tRParen, 1
	case ',':
		return tComma, 1
	case '+':
		return tPlus, 1
	case '-':
		return tMinus, 1
	}
	return 0, 0
}
