package cluster

import (
	"context"
	"fmt"
	"slices"
	"strconv"
	"sync"
	"sync/atomic"
	"testing"
	"time"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client/statestore/router"
	twc "github.com/smartgo/smartgo/client/twin"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/statestore"
)

// twinBenchDevices and twinBenchWorkers shape BenchmarkClusterTwinRoundTrips.
const (
	twinBenchDevices = 1000
	twinBenchWorkers = 32
	twinBenchRounds  = 6
)

// twinBenchEnv is one broker (async flush) hosting both the state store
// and the twins, with a router and a twin client over loopback remoting.
type twinBenchEnv struct {
	ss  *router.Router
	twc *twc.Client
}

func newTwinBenchEnv(b *testing.B) *twinBenchEnv {
	b.Helper()
	c, err := Start(context.Background(), Options{Dir: b.TempDir(), LargeFiles: true,
		Broker: func(i int, o *broker.Options) { o.Store.SegmentSize = 256 << 20 }})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = c.Close() })
	ss, err := broker.OpenStateStore(c.Broker(0), broker.StateStoreOptions{SnapshotInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	tw, err := broker.OpenTwins(c.Broker(0), broker.TwinOptions{SnapshotInterval: time.Hour})
	if err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = tw.Close(); _ = ss.Close() })
	ctx, cancel := context.WithTimeout(context.Background(), 10*time.Second)
	defer cancel()
	if err := c.WaitRoute(ctx, twc.SystemTopic); err != nil {
		b.Fatal(err)
	}
	if err := c.WaitRoute(ctx, router.SystemTopic); err != nil {
		b.Fatal(err)
	}
	e := &twinBenchEnv{}
	if e.ss, err = router.New(router.Options{Registries: c.RegistryAddrs()}); err != nil {
		b.Fatal(err)
	}
	if e.twc, err = twc.New(twc.Options{Registries: c.RegistryAddrs()}); err != nil {
		b.Fatal(err)
	}
	b.Cleanup(func() { _ = e.ss.Close(); _ = e.twc.Close() })
	for i := 0; i < twinBenchDevices; i++ {
		id := "dev-" + strconv.Itoa(i)
		if _, err := e.twc.CreateDevice(ctx, &twc.Device{DeviceID: id}); err != nil {
			b.Fatal(err)
		}
		if _, err := e.twc.PatchReported(ctx, id, "", []byte(`{"temp":21.5,"seq":0}`), 0); err != nil {
			b.Fatal(err)
		}
		if err := e.ssDo(ctx, "SET", id, `{"temp":21.5,"seq":0}`); err != nil {
			b.Fatal(err)
		}
	}
	return e
}

// ssDo sends one state store command through the router.
func (e *twinBenchEnv) ssDo(ctx context.Context, args ...string) error {
	bs := make([][]byte, len(args))
	for i, a := range args {
		bs[i] = []byte(a)
	}
	req := &protocol.StateStoreRequest{ClientID: "bench", Timestamp: statestore.HLC{Wall: time.Now().UnixMilli(), Node: "bench"}.String(),
		HasTimestamp: true, Payload: statestore.AppendRequest(nil, bs...)}
	resp, err := e.ss.Invoke(ctx, bs[1], req)
	if err != nil {
		return err
	}
	if len(resp.Reply) > 0 && resp.Reply[0] == '-' {
		return fmt.Errorf("state store: %q", resp.Reply)
	}
	return nil
}

// latencies collects per-operation latencies of the workers.
type latencies struct {
	mu sync.Mutex
	d  []time.Duration
}

func (l *latencies) pct(p float64) time.Duration {
	l.mu.Lock()
	defer l.mu.Unlock()
	if len(l.d) == 0 {
		return 0
	}
	slices.Sort(l.d)
	return l.d[min(len(l.d)-1, int(p*float64(len(l.d))))]
}

// runOps runs n operations over twinBenchWorkers goroutines (operation i
// on device i mod twinBenchDevices) and returns the wall time.
func runOps(b *testing.B, n int, lat *latencies, op func(ctx context.Context, i int) error) time.Duration {
	var next atomic.Int64
	var wg sync.WaitGroup
	start := time.Now()
	for w := 0; w < twinBenchWorkers; w++ {
		wg.Add(1)
		go func() {
			defer wg.Done()
			local := make([]time.Duration, 0, n/twinBenchWorkers+1)
			for {
				i := int(next.Add(1)) - 1
				if i >= n {
					break
				}
				t0 := time.Now()
				if err := op(context.Background(), i); err != nil {
					b.Error(err)
					return
				}
				local = append(local, time.Since(t0))
			}
			lat.mu.Lock()
			lat.d = append(lat.d, local...)
			lat.mu.Unlock()
		}()
	}
	wg.Wait()
	return time.Since(start)
}

// BenchmarkClusterTwinRoundTrips measures twin round trips through the
// Go API against a real broker over loopback (32 concurrent callers on
// 1,000 twins): a device's properties GET and a reported PATCH, next to
// the state store's own GET and SET of a value of the same size on the
// same broker, interleaved in rounds so load on a shared machine hits
// both alike. ratio = twin rate / state store rate.
func BenchmarkClusterTwinRoundTrips(b *testing.B) {
	e := newTwinBenchEnv(b)
	cases := []struct {
		name     string
		base, op func(ctx context.Context, i int) error
	}{
		{"get",
			func(ctx context.Context, i int) error {
				return e.ssDo(ctx, "GET", "dev-"+strconv.Itoa(i%twinBenchDevices))
			},
			func(ctx context.Context, i int) error {
				_, err := e.twc.GetProperties(ctx, "dev-"+strconv.Itoa(i%twinBenchDevices), "")
				return err
			}},
		{"patch-reported",
			func(ctx context.Context, i int) error {
				return e.ssDo(ctx, "SET", "dev-"+strconv.Itoa(i%twinBenchDevices), `{"temp":21.5,"seq":`+strconv.Itoa(i)+`}`)
			},
			func(ctx context.Context, i int) error {
				_, err := e.twc.PatchReported(ctx, "dev-"+strconv.Itoa(i%twinBenchDevices), "", []byte(`{"temp":21.5,"seq":`+strconv.Itoa(i)+`}`), 0)
				return err
			}},
	}
	for _, c := range cases {
		b.Run(c.name, func(b *testing.B) {
			var baseLat, oursLat latencies
			var baseT, oursT time.Duration
			b.ResetTimer()
			for r := 0; r < twinBenchRounds; r++ {
				k := b.N / twinBenchRounds
				if r == twinBenchRounds-1 {
					k = b.N - k*(twinBenchRounds-1)
				}
				if k == 0 {
					continue
				}
				b.StopTimer()
				baseT += runOps(b, k, &baseLat, c.base)
				b.StartTimer()
				oursT += runOps(b, k, &oursLat, c.op)
			}
			b.StopTimer()
			oursRate, baseRate := float64(b.N)/oursT.Seconds(), float64(b.N)/baseT.Seconds()
			b.ReportMetric(oursRate, "twin-ops/s")
			b.ReportMetric(baseRate, "statestore-ops/s")
			b.ReportMetric(oursRate/baseRate, "ratio")
			b.ReportMetric(float64(oursLat.pct(0.5).Microseconds()), "p50-µs")
			b.ReportMetric(float64(oursLat.pct(0.99).Microseconds()), "p99-µs")
			b.ReportMetric(float64(baseLat.pct(0.5).Microseconds()), "base-p50-µs")
			b.ReportMetric(float64(baseLat.pct(0.99).Microseconds()), "base-p99-µs")
		})
	}
}

// BenchmarkClusterTwinQuery measures queries through the Go API over the
// eight shards of one broker holding 10,000 twins: an indexed tag
// equality (100 twins match, one page), a scan whose predicate matches
// nothing (every twin evaluated), and a GROUP BY counted on every shard.
func BenchmarkClusterTwinQuery(b *testing.B) {
	e := newTwinBenchEnv(b)
	ctx := context.Background()
	const fleet = 10_000
	for i := twinBenchDevices; i < fleet; i++ {
		if _, err := e.twc.CreateDevice(ctx, &twc.Device{DeviceID: "dev-" + strconv.Itoa(i)}); err != nil {
			b.Fatal(err)
		}
	}
	for i := 0; i < fleet; i++ {
		tags := fmt.Sprintf(`{"tags":{"region":"r%d","building":"b%d"}}`, i%10, i/100)
		if _, err := e.twc.UpdateTwin(ctx, "dev-"+strconv.Itoa(i), "", []byte(tags), ""); err != nil {
			b.Fatal(err)
		}
	}
	for _, q := range []struct{ name, q string }{
		{"indexed-tag", "SELECT * FROM devices WHERE tags.building = 'b7'"},
		{"scan-nomatch", "SELECT * FROM devices WHERE properties.reported.temp = -1"},
		{"groupby-all", "SELECT tags.region, COUNT() AS n FROM devices GROUP BY tags.region"},
	} {
		b.Run(q.name+"/n=10000", func(b *testing.B) {
			for b.Loop() {
				if _, err := e.twc.Query(ctx, q.q, twc.QueryOptions{}); err != nil {
					b.Fatal(err)
				}
			}
		})
	}
}
