// Package datadriven runs script-driven tests: a script under testdata/
// holds cases, each a directive line, optional input lines, a line
// "----" and the expected output up to a blank line; lines starting with
// '#' between cases are comments. A test runs every case through its own
// interpreter and compares the output; with rewrite the script's expected
// blocks are regenerated instead (review the diff).
package datadriven

import (
	"fmt"
	"os"
	"path/filepath"
	"strings"
	"testing"
)

// Case is one case of a script.
type Case struct {
	Pos      string   // file:line of the directive
	Cmd      string   // the directive line
	Input    []string // lines between the directive and "----"
	Expected string   // the expected output, each line ending in "\n"

	outStart, outEnd int // line range of the expected block, for rewriting
}

// Args splits a directive into its name, its key=value arguments and the
// other words.
func (c *Case) Args() (name string, kv map[string]string, pos []string) {
	f := strings.Fields(c.Cmd)
	kv = map[string]string{}
	for _, a := range f[1:] {
		if k, v, ok := strings.Cut(a, "="); ok {
			kv[k] = v
		} else {
			pos = append(pos, a)
		}
	}
	return f[0], kv, pos
}

// RunFile runs every case of the script at path through run, in order,
// and reports each output that differs from the expected one. With
// rewrite it writes the outputs back into the script instead.
func RunFile(t *testing.T, path string, rewrite bool, run func(c *Case) string) {
	t.Helper()
	data, err := os.ReadFile(path)
	if err != nil {
		t.Fatal(err)
	}
	lines := strings.Split(string(data), "\n")
	cases, err := parse(path, lines)
	if err != nil {
		t.Fatal(err)
	}
	var out []string
	last := 0
	for i := range cases {
		c := &cases[i]
		got := run(c)
		if rewrite {
			out = append(out, lines[last:c.outStart]...)
			out = append(out, strings.Split(strings.TrimRight(got, "\n"), "\n")...)
			last = c.outEnd
			continue
		}
		if got != c.Expected {
			t.Errorf("%s: %s\n--- got:\n%s--- want:\n%s", c.Pos, c.Cmd, got, c.Expected)
		}
	}
	if rewrite {
		out = append(out, lines[last:]...)
		if err := os.WriteFile(path, []byte(strings.Join(out, "\n")), 0o644); err != nil {
			t.Fatal(err)
		}
	}
}

func parse(path string, lines []string) ([]Case, error) {
	var cases []Case
	for i := 0; i < len(lines); {
		l := strings.TrimSpace(lines[i])
		if l == "" || strings.HasPrefix(l, "#") {
			i++
			continue
		}
		c := Case{Pos: fmt.Sprintf("%s:%d", path, i+1), Cmd: l}
		i++
		for i < len(lines) && lines[i] != "----" {
			c.Input = append(c.Input, lines[i])
			i++
		}
		if i == len(lines) {
			return nil, fmt.Errorf("%s: no ---- after the directive", c.Pos)
		}
		i++
		c.outStart = i
		var exp strings.Builder
		for i < len(lines) && strings.TrimSpace(lines[i]) != "" {
			exp.WriteString(lines[i])
			exp.WriteByte('\n')
			i++
		}
		c.outEnd = i
		c.Expected = exp.String()
		cases = append(cases, c)
	}
	return cases, nil
}

// RunGlob runs every script matching pattern (for example
// "testdata/*.txt") as a subtest; newRun makes the interpreter of one
// script (a fresh state per file).
func RunGlob(t *testing.T, pattern string, rewrite bool, newRun func(t *testing.T) func(c *Case) string) {
	t.Helper()
	files, err := filepath.Glob(pattern)
	if err != nil || len(files) == 0 {
		t.Fatalf("no scripts match %s: %v", pattern, err)
	}
	for _, f := range files {
		t.Run(filepath.Base(f), func(t *testing.T) { RunFile(t, f, rewrite, newRun(t)) })
	}
}
