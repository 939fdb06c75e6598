package broker

import (
	"context"
	"fmt"
	"math"
	"strconv"
	"strings"
	"sync"
	"sync/atomic"
	"time"

	"github.com/smartgo/smartgo/internal/beat"
)

// Broker-wide runtime statistics: what RocketMQ's StoreStatsService and
// BrokerStats report in GET_BROKER_RUNTIME_INFO and the per-topic Stats do
// not cover. Counters are atomics bumped on the send and pull paths; one
// goroutine samples them every second.

// tpsWindows are the windows of the "putTps"-style values, in samples of
// one second: "10s 60s 600s", as RocketMQ reports them.
var tpsWindows = [...]int{10, 60, 600}

// putDistBounds are the upper bounds (exclusive, ms) of RocketMQ's put
// latency distribution ("[<=0ms]:n [0~10ms]:n ... [10s~]:n"); the first
// bucket holds puts of 0 ms, the last everything from 10 s on.
var putDistBounds = [...]int64{1, 10, 50, 100, 200, 500, 1000, 2000, 3000, 4000, 5000, 10000}

var putDistNames = [...]string{"[<=0ms]", "[0~10ms]", "[10~50ms]", "[50~100ms]", "[100~200ms]", "[200~500ms]",
	"[500ms~1s]", "[1~2s]", "[2~3s]", "[3~4s]", "[4~5s]", "[5~10s]", "[10s~]"}

// latencyBounds are the upper bounds (µs, inclusive) of the histogram the
// put latency percentiles are read from: 0.1 ms steps up to 1 ms, 1 ms
// steps to 20 ms, then RocketMQ's own steps to 10 s; one more bucket holds
// the rest.
var latencyBounds = func() (b [numLatencyBounds]int64) {
	n := 0
	step := func(from, to, by int64) {
		for v := from + by; v <= to; v += by {
			b[n] = v
			n++
		}
	}
	step(0, 1000, 100)
	step(1000, 20000, 1000)
	step(20000, 50000, 2000)
	step(50000, 100000, 5000)
	step(100000, 200000, 10000)
	step(200000, 500000, 50000)
	step(500000, 1000000, 100000)
	step(1000000, 10000000, 1000000)
	if n != numLatencyBounds {
		panic("broker: latencyBounds has " + strconv.Itoa(n) + " bounds")
	}
	return b
}()

const numLatencyBounds = 10 + 19 + 15 + 10 + 10 + 6 + 5 + 9

// Rate counters sampled every second, in this order.
const (
	rateTransferred = iota // messages returned by pulls
	rateFound              // pulls that found messages
	rateMiss               // pulls that found none
	ratePut                // messages stored (the store's count)
	numRates
)

type rateSample struct {
	at time.Time
	v  [numRates]int64
}

// runtimeStats are the broker-wide counters behind GET_BROKER_RUNTIME_INFO.
type runtimeStats struct {
	now  func() time.Time
	boot time.Time

	getFound, getMiss, getTransferred atomic.Int64
	putMaxMs, getMaxMs                atomic.Int64
	putDist                           [len(putDistNames)]atomic.Int64    // cumulative
	putLatency                        [numLatencyBounds + 1]atomic.Int64 // cumulative, µs buckets

	mu         sync.Mutex
	samples    []rateSample                // protected by mu; oldest first, at most 601
	rotatedAt  time.Time                   // protected by mu; last minute boundary
	distBase   [len(putDistNames)]int64    // protected by mu; putDist at rotatedAt
	latBase    [numLatencyBounds + 1]int64 // protected by mu; putLatency at rotatedAt
	distLast   [len(putDistNames)]int64    // protected by mu; the last full minute
	latLast    [numLatencyBounds + 1]int64 // protected by mu; the last full minute
	day        string                      // protected by mu; local date of todayMorning
	putMorning [2]int64                    // protected by mu; [yesterday, today] at midnight
	getMorning [2]int64                    // protected by mu
	putTotal   func() int64                // the store's put count
}

func newRuntimeStats(now func() time.Time, putTotal func() int64) *runtimeStats {
	r := &runtimeStats{now: now, boot: now(), putTotal: putTotal}
	r.rotatedAt = r.boot
	r.day = r.boot.Format(time.DateOnly)
	return r
}

// observePut records one store put (or batch) that took d.
func (r *runtimeStats) observePut(d time.Duration) {
	raiseMax(&r.putMaxMs, d.Milliseconds())
	i, j := putBuckets(d)
	r.putDist[i].Add(1)
	r.putLatency[j].Add(1)
}

// putBuckets are the buckets of a put that took d in putDist and
// putLatency.
func putBuckets(d time.Duration) (dist, latency int) {
	ms := d.Milliseconds()
	for dist < len(putDistBounds) && ms >= putDistBounds[dist] {
		dist++
	}
	us := d.Microseconds()
	for latency < len(latencyBounds) && us > latencyBounds[latency] {
		latency++
	}
	return dist, latency
}

// putTimes is observePut for several puts at once: what they add to
// runtimeStats, counted without atomics (observePuts adds them).
type putTimes struct {
	n       int64
	maxMs   int64
	dist    [len(putDistNames)]int64
	latency [numLatencyBounds + 1]int64
}

func (t *putTimes) add(d time.Duration) {
	t.n++
	t.maxMs = max(t.maxMs, d.Milliseconds())
	i, j := putBuckets(d)
	t.dist[i]++
	t.latency[j]++
}

// observePuts records the puts of t, one atomic add per bucket that
// moved, and zeroes t.
func (r *runtimeStats) observePuts(t *putTimes) {
	if t.n == 0 {
		return
	}
	raiseMax(&r.putMaxMs, t.maxMs)
	for i, n := range t.dist {
		if n != 0 {
			r.putDist[i].Add(n)
		}
	}
	for j, n := range t.latency {
		if n != 0 {
			r.putLatency[j].Add(n)
		}
	}
	*t = putTimes{}
}

// observeGet records one pull's read from the store: msgs returned, in d.
func (r *runtimeStats) observeGet(msgs int, d time.Duration) {
	if msgs > 0 {
		r.getFound.Add(1)
	} else {
		r.getMiss.Add(1)
	}
	r.getTransferred.Add(int64(msgs))
	raiseMax(&r.getMaxMs, d.Milliseconds())
}

func raiseMax(a *atomic.Int64, v int64) {
	for {
		cur := a.Load()
		if v <= cur || a.CompareAndSwap(cur, v) {
			return
		}
	}
}

// run samples every second until ctx ends.
func (r *runtimeStats) run(ctx context.Context) {
	t := beat.NewTicker(time.Second)
	defer t.Stop()
	r.sample()
	for {
		select {
		case <-ctx.Done():
			return
		case <-t.C:
			r.sample()
		}
	}
}

// sample records the rate counters, closes a minute of the latency
// distribution when one passed, and rolls the day totals over at midnight.
func (r *runtimeStats) sample() {
	now := r.now()
	s := rateSample{at: now}
	s.v[rateTransferred] = r.getTransferred.Load()
	s.v[rateFound] = r.getFound.Load()
	s.v[rateMiss] = r.getMiss.Load()
	s.v[ratePut] = r.putTotal()
	r.mu.Lock()
	defer r.mu.Unlock()
	r.samples = append(r.samples, s)
	if max := tpsWindows[len(tpsWindows)-1] + 1; len(r.samples) > max {
		r.samples = append(r.samples[:0], r.samples[len(r.samples)-max:]...)
	}
	if now.Sub(r.rotatedAt) >= time.Minute {
		for i := range r.putDist {
			v := r.putDist[i].Load()
			r.distLast[i], r.distBase[i] = v-r.distBase[i], v
		}
		for i := range r.putLatency {
			v := r.putLatency[i].Load()
			r.latLast[i], r.latBase[i] = v-r.latBase[i], v
		}
		r.rotatedAt = now
	}
	if day := now.Format(time.DateOnly); day != r.day {
		r.day = day
		r.putMorning = [2]int64{r.putMorning[1], s.v[ratePut]}
		r.getMorning = [2]int64{r.getMorning[1], s.v[rateTransferred]}
	}
}

// tps returns the rate of counter k over each of tpsWindows, joined by
// spaces ("10s 60s 600s"). A window longer than the samples kept so far
// is measured over the samples there are.
func (r *runtimeStats) tps(k int) string {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := make([]string, len(tpsWindows))
	for i, w := range tpsWindows {
		parts[i] = javaDouble(r.rateLocked(k, w))
	}
	return strings.Join(parts, " ")
}

// rateLocked is counter k's per-second rate over the last w samples.
func (r *runtimeStats) rateLocked(k, w int) float64 {
	n := len(r.samples)
	if n < 2 {
		return 0
	}
	last := r.samples[n-1]
	first := r.samples[max(0, n-1-w)]
	span := last.at.Sub(first.at).Seconds()
	if span <= 0 {
		return 0
	}
	return float64(last.v[k]-first.v[k]) / span
}

// totalTPS is found + miss pulls per second, per window.
func (r *runtimeStats) totalTPS() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	parts := make([]string, len(tpsWindows))
	for i, w := range tpsWindows {
		parts[i] = javaDouble(r.rateLocked(rateFound, w) + r.rateLocked(rateMiss, w))
	}
	return strings.Join(parts, " ")
}

// putDistribution is the put latency distribution of the last full
// minute, in RocketMQ's format (each bucket followed by a space).
func (r *runtimeStats) putDistribution() string {
	r.mu.Lock()
	defer r.mu.Unlock()
	var sb strings.Builder
	for i, n := range r.distLast {
		fmt.Fprintf(&sb, "%s:%d ", putDistNames[i], n)
	}
	return sb.String()
}

// putPercentile is the put latency (ms) below which a fraction p of the
// last full minute's puts fell, interpolated within its bucket.
func (r *runtimeStats) putPercentile(p float64) float64 {
	r.mu.Lock()
	defer r.mu.Unlock()
	var total int64
	for _, n := range r.latLast {
		total += n
	}
	if total == 0 {
		return 0
	}
	rank := int64(float64(total) * p)
	var passed int64
	for i, n := range r.latLast {
		if rank <= passed+n {
			lo := int64(0)
			if i > 0 {
				lo = latencyBounds[i-1]
			}
			hi := lo
			if i < len(latencyBounds) {
				hi = latencyBounds[i]
			}
			us := float64(lo)
			if n > 0 {
				us += float64(hi-lo) * float64(rank-passed) / float64(n)
			}
			return us / 1000
		}
		passed += n
	}
	return float64(latencyBounds[len(latencyBounds)-1]) / 1000
}

// dayTotals returns the put and transferred-get totals at yesterday's and
// today's midnight (0 before the broker saw one).
func (r *runtimeStats) dayTotals() (put, get [2]int64) {
	r.mu.Lock()
	defer r.mu.Unlock()
	return r.putMorning, r.getMorning
}

// runtimeText is RocketMQ's uptime text, "[ d days, h hours, m minutes, s seconds ]".
func (r *runtimeStats) runtimeText() string {
	d := r.now().Sub(r.boot)
	if d < 0 {
		d = 0
	}
	s := int64(d / time.Second)
	return fmt.Sprintf("[ %d days, %d hours, %d minutes, %d seconds ]", s/86400, s%86400/3600, s%3600/60, s%60)
}

// javaDouble formats f as Java's Double.toString does for the values
// reported here (plain decimal, at least one fractional digit).
func javaDouble(f float64) string {
	if math.IsNaN(f) || math.IsInf(f, 0) {
		return "0.0"
	}
	s := strconv.FormatFloat(f, 'f', -1, 64)
	if !strings.ContainsRune(s, '.') {
		s += ".0"
	}
	return s
}

// humanBytes is RocketMQ's binary byte count text ("512 B", "1.5 KiB",
// "49.0 GiB").
func humanBytes(n int64) string {
	if n < 1024 {
		return strconv.FormatInt(n, 10) + " B"
	}
	exp := int(math.Log(float64(n)) / math.Log(1024))
	exp = min(exp, 6)
	return fmt.Sprintf("%.1f %ciB", float64(n)/math.Pow(1024, float64(exp)), "KMGTPE"[exp-1])
}
