package controller

import (
	"fmt"
	"log/slog"
	"strings"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
)

// TestControllerRaftLogsFormatted: raft's lines that carry a formatted
// value (hclog.Fmt, as its "initial configuration" does with the servers
// of a replica that restarts) reach the log formatted, not as the raw
// format string and its arguments.
func TestControllerRaftLogsFormatted(t *testing.T) {
	var logs testutil.LogBuffer
	rs := startReplicas(t, 1, func(o *Options) { o.Logger = slog.New(slog.NewTextHandler(&logs, nil)) })
	rs.leader()
	rs.stop(0)
	rs.start(0)
	var line string
	testutil.Eventually(t, 10*time.Second, func() error {
		n := 0
		for l := range strings.SplitSeq(logs.String(), "\n") {
			if strings.Contains(l, "initial configuration") {
				n, line = n+1, l
			}
		}
		if n < 2 {
			return fmt.Errorf("%d \"initial configuration\" lines, want 2 (start and restart)", n)
		}
		return nil
	})
	if strings.Contains(line, "%") || !strings.Contains(line, rs.opts[0].RaftAddr) {
		t.Fatalf("raft's servers are not formatted (want %s in them):\n%s", rs.opts[0].RaftAddr, line)
	}
}
