package testnet

import (
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
	dir, err := os.MkdirTemp("", "smartgo-test-bin")
	if err != nil {
		t.Fatal(err)
	}
	bin := filepath.Join(dir, "smartgo")
	cmd := exec.Command("go", "build", "-o", bin, "./cmd/smartgo")
	cmd.Dir = root
	if out, err := cmd.CombinedOutput(); err != nil {
		t.Fatal(fmt.Errorf("go build smartgo in %s: %v\n%s", root, err, out))
	}
	binBuilt[root] = bin
	return bin
}
