package filter

import (
	"errors"
	"slices"
	"strings"
	"testing"

	"github.com/smartgo/smartgo/store/record"
)

// encode builds a record properties string from pairs.
func encode(pairs ...string) []byte {
	var p record.Properties
	for i := 0; i+1 < len(pairs); i += 2 {
		p.Set(pairs[i], pairs[i+1])
	}
	return []byte(p.String())
}

func toMap(pairs ...string) map[string]string {
	m := map[string]string{}
	for i := 0; i+1 < len(pairs); i += 2 {
		m[pairs[i]] = pairs[i+1]
	}
	return m
}

func TestFilterEvaluate(t *testing.T) {
	msg := []string{"a", "7", "b", "2.5", "s", "eu", "flag", "true", "TAGS", "TagA", "neg", "-3", "word", "abc"}
	cases := []struct {
		expr string
		want Result
		err  bool // the evaluation fails (conversion)
	}{
		{"a > 5", True, false},
		{"a > 7", False, false},
		{"a >= 7", True, false},
		{"a < 7.5", True, false},
		{"a <= 6", False, false},
		{"a = 7", True, false},
		{"a = 7.0", True, false},
		{"a = '7'", True, false},
		{"a <> 7", False, false},
		{"7 = a", True, false},
		{"b > 2", True, false}, // 2.5 against an integer: compared as floats
		{"b = 2", False, false},
		{"b = 2.5", True, false},
		{"b > a", False, false}, // two strings compare as numbers
		{"a > b", True, false},
		{"neg < 0", True, false},
		{"neg = -3", True, false},
		{"-a = -7", Unknown, false}, // minus of a string property is NULL, as in RocketMQ
		{"a = -(-7)", True, false},
		{"+a = 7", True, false},
		{"s = 'eu'", True, false},
		{"s = 'us'", False, false},
		{"s <> 'us'", True, false},
		{"s IN ('eu', 'us')", True, false},
		{"s NOT IN ('eu', 'us')", False, false},
		{"s IN ('x')", False, false},
		{"missing IN ('x')", Unknown, false},
		{"missing NOT IN ('x')", Unknown, false},
		{"TAGS = 'TagA'", True, false},
		{"TAGS IN ('TagB', 'TagA')", True, false},
		{"flag = TRUE", True, false},
		{"flag = FALSE", False, false},
		{"flag", False, false}, // a property alone is never TRUE
		{"missing", Unknown, false},
		{"TRUE", True, false},
		{"FALSE", False, false},
		{"NULL", Unknown, false},
		{"NOT TRUE", False, false},
		{"NOT missing", Unknown, false},
		{"a BETWEEN 1 AND 7", True, false},
		{"a BETWEEN 8 AND 9", False, false},
		{"a NOT BETWEEN 8 AND 9", True, false},
		{"a NOT BETWEEN 1 AND 9", False, false},
		{"missing BETWEEN 1 AND 2", Unknown, false},
		{"missing IS NULL", True, false},
		{"a IS NULL", False, false},
		{"a IS NOT NULL", True, false},
		{"missing IS NOT NULL", False, false},
		{"missing = 1", Unknown, false},
		{"missing > 1", Unknown, false},
		{"1 = missing", False, false}, // x = NULL is FALSE, NULL = x unknown
		{"missing = 1 OR a = 7", True, false},
		{"missing = 1 AND a = 7", Unknown, false},
		{"missing = 1 AND a = 8", False, false},
		{"missing = 1 OR a = 8", Unknown, false},
		{"NOT (missing = 1 OR a = 8)", Unknown, false},
		{"NOT (a = 8)", True, false},
		{"NOT a = 7", False, false}, // (NOT a) = 7: a boolean is never 7
		{"a > 5 AND s IN ('eu','us') AND TAGS IS NOT NULL", True, false},
		{"(a > 100 OR s = 'eu') AND NOT (b > 3)", True, false},
		{"word = 5", Unknown, true}, // 'abc' does not convert
		{"word = 5 OR TRUE", Unknown, true},
		{"TRUE OR word = 5", True, false}, // decided before the bad side
		{"word > 'x'", Unknown, true},     // strings compare only as numbers... but the literal is refused at compile
		{"a > 1e0", True, false},
		{"a = 7L", True, false},
		{"b > .5", True, false},
		{"flag = 'true'", True, false},
		{"-- comment\n a = 7", True, false},
		{"/* c */ a /* d */ = 7", True, false},
		{"a = 7 -- trailing comment", True, false},
		{"s = 'it''s'", False, false},
		{"s iN ('eu') aNd a Is NoT nUlL", True, false},
		{"$x IS NULL AND _y IS NULL", True, false},
	}
	for _, c := range cases {
		e, err := Compile(c.expr)
		if c.expr == "word > 'x'" {
			if err == nil {
				t.Errorf("%q compiled; a string literal cannot be compared with >", c.expr)
			}
			continue
		}
		if err != nil {
			t.Errorf("Compile(%q): %v", c.expr, err)
			continue
		}
		got, err := e.Evaluate(toMap(msg...))
		if (err != nil) != c.err || got != c.want {
			t.Errorf("%q = %v, %v; want %v, error %v", c.expr, got, err, c.want, c.err)
		}
		// Match over the record encoding agrees with the map.
		if m := e.Match(encode(msg...)); m != (got == True && err == nil) {
			t.Errorf("%q: Match = %v, Evaluate = %v, %v", c.expr, m, got, err)
		}
		// The canonical form means the same.
		e2, err2 := Compile(e.String())
		if err2 != nil {
			t.Errorf("%q: its String %q does not compile: %v", c.expr, e.String(), err2)
			continue
		}
		if e2.String() != e.String() {
			t.Errorf("%q: String %q recompiles to %q", c.expr, e.String(), e2.String())
		}
	}
}

func TestFilterCompileErrors(t *testing.T) {
	bad := map[string]string{
		"":                         "empty",
		"   ":                      "empty",
		"a >":                      "expected",
		"a > 5 AND":                "expected",
		"(a > 5":                   "expected ')'",
		"a > 5)":                   "end of the selector",
		"a = 'x":                   "unterminated string",
		"a = 1 /* x":               "unterminated /*",
		"a == 1":                   "expected",
		"a != 1":                   "unexpected character",
		"a > 'x'":                  "cannot be compared",
		"a BETWEEN 'a' AND 'b'":    "cannot be compared",
		"a BETWEEN 5 AND 1":        "low bound",
		"a BETWEEN NULL AND 1":     "cannot be NULL",
		"a > TRUE":                 "cannot be compared",
		"(a = 1) > 2":              "cannot be compared",
		"a = NULL":                 "IS NULL",
		"TRUE = 1":                 "cannot be compared",
		"5":                        "boolean value",
		"'x'":                      "boolean value",
		"a = 1 AND 5":              "boolean value",
		"NOT 5":                    "boolean value",
		"-a":                       "boolean value",
		"1 IN ('a')":               "IN needs a property",
		"a IN ()":                  "expected string",
		"a IN (1, 2)":              "expected string",
		"a IN ('x',)":              "expected string",
		"a = 05":                   "leading zero",
		"a = 0L":                   "expected",
		"a = 99999999999999999999": "64 bits",
		"a = 1e999":                "out of range",
		"a LIKE 'x%'":              "expected",
		"a = 1 b = 2":              "expected",
		"a.b = 1":                  "unexpected character",
		"a IS 5":                   "expected NULL",
		"a ☃ 1":                    "unexpected character",
		"a = 1 AND (b = 2":         "expected ')'",
	}
	for src, want := range bad {
		_, err := Compile(src)
		if err == nil {
			t.Errorf("Compile(%q) succeeded; want an error containing %q", src, want)
			continue
		}
		if !errors.Is(err, ErrSyntax) {
			t.Errorf("Compile(%q): %v does not wrap ErrSyntax", src, err)
		}
		var se *SyntaxError
		if !errors.As(err, &se) || se.Offset < 0 || se.Offset > len(src) {
			t.Errorf("Compile(%q): %v has no offset within the selector", src, err)
		}
		if !strings.Contains(err.Error(), want) {
			t.Errorf("Compile(%q) = %q; want it to mention %q", src, err, want)
		}
	}
}

// An empty property value does not survive the record encoding (Java's
// parser drops it), so a record sees it as missing; a map keeps it.
func TestFilterEmptyValue(t *testing.T) {
	e, err := Compile("e IS NULL")
	if err != nil {
		t.Fatal(err)
	}
	if !e.Match([]byte("e\x01\x02a\x017")) {
		t.Error("an empty value in a record is not NULL")
	}
	if e.MatchMap(map[string]string{"e": ""}) {
		t.Error("an empty value in a map is NULL")
	}
}

func TestFilterLimits(t *testing.T) {
	deep := strings.Repeat("(", MaxDepth+1) + "a = 1" + strings.Repeat(")", MaxDepth+1)
	if _, err := Compile(deep); err == nil || !strings.Contains(err.Error(), "nested deeper") {
		t.Errorf("deep nesting: %v", err)
	}
	ok := strings.Repeat("(", MaxDepth-1) + "a = 1" + strings.Repeat(")", MaxDepth-1)
	if _, err := Compile(ok); err != nil {
		t.Errorf("nesting within the limit: %v", err)
	}
	nots := strings.Repeat("NOT ", MaxDepth+1) + "TRUE"
	if _, err := Compile(nots); err == nil {
		t.Error("a long NOT chain compiled")
	}
	long := "a = '" + strings.Repeat("x", MaxLength) + "'"
	if _, err := Compile(long); err == nil || !strings.Contains(err.Error(), "longer than") {
		t.Errorf("long selector: %v", err)
	}
	// A long AND chain is flat, not deep.
	chain := "a = 1" + strings.Repeat(" AND a = 1", 2000)
	e, err := Compile(chain)
	if err != nil {
		t.Fatal(err)
	}
	if !e.MatchMap(map[string]string{"a": "1"}) {
		t.Error("long chain does not match")
	}
}

func TestFilterTagCodes(t *testing.T) {
	cases := []struct {
		expr string
		tags []string
		ok   bool
	}{
		{"TAGS = 'a'", []string{"a"}, true},
		{"'a' = TAGS", []string{"a"}, true},
		{"TAGS IN ('b', 'a', 'b')", []string{"a", "b"}, true},
		{"TAGS = 'a' AND x > 1", []string{"a"}, true},
		{"x > 1 AND TAGS IN ('a','b')", []string{"a", "b"}, true},
		{"TAGS = 'a' OR TAGS = 'b'", []string{"a", "b"}, true},
		{"TAGS IN ('a','b') AND TAGS IN ('b','c')", []string{"b"}, true},
		{"TAGS = 'a' AND TAGS = 'b'", nil, true}, // nothing matches
		{"TAGS = 'a' OR x > 1", nil, false},
		{"TAGS <> 'a'", nil, false},
		{"TAGS NOT IN ('a')", nil, false},
		{"NOT (TAGS = 'a')", nil, false},
		{"TAGS = 5", nil, false},
		{"x > 1", nil, false},
		{"tags = 'a'", nil, false}, // property names are case-sensitive
	}
	for _, c := range cases {
		e, err := Compile(c.expr)
		if err != nil {
			t.Fatalf("%q: %v", c.expr, err)
		}
		tags, ok := e.Tags()
		if ok != c.ok || !slices.Equal(tags, c.tags) {
			t.Errorf("%q: Tags = %v, %v; want %v, %v", c.expr, tags, ok, c.tags, c.ok)
		}
		codes, _ := e.TagCodes()
		if len(codes) != len(c.tags) {
			t.Errorf("%q: %d codes for %d tags", c.expr, len(codes), len(c.tags))
		}
		for _, tag := range c.tags {
			if !slices.Contains(codes, record.TagsHash(tag)) {
				t.Errorf("%q: codes %v lack the hash of %q", c.expr, codes, tag)
			}
		}
	}
}

// The tag set is a sound first cut: a message whose tag is outside it
// never matches.
func TestFilterTagCutIsSound(t *testing.T) {
	exprs := []string{"TAGS = 'a' AND x > 1", "TAGS IN ('a','b') OR (TAGS = 'c' AND x = 2)", "x = 2 AND TAGS = 'b'"}
	for _, src := range exprs {
		e, err := Compile(src)
		if err != nil {
			t.Fatal(err)
		}
		tags, ok := e.Tags()
		if !ok {
			t.Fatalf("%q has no tag set", src)
		}
		for _, tag := range []string{"a", "b", "c", "d", ""} {
			for _, x := range []string{"1", "2", "3"} {
				m := map[string]string{"x": x}
				if tag != "" {
					m["TAGS"] = tag
				}
				if e.MatchMap(m) && !slices.Contains(tags, tag) {
					t.Errorf("%q matches tag %q outside its set %v", src, tag, tags)
				}
			}
		}
	}
}

func TestFilterMatchDoesNotAllocate(t *testing.T) {
	e, err := Compile("a > 5 AND s IN ('eu','us') AND TAGS IS NOT NULL AND b BETWEEN 1 AND 3")
	if err != nil {
		t.Fatal(err)
	}
	raw := encode("a", "7", "s", "us", "TAGS", "t", "b", "2")
	if !e.Match(raw) {
		t.Fatal("no match")
	}
	if n := testing.AllocsPerRun(100, func() { e.Match(raw) }); n != 0 {
		t.Errorf("Match allocates %v times", n)
	}
}

func BenchmarkFilterMatch(b *testing.B) {
	e, err := Compile("a > 5 AND region IN ('eu','us') AND TAGS IS NOT NULL")
	if err != nil {
		b.Fatal(err)
	}
	raw := encode("TAGS", "t", "KEYS", "k1 k2", "a", "7", "region", "us", "UNIQ_KEY", "7F0000010F2A18B4AAC27A9B5B9A0000", "CLUSTER", "DefaultCluster")
	b.ReportAllocs()
	for b.Loop() {
		if !e.Match(raw) {
			b.Fatal("no match")
		}
	}
}
