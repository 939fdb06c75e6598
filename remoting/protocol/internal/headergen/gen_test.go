package headergen

import (
	"strings"
	"testing"
)

func TestHeadergenRejectsBadTables(t *testing.T) {
	for name, h := range map[string][]Header{
		"duplicate type":               {{Type: "A", Fields: []Field{{Go: "X", Key: "x", Kind: Str}}}, {Type: "A"}},
		"duplicate key":                {{Type: "A", Fields: []Field{{Go: "X", Key: "x", Kind: Str}, {Go: "Y", Key: "x", Kind: I32}}}},
		"no kind":                      {{Type: "A", Fields: []Field{{Go: "X", Key: "x"}}}},
		"Has on a string":              {{Type: "A", Fields: []Field{{Go: "X", Key: "x", Kind: Str, Has: "HasX"}}}},
		"bad condition":                {{Type: "A", Fields: []Field{{Go: "X", Key: "x", Kind: Str, If: "h.X !="}}}},
		"direct, conditional required": {{Type: "A", Direct: true, Fields: []Field{{Go: "X", Key: "x", Kind: Str, Req: "h.Y"}}}},
		"direct, key to escape":        {{Type: "A", Direct: true, Fields: []Field{{Go: "X", Key: "x\"", Kind: Str}}}},
	} {
		if _, err := Generate(h); err == nil {
			t.Errorf("%s: no error", name)
		}
	}
}

// The rules of the table, as the generated code states them.
func TestHeadergenRules(t *testing.T) {
	src, err := Generate([]Header{{Type: "H", Fields: []Field{
		{Go: "A", Key: "a", Kind: Str, Req: Required},
		{Go: "B", Key: "b", Kind: Str},
		{Go: "C", Key: "c", Kind: Str, Always: true},
		{Go: "D", Key: "d", Kind: I32, Has: "HasD"},
		{Go: "E", Key: "e", Kind: Bool, If: "h.E"},
		{Go: "F", Key: "f", Kind: I64, Req: "h.A != \"\""},
		{Go: "G", Key: "g", Kind: Bool, Has: "HasG"},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	for _, want := range []string{
		"EncodeFields implements HeaderEncoder: a!, b, c, d, e, f, g.",
		`f["a"] = h.A`, `putOptStr(f, "b", h.B)`, `f["c"] = h.C`,
		"if h.HasD {\n\t\tputI32(f, \"d\", h.D)\n\t}", "if h.E {\n\t\tputBool(f, \"e\", h.E)\n\t}", `putI64(f, "f", h.F)`,
		`r := fieldReader{f: f, hdr: "H"}`, `h.A = r.str("a", true)`, `h.B = r.str("b", false)`,
		`h.D, h.HasD = r.optI32("d")`, `h.E = r.boolean("e", false)`, `h.F = r.i64("f", h.A != "")`,
		`h.G, h.HasG = r.optBool("g")`, "if h.HasG {\n\t\tputBool(f, \"g\", h.G)\n\t}",
	} {
		if !strings.Contains(string(src), want) {
			t.Errorf("generated code lacks %q:\n%s", want, src)
		}
	}
	if strings.Contains(string(src), "numFields") {
		t.Error("numFields for a header of 6 fields")
	}
}

// A Direct header's generated decoder and writer, as the generated code
// states them: required keys as a mask, keys written in sorted order.
func TestHeadergenDirect(t *testing.T) {
	src, err := Generate([]Header{{Type: "H", Direct: true, Fields: []Field{
		{Go: "B", Key: "b", Kind: Str, Req: Required},
		{Go: "A", Key: "a", Kind: I32, Has: "HasA"},
		{Go: "C", Key: "c", Kind: Bool, Req: Required},
	}}})
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for _, want := range []string{
		"func (h *H) decodeFieldList(l fieldList) bool {",
		"h.A, ok = parseI32(it.val)\n\t\t\th.HasA = true",
		"return ok && seen == 0x5",
		"func (h *H) appendJSONFields(dst []byte) []byte {",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("generated code lacks %q:\n%s", want, s)
		}
	}
	if a, b := strings.Index(s, "`\"a\":`"), strings.Index(s, "`\"b\":`"); a < 0 || b < 0 || a > b {
		t.Errorf("keys not written in order:\n%s", s)
	}
}

// A Shaped header also gets setListField, one member at a time with its
// required bit, and listRequired; a Direct header that is not Shaped does
// not.
func TestHeadergenShaped(t *testing.T) {
	fields := []Field{
		{Go: "B", Key: "b", Kind: Str, Req: Required},
		{Go: "A", Key: "a", Kind: I32, Has: "HasA"},
		{Go: "C", Key: "c", Kind: Bool, Req: Required},
	}
	src, err := Generate([]Header{{Type: "H", Direct: true, Shaped: true, Fields: fields}})
	if err != nil {
		t.Fatal(err)
	}
	s := string(src)
	for _, want := range []string{
		"func (h *H) setListField(key, val string) (seen uint64, ok bool) {",
		"case \"b\":\n\t\th.B = val\n\t\tseen = 1 << 0",
		"h.A, ok = parseI32(val)\n\t\th.HasA = true",
		"case \"c\":\n\t\th.C = parseBool(val)\n\t\tseen = 1 << 2",
		"func (h *H) listRequired() uint64 { return 0x5 }",
	} {
		if !strings.Contains(s, want) {
			t.Errorf("generated code lacks %q:\n%s", want, s)
		}
	}
	plain, err := Generate([]Header{{Type: "H", Direct: true, Fields: fields}})
	if err != nil {
		t.Fatal(err)
	}
	if strings.Contains(string(plain), "setListField") {
		t.Error("setListField for a header that is not Shaped")
	}
}

// An OwnWriter header gets its decoder but no appendJSONFields: the
// protocol package writes that one by hand.
func TestHeadergenOwnWriter(t *testing.T) {
	fields := []Field{{Go: "A", Key: "a", Kind: Str, Req: Required}}
	src, err := Generate([]Header{{Type: "H", Direct: true, OwnWriter: true, Fields: fields}})
	if err != nil {
		t.Fatal(err)
	}
	if s := string(src); strings.Contains(s, "appendJSONFields") || !strings.Contains(s, "decodeFieldList") {
		t.Fatalf("generated:\n%s", s)
	}
}
