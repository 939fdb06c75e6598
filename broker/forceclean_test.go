package broker

import (
	"fmt"
	"log/slog"
	"math"
	"regexp"
	"strings"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/internal/obs"
	"github.com/smartgo/smartgo/internal/testutil"
)

// Retention under disk pressure (usage above disk_force_clean_ratio,
// below the full mark), through the broker: without disk_force_clean an
// unexpired segment holding messages no consumer group has consumed is
// kept, and goes once the group's committed offset passes it; with it, the
// oldest segment goes anyway, and the messages lost are logged at WARN
// with their count and counted in
// smartgo_store_force_deleted_unconsumed_total (issue #16: 18-40% of the
// acknowledged messages were deleted unconsumed, logged at INFO).
func TestBrokerForceCleanOnlyWhenOptedIn(t *testing.T) {
	for _, force := range []bool{false, true} {
		t.Run(fmt.Sprintf("disk_force_clean=%v", force), func(t *testing.T) {
			var usage atomic.Value
			usage.Store(0.10)
			var logs testutil.LogBuffer
			b := testBroker(t, t.TempDir(), func(o *Options) {
				o.Logger = slog.New(slog.NewTextHandler(&logs, nil))
				o.Store.DiskUsage = func(string) (float64, error) { return usage.Load().(float64), nil }
				o.Store.CleanInterval = 50 * time.Millisecond
				o.Store.DiskForceClean = force
			})
			reg := obs.NewRegistry()
			reg.MustRegister(b.Collectors()...)
			ms, err := obs.Serve("127.0.0.1:0", reg, &obs.Health{}, nil)
			if err != nil {
				t.Fatal(err)
			}
			t.Cleanup(func() { ms.Close() })
			forced := func() float64 {
				return sample(scrapeMetrics(t, ms.Addr()), "smartgo_store_force_deleted_unconsumed_total")
			}
			if v := forced(); v != 0 {
				t.Fatalf("force-deleted before any write: %v", v)
			}
			// 1 MiB segments: 48 messages of 64 KiB fill about three.
			c := newTestClient(t, b.Addr())
			body := strings.Repeat("k", 64<<10)
			const n = 48
			for range n {
				c.mustSend("Kept", 0, body, "")
			}
			st := b.Store()
			testutil.WaitFor(t, 10*time.Second, "", func() bool { return st.MaxOffset("Kept", 0) == n })
			usage.Store(0.87)
			if !force {
				testutil.WaitFor(t, 10*time.Second, "", func() bool { return strings.Contains(logs.String(), "holds unconsumed messages; not deleted") })
				// Retention ran under pressure and kept everything.
				if min := st.MinOffset("Kept", 0); min != 0 || st.MinPhysicalOffset() != 0 {
					t.Fatalf("unconsumed messages deleted without disk_force_clean: queue min %d", min)
				}
				r, err := st.GetMessages("Kept", 0, 0, 1, nil)
				if err != nil || len(r.Buffers) != 1 {
					t.Fatalf("first message not readable: %v %v", r.Status, err)
				}
				r.Release()
				// The group consumed everything: the segments may go now.
				commitOffset(t, c, "g", "Kept", 0, n)
				testutil.WaitFor(t, 10*time.Second, "", func() bool { return st.MinPhysicalOffset() > 0 })
				if v := forced(); v != 0 {
					t.Fatalf("consumed messages counted as force-deleted: %v", v)
				}
				if strings.Contains(logs.String(), "unconsumed messages are lost") {
					t.Fatalf("consumed segment logged as losing messages:\n%s", logs.String())
				}
				return
			}
			testutil.WaitFor(t, 10*time.Second, "", func() bool { v := forced(); return !math.IsNaN(v) && v > 0 })
			usage.Store(0.10)
			// Every message deleted unconsumed is in the counter and in the
			// WARN lines' counts (retention may have taken more than one
			// segment before the disk went back below the mark).
			warn := regexp.MustCompile(`level=WARN msg="store: unexpired segment deleted to free disk space; its unconsumed messages are lost".* unconsumed=(\d+)`)
			var logged, lost int64
			var counted float64
			testutil.WaitFor(t, 10*time.Second, "", func() bool {
				logged = 0
				for _, m := range warn.FindAllStringSubmatch(logs.String(), -1) {
					var k int64
					_, _ = fmt.Sscan(m[1], &k)
					logged += k
				}
				lost, counted = st.MinOffset("Kept", 0), forced()
				return logged > 0 && float64(logged) == counted && logged == lost
			})
			if lost <= 0 || lost >= n {
				t.Fatalf("%d of %d messages force-deleted (logged %d, counted %v)", lost, n, logged, counted)
			}
			if _, err := st.ReadMessage(0); err == nil {
				t.Fatal("the first message is still readable after its segment was force-deleted")
			}
		})
	}
}
