package broker

import (
	"fmt"
	"io"
	"log/slog"
	"math"
	"net/http"
	"strings"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/obs"
	"github.com/smartgo/smartgo/internal/testutil"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
)

// scrapeMetrics returns the /metrics page of a monitoring server.
func scrapeMetrics(t *testing.T, addr string) string {
	t.Helper()
	resp, err := http.Get("http://" + addr + "/metrics")
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, err := io.ReadAll(resp.Body)
	if err != nil {
		t.Fatal(err)
	}
	return string(text)
}

// sample returns the value of one series line (name with labels as
// printed) of a /metrics page, NaN when absent.
func sample(page, series string) float64 {
	for line := range strings.Lines(page) {
		if rest, ok := strings.CutPrefix(line, series+" "); ok {
			var v float64
			if _, err := fmt.Sscan(rest, &v); err == nil {
				return v
			}
		}
	}
	return math.NaN()
}

// TestBrokerStoreEventsReachMetricsAndLogs: the broker is the store's
// event Listener. Rolled segments and the disk filling and freeing are
// counted by kind in smartgo_store_events_total on /metrics and logged,
// writes_refused and /readyz follow the disk, and a Listener the
// broker's user set still hears every event.
func TestBrokerStoreEventsReachMetricsAndLogs(t *testing.T) {
	var usage atomic.Value
	usage.Store(0.10)
	var logs testutil.LogBuffer
	var mu sync.Mutex
	heard := map[store.EventKind]int{}
	b := testBroker(t, t.TempDir(), func(o *Options) {
		o.Logger = slog.New(slog.NewTextHandler(&logs, &slog.HandlerOptions{Level: slog.LevelDebug}))
		o.Store.DiskUsage = func(string) (float64, error) { return usage.Load().(float64), nil }
		o.Store.Listener = func(ev store.Event) {
			mu.Lock()
			heard[ev.Kind]++
			mu.Unlock()
		}
	})
	reg := obs.NewRegistry()
	reg.MustRegister(b.Collectors()...)
	var health obs.Health
	health.Add("broker", b.Ready)
	ms, err := obs.Serve("127.0.0.1:0", reg, &health, nil)
	if err != nil {
		t.Fatal(err)
	}
	t.Cleanup(func() { ms.Close() })
	heardOf := func(k store.EventKind) int {
		mu.Lock()
		defer mu.Unlock()
		return heard[k]
	}
	rolled := `smartgo_store_events_total{kind="segment-rolled"}`
	if v := sample(scrapeMetrics(t, ms.Addr()), rolled); !math.IsNaN(v) && v != 0 {
		t.Fatalf("segments rolled before any write: %v", v)
	}

	// 1 MiB segments: 24 messages of 64 KiB roll at least one.
	c := newTestClient(t, b.Addr())
	body := strings.Repeat("x", 64<<10)
	for range 24 {
		c.mustSend("Rolled", 0, body, "")
	}
	testutil.WaitFor(t, 5*time.Second, "", func() bool { return sample(scrapeMetrics(t, ms.Addr()), rolled) >= 1 })
	if n := heardOf(store.EventSegmentRolled); n < 1 {
		t.Fatalf("the user's listener heard %d segment rolls", n)
	}
	if !strings.Contains(logs.String(), "commitlog segment rolled") {
		t.Fatalf("no log of the rolled segment:\n%s", logs.String())
	}
	if code, _ := getStatus(t, ms.Addr(), "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz before the disk fills: %d", code)
	}

	// The disk fills: counted, refused, not ready; then it frees.
	usage.Store(0.95)
	testutil.WaitFor(t, 5*time.Second, "", func() bool {
		page := scrapeMetrics(t, ms.Addr())
		return sample(page, `smartgo_store_events_total{kind="disk-full"}`) == 1 && sample(page, `smartgo_store_writes_refused{reason="disk-full"}`) == 1
	})
	if code, text := getStatus(t, ms.Addr(), "/readyz"); code != http.StatusServiceUnavailable || !strings.Contains(text, "refuses writes") {
		t.Fatalf("/readyz with the disk full: %d %q", code, text)
	}
	if r := c.send("Rolled", 0, "refused", ""); r.Code == protocol.Success {
		t.Fatal("a send with the disk full succeeded")
	}
	usage.Store(0.10)
	testutil.WaitFor(t, 5*time.Second, "", func() bool {
		page := scrapeMetrics(t, ms.Addr())
		return sample(page, `smartgo_store_events_total{kind="disk-ok"}`) == 1 && sample(page, `smartgo_store_writes_refused{reason="disk-full"}`) == 0
	})
	if code, _ := getStatus(t, ms.Addr(), "/readyz"); code != http.StatusOK {
		t.Fatalf("/readyz after the disk freed: %d", code)
	}
	if heardOf(store.EventDiskFull) != 1 || heardOf(store.EventDiskOK) != 1 {
		t.Fatalf("the user's listener heard %v", heard)
	}
	c.mustSend("Rolled", 0, "accepted again", "")
}

func getStatus(t *testing.T, addr, path string) (int, string) {
	t.Helper()
	resp, err := http.Get("http://" + addr + path)
	if err != nil {
		t.Fatal(err)
	}
	defer resp.Body.Close()
	text, _ := io.ReadAll(resp.Body)
	return resp.StatusCode, string(text)
}
