package benchmark

import (
	"testing"
	"time"
)

func TestBenchHistogramBuckets(t *testing.T) {
	for _, v := range []uint64{0, 1, 127, 128, 129, 255, 256, 1000, 123456, 1 << 40} {
		i := bucketOf(v)
		lo := lowerBound(i)
		if lo > v || (i+1 < 64<<subBits && lowerBound(i+1) <= v) {
			t.Errorf("v=%d: bucket %d [%d, %d)", v, i, lo, lowerBound(i+1))
		}
		if v > 0 && float64(v-lo)/float64(v) > 1.0/(1<<subBits) {
			t.Errorf("v=%d: error too large (lower bound %d)", v, lo)
		}
	}
}

func TestBenchHistogramPercentiles(t *testing.T) {
	var h Histogram
	for i := 1; i <= 1000; i++ {
		h.Record(time.Duration(i) * time.Microsecond)
	}
	check := func(p float64, want time.Duration) {
		got := h.Percentile(p)
		if got < want*99/100 || got > want {
			t.Errorf("p%v = %v, want ~%v", p, got, want)
		}
	}
	check(50, 501*time.Microsecond)
	check(90, 901*time.Microsecond)
	check(99, 991*time.Microsecond)
	if h.Max() != time.Millisecond || h.Percentile(100) != time.Millisecond || h.Count() != 1000 {
		t.Fatalf("max %v count %d", h.Max(), h.Count())
	}
}
