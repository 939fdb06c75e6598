package registry

import (
	"errors"

	"github.com/prometheus/client_golang/prometheus"
)

// Registry metrics, read from the route tables when Prometheus scrapes.

var (
	descBrokers  = prometheus.NewDesc("smartgo_registry_brokers", "Broker addresses registered and alive.", nil, nil)
	descTopics   = prometheus.NewDesc("smartgo_registry_topics", "Topics with a route.", nil, nil)
	descClusters = prometheus.NewDesc("smartgo_registry_clusters", "Clusters with at least one broker.", nil, nil)
	descBridges  = prometheus.NewDesc("smartgo_registry_bridges", "MQTT bridge nodes registered and alive.", nil, nil)
)

type collector struct{ s *Server }

func (c collector) Describe(ch chan<- *prometheus.Desc) {
	ch <- descBrokers
	ch <- descTopics
	ch <- descClusters
	ch <- descBridges
}

func (c collector) Collect(ch chan<- prometheus.Metric) {
	t := c.s.routes
	t.mu.RLock()
	brokers, topics, clusters := len(t.live), len(t.topicQueues), len(t.clusters)
	t.mu.RUnlock()
	ch <- prometheus.MustNewConstMetric(descBrokers, prometheus.GaugeValue, float64(brokers))
	ch <- prometheus.MustNewConstMetric(descTopics, prometheus.GaugeValue, float64(topics))
	ch <- prometheus.MustNewConstMetric(descClusters, prometheus.GaugeValue, float64(clusters))
	ch <- prometheus.MustNewConstMetric(descBridges, prometheus.GaugeValue, float64(c.s.bridges.len()))
}

// Collectors returns the registry's metric collectors.
func (s *Server) Collectors() []prometheus.Collector { return []prometheus.Collector{collector{s}} }

// Ready reports whether the registry serves requests: nil once it listens
// and until Close.
func (s *Server) Ready() error {
	select {
	case <-s.stop:
		return errors.New("registry: closed")
	default:
	}
	if s.rs.Addr() == nil {
		return errors.New("registry: not listening yet")
	}
	return nil
}
