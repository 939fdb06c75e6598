package iothub

import (
	"sync/atomic"

	"github.com/prometheus/client_golang/prometheus"
)

// Hub metrics: every counter of Stats, read when Prometheus scrapes.
// TestCmdBinaryStandaloneStatsOnMetrics in cmd/smartgo fails when a field
// of Stats has no metric here.

var hubCounters = []struct {
	desc *prometheus.Desc
	get  func(*Stats) *atomic.Int64
}{
	{prometheus.NewDesc("smartgo_iothub_auth_failures_total", "IoT Hub devices refused at CONNECT (bad SAS token or certificate, unknown or disabled device).", nil, nil),
		func(s *Stats) *atomic.Int64 { return &s.AuthFailures }},
	{prometheus.NewDesc("smartgo_iothub_twin_requests_total", "Device twin GET and PATCH requests served by this node.", nil, nil),
		func(s *Stats) *atomic.Int64 { return &s.TwinRequests }},
	{prometheus.NewDesc("smartgo_iothub_twin_errors_total", "Device twin requests answered with an error status (throttled ones included).", nil, nil),
		func(s *Stats) *atomic.Int64 { return &s.TwinErrors }},
	{prometheus.NewDesc("smartgo_iothub_twin_throttled_total", "Device twin requests answered 429 (over iothub.twin_rate).", nil, nil),
		func(s *Stats) *atomic.Int64 { return &s.Throttled }},
	{prometheus.NewDesc("smartgo_iothub_method_calls_total", "Direct method invocations started on this node.", nil, nil),
		func(s *Stats) *atomic.Int64 { return &s.MethodCalls }},
	{prometheus.NewDesc("smartgo_iothub_method_unknown_responses_total", "Direct method responses from devices for no pending request id.", nil, nil),
		func(s *Stats) *atomic.Int64 { return &s.UnknownResponses }},
	{prometheus.NewDesc("smartgo_iothub_c2d_sent_total", "Cloud-to-device messages stored for devices.", nil, nil),
		func(s *Stats) *atomic.Int64 { return &s.C2DSent }},
	{prometheus.NewDesc("smartgo_iothub_desired_pushed_total", "Desired property changes handed to device sessions.", nil, nil),
		func(s *Stats) *atomic.Int64 { return &s.DesiredPushed }},
	{prometheus.NewDesc("smartgo_iothub_owner_reads_total", "Registry reads for the identity generation of a client that connects with a device's id and no user name.", nil, nil),
		func(s *Stats) *atomic.Int64 { return &s.OwnerReads }},
}

// Collectors returns the hub's metric collectors.
func (h *Hub) Collectors() []prometheus.Collector { return []prometheus.Collector{hubCollector{h}} }

type hubCollector struct{ h *Hub }

func (c hubCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, m := range hubCounters {
		ch <- m.desc
	}
}

func (c hubCollector) Collect(ch chan<- prometheus.Metric) {
	for _, m := range hubCounters {
		ch <- prometheus.MustNewConstMetric(m.desc, prometheus.CounterValue, float64(m.get(&c.h.stats).Load()))
	}
}
