package bridge

import (
	"errors"
	"strconv"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"
)

// Bridge metrics: the MQTT engine's counters (read from mqtt.Server.Stats
// when Prometheus scrapes), the node's view of the cluster's sessions and
// retained messages, and the time the brokers take to store what devices
// publish.

// produceBuckets are the upper bounds, in seconds, of the produce latency
// histogram.
var produceBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// backendMetrics are updated on the ingress path.
type backendMetrics struct {
	latency  prometheus.Histogram
	produced prometheus.Counter
	failed   prometheus.Counter
}

func newBackendMetrics() *backendMetrics {
	return &backendMetrics{
		latency: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "smartgo_bridge_produce_latency_seconds",
			Help: "Time for a broker to store what this bridge node sent (one message or one ordered batch per request).", Buckets: produceBuckets}),
		produced: prometheus.NewCounter(prometheus.CounterOpts{Name: "smartgo_bridge_produced_messages_total",
			Help: "MQTT messages this node stored in the brokers (retained copies not counted)."}),
		failed: prometheus.NewCounter(prometheus.CounterOpts{Name: "smartgo_bridge_produce_errors_total",
			Help: "Messages whose store failed (the device got a failure reason or no acknowledgement)."}),
	}
}

// observe records one produce request of n messages that started at
// start.
func (m *backendMetrics) observe(start time.Time, n int, err error) {
	m.latency.Observe(time.Since(start).Seconds())
	if err != nil {
		m.failed.Add(float64(n))
	} else {
		m.produced.Add(float64(n))
	}
}

// ClusterCounts returns what this node's copy of the system topics holds:
// sessions (connected or not, expired ones excluded) and retained
// messages, cluster-wide.
func (b *Backend) ClusterCounts() (sessions, retained int) {
	now := time.Now()
	b.mu.Lock()
	defer b.mu.Unlock()
	for _, r := range b.sessions {
		if !r.Deleted && !expiredAt(r, now) {
			sessions++
		}
	}
	for _, e := range b.retained {
		if e.msg != nil && (e.msg.Expiry.IsZero() || now.Before(e.msg.Expiry)) {
			retained++
		}
	}
	return sessions, retained
}

// Ready reports whether the node serves devices: nil once Start replayed
// the session and retained topics and began consuming, until Close.
func (b *Backend) Ready() error {
	if b.isClosed() {
		return ErrClosed
	}
	if !b.ready.Load() {
		return errors.New("bridge: starting: topics and sessions not replayed yet")
	}
	return nil
}

// Collectors returns the node's metric collectors: the MQTT engine's
// counters, the cluster's sessions and retained messages as this node sees
// them, and the produce latency.
func (b *Bridge) Collectors() []prometheus.Collector {
	m := b.backend.metrics
	return []prometheus.Collector{mqttCollector{b}, m.latency, m.produced, m.failed}
}

// Ready reports whether the node serves devices (see Backend.Ready),
// listens, and a registry accepted its heartbeat within three heartbeat
// intervals.
func (b *Bridge) Ready() error {
	if err := b.backend.Ready(); err != nil {
		return err
	}
	if len(b.server.Addrs()) == 0 {
		return errors.New("bridge: not listening")
	}
	return b.registered()
}

// mqttCollector exports every field of mqtt.Stats (Received and Sent as
// the sums of messages_received_total and messages_sent_total over their
// qos label); TestCmdBinaryStandaloneStatsOnMetrics in cmd/smartgo fails
// when a field has no metric.
type mqttCollector struct{ b *Bridge }

var (
	descConns       = prometheus.NewDesc("smartgo_mqtt_connections", "Open MQTT connections on this node.", nil, nil)
	descSessions    = prometheus.NewDesc("smartgo_mqtt_sessions", "MQTT sessions held by this node (connected or not).", nil, nil)
	descOnline      = prometheus.NewDesc("smartgo_mqtt_sessions_online", "MQTT sessions with a connection on this node (CONNECT accepted).", nil, nil)
	descSubs        = prometheus.NewDesc("smartgo_mqtt_subscriptions", "Subscriptions of the sessions held by this node.", nil, nil)
	descBytesIn     = prometheus.NewDesc("smartgo_mqtt_received_bytes_total", "Bytes read from MQTT client sockets (TLS: plaintext).", nil, nil)
	descBytesOut    = prometheus.NewDesc("smartgo_mqtt_sent_bytes_total", "Bytes written to MQTT client sockets (TLS: plaintext).", nil, nil)
	descPacketsIn   = prometheus.NewDesc("smartgo_mqtt_packets_received_total", "MQTT control packets of every type received from clients.", nil, nil)
	descPacketsOut  = prometheus.NewDesc("smartgo_mqtt_packets_sent_total", "MQTT control packets of every type sent to clients.", nil, nil)
	descReceived    = prometheus.NewDesc("smartgo_mqtt_messages_received_total", "PUBLISH packets received from clients, by QoS.", []string{"qos"}, nil)
	descSent        = prometheus.NewDesc("smartgo_mqtt_messages_sent_total", "PUBLISH packets sent to clients, by QoS.", []string{"qos"}, nil)
	descDropped     = prometheus.NewDesc("smartgo_mqtt_messages_dropped_total", "Messages not delivered: queue full, over the client's packet size, or its output backed up.", nil, nil)
	descDroppedQoS0 = prometheus.NewDesc("smartgo_mqtt_dropped_qos0_total", "QoS 0 messages dropped because the client's output was backed up.", nil, nil)
	descOverflows   = prometheus.NewDesc("smartgo_mqtt_queue_overflows_total", "Times a session's queue filled with live QoS 1/2 messages: the rest were left in the log for the session to read back (not dropped).", nil, nil)
	descSlow        = prometheus.NewDesc("smartgo_mqtt_slow_reader_disconnects_total", "Clients disconnected as slow readers.", nil, nil)
	descAuthFail    = prometheus.NewDesc("smartgo_mqtt_auth_failures_total", "CONNECTs refused for a missing or wrong user name or password.", nil, nil)
	descInBytes     = prometheus.NewDesc("smartgo_mqtt_inbound_bytes", "Input buffered beyond the connections' 4 KiB arrays (partly received large packets), charged to bridge.max_inbound_memory.", nil, nil)
	descInThrottled = prometheus.NewDesc("smartgo_mqtt_inbound_throttled_total", "Times a connection stopped being read because bridge.max_inbound_memory was used up.", nil, nil)
	descInStalled   = prometheus.NewDesc("smartgo_mqtt_inbound_stalled_disconnects_total", "Clients disconnected for holding inbound memory while stalled inside a packet, as others waited for it.", nil, nil)
	descClusterSess = prometheus.NewDesc("smartgo_bridge_cluster_sessions", "Persistent sessions in the cluster (connected or not), as this node's copy of the session topic holds them.", nil, nil)
	descRetained    = prometheus.NewDesc("smartgo_bridge_retained_messages", "Retained messages in the cluster, as this node's copy of the retained topic holds them.", nil, nil)
)

func (c mqttCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descConns, descSessions, descOnline, descSubs, descBytesIn, descBytesOut, descPacketsIn, descPacketsOut, descReceived, descSent, descDropped,
		descDroppedQoS0, descOverflows, descSlow, descAuthFail, descInBytes, descInThrottled, descInStalled, descClusterSess, descRetained} {
		ch <- d
	}
}

func (c mqttCollector) Collect(ch chan<- prometheus.Metric) {
	st := c.b.server.Stats()
	gauge := func(d *prometheus.Desc, v int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, float64(v), labels...)
	}
	counter := func(d *prometheus.Desc, v *atomic.Int64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.CounterValue, float64(v.Load()), labels...)
	}
	gauge(descConns, st.Connections.Load())
	gauge(descSessions, st.Sessions.Load())
	gauge(descOnline, st.Clients.Load())
	gauge(descSubs, st.Subscriptions.Load())
	counter(descBytesIn, &st.BytesReceived)
	counter(descBytesOut, &st.BytesSent)
	counter(descPacketsIn, &st.PacketsReceived)
	counter(descPacketsOut, &st.PacketsSent)
	for q := range st.ReceivedQoS {
		counter(descReceived, &st.ReceivedQoS[q], strconv.Itoa(q))
		counter(descSent, &st.SentQoS[q], strconv.Itoa(q))
	}
	counter(descDropped, &st.Dropped)
	counter(descDroppedQoS0, &st.DroppedQoS0)
	counter(descOverflows, &st.Overflows)
	counter(descSlow, &st.SlowReaders)
	counter(descAuthFail, &st.AuthFailures)
	gauge(descInBytes, st.InboundBytes.Load())
	counter(descInThrottled, &st.InboundThrottled)
	counter(descInStalled, &st.InboundStalled)
	sessions, retained := c.b.backend.ClusterCounts()
	gauge(descClusterSess, int64(sessions))
	gauge(descRetained, int64(retained))
}
