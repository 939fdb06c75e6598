package testnet

import (
	"crypto/sha256"
	"encoding/hex"
	"fmt"
	"os"
	"os/exec"
	"path/filepath"
	"sync"
	"testing"
)

var (
	binMu    sync.Mutex
	binBuilt = map[string]string{} // module root -> binary; protected by binMu
)

// SmartgoBinary builds cmd/smartgo of the main module at moduleRoot (a
// path relative to the test's directory, such as "../..") once per test
// binary and returns the path of the executable. It is built in the main
// module, with its go.sum, also when the caller is another module.
//
// The executable lives in one directory per module root under the temp
// directory (smartgo-test-bin-<hash of the root>), so repeated test runs
// reuse it instead of leaving a fresh 25 MB copy behind each time (a test
// binary has no hook that runs at its exit). Each build writes a file of
// its own and renames it into place: test binaries of several packages
// build at once, and a process already started from the old file keeps
// it.
func SmartgoBinary(t testing.TB, moduleRoot string) string {
	t.Helper()
	root, err := filepath.Abs(moduleRoot)
	if err != nil {
		t.Fatal(err)
	}
	binMu.Lock()
	defer binMu.Unlock()
	if bin, ok := binBuilt[root]; ok {
		return bin
	}
	sum := sha256.Sum256([]byte(root))
	dir := filepath.Join(os.TempDir(), "smartgo-test-bin-"+hex.EncodeToString(sum[:6]))
	if err := os.MkdirAll(dir, 0o755); err != nil {
		t.Fatal(err)
	}
	tmp, err := os.CreateTemp(dir, "smartgo-*.tmp")
	if err != nil {
		t.Fatal(err)
	}
	_ = tmp.Close()
	cmd := exec.Command("go", "build", "-o", tmp.Name(), "./cmd/smartgo")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		_ = os.Remove(tmp.Name())
		t.Fatal(fmt.Errorf("go build smartgo in %s: %v\n%s", root, err, out))
	}
	bin := filepath.Join(dir, "smartgo")
	if err := os.Rename(tmp.Name(), bin); err != nil {
		_ = os.Remove(tmp.Name())
		t.Fatal(fmt.Errorf("install test binary: %w", err))
	}
	binBuilt[root] = bin
	return bin
}
