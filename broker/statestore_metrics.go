package broker

import (
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
	ops *ssOpsCollector
	lat *prometheus.HistogramVec
	// Resolved per verb once, so a command pays no label lookup.
	timer [len(ssVerbs)]prometheus.Observer
}

// ssShardCounts are the commands of one shard counted by verb and result,
// and its sequence for latencySample, on cache lines of their own: every
// command adds to them, and a count shared by all shards would be written
// by both cores in turn (a shard's are too, but less often).
type ssShardCounts struct {
	n   [len(ssVerbs)][2]atomic.Uint64 // [verb][0 ok, 1 error]
	seq atomic.Uint64                  // commands seen, for latencySample
	_   [128 - (len(ssVerbs)*2+1)*8%128]byte
}

// ssOpsCollector is smartgo_statestore_commands_total, summed over the
// shards' counts when collected.
type ssOpsCollector struct {
	desc   *prometheus.Desc
	shards []ssShardCounts // one per shard, then one for a request naming no shard of ours
}

func newSSMetrics(shards int) *ssMetrics {
	m := &ssMetrics{
		ops: &ssOpsCollector{desc: prometheus.NewDesc("smartgo_statestore_commands_total",
			"State store commands served by this broker's shards, by command and result (ok: answered, the reply may be a RESP error; error: not served, e.g. not the owner or a failed shard).",
			[]string{"command", "result"}, nil), shards: make([]ssShardCounts, shards+1)},
		lat: prometheus.NewHistogramVec(prometheus.HistogramOpts{Name: "smartgo_statestore_command_latency_seconds",
			Help: "Time to serve a state store command on its shard (log append and apply included); one command in 8 is timed.", Buckets: LatencyBuckets},
			[]string{"command"}),
	}
	for i, v := range ssVerbs {
		m.timer[i] = m.lat.WithLabelValues(v)
	}
	return m
}

// counts returns the counts of shard (a request's, not checked yet).
func (m *ssMetrics) counts(shard int32) *ssShardCounts {
	c := m.ops.shards
	if shard >= 0 && int(shard) < len(c)-1 {
		return &c[shard]
	}
	return &c[len(c)-1]
}

// timed reports whether this command of shard is one of those timed (one
// in latencySample of the shard's); start is then its start.
func (m *ssMetrics) timed(shard int32) (start time.Time, ok bool) {
	if (m.counts(shard).seq.Add(1)-1)%latencySample != 0 {
		return time.Time{}, false
	}
	return time.Now(), true
}

// observe records one command of shard; start is zero when it was not
// timed.
func (m *ssMetrics) observe(shard int32, cmd *statestore.Command, start time.Time, err error) {
	m.observeVerb(shard, ssVerbOf(cmd), start, err)
}

// observeVerb is observe of a command whose verb's index is v (ssVerbOf).
func (m *ssMetrics) observeVerb(shard int32, v int, start time.Time, err error) {
	if !start.IsZero() {
		m.timer[v].Observe(time.Since(start).Seconds())
	}
	r := 0
	if err != nil {
		r = 1
	}
	m.counts(shard).n[v][r].Add(1)
}

// Describe implements prometheus.Collector.
func (c *ssOpsCollector) Describe(ch chan<- *prometheus.Desc) { ch <- c.desc }

// Collect implements prometheus.Collector: every verb and result, zero
// included.
func (c *ssOpsCollector) Collect(ch chan<- prometheus.Metric) {
	for v, verb := range ssVerbs {
		for r, result := range [2]string{"ok", "error"} {
			var sum uint64
			for i := range c.shards {
				sum += c.shards[i].n[v][r].Load()
			}
			ch <- prometheus.MustNewConstMetric(c.desc, prometheus.CounterValue, float64(sum), verb, result)
		}
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

func (c ssTableCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, g := range ssStatsGauges {
		ch <- g.desc
	}
}

func (c ssTableCollector) Collect(ch chan<- prometheus.Metric) {
	for i, sh := range c.s.shards {
		st := sh.eng.Stats()
		id := strconv.Itoa(i)
		for _, g := range ssStatsGauges {
			ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.value(&st), id)
		}
	}
}
