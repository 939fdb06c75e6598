package lint

import (
	"io/fs"
	"os"
	"path/filepath"
	"regexp"
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
