package filter

import (
	"errors"
	"testing"
)

// FuzzFilterCompile feeds arbitrary text to Compile. It must return an
// expression or an ErrSyntax error, never panic or hang; a compiled
// expression evaluates without panicking on any properties, its String
// compiles to the same String, and Match agrees with MatchMap.
func FuzzFilterCompile(f *testing.F) {
	for _, s := range []string{
		"a > 5 AND region IN ('eu','us') AND TAGS IS NOT NULL",
		"a BETWEEN 1 AND 3 OR NOT (b = 'x')",
		"a NOT BETWEEN -1.5 AND 2e3",
		"x IS NULL", "TRUE", "NOT NULL", "-- c\n a = 1", "/* x */ a <> 'it''s'",
		"(((a = 1)))", "a = 9223372036854775807", "a = .5", "a = 5L", "$b = TRUE",
		"a IN ('x') AND TAGS = 'y' OR TAGS IN ('z')",
	} {
		f.Add(s, "7", "eu")
	}
	f.Fuzz(func(t *testing.T, src, a, region string) {
		e, err := Compile(src)
		if err != nil {
			if !errors.Is(err, ErrSyntax) {
				t.Fatalf("Compile(%q): %v does not wrap ErrSyntax", src, err)
			}
			return
		}
		s := e.String()
		e2, err := Compile(s)
		if err != nil {
			t.Fatalf("Compile(%q) ok, its String %q fails: %v", src, s, err)
		}
		if e2.String() != s {
			t.Fatalf("String %q recompiles to %q", s, e2.String())
		}
		m := map[string]string{"a": a, "region": region, "TAGS": region, "b": a}
		raw := encode("a", a, "region", region, "TAGS", region, "b", a)
		if valid(a) && valid(region) && a != "" && region != "" && e.Match(raw) != e.MatchMap(m) {
			t.Fatalf("%q: Match and MatchMap disagree on %v", src, m)
		}
		if e.MatchMap(m) != e2.MatchMap(m) {
			t.Fatalf("%q and its String %q disagree on %v", src, s, m)
		}
		_, _ = e.Evaluate(nil)
		_, _ = e.TagCodes()
	})
}

// valid reports whether a value can travel in a properties string.
func valid(s string) bool {
	for i := 0; i < len(s); i++ {
		if s[i] == 1 || s[i] == 2 {
			return false
		}
	}
	return true
}
