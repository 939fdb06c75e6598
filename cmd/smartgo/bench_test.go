package main

import (
	"context"
	"strings"
	"testing"

	"github.com/smartgo/smartgo/internal/cluster"
)

func TestCmdBenchE2E(t *testing.T) {
	c, err := cluster.Start(context.Background(), cluster.Options{Dir: t.TempDir()})
	if err != nil {
		t.Fatal(err)
	}
	defer c.Close()
	reg := strings.Join(c.RegistryAddrs(), ",")
	for _, mode := range []string{"produce", "e2e"} {
		code, stdout, stderr := runCmd(t, "bench", mode, "-registry", reg, "-count", "2000", "-duration", "30s", "-async", "-topic", "BenchT")
		if code != exitOK || !strings.Contains(stdout, "msgs/s") || !strings.Contains(stdout, "p99") {
			t.Fatalf("%s: exit %d\n%s\n%s", mode, code, stdout, stderr)
		}
		if mode == "e2e" && !strings.Contains(stdout, "2000 sent, 2000 received") {
			t.Fatalf("e2e did not receive everything: %s", stdout)
		}
	}
	if code, _, _ := runCmd(t, "bench", "sideways", "-registry", reg); code != exitFailure && code != exitUsage {
		t.Fatalf("bad mode: exit %d", code)
	}
}
