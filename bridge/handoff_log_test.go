package bridge

import (
	"context"
	"log/slog"
	"strings"
	"sync"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/mqtt"
)

// warnings is a slog.Handler that keeps the messages of WARN records and
// above.
type warnings struct {
	mu   sync.Mutex
	msgs []string
}

func (w *warnings) Enabled(_ context.Context, l slog.Level) bool { return l >= slog.LevelWarn }
func (w *warnings) Handle(_ context.Context, r slog.Record) error {
	w.mu.Lock()
	defer w.mu.Unlock()
	w.msgs = append(w.msgs, r.Message)
	return nil
}
func (w *warnings) WithAttrs([]slog.Attr) slog.Handler { return w }
func (w *warnings) WithGroup(string) slog.Handler      { return w }

func (w *warnings) containing(s string) []string {
	w.mu.Lock()
	defer w.mu.Unlock()
	var out []string
	for _, m := range w.msgs {
		if strings.Contains(m, s) {
			out = append(out, m)
		}
	}
	return out
}

// TestBridgeOldConnectRequestReplayedQuietly: a node that starts after
// another node's clients connected, longer ago than a handoff is waited
// for, replays their connect requests. It holds nothing of those clients
// and has no handoff to give, so it warns about none of them. Before, it
// logged "connect request answered too late for a handoff" for each, at
// every start.
func TestBridgeOldConnectRequestReplayedQuietly(t *testing.T) {
	c := startCluster(t)
	const handoff = 200 * time.Millisecond
	a := startBridge(t, c, func(_ *mqtt.Options, o *Options) { o.HandoffTimeout = handoff })
	persistent(t, addrOf(a), "old-1", false)
	persistent(t, addrOf(a), "old-2", true)
	connectedAt := time.Now()
	// The requests must be older than the handoff window when the new
	// node reads them: time itself is the condition here.
	testutil.WaitFor(t, time.Minute, "the connect requests older than the handoff window", func() bool {
		return time.Since(connectedAt) > 2*handoff
	})
	w := &warnings{}
	startBridge(t, c, func(_ *mqtt.Options, o *Options) {
		o.HandoffTimeout = handoff
		o.Logger = slog.New(w)
	}) // Start returns once the node has replayed the session records
	if got := w.containing("too late for a handoff"); len(got) > 0 {
		t.Fatalf("a fresh node warned %d times about handoffs it never owed: %q", len(got), got)
	}
}
