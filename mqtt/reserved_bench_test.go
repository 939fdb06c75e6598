package mqtt

import (
	"fmt"
	"testing"
	"time"
)

// BenchmarkMQTTMatchReserved measures what keeping reserved topics out of
// wildcard subscriptions costs the delivery path: subscription matching
// of an ordinary topic with the default reserved filters, against the
// same index with none (the baseline, measured in the same run), reported
// as ns/match of each and their ratio.
func BenchmarkMQTTMatchReserved(b *testing.B) {
	build := func(filters []string) *subIndex {
		srv := &Server{}
		x := &subIndex{res: newReservedSet(filters), count: &srv.stats.Subscriptions}
		for i := range 1000 {
			ss := &session{srv: srv, id: fmt.Sprint("c", i), seq: uint64(i + 1)}
			x.add(ss, &Subscription{Filter: fmt.Sprintf("dev/%d/#", i)})
			if i%100 == 0 {
				x.add(ss, &Subscription{Filter: "#"})
				x.add(ss, &Subscription{Filter: "+/+/t"})
			}
		}
		return x
	}
	run := func(x *subIndex, n int) time.Duration {
		start := time.Now()
		for i := range n {
			if len(x.match(fmt.Sprint("dev/", i%1000, "/t"), "")) == 0 {
				b.Fatal("no match")
			}
		}
		return time.Since(start)
	}
	withRes, none := build(DefaultReservedFilters), build([]string{})
	var tRes, tNone time.Duration
	b.ResetTimer()
	for range b.N {
		tNone += run(none, 100)
		tRes += run(withRes, 100)
	}
	n := float64(b.N * 100)
	b.ReportMetric(float64(tNone.Nanoseconds())/n, "ns/match-baseline")
	b.ReportMetric(float64(tRes.Nanoseconds())/n, "ns/match-reserved")
	b.ReportMetric(float64(tRes)/float64(tNone), "ratio")
}
