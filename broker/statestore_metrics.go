package broker

import (
	"math/rand/v2"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/smartgo/smartgo/statestore"
)

// State store metrics: commands served by this broker's shards, counted
// and timed by command verb, and the size of the shards' tables.

// ssVerbs are the verbs labelled in the metrics; anything else (a request
// the engine rejects) is "other".
var ssVerbs = [...]string{"SET", "GET", "DEL", "VDEL", "KEYNOTIFY", "other"}

const ssVerbOther = len(ssVerbs) - 1

type ssMetrics struct {
	ops *prometheus.CounterVec
	lat *prometheus.HistogramVec
	// Resolved per verb once, so a command pays no label lookup.
	ok, failed [len(ssVerbs)]prometheus.Counter
	timer      [len(ssVerbs)]prometheus.Observer
	first      atomic.Bool // the first command was taken (timed)
}

// ssLatencySample is how many state store commands go by per one timed:
// 1 in 64 on average, drawn at random (timed), the first one included. A
// timed command reads the clock twice, and a clock read costs 100-200 ns on this project's virtual machines
// (a GET served in process is about 0.4 µs around its MQTT work), where
// 1 in 8 (latencySample, the send path's) cost about 8 % of that;
// at tens of thousands of commands a second, 1 in 64 still times hundreds
// a second, enough for the histogram's buckets. Its _count is the number
// of commands timed.
const ssLatencySample = 64

func newSSMetrics() *ssMetrics {
	m := &ssMetrics{
		ops: prometheus.NewCounterVec(prometheus.CounterOpts{Name: "smartgo_statestore_commands_total",
			Help: "State store commands served by this broker's shards, by command and result (ok: answered, the reply may be a RESP error; error: not served, e.g. not the owner or a failed shard)."},
			[]string{"command", "result"}),
		lat: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "smartgo_statestore_command_latency_seconds",
			Help: "Time to serve a state store command on its shard (log append and apply included); one command in 64 is timed.", Buckets: LatencyBuckets},
			[]string{"command"}),
	}
	for i, v := range ssVerbs {
		m.ok[i] = m.ops.WithLabelValues(v, "ok")
		m.failed[i] = m.ops.WithLabelValues(v, "error")
		m.timer[i] = m.lat.WithLabelValues(v)
	}
	return m
}

// timed reports whether this command is one of those timed (one in
// ssLatencySample on average); start is then its start. The draw is the
// runtime's per-thread generator, not a shared count: a count's atomic
// add drained the store buffer a SET had just filled (about 35 ns, 1 % of
// BenchmarkStateStoreSetPath, all on the instruction after the lock
// xadd), and every poller and connection bumped the same line. The first
// command is always timed (a plain load after it), so that one command
// shows in the histogram.
func (m *ssMetrics) timed() (start time.Time, ok bool) {
	if m.first.Load() || !m.first.CompareAndSwap(false, true) {
		if rand.Uint64()%ssLatencySample != 0 {
			return time.Time{}, false
		}
	}
	return time.Now(), true
}

// observe records one command; start is zero when it was not timed.
func (m *ssMetrics) observe(cmd *statestore.Command, start time.Time, err error) {
	m.observeVerb(ssVerbOf(cmd), start, err)
}

// observeVerb is observe of a command whose verb's index is v (ssVerbOf).
func (m *ssMetrics) observeVerb(v int, start time.Time, err error) {
	if !start.IsZero() {
		m.timer[v].Observe(time.Since(start).Seconds())
	}
	if err != nil {
		m.failed[v].Inc()
	} else {
		m.ok[v].Inc()
	}
}

// ssVerbOf returns the index in ssVerbs of a parsed request's verb (nil:
// the request did not parse).
func ssVerbOf(cmd *statestore.Command) int {
	if cmd == nil {
		return ssVerbOther
	}
	switch cmd.Verb {
	case statestore.VerbSet:
		return 0
	case statestore.VerbGet:
		return 1
	case statestore.VerbDel:
		return 2
	case statestore.VerbVDel:
		return 3
	case statestore.VerbKeyNotify:
		return 4
	}
	return ssVerbOther
}

// Collectors returns the state store's metric collectors: commands by verb
// and result, their latency, and every field of statestore.Stats per
// shard.
func (s *StateStore) Collectors() []prometheus.Collector {
	return []prometheus.Collector{s.metrics.ops, s.metrics.lat, ssTableCollector{s}}
}

type ssTableCollector struct{ s *StateStore }

// ssStatsGauges are the per-shard gauges of statestore.Stats, one per
// field (cmd/smartgo's TestCmdBinaryStandaloneStatsOnMetrics checks that
// none is missing); versions are exported as their wall clock time.
var ssStatsGauges = []struct {
	desc  *prometheus.Desc
	value func(*statestore.Stats) float64
}{
	{prometheus.NewDesc("smartgo_statestore_keys", "Keys held by a state store shard (expired ones not yet removed included).", []string{"shard"}, nil),
		func(st *statestore.Stats) float64 { return float64(st.Keys) }},
	{prometheus.NewDesc("smartgo_statestore_bytes", "Key and value bytes held by a state store shard.", []string{"shard"}, nil),
		func(st *statestore.Stats) float64 { return float64(st.Bytes) }},
	{prometheus.NewDesc("smartgo_statestore_expiring_keys", "Keys with an expiry held by a state store shard.", []string{"shard"}, nil),
		func(st *statestore.Stats) float64 { return float64(st.Expiring) }},
	{prometheus.NewDesc("smartgo_statestore_history_changes", "Changes in a state store shard's change history.", []string{"shard"}, nil),
		func(st *statestore.Stats) float64 { return float64(st.History) }},
	{prometheus.NewDesc("smartgo_statestore_cached_replies", "Replies in a state store shard's response cache.", []string{"shard"}, nil),
		func(st *statestore.Stats) float64 { return float64(st.Cached) }},
	{prometheus.NewDesc("smartgo_statestore_watches", "KEYNOTIFY registrations on a state store shard.", []string{"shard"}, nil),
		func(st *statestore.Stats) float64 { return float64(st.Watches) }},
	{prometheus.NewDesc("smartgo_statestore_applied_version_timestamp_seconds", "Wall clock time of the newest version a state store shard applied (0: none).", []string{"shard"}, nil),
		func(st *statestore.Stats) float64 { return float64(st.Applied.Wall) / 1000 }},
	{prometheus.NewDesc("smartgo_statestore_history_floor_timestamp_seconds", "Wall clock time of the version at or before which a state store shard's change history is gone (0: none).", []string{"shard"}, nil),
		func(st *statestore.Stats) float64 { return float64(st.HistoryMin.Wall) / 1000 }},
}

var descSSOpen = prometheus.NewDesc("smartgo_statestore_open",
	"1 once the state store's shards are loaded and serve, 0 while they wait for the consume queues (a restart on a full disk).", nil, nil)

func (c ssTableCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descSSOpen
	for _, g := range ssStatsGauges {
		ch <- g.desc
	}
}

func (c ssTableCollector) Collect(ch chan<- prometheus.Metric) {
	if c.s.host.notOpen() != nil {
		ch <- prometheus.MustNewConstMetric(descSSOpen, prometheus.GaugeValue, 0)
		return // no shard loaded
	}
	ch <- prometheus.MustNewConstMetric(descSSOpen, prometheus.GaugeValue, 1)
	for i, sh := range c.s.shards {
		st := sh.eng.Stats()
		id := strconv.Itoa(i)
		for _, g := range ssStatsGauges {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.value(&st), id)
		}
	}
}
