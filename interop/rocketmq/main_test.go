package rocketmq

import (
	"flag"
	"fmt"
	"os"
	"path/filepath"
	"strconv"
	"testing"

	"github.com/apache/rocketmq-client-go/v2/rlog"
)

// TestMain: without -v (CI's `make interop`), rocketmq-client-go's own
// log lines go to a file, not to stderr. There they buried which test
// failed: go test prints a failed test's lines when it ends, and the
// lines the client logged in the tests after it (the transactional ones
// log expected errors) filled the tail of CI's log. The file is removed
// after a run that passed; after one that failed, its path is printed.
// With -v, or RLOG_STDERR=1, the client logs to stderr as before.
func TestMain(m *testing.M) {
	flag.Parse()
	var path string
	if !testing.Verbose() && os.Getenv("RLOG_STDERR") == "" {
		path = filepath.Join(os.TempDir(), "smartgo-interop-rocketmq-client-"+strconv.Itoa(os.Getpid())+".log")
		if err := rlog.SetOutputPath(path); err != nil {
			path = ""
		}
	}
	code := m.Run()
	if path != "" {
		if code == 0 {
			_ = os.Remove(path)
		} else {
			fmt.Fprintf(os.Stderr, "rocketmq-client-go's log: %s\n", path)
		}
	}
	os.Exit(code)
}
