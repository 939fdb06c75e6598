package broker

import (
	"strconv"

	"github.com/prometheus/client_golang/prometheus"
)

// Twin metrics: what twin.Engine.Stats reports for each shard this broker
// hosts, read when Prometheus scrapes. TestCmdBinaryStandaloneStatsOnMetrics
// in cmd/smartgo fails when a field of twin.Stats has no metric here.

var (
	descTwDevices   = prometheus.NewDesc("smartgo_twin_devices", "Device identities held by a twin shard.", []string{"shard"}, nil)
	descTwModules   = prometheus.NewDesc("smartgo_twin_modules", "Module identities held by a twin shard.", []string{"shard"}, nil)
	descTwConnected = prometheus.NewDesc("smartgo_twin_connected", "Devices and modules of a twin shard whose connection state is Connected.", []string{"shard"}, nil)
	descTwIndex     = prometheus.NewDesc("smartgo_twin_index_entries", "Postings held by a twin shard's query index.", []string{"shard"}, nil)
	descTwOpen      = prometheus.NewDesc("smartgo_twin_open",
		"1 once the twin shards are loaded and serve, 0 while they wait for the consume queues (a restart on a full disk).", nil, nil)
)

// Collectors returns the twin shards' metric collectors.
func (t *Twins) Collectors() []prometheus.Collector { return []prometheus.Collector{twCollector{t}} }

type twCollector struct{ t *Twins }

func (c twCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descTwDevices
	ch <- descTwModules
	ch <- descTwConnected
	ch <- descTwIndex
	ch <- descTwOpen
}

func (c twCollector) Collect(ch chan<- prometheus.Metric) {
	if c.t.host.notOpen() != nil {
		ch <- prometheus.MustNewConstMetric(descTwOpen, prometheus.GaugeValue, 0)
		return // no shard loaded
	}
	ch <- prometheus.MustNewConstMetric(descTwOpen, prometheus.GaugeValue, 1)
	for i, sh := range c.t.shards {
		st := sh.eng.Stats()
		id := strconv.Itoa(i)
		ch <- prometheus.MustNewConstMetric(descTwDevices, prometheus.GaugeValue, float64(st.Devices), id)
		ch <- prometheus.MustNewConstMetric(descTwModules, prometheus.GaugeValue, float64(st.Modules), id)
		ch <- prometheus.MustNewConstMetric(descTwConnected, prometheus.GaugeValue, float64(st.Connected), id)
		ch <- prometheus.MustNewConstMetric(descTwIndex, prometheus.GaugeValue, float64(st.IndexEntries), id)
	}
}
