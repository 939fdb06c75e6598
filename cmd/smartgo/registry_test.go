package main

import (
	"context"
	"net"
	"os"
	"path/filepath"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// The registry runs until its context ends and stops cleanly; a taken port
// is a start failure with exit status 1.
func TestCmdRegistryRunsAndStops(t *testing.T) {
	dir := t.TempDir()
	kv := filepath.Join(dir, "kvConfig.json")
	ctx, cancel := context.WithCancel(context.Background())
	var out, errb testutil.LogBuffer
	done := make(chan int, 1)
	go func() {
		done <- run(ctx, []string{"registry", "-listen", "127.0.0.1:0", "-set", "registry.kv_config_path=" + kv}, &out, &errb)
	}()
	deadline := time.Now().Add(10 * time.Second)
	for !strings.Contains(errb.String(), "started") {
		if time.Now().After(deadline) {
			cancel()
			t.Fatalf("registry did not start: %s", errb.String())
		}
		time.Sleep(10 * time.Millisecond)
	}
	cancel()
	select {
	case code := <-done:
		if code != exitOK {
			t.Fatalf("exit %d: %s", code, errb.String())
		}
	case <-time.After(10 * time.Second):
		t.Fatal("registry did not stop")
	}

	ln, err := net.Listen("tcp", "127.0.0.1:0")
	if err != nil {
		t.Fatal(err)
	}
	defer ln.Close()
	var errb2 testutil.LogBuffer
	code := run(context.Background(), []string{"registry", "-listen", ln.Addr().String(), "-set", "registry.kv_config_path=" + kv}, &out, &errb2)
	if code != exitFailure || !strings.Contains(errb2.String(), ln.Addr().String()) {
		t.Fatalf("taken port: exit %d, stderr %q", code, errb2.String())
	}
	if _, err := os.Stat(dir); err != nil {
		t.Fatal(err)
	}
}
