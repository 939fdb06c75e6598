// Package lint holds SmartGo's lint rules written as Go tests, so that
// `go test ./...` enforces them.
package lint

import (
	"bufio"
	"bytes"
	"os/exec"
	"path/filepath"
	"runtime"
	"sort"
	"strings"
	"testing"
)

const module = "github.com/smartgo/smartgo"

// allowed is the import table of docs/architecture.md: a package
// may import only the in-module packages its row names (and its own
// subpackages never upward). internal/... packages may be imported by
// anyone below cmd; cmd/... may import anything.
var allowed = map[string][]string{
	"conf":                {},
	"store/record":        {},
	"remoting/protocol":   {"store/record"},
	"statestore":          {},
	"twin":                {},
	"remoting":            {"remoting/protocol"},
	"store":               {"store/record"},
	"store/ha":            {"store", "store/record"},
	"registry":            {"remoting", "remoting/protocol"},
	"controller":          {"remoting", "remoting/protocol"},
	"filter":              {"store/record"},
	"broker":              {"store", "store/ha", "store/record", "remoting", "remoting/protocol", "statestore", "twin", "filter"},
	"client":              {"remoting", "remoting/protocol", "store/record", "statestore", "twin"},
	"mqtt":                {},
	"amqp":                {},
	"bridge":              {"mqtt", "amqp", "client", "statestore", "twin", "bridge/iothub/amqp1"},
	"bridge/iothub/amqp1": {},
	"benchmark":           {"client", "store", "mqtt"},
	"console":             {"client"}, // client and client/admin
	"examples":            {"client"},
}

// owner maps a package path (relative to the module) to its row: the
// longest row name that is the package itself or a parent of it, so that
// client/admin belongs to client and store/internal/x to store.
func owner(rel string) (string, bool) {
	best := ""
	for row := range allowed {
		if (rel == row || strings.HasPrefix(rel, row+"/")) && len(row) > len(best) {
			best = row
		}
	}
	return best, best != ""
}

func importAllowed(fromRel, toRel string) bool {
	if strings.HasPrefix(fromRel, "cmd/") {
		return true
	}
	if toRel == "internal/lint" {
		return false
	}
	if strings.HasPrefix(toRel, "internal/") {
		// Helpers are shared, but an internal package never reaches up
		// into the system's packages unless the table lets its importer.
		return !strings.HasPrefix(fromRel, "internal/") || !strings.HasPrefix(toRel, fromRel+"/")
	}
	if strings.HasPrefix(fromRel, "internal/") {
		// internal helpers (test harnesses) may use any system package
		// but never cmd.
		return !strings.HasPrefix(toRel, "cmd/")
	}
	from, ok := owner(fromRel)
	if !ok {
		return false
	}
	to, ok := owner(toRel)
	if !ok {
		return false
	}
	if from == to {
		return true
	}
	for _, a := range allowed[from] {
		if a == to {
			return true
		}
	}
	return false
}

// TestLintImportEdges lists every package of the module with its direct
// imports (test files included) and fails on an edge the architecture does
// not allow, and on a package that has no row in the table.
func TestLintImportEdges(t *testing.T) {
	root := moduleRoot(t)
	cmd := exec.Command("go", "list", "-e", "-f",
		`{{.ImportPath}}|{{join .Imports ","}},{{join .TestImports ","}},{{join .XTestImports ","}}`, "./...")
	cmd.Dir = root
	out, err := cmd.Output()
	if err != nil {
		t.Fatalf("go list: %v", err)
	}
	var bad []string
	seen := 0
	sc := bufio.NewScanner(bytes.NewReader(out))
	for sc.Scan() {
		path, imports, _ := strings.Cut(sc.Text(), "|")
		rel, ok := strings.CutPrefix(path, module+"/")
		if !ok {
			continue
		}
		seen++
		if _, known := owner(rel); !known && !strings.HasPrefix(rel, "cmd/") && !strings.HasPrefix(rel, "internal/") {
			bad = append(bad, rel+": package has no row in the import table (internal/lint/imports_test.go, docs/architecture.md)")
			continue
		}
		for _, imp := range strings.Split(imports, ",") {
			toRel, ok := strings.CutPrefix(imp, module+"/")
			if !ok || toRel == rel {
				continue
			}
			if !importAllowed(rel, toRel) {
				bad = append(bad, rel+" imports "+toRel)
			}
		}
	}
	if seen < 3 {
		t.Fatalf("go list found only %d packages; is the module root right (%s)?", seen, root)
	}
	sort.Strings(bad)
	for _, b := range bad {
		t.Errorf("forbidden import edge: %s", b)
	}
}

// TestLintImportTable checks the checker on known edges, so a bug in it
// cannot silently pass everything.
func TestLintImportTable(t *testing.T) {
	for _, c := range []struct {
		from, to string
		ok       bool
	}{
		{"broker", "store", true},
		{"broker", "registry", false},
		{"registry", "broker", false},
		{"store", "remoting/protocol", false},
		{"store", "store/record", true},
		{"store/record", "store", false},
		{"mqtt", "client", false},
		{"bridge", "mqtt", true},
		{"bridge", "broker", false},
		{"client/admin", "remoting", true},
		{"client/statestore", "statestore", true},
		{"conf", "store/record", false},
		{"store", "internal/fsutil", true},
		{"cmd/smartgo", "broker", true},
		{"internal/cluster", "broker", true},
		{"broker", "internal/lint", false},
		{"statestore", "store", false},
		{"store/ha", "store", true},
		{"store", "store/ha", false},
		{"store/ha", "remoting", false},
		{"broker", "store/ha", true},
	} {
		if got := importAllowed(c.from, c.to); got != c.ok {
			t.Errorf("importAllowed(%s -> %s) = %v, want %v", c.from, c.to, got, c.ok)
		}
	}
}

func moduleRoot(t *testing.T) string {
	t.Helper()
	_, file, _, ok := runtime.Caller(0)
	if !ok {
		t.Fatal("no caller info")
	}
	return filepath.Join(filepath.Dir(file), "..", "..")
}
