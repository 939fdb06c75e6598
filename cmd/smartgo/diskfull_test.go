package main

import (
	"context"
	"io"
	"net/http"
	"os"
	"path/filepath"
	"regexp"
	"strings"
	"syscall"
	"testing"
	"time"

	"github.com/smartgo/smartgo/client"
	"github.com/smartgo/smartgo/registry"
)

// A broker whose disk is past its full mark (the marks set below what the
// test machine's disk already uses) starts, refuses writes, says so in
// /readyz, and still shuts down cleanly on SIGTERM: exit 0 and no abort
// file left behind, so the next start is a clean one (a refusing broker
// used to leave the abort file and force crash recovery).
func TestCmdBinaryBrokerSIGTERMWhileRefusingWrites(t *testing.T) {
	data := t.TempDir()
	skipUnlessDiskFullAt10(t, data)
	r := startTestRegistry(t)
	args := []string{"broker", "-data", data, "-listen", "127.0.0.1:0", "-registries", r.Addr().String(),
		"-set", "metrics.listen=127.0.0.1:0", "-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB",
		"-set", "store.disk_max_used_ratio=10", "-set", "store.disk_force_clean_ratio=10", "-set", "store.disk_full_ratio=10"}
	p := startBin(t, args...)
	p.waitLog(t, regexp.MustCompile(`disk full, refusing writes`), 60*time.Second)
	addr := p.waitLog(t, regexp.MustCompile(`metrics listening.* addr=(\S+)`), 30*time.Second)[1]
	p.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)
	if _, err := os.Stat(filepath.Join(data, "abort")); err != nil {
		t.Fatalf("no abort file while running: %v", err)
	}
	// /readyz answers "starting" until the broker's components are added.
	var code int
	var body string
	var took time.Duration
	for deadline := time.Now().Add(30 * time.Second); ; time.Sleep(50 * time.Millisecond) {
		code, body = readyz(t, addr)
		if code == http.StatusServiceUnavailable && strings.Contains(body, "refuses writes") {
			break
		}
		if time.Now().After(deadline) {
			t.Fatalf("/readyz while the disk is full: %d %q\n%s", code, body, p.stderr.String())
		}
	}
	code, took = p.stop(t, syscall.SIGTERM, 30*time.Second)
	if code != exitOK {
		t.Fatalf("exit %d after SIGTERM while refusing writes:\n%s", code, p.stderr.String())
	}
	if _, err := os.Stat(filepath.Join(data, "abort")); !os.IsNotExist(err) {
		t.Fatalf("abort file left behind by a SIGTERM while refusing writes (%v):\n%s", err, p.stderr.String())
	}
	t.Logf("stopped in %v", took.Round(time.Millisecond))
	// The next start finds a clean shutdown: no crash recovery.
	p = startBin(t, args...)
	rec := p.waitLog(t, regexp.MustCompile(`store: recovered.* abnormal=(\w+)`), 60*time.Second)
	if rec[1] != "false" {
		t.Fatalf("restart after SIGTERM recovered as after a crash:\n%s", p.stderr.String())
	}
	p.waitLog(t, regexp.MustCompile(`disk full, refusing writes`), 60*time.Second)
	if code, _ := p.stop(t, syscall.SIGTERM, 30*time.Second); code != exitOK {
		t.Fatalf("exit %d:\n%s", code, p.stderr.String())
	}
}

// skipUnlessDiskFullAt10 skips a test that sets the disk-full marks to
// their lowest, 10 %, when the disk under dir is not used beyond them.
func skipUnlessDiskFullAt10(t *testing.T, dir string) {
	t.Helper()
	var st syscall.Statfs_t
	if err := syscall.Statfs(dir, &st); err != nil {
		t.Fatal(err)
	}
	if used := 1 - float64(st.Bavail)/float64(st.Blocks); used < 0.12 {
		t.Skipf("the disk under %s is only %.0f%% used; the lowest full mark is 10%%", dir, used*100)
	}
}

func readyz(t *testing.T, addr string) (int, string) {
	t.Helper()
	return getPath(t, addr, "/readyz")
}

// getPath returns the status and body of GET http://addr/path.
func getPath(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	body, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(body)
}

// A broker whose configuration file, written for an older SmartGo, names
// a cluster of 120 characters (more than request-reply's 115) starts,
// says at start that its cluster has no request-reply topic, and
// registers with its registry. conf refused the name for a while, so the broker
// did not start after an upgrade.
func TestCmdBinaryBrokerLongClusterName(t *testing.T) {
	data := t.TempDir()
	r := startTestRegistry(t)
	cluster := strings.Repeat("c", 120)
	cfg := filepath.Join(data, "broker.toml")
	toml := "[broker]\ncluster = \"" + cluster + "\"\nregistries = [\"" + r.Addr().String() + "\"]\n"
	if err := os.WriteFile(cfg, []byte(toml), 0o644); err != nil {
		t.Fatal(err)
	}
	p := startBin(t, "broker", "-c", cfg, "-data", data, "-listen", "127.0.0.1:0",
		"-set", "metrics.listen=127.0.0.1:0", "-set", "store.segment_size=4MiB", "-set", "store.max_message_size=1MiB")
	p.waitLog(t, regexp.MustCompile(`no request-reply topic for this cluster name`), 30*time.Second)
	p.waitLog(t, regexp.MustCompile(`msg="registered with registry"`), 30*time.Second)
}

// testProducer starts a producer that finds brokers through registries,
// closed at cleanup.
func testProducer(t *testing.T, registries []string) *client.Producer {
	t.Helper()
	p, err := client.NewProducer(client.ProducerOptions{ClientOptions: client.ClientOptions{Registries: registries}})
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { p.Close() })
	return p
}

// startTestRegistry runs a registry in process on a free loopback port
// until cleanup.
func startTestRegistry(t *testing.T) *registry.Server {
	t.Helper()
	r, err := registry.New(registry.Options{Addr: "127.0.0.1:0"})
	if err != nil {
		t.Fatal(err)
	}
	if err := r.Start(context.Background()); err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { r.Close() })
	return r
}
