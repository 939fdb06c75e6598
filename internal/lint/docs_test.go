package lint

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
	"sort"
	"strings"
	"testing"
)

var (
	mdLink   = regexp.MustCompile(`\]\(([^)\s]+)\)`)
	codeSpan = regexp.MustCompile("`([^`\n]+)`")
	repoPath = regexp.MustCompile(`^[a-z][a-z0-9_]*(/[A-Za-z0-9_.-]+)*\.(go|md|toml)$`)
	testName = regexp.MustCompile(`^(Test|Fuzz|Benchmark)[A-Z][A-Za-z0-9_]*$`)
)

// TestLintDocs keeps the project's own documentation (README.md and
// docs/) honest: it never points outside the repository (a clone has no
// ../shared), every relative link and every file path it names exists,
// and every test it names as pinning a format exists.
func TestLintDocs(t *testing.T) {
	root := moduleRoot(t)
	docs := []string{filepath.Join(root, "README.md")}
	more, _ := filepath.Glob(filepath.Join(root, "docs", "*.md"))
	docs = append(docs, more...)
	if len(more) < 3 {
		t.Fatalf("docs/ holds %d pages, want at least architecture, formats and protocols", len(more))
	}
	funcs := map[string]bool{}
	err := filepath.WalkDir(root, func(p string, d fs.DirEntry, err error) error {
		if err != nil || d.IsDir() || !strings.HasSuffix(p, ".go") {
			return err
		}
		b, err := os.ReadFile(p)
		if err != nil {
			return err
		}
		for _, m := range regexp.MustCompile(`(?m)^func ((?:Test|Fuzz|Benchmark)\w+)\(`).FindAllSubmatch(b, -1) {
			funcs[string(m[1])] = true
		}
		return nil
	})
	if err != nil {
		t.Fatal(err)
	}
	for _, doc := range docs {
		b, err := os.ReadFile(doc)
		if err != nil {
			t.Fatal(err)
		}
		text := string(b)
		rel, _ := filepath.Rel(root, doc)
		if strings.Contains(text, "../shared") || strings.Contains(text, "shared/docs") {
			t.Errorf("%s points at ../shared, which a clone of the project does not have", rel)
		}
		for _, m := range mdLink.FindAllStringSubmatch(text, -1) {
			target := m[1]
			if strings.Contains(target, "://") || strings.HasPrefix(target, "#") || strings.HasPrefix(target, "mailto:") {
				continue
			}
			target, _, _ = strings.Cut(target, "#")
			if _, err := os.Stat(filepath.Join(filepath.Dir(doc), target)); err != nil {
				t.Errorf("%s: broken link %q", rel, m[1])
			}
		}
		for _, m := range codeSpan.FindAllStringSubmatch(text, -1) {
			s := m[1]
			switch {
			case repoPath.MatchString(s):
				if _, err := os.Stat(filepath.Join(root, s)); err != nil {
					t.Errorf("%s: names %s, which does not exist", rel, s)
				}
			case testName.MatchString(s):
				if !funcs[s] {
					t.Errorf("%s: names %s, which no test file defines", rel, s)
				}
			}
		}
	}
}

// TestLintArchitectureDoc keeps the package table of docs/architecture.md
// equal to the import table above: the same rows, each allowing the same
// imports ("nothing" for none). Rows of internal/..., examples/... and
// cmd/... follow rules of their own and are not compared.
func TestLintArchitectureDoc(t *testing.T) {
	b, err := os.ReadFile(filepath.Join(moduleRoot(t), "docs", "architecture.md"))
	if err != nil {
		t.Fatal(err)
	}
	_, section, _ := strings.Cut(string(b), "\n## Packages\n")
	section, _, _ = strings.Cut(section, "\n## ")
	rows := map[string][]string{}
	for _, line := range strings.Split(section, "\n") {
		cells := strings.Split(line, "|")
		if len(cells) != 5 || !strings.HasPrefix(strings.TrimSpace(cells[1]), "`") {
			continue
		}
		name := codeSpan.FindStringSubmatch(cells[1])[1]
		if strings.HasPrefix(name, "internal/") || strings.HasPrefix(name, "cmd/") {
			continue
		}
		name = strings.TrimSuffix(name, "/...")
		var imports []string
		for _, m := range codeSpan.FindAllStringSubmatch(cells[3], -1) {
			imports = append(imports, m[1])
		}
		sort.Strings(imports)
		rows[name] = imports
	}
	if len(rows) < 10 {
		t.Fatalf("found %d rows in the Packages table of docs/architecture.md", len(rows))
	}
	for name, want := range allowed {
		got, ok := rows[name]
		if !ok {
			t.Errorf("package %s has a row in internal/lint but none in docs/architecture.md", name)
			continue
		}
		w := append([]string(nil), want...)
		sort.Strings(w)
		if strings.Join(got, ",") != strings.Join(w, ",") {
			t.Errorf("docs/architecture.md lets %s import %v, internal/lint %v", name, got, w)
		}
	}
	for name := range rows {
		if _, ok := allowed[name]; !ok {
			t.Errorf("docs/architecture.md has a row for %s, internal/lint none", name)
		}
	}
}
