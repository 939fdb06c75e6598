package main

import (
	"cmp"
	"context"
	"errors"
	"fmt"
	"log/slog"
	"net"
	"slices"
	"sync"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/smartgo/smartgo/amqp"
	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/mqtt"
)

// amqpOptions maps [amqp] onto the AMQP engine's options; startAMQP wires
// the Backend and Authenticate.
func amqpOptions(c conf.AMQP, log *slog.Logger) amqp.Options {
	o := amqp.DefaultOptions()
	o.VirtualHosts = slices.Clone(c.VHosts)
	o.ChannelMax = uint16(c.ChannelMax)
	o.FrameMax = uint32(c.FrameMax.Bytes())
	o.Heartbeat = c.Heartbeat.D()
	if o.Heartbeat == 0 {
		o.Heartbeat = -1 // heartbeat = "0s": none (0 would mean the default)
	}
	o.MaxMessageSize = int(c.MaxMessageSize.Bytes())
	o.MaxQueueBytes = c.MaxQueueBytes.Bytes()
	o.Logger = log.With("component", "amqp")
	return o
}

// amqpNode is the AMQP 0-9-1 server of a bridge node, on a
// bridge.AMQPBackend.
type amqpNode struct {
	srv    *amqp.Server
	be     *bridge.AMQPBackend
	addr   net.Addr
	cancel context.CancelFunc
	done   chan struct{} // closed when Serve returned
	serr   error         // Serve's error, once done is closed
	once   sync.Once
	err    error // Close's
}

// startAMQP serves AMQP 0-9-1 on [amqp].listen with its durable state in
// the brokers of [bridge].registries; nil (and no error) when
// amqp.listen is "". local says the brokers are this process's one
// (standalone), whose store.max_message_size f holds.
func startAMQP(f conf.File, local bool, log *slog.Logger) (*amqpNode, error) {
	c := f.AMQP
	if c.Listen == "" {
		return nil, nil
	}
	if local && c.MaxMessageSize > f.Store.MaxMessageSize {
		// Info, not a warning: the defaults (16 MiB and 4 MiB) are so.
		log.Info("amqp.max_message_size is above store.max_message_size: a persistent message to a durable queue "+
			"larger than the store's limit is refused (nack under confirms)",
			"amqp.max_message_size", c.MaxMessageSize.String(), "store.max_message_size", f.Store.MaxMessageSize.String())
	}
	opts := amqpOptions(c, log)
	if c.CredentialsFile != "" {
		creds, err := mqtt.LoadCredentials(c.CredentialsFile)
		if err != nil {
			return nil, fmt.Errorf("amqp.credentials_file %s: %w", c.CredentialsFile, err)
		}
		opts.Authenticate = func(user, password string) (bool, error) { return creds.Check(user, []byte(password)), nil }
	}
	ln, err := net.Listen("tcp", c.Listen)
	if err != nil {
		return nil, fmt.Errorf("amqp.listen %s: %w", c.Listen, err)
	}
	be, err := bridge.NewAMQPBackend(bridge.AMQPOptions{Registries: f.Bridge.Registries, RequestTimeout: f.Bridge.SendTimeout.D(),
		Logger: log.With("component", "amqp-backend")})
	if err != nil {
		ln.Close()
		return nil, fmt.Errorf("amqp: %w", err)
	}
	opts.Backend = be
	srv, err := amqp.NewServer(opts)
	if err != nil {
		ln.Close()
		be.Close()
		return nil, fmt.Errorf("amqp: %w", err)
	}
	ctx, cancel := context.WithCancel(context.Background())
	n := &amqpNode{srv: srv, be: be, addr: ln.Addr(), cancel: cancel, done: make(chan struct{})}
	go func() {
		defer close(n.done)
		n.serr = srv.Serve(ctx, ln)
		if n.serr != nil {
			log.Error("AMQP listener failed", "listen", n.addr.String(), "err", n.serr)
		}
	}()
	log.Info("AMQP 0-9-1 listening", "listen", n.addr.String(), "vhosts", c.VHosts, "auth", c.CredentialsFile != "")
	return n, nil
}

// Close stops accepting, closes the connections and the server, then the
// backend (idempotent; nil does nothing).
func (n *amqpNode) Close() error {
	if n == nil {
		return nil
	}
	n.once.Do(func() {
		n.cancel()
		<-n.done
		n.err = errors.Join(n.serr, n.srv.Close(), n.be.Close())
	})
	return n.err
}

// ready fails once the listener stopped serving.
func (n *amqpNode) ready() error {
	select {
	case <-n.done:
		if n.serr != nil {
			return fmt.Errorf("amqp: not listening: %w", n.serr)
		}
		return errors.New("amqp: not listening")
	default:
		return nil
	}
}

// monitor adds the AMQP server's metrics and readiness.
func (n *amqpNode) monitor(m *monitor) {
	if n == nil {
		return
	}
	m.add("amqp", []prometheus.Collector{amqpCollector{n.srv}}, n.ready)
}

// amqpCollector exports every field of amqp.Stats;
// TestCmdBinaryStandaloneStatsOnMetrics fails when a field has no metric.
type amqpCollector struct{ s *amqp.Server }

var amqpGauges = []struct {
	desc *prometheus.Desc
	get  func(amqp.Stats) float64
}{
	{prometheus.NewDesc("smartgo_amqp_connections", "Open AMQP 0-9-1 connections on this node.", nil, nil),
		func(s amqp.Stats) float64 { return float64(s.Connections) }},
	{prometheus.NewDesc("smartgo_amqp_channels", "Open AMQP channels on this node.", nil, nil),
		func(s amqp.Stats) float64 { return float64(s.Channels) }},
	{prometheus.NewDesc("smartgo_amqp_consumers", "AMQP consumers (basic.consume) on this node.", nil, nil),
		func(s amqp.Stats) float64 { return float64(s.Consumers) }},
	{prometheus.NewDesc("smartgo_amqp_queues", "AMQP queues on this node, durable or not.", nil, nil),
		func(s amqp.Stats) float64 { return float64(s.Queues) }},
	{prometheus.NewDesc("smartgo_amqp_messages_ready", "AMQP messages ready for delivery, over every queue.", nil, nil),
		func(s amqp.Stats) float64 { return float64(s.MessagesReady) }},
	{prometheus.NewDesc("smartgo_amqp_messages_unacked", "AMQP messages delivered and not acknowledged yet.", nil, nil),
		func(s amqp.Stats) float64 { return float64(s.MessagesUnacked) }},
}

var amqpCounters = []struct {
	desc *prometheus.Desc
	get  func(amqp.Stats) uint64
}{
	{prometheus.NewDesc("smartgo_amqp_published_total", "AMQP messages published to this node.", nil, nil),
		func(s amqp.Stats) uint64 { return s.Published }},
	{prometheus.NewDesc("smartgo_amqp_delivered_total", "AMQP messages delivered to consumers and basic.get.", nil, nil),
		func(s amqp.Stats) uint64 { return s.Delivered }},
	{prometheus.NewDesc("smartgo_amqp_acked_total", "AMQP deliveries acknowledged by clients.", nil, nil),
		func(s amqp.Stats) uint64 { return s.Acked }},
	{prometheus.NewDesc("smartgo_amqp_confirmed_total", "AMQP publishes confirmed to publishers (confirm mode).", nil, nil),
		func(s amqp.Stats) uint64 { return s.Confirmed }},
	{prometheus.NewDesc("smartgo_amqp_returned_total", "Mandatory AMQP publishes returned unroutable.", nil, nil),
		func(s amqp.Stats) uint64 { return s.Returned }},
	{prometheus.NewDesc("smartgo_amqp_dropped_total", "AMQP messages dropped: unroutable, or refused by a full queue.", nil, nil),
		func(s amqp.Stats) uint64 { return s.Dropped }},
}

// amqpQueueSeriesMax bounds the queues /metrics has per-queue series
// for: the ones with the most messages (ready and unacked), so that a
// client declaring thousands of queues cannot blow up the scrape.
const amqpQueueSeriesMax = 500

// Per-queue gauges, for the amqpQueueSeriesMax largest queues.
var (
	amqpQueueReady = prometheus.NewDesc("smartgo_amqp_queue_messages_ready",
		"Messages ready for delivery in one AMQP queue (the 500 largest queues only).", []string{"vhost", "queue"}, nil)
	amqpQueueUnacked = prometheus.NewDesc("smartgo_amqp_queue_messages_unacked",
		"Messages delivered and not acknowledged yet of one AMQP queue (the 500 largest queues only).", []string{"vhost", "queue"}, nil)
	amqpQueueConsumers = prometheus.NewDesc("smartgo_amqp_queue_consumers",
		"Consumers of one AMQP queue (the 500 largest queues only).", []string{"vhost", "queue"}, nil)
	amqpQueuesOmitted = prometheus.NewDesc("smartgo_amqp_queue_series_omitted",
		"AMQP queues left out of the per-queue series (beyond the 500 largest).", nil, nil)
)

// largestQueues returns the max queues with the most messages (ready and
// unacked; ties by virtual host and name) and how many it left out.
func largestQueues(qs []amqp.QueueInfo, max int) ([]amqp.QueueInfo, int) {
	if len(qs) <= max {
		return qs, 0
	}
	slices.SortStableFunc(qs, func(a, b amqp.QueueInfo) int { return cmp.Compare(b.Ready+b.Unacked, a.Ready+a.Unacked) })
	return qs[:max], len(qs) - max
}

func (c amqpCollector) Describe(ch chan<- *prometheus.Desc) {
	ch <- amqpQueueReady
	ch <- amqpQueueUnacked
	ch <- amqpQueueConsumers
	ch <- amqpQueuesOmitted
	for _, g := range amqpGauges {
		ch <- g.desc
	}
	for _, k := range amqpCounters {
		ch <- k.desc
	}
}

func (c amqpCollector) Collect(ch chan<- prometheus.Metric) {
	qs, _ := c.s.Queues("") // "" (every virtual host) cannot fail
	qs, omitted := largestQueues(qs, amqpQueueSeriesMax)
	for _, q := range qs {
		ch <- prometheus.MustNewConstMetric(amqpQueueReady, prometheus.GaugeValue, float64(q.Ready), q.VHost, q.Name)
		ch <- prometheus.MustNewConstMetric(amqpQueueUnacked, prometheus.GaugeValue, float64(q.Unacked), q.VHost, q.Name)
		ch <- prometheus.MustNewConstMetric(amqpQueueConsumers, prometheus.GaugeValue, float64(q.Consumers), q.VHost, q.Name)
	}
	ch <- prometheus.MustNewConstMetric(amqpQueuesOmitted, prometheus.GaugeValue, float64(omitted))
	s := c.s.Stats()
	for _, g := range amqpGauges {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.get(s))
	}
	for _, k := range amqpCounters {
		ch <- prometheus.MustNewConstMetric(k.desc, prometheus.CounterValue, float64(k.get(s)))
	}
}
