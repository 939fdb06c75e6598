// Package benchmark is the logic of `smartgo bench`: workloads (produce,
// consume, end-to-end), rate control, an HDR-style latency histogram and
// the report. Every run is bounded by a message count and/or a duration.
package benchmark

import (
	"math/bits"
	"sync/atomic"
	"time"
)

// subBits gives 2^subBits linear sub-buckets per power of two: values are
// recorded with a relative error below 1/2^subBits (0.8 %).
const subBits = 7

// Histogram records durations (in nanoseconds) into log-linear buckets, in
// the manner of HdrHistogram. Record is safe for concurrent use and does
// not allocate.
type Histogram struct {
	counts [64 << subBits]atomic.Int64
	total  atomic.Int64
	max    atomic.Int64
}

func bucketOf(v uint64) int {
	if v < 1<<subBits {
		return int(v)
	}
	e := bits.Len64(v) - subBits - 1 // shift that leaves subBits+1 significant bits
	return (e+1)<<subBits + int(v>>uint(e)) - 1<<subBits
}

// lowerBound is the smallest value of bucket i.
func lowerBound(i int) uint64 {
	if i < 1<<subBits {
		return uint64(i)
	}
	e := i>>subBits - 1
	m := uint64(i&(1<<subBits-1)) + 1<<subBits
	return m << uint(e)
}

// Record adds one duration.
func (h *Histogram) Record(d time.Duration) {
	if d < 0 {
		d = 0
	}
	v := uint64(d)
	h.counts[bucketOf(v)].Add(1)
	h.total.Add(1)
	for {
		m := h.max.Load()
		if int64(v) <= m || h.max.CompareAndSwap(m, int64(v)) {
			break
		}
	}
}

// Count returns the number of recorded values.
func (h *Histogram) Count() int64 { return h.total.Load() }

// Max returns the largest recorded value.
func (h *Histogram) Max() time.Duration { return time.Duration(h.max.Load()) }

// Percentile returns the value at or below which p percent (0..100) of
// the recorded values lie (the bucket's lower bound; max for p = 100).
func (h *Histogram) Percentile(p float64) time.Duration {
	n := h.total.Load()
	if n == 0 {
		return 0
	}
	if p >= 100 {
		return h.Max()
	}
	rank := int64(p / 100 * float64(n))
	if rank >= n {
		rank = n - 1
	}
	var seen int64
	for i := range h.counts {
		seen += h.counts[i].Load()
		if seen > rank {
			return min(time.Duration(lowerBound(i)), h.Max())
		}
	}
	return h.Max()
}
