package main

import (
	"bytes"
	"context"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/cluster"
)

// The example produces and consumes against a real (in-process) cluster.
func TestExampleQuickstartRuns(t *testing.T) {
	ctx, cancel := context.WithTimeout(context.Background(), 60*time.Second)
	defer cancel()
	c, err := cluster.Start(ctx, cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	var out bytes.Buffer
	if err := run(ctx, c.RegistryAddrs()[0], &out); err != nil {
		t.Fatalf("run: %v\n%s", err, out.String())
	}
	if !regexp.MustCompile(`(?s)^sent [0-9A-F]+ to broker-a queue \d+\nreceived "hello, SmartGo" \(key \[order-1\]\)\n$`).MatchString(out.String()) {
		t.Fatalf("output:\n%s", out.String())
	}
}

// The README shows exactly the code of run, so what it shows compiles and
// works.
func TestExampleQuickstartInReadme(t *testing.T) {
	src, err := os.ReadFile("main.go")
	if err != nil {
		t.Fatal(err)
	}
	_, code, _ := strings.Cut(string(src), "// README:begin\n")
	code, _, _ = strings.Cut(code, "\n// README:end")
	readme, err := os.ReadFile(filepath.Join("..", "..", "README.md"))
	if err != nil {
		t.Fatal(err)
	}
	if len(code) < 200 || !strings.Contains(string(readme), "```go\n"+strings.TrimSpace(code)+"\n```") {
		t.Fatalf("README.md does not show run from examples/quickstart/main.go verbatim in a go block:\n%s", code)
	}
}
