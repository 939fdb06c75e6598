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
	"time"

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
	be     *bridge.AMQPBackend
	addr   net.Addr
	log    *slog.Logger
	ctx    context.Context
	cancel context.CancelFunc
	done   chan struct{} // closed when run returned

	mu      sync.Mutex   // orders a server's start against Close
	srv     *amqp.Server // nil until the definitions are loaded; guarded by mu
	loadErr error        // the last failed start; guarded by mu
	serr    error        // Serve's error, once done is closed

	once sync.Once
	err  error // Close's
}

// amqpRetryMin and amqpRetryMax bound the wait between two attempts to
// start the AMQP server (load the definitions and the durable queues).
const (
	amqpRetryMin = time.Second
	amqpRetryMax = 30 * time.Second
)

// startAMQP serves AMQP 0-9-1 on [amqp].listen with its durable state in
// the brokers of [bridge].registries; nil (and no error) when
// amqp.listen is "". local says the brokers are this process's one
// (standalone), whose store.max_message_size f holds.
//
// A bad option, credentials file or listen address fails the start. The
// definitions and durable queues are loaded in the background, again
// and again until it works: brokers that are down or a full disk delay
// AMQP (the port takes connections and answers them once loaded;
// /readyz says why it waits), never the rest of the node. serving is
// called with the server once it serves.
func startAMQP(f conf.File, local bool, log *slog.Logger, serving func(*amqp.Server)) (*amqpNode, error) {
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
	if err := opts.Validate(); err != nil {
		return nil, fmt.Errorf("amqp: %w", err)
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
	ctx, cancel := context.WithCancel(context.Background())
	n := &amqpNode{be: be, addr: ln.Addr(), log: log, ctx: ctx, cancel: cancel, done: make(chan struct{})}
	go n.run(ln, opts, serving, c)
	return n, nil
}

// run starts the server (retrying while the definitions cannot be
// loaded), then serves ln until Close.
func (n *amqpNode) run(ln net.Listener, opts amqp.Options, serving func(*amqp.Server), c conf.AMQP) {
	defer close(n.done)
	wait := amqpRetryMin
	for {
		srv, err := amqp.NewServer(opts)
		n.mu.Lock()
		if n.ctx.Err() != nil {
			n.mu.Unlock()
			if srv != nil {
				_ = srv.Close()
			}
			_ = ln.Close()
			return
		}
		if err == nil {
			n.srv, n.loadErr = srv, nil
			n.mu.Unlock()
			break
		}
		n.loadErr = err
		n.mu.Unlock()
		n.log.Warn("AMQP 0-9-1 waits: cannot load its definitions and durable queues; retrying",
			"listen", n.addr.String(), "retry", wait, "err", err)
		select {
		case <-n.ctx.Done():
			_ = ln.Close()
			return
		case <-time.After(wait):
		}
		wait = min(2*wait, amqpRetryMax)
	}
	n.mu.Lock()
	srv := n.srv
	n.mu.Unlock()
	if serving != nil {
		serving(srv)
	}
	n.log.Info("AMQP 0-9-1 listening", "listen", n.addr.String(), "vhosts", c.VHosts, "auth", c.CredentialsFile != "")
	n.serr = srv.Serve(n.ctx, ln)
	if n.serr != nil {
		n.log.Error("AMQP listener failed", "listen", n.addr.String(), "err", n.serr)
	}
}

// server is the AMQP server once it serves, else nil.
func (n *amqpNode) server() *amqp.Server {
	n.mu.Lock()
	defer n.mu.Unlock()
	return n.srv
}

// Close stops accepting, closes the connections and the server, then the
// backend (idempotent; nil does nothing). A start still loading is
// abandoned: closing the backend first ends its requests.
func (n *amqpNode) Close() error {
	if n == nil {
		return nil
	}
	n.once.Do(func() {
		n.mu.Lock()
		n.cancel()
		srv := n.srv
		n.mu.Unlock()
		if srv == nil {
			n.err = n.be.Close()
			<-n.done
			return
		}
		<-n.done
		n.err = errors.Join(n.serr, srv.Close(), n.be.Close())
	})
	return n.err
}

// ready fails while the server is not serving: still loading (with the
// last error), or stopped.
func (n *amqpNode) ready() error {
	select {
	case <-n.done:
		if n.serr != nil {
			return fmt.Errorf("amqp: not listening: %w", n.serr)
		}
		return errors.New("amqp: not listening")
	default:
	}
	n.mu.Lock()
	defer n.mu.Unlock()
	if n.srv == nil {
		if n.loadErr != nil {
			return fmt.Errorf("amqp: not serving yet: loading definitions: %w", n.loadErr)
		}
		return errors.New("amqp: not serving yet: loading definitions")
	}
	return nil
}

// monitor adds the AMQP server's metrics and readiness.
func (n *amqpNode) monitor(m *monitor) {
	if n == nil {
		return
	}
	m.add("amqp", []prometheus.Collector{amqpCollector{n}}, n.ready)
}

// amqpCollector exports every field of amqp.Stats;
// TestCmdBinaryStandaloneStatsOnMetrics fails when a field has no metric.
type amqpCollector struct{ n *amqpNode }

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
	// Until the server serves (its definitions load), zeros and no queues.
	var qs []amqp.QueueInfo
	var s amqp.Stats
	if srv := c.n.server(); srv != nil {
		qs, _ = srv.Queues("") // "" (every virtual host) cannot fail
		s = srv.Stats()
	}
	qs, omitted := largestQueues(qs, amqpQueueSeriesMax)
	for _, q := range qs {
		ch <- prometheus.MustNewConstMetric(amqpQueueReady, prometheus.GaugeValue, float64(q.Ready), q.VHost, q.Name)
		ch <- prometheus.MustNewConstMetric(amqpQueueUnacked, prometheus.GaugeValue, float64(q.Unacked), q.VHost, q.Name)
		ch <- prometheus.MustNewConstMetric(amqpQueueConsumers, prometheus.GaugeValue, float64(q.Consumers), q.VHost, q.Name)
	}
	ch <- prometheus.MustNewConstMetric(amqpQueuesOmitted, prometheus.GaugeValue, float64(omitted))
	for _, g := range amqpGauges {
		ch <- prometheus.MustNewConstMetric(g.desc, prometheus.GaugeValue, g.get(s))
	}
	for _, k := range amqpCounters {
		ch <- prometheus.MustNewConstMetric(k.desc, prometheus.CounterValue, float64(k.get(s)))
	}
}
