package twin

import (
	"fmt"
	"runtime"
	"runtime/debug"
	"strconv"
	"sync"
	"syscall"
	"testing"
	"time"
)

// benchFleet builds (once per size) an engine holding n device twins
// shaped like a fleet's: tags {region (10 values), building (n/100
// values, so 100 twins each), type}, reported {fw (3 values, an index
// path), battery 0..99, temp}.
// It reports the heap the fleet holds per twin.
var benchFleets = struct {
	sync.Mutex
	m map[int]*Engine
	b map[int]float64 // heap bytes per twin
}{m: map[int]*Engine{}, b: map[int]float64{}}

func benchFleet(b *testing.B, n int) (*Engine, float64) {
	benchFleets.Lock()
	defer benchFleets.Unlock()
	if e, ok := benchFleets.m[n]; ok {
		return e, benchFleets.b[n]
	}
	for k := range benchFleets.m { // keep one fleet alive at a time
		delete(benchFleets.m, k)
	}
	runtime.GC()
	var before runtime.MemStats
	runtime.ReadMemStats(&before)
	e := mustEngine(b, Options{Rand: &counterReader{}, IndexPaths: []string{"properties.reported.fw"}})
	defer debug.SetGCPercent(debug.SetGCPercent(400))
	// The entries Prepare would build, applied through the engine's own
	// write paths (the JSON and entry codecs are measured elsewhere).
	now := t0.UnixMilli()
	var out Outcome
	e.mu.Lock()
	for i := 0; i < n; i++ {
		id := fmt.Sprintf("device-%07d", i)
		p, s, g, _ := e.generate()
		e.putIdentityLocked(&logEntry{op: OpPutDevice, deviceID: id, genPrimary: p, genSecondary: s, generationID: g}, now, &out)
		tags := mustParse(b, fmt.Sprintf(`{"region":"r%d","building":"b%d","type":"sensor"}`, i%10, i/100))
		e.writeTwinLocked(&logEntry{op: OpUpdateTwin, deviceID: id, hasTags: true, tags: tags}, now, &out)
		rep := mustParse(b, fmt.Sprintf(`{"fw":"1.%d.0","battery":%d,"temp":%d.5}`, i%3, i%100, i%40))
		e.patchReportedLocked(&logEntry{op: OpPatchReported, deviceID: id, reported: rep}, now, &out)
		if out.Reply.Err != nil {
			b.Fatal(out.Reply.Err)
		}
		out = Outcome{}
	}
	e.mu.Unlock()
	runtime.GC()
	var after runtime.MemStats
	runtime.ReadMemStats(&after)
	per := float64(after.HeapAlloc-before.HeapAlloc) / float64(n)
	benchFleets.m[n], benchFleets.b[n] = e, per
	return e, per
}

func mustParse(b testing.TB, s string) node {
	v, err := parseJSON([]byte(s))
	if err != nil {
		b.Fatal(err)
	}
	return v
}

var benchSizes = []int{1_000, 10_000, 100_000, 1_000_000}

// cpuTime is the CPU time (user + system) the process used so far: on a
// shared machine it is steadier than the wall clock (the query runs on
// one goroutine, so cpu-µs/op is its own cost plus the GC's).
func cpuTime(b *testing.B) time.Duration {
	var ru syscall.Rusage
	if err := syscall.Getrusage(syscall.RUSAGE_SELF, &ru); err != nil {
		b.Fatal(err)
	}
	return time.Duration(ru.Utime.Nano() + ru.Stime.Nano())
}

// BenchmarkTwinQuery measures one query page (100 items) or one count
// over one shard of n twins (sizes above 10^4 only without -short):
//
//   - scan: a predicate on an unindexed property that matches nothing, so
//     every twin is evaluated; the baseline of each size;
//   - page-tag, page-prop: the first page of SELECT * on an indexed tag
//     (100 twins match) and on an index path (n/3 match);
//   - page-all: the first page of SELECT deviceId with no WHERE;
//   - count-tag: COUNT() of one indexed tag value, from the posting size;
//   - count-tag-and: COUNT() of an indexed tag AND a range, evaluated on
//     the tag's 100 twins;
//   - groupby-tag: GROUP BY an indexed tag, from the postings' sizes;
//   - groupby-scan: GROUP BY an unindexed property (every twin);
//   - page-range: the first page of SELECT * on an order comparison of an
//     indexed tag that 200 twins match (b0 to b1...: n/100 values to
//     compare, then the 200 keys sorted);
//   - count-range: COUNT() of the same, from the postings' sizes.
//
// vs-scan is the query's CPU time over the scan's at the same size.
func BenchmarkTwinQuery(b *testing.B) {
	queries := []struct{ name, q string }{
		{"scan", "SELECT * FROM devices WHERE properties.reported.battery = -1"},
		{"page-tag", "SELECT * FROM devices WHERE tags.building = 'b7'"},
		{"page-prop", "SELECT * FROM devices WHERE properties.reported.fw = '1.1.0'"},
		{"page-all", "SELECT deviceId FROM devices"},
		{"count-tag", "SELECT COUNT() AS n FROM devices WHERE tags.building = 'b7'"},
		{"count-tag-and", "SELECT COUNT() AS n FROM devices WHERE tags.building = 'b7' AND properties.reported.battery >= 50"},
		{"groupby-tag", "SELECT tags.region, COUNT() AS n FROM devices GROUP BY tags.region"},
		{"groupby-scan", "SELECT properties.reported.battery, COUNT() AS n FROM devices GROUP BY properties.reported.battery"},
		{"page-range", "SELECT * FROM devices WHERE tags.building < 'b10'"},
		{"count-range", "SELECT COUNT() AS n FROM devices WHERE tags.building < 'b10'"},
	}
	for _, n := range benchSizes {
		if testing.Short() && n > 10_000 {
			continue
		}
		var scanCPU float64
		for _, q := range queries {
			b.Run(fmt.Sprintf("%s/n=%d", q.name, n), func(b *testing.B) {
				e, per := benchFleet(b, n)
				req := &Request{Op: OpQuery, Body: []byte(q.q), Limit: 100}
				b.ResetTimer()
				cpu0 := cpuTime(b)
				for b.Loop() {
					if _, rep, _ := e.Prepare(req); rep.Err != nil {
						b.Fatal(rep.Err)
					}
				}
				cpu := float64((cpuTime(b) - cpu0).Microseconds()) / float64(b.N)
				if q.name == "scan" {
					scanCPU = cpu
				} else if scanCPU > 0 {
					b.ReportMetric(cpu/scanCPU, "vs-scan")
				}
				b.ReportMetric(cpu, "cpu-µs/op")
				b.ReportMetric(per, "heapB/twin")
			})
		}
	}
}

// BenchmarkTwinEngine measures the engine alone (no log): a reported
// patch (Prepare, Apply) and a device's properties GET, on a shard of
// 10^4 twins.
func BenchmarkTwinEngine(b *testing.B) {
	e, _ := benchFleet(b, 10_000)
	b.Run("patch-reported", func(b *testing.B) {
		i := 0
		for b.Loop() {
			id := "device-" + fmt.Sprintf("%07d", i%10_000)
			body := []byte(`{"battery":` + strconv.Itoa(i%100) + `,"temp":21.5}`)
			entry, rep, _ := e.Prepare(&Request{Op: OpPatchReported, DeviceID: id, Body: body})
			if entry == nil {
				b.Fatal(rep.Err)
			}
			if _, err := e.Apply(entry, t0.Add(time.Duration(i)*time.Millisecond)); err != nil {
				b.Fatal(err)
			}
			i++
		}
	})
	b.Run("get-properties", func(b *testing.B) {
		req := &Request{Op: OpGetProperties, DeviceID: "device-0000042"}
		for b.Loop() {
			if _, rep, _ := e.Prepare(req); rep.Err != nil {
				b.Fatal(rep.Err)
			}
		}
	})
	b.Run("get-twin", func(b *testing.B) {
		req := &Request{Op: OpGetTwin, DeviceID: "device-0000042"}
		for b.Loop() {
			if _, rep, _ := e.Prepare(req); rep.Err != nil {
				b.Fatal(rep.Err)
			}
		}
	})
}
