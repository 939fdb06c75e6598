package broker

import (
	"context"
	"errors"
	"fmt"
	"strconv"
	"sync"
	"sync/atomic"
	"time"

	"github.com/prometheus/client_golang/prometheus"

	"github.com/smartgo/smartgo/internal/beat"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/ha"
)

// Broker metrics. Everything the hot path updates is an atomic (the two
// latency histograms); the rest is read from the store and the broker's
// state when Prometheus scrapes, so an unscraped broker pays nothing for
// it. Names and meanings are listed in the README's metrics section.

// LatencyBuckets are the upper bounds, in seconds, of the broker's latency
// histograms (send, pull, state store commands).
var LatencyBuckets = []float64{.0001, .00025, .0005, .001, .0025, .005, .01, .025, .05, .1, .25, .5, 1, 2.5, 5}

// latencySample is how many requests go by per one timed: 1 in 8. A
// clock read costs 20 ns on a machine with a fast clock source but a few
// hundred in some virtual machines (kvm-clock), so timing every
// single-message send would cost about 1% of its CPU there; one in eight
// keeps the distribution and costs an eighth. The histograms' _count is
// the number of requests timed.
const latencySample = 8

// metrics are the broker's own metrics.
type metrics struct {
	send    prometheus.Histogram
	pull    prometheus.Histogram
	sendSeq atomic.Uint64 // requests seen, for latencySample
	pullSeq atomic.Uint64

	evMu   sync.Mutex
	events map[store.EventKind]int64 // protected by evMu

	// caughtUp is when replication was last seen with no lag (Unix
	// nanoseconds), sampled every second by trackReplication.
	caughtUp atomic.Int64
	// lastRegistered is when a registry last accepted the registration
	// (Unix nanoseconds, 0 = never).
	lastRegistered atomic.Int64
	started        time.Time // when New began
}

func newMetrics() *metrics {
	return &metrics{
		send: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "smartgo_broker_send_latency_seconds",
			Help: "Time from a send request's dispatch to its response (stored; flushed or replicated when the broker waits for that); one request in 8 is timed.", Buckets: LatencyBuckets}),
		pull: prometheus.NewHistogram(prometheus.HistogramOpts{Name: "smartgo_broker_pull_latency_seconds",
			Help: "Time to answer a pull request that was not held by long polling; one request in 8 is timed.", Buckets: LatencyBuckets}),
		events:  map[store.EventKind]int64{},
		started: time.Now(),
	}
}

// monitorRuntimeInfo adds to GET_BROKER_RUNTIME_INFO what the console
// shows and the table has no other key for (Java's names where Java has
// one; a key already set is kept): bootTimestamp (Unix ms),
// commitLogDiskRatio (used fraction of the store's file system, 0..1) and
// replicationLagSeconds (see ReplicationLag).
func (b *Broker) monitorRuntimeInfo(t map[string]string) {
	set := func(k, v string) {
		if _, ok := t[k]; !ok {
			t[k] = v
		}
	}
	set("bootTimestamp", strconv.FormatInt(b.metrics.started.UnixMilli(), 10))
	set("commitLogDiskRatio", strconv.FormatFloat(b.store.DiskUsed(), 'f', 4, 64))
	if _, behind, ok := b.ReplicationLag(); ok {
		set("replicationLagSeconds", strconv.FormatFloat(behind.Seconds(), 'f', 1, 64))
	}
}

// sendStart starts timing a send request when it is one of the
// latencySample requests timed: the zero time when it is not.
func (m *metrics) sendStart() time.Time {
	if !m.sendTimed() {
		return time.Time{}
	}
	return time.Now()
}

// sendTimed counts a send request in and reports whether it is one of
// the latencySample requests timed (sendStart without the clock:
// processSend starts a timed send at its reader's batch clock).
func (m *metrics) sendTimed() bool { return (m.sendSeq.Add(1)-1)%latencySample == 0 }

// sendDone records the latency of a send request sendStart timed.
func (m *metrics) sendDone(start time.Time) {
	if !start.IsZero() {
		m.send.Observe(time.Since(start).Seconds())
	}
}

// timedPull wraps the pull processor: a pull answered at once is timed
// (one in latencySample), a held one (nil response) is not (its time is
// the hold).
func (m *metrics) timedPull(fn func(*remoting.Conn, *protocol.Command) (*protocol.Command, error)) func(*remoting.Conn, *protocol.Command) (*protocol.Command, error) {
	return func(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
		if (m.pullSeq.Add(1)-1)%latencySample != 0 {
			return fn(c, req)
		}
		start := time.Now()
		resp, err := fn(c, req)
		if resp != nil {
			m.pull.Observe(time.Since(start).Seconds())
		}
		return resp, err
	}
}

// onStoreEvent is the store's Listener: it counts events by kind for
// smartgo_store_events_total and logs the ones the store does not log
// itself, then calls next (a listener the broker's user set, if any).
func (b *Broker) onStoreEvent(next func(store.Event)) func(store.Event) {
	return func(ev store.Event) {
		b.metrics.evMu.Lock()
		b.metrics.events[ev.Kind]++
		b.metrics.evMu.Unlock()
		switch ev.Kind {
		case store.EventSlowFlush:
			b.log.Warn("slow commitlog flush", "duration", ev.Duration, "offset", ev.Offset)
		case store.EventSegmentRolled:
			b.log.Debug("commitlog segment rolled", "file", ev.File, "offset", ev.Offset)
		case store.EventDiskFull, store.EventDiskOK, store.EventWriteFailed:
			// Tell the registries (write permission) at once; a new data
			// version makes them take the topics again, as a Java broker
			// does when its permission changes.
			b.topics.version.bump(b.now())
			select {
			case b.regNow <- struct{}{}:
			default:
			}
		}
		if next != nil {
			next(ev)
		}
	}
}

// trackReplication samples the replication lag every second, so that
// ReplicationLag can say how long the copy has been behind.
func (b *Broker) trackReplication(ctx context.Context) {
	b.metrics.caughtUp.Store(b.now().UnixNano())
	t := beat.NewTicker(time.Second)
	defer t.Stop()
	for {
		if lag, ok := b.replicationLagBytes(); !ok || (lag == 0 && !b.slaveCutOff()) {
			b.metrics.caughtUp.Store(b.now().UnixNano())
		}
		select {
		case <-ctx.Done():
			return
		case <-t.C:
		}
	}
}

// replicationLagBytes is, on a master, its commitlog end minus the best
// connected slave's acknowledged end; on a slave, its master's end as last
// reported minus its own. ok is false when there is nothing to measure (a
// master without a slave, a slave that has not heard from its master).
func (b *Broker) replicationLagBytes() (int64, bool) {
	maxOff := b.store.MaxPhysicalOffset()
	if srv := b.haSrv.Load(); srv != nil {
		if ack, ok := srv.AckOffset(); ok {
			return max(0, maxOff-ack), true
		}
		return 0, false
	}
	if c := b.haCli.Load(); c != nil {
		if mm := c.MasterMaxOffset(); mm >= 0 {
			return max(0, mm-maxOff), true
		}
	}
	return 0, false
}

// ReplicationLag returns the replication lag in bytes (see
// replicationLagBytes) and in time: zero while caught up, else how long
// the copy has been behind (since the last one-second sample that found
// no lag). A slave cut off from its master (no replication session) is not
// caught up whatever it last heard: its lag in time grows from the moment
// it lost the session. ok is false when there is nothing to measure.
func (b *Broker) ReplicationLag() (bytes int64, behind time.Duration, ok bool) {
	bytes, ok = b.replicationLagBytes()
	if !ok || (bytes == 0 && !b.slaveCutOff()) {
		return bytes, 0, ok
	}
	return bytes, max(0, b.now().Sub(time.Unix(0, b.metrics.caughtUp.Load()))), true
}

// slaveCutOff reports whether the broker is a slave without a replication
// session to its master.
func (b *Broker) slaveCutOff() bool {
	return b.isSlave() && b.haCli.Load() != nil && !b.masterReachable()
}

// slaveReplicating returns why a slave does not replicate: its master has
// sent nothing yet, or nothing (not even a heartbeat) for longer than the
// HA idle timeout, or it is more than the HA fall-behind limit behind; nil
// otherwise, and on a master.
func (b *Broker) slaveReplicating() error {
	c := b.haCli.Load()
	if !b.isSlave() || c == nil {
		return nil
	}
	idle := b.opts.HA.IdleTimeout
	if idle <= 0 {
		idle = ha.DefaultIdleTimeout
	}
	last, why := c.LastContact(), ""
	switch {
	case last.IsZero():
		why = "not heard from its master yet"
	case b.now().Sub(last) > idle:
		why = "heard nothing from its master since " + last.UTC().Format(time.RFC3339)
	}
	if why != "" {
		if err := c.Err(); err != nil {
			why += " (" + err.Error() + ")"
		}
		return fmt.Errorf("%w: %s", errNotReplicating, why)
	}
	limit := b.opts.HA.FallBehindMax
	if limit <= 0 {
		limit = ha.DefaultFallBehindMax
	}
	if lag, ok := b.replicationLagBytes(); ok && lag > limit {
		return fmt.Errorf("%w: %d bytes behind its master, over ha_fall_behind_max (%d)", errNotReplicating, lag, limit)
	}
	return nil
}

// Ready reports whether the broker can take its share of the traffic:
// nil when its store accepts writes (store.WritesRefused: not closed, no
// write failure, disk not full), a registry accepted its registration within
// three register intervals (when it has registries), and, on a slave, its
// master is known and it replicates (it has heard from its master, within
// the HA idle timeout, and is not further behind than ha_fall_behind_max);
// in controller mode, a master holds its lease (a controller replica
// confirmed it in time: without, it refuses every write).
// Otherwise the error says what is missing.
func (b *Broker) Ready() error {
	var errs []error
	if refused, why := b.WritesRefused(); refused {
		errs = append(errs, fmt.Errorf("store refuses writes: %s", why))
	}
	if len(b.opts.Registries) > 0 {
		last := b.metrics.lastRegistered.Load()
		switch {
		case last == 0:
			errs = append(errs, errors.New("not registered with any registry yet"))
		case b.now().Sub(time.Unix(0, last)) > 3*b.opts.RegisterInterval:
			errs = append(errs, fmt.Errorf("no registry accepted a registration since %s", time.Unix(0, last).UTC().Format(time.RFC3339)))
		}
	}
	switch {
	case b.isSlave() && b.masterRemotingAddr() == "":
		errs = append(errs, errNoMaster)
	case b.isSlave():
		if err := b.slaveReplicating(); err != nil {
			errs = append(errs, err)
		}
	case b.controlled():
		if ok, why := b.writable(); !ok { // a master whose lease ran out refuses every write
			errs = append(errs, fmt.Errorf("%w: master %s", errNotWritable, why))
		}
	}
	return errors.Join(errs...)
}

// Collectors returns the broker's metric collectors: statistics per topic
// and group, store and replication gauges, store events, and the send and
// pull latency histograms. The process adds the Go runtime's.
func (b *Broker) Collectors() []prometheus.Collector {
	return []prometheus.Collector{b.stats.Collector(), storeCollector{b}, b.metrics.send, b.metrics.pull}
}

// storeCollector exports store-level and replication gauges, read at
// scrape time.
type storeCollector struct{ b *Broker }

var (
	descCommitLogMax   = prometheus.NewDesc("smartgo_commitlog_max_offset", "Next commitlog write position.", nil, nil)
	descCommitLogMin   = prometheus.NewDesc("smartgo_commitlog_min_offset", "First commitlog offset still stored.", nil, nil)
	descDispatchLag    = prometheus.NewDesc("smartgo_dispatch_lag_bytes", "Commitlog bytes not yet dispatched to consume queues.", nil, nil)
	descIndexLag       = prometheus.NewDesc("smartgo_index_lag_bytes", "Commitlog bytes dispatched but not yet in the key index.", nil, nil)
	descHeldPulls      = prometheus.NewDesc("smartgo_held_pulls", "Pull requests held by long polling.", nil, nil)
	descFlushedOffset  = prometheus.NewDesc("smartgo_commitlog_flushed_offset", "Commitlog offset made durable.", nil, nil)
	descFlushLatency   = prometheus.NewDesc("smartgo_store_flush_latency_seconds", "Duration of commitlog fdatasync rounds.", nil, nil)
	descDiskUsed       = prometheus.NewDesc("smartgo_store_disk_used_ratio", "Used fraction (0..1) of the file system holding the store.", nil, nil)
	descBadRecords     = prometheus.NewDesc("smartgo_store_bad_records_total", "Records refused on a read path (pull, lookup, query, replication) because they failed verification: damaged on disk, never served.", nil, nil)
	descIndexDamaged   = prometheus.NewDesc("smartgo_store_index_files_damaged_total", "Key index files found damaged (at start, or by the check of older files that follows it); each is rebuilt from the commitlog.", nil, nil)
	descIndexRebuilt   = prometheus.NewDesc("smartgo_store_index_files_rebuilt_total", "Damaged key index files rebuilt from the commitlog.", nil, nil)
	descCQRebuilt      = prometheus.NewDesc("smartgo_store_cq_entries_rebuilt_total", "Damaged consume-queue entries a read rebuilt from the commitlog.", nil, nil)
	descCQLost         = prometheus.NewDesc("smartgo_store_cq_entries_lost_total", "Damaged consume-queue entries whose record the commitlog no longer holds (made holes, never served).", nil, nil)
	descForceDeleted   = prometheus.NewDesc("smartgo_store_force_deleted_unconsumed_total", "Messages retention deleted before every consumer group consumed them (store.disk_force_clean).", nil, nil)
	descRetainHeld     = prometheus.NewDesc("smartgo_store_retain_held_bytes", "Commitlog bytes the last retention run kept only because a protected queue (an AMQP durable queue, the AMQP definitions) still needs them: expired, or the oldest above the force-clean mark.", nil, nil)
	descOpenFiles      = prometheus.NewDesc("smartgo_store_open_files", "Descriptors the store holds of its segments, consume-queue and index files (at most store.max_open_files but for the calls using one; the others are read through their mappings).", nil, nil)
	descFileReopens    = prometheus.NewDesc("smartgo_store_file_reopens_total", "Store files opened again to be written or synced after their descriptor was closed (store.max_open_files).", nil, nil)
	descWritesRefused  = prometheus.NewDesc("smartgo_store_writes_refused", "1 while the store refuses writes (disk over the full mark, or a write failed), else 0.", []string{"reason"}, nil)
	descStoreEvents    = prometheus.NewDesc("smartgo_store_events_total", "Store events by kind (segment-rolled, segment-deleted, corruption, slow-flush, disk-full, disk-ok, write-failed, queue-gap, truncated).", []string{"kind"}, nil)
	descReplLagBytes   = prometheus.NewDesc("smartgo_replication_lag_bytes", "Master: commitlog end minus the best slave's acknowledged end. Slave: its master's end minus its own.", nil, nil)
	descReplLagSeconds = prometheus.NewDesc("smartgo_replication_lag_seconds", "How long replication has been behind (0 while caught up; sampled every second).", nil, nil)
	descSlaves         = prometheus.NewDesc("smartgo_replication_slaves", "Slaves connected to this master.", nil, nil)
	descReplRefused    = prometheus.NewDesc("smartgo_replication_refused", "Slave: 1 while its master refuses it, by why (mismatch: another group or segment size; slave-ahead; slave-behind; diverged; protocol), else 0. A refused slave keeps its data and retries; it needs an operator.", []string{"reason"}, nil)
	descInfo           = prometheus.NewDesc("smartgo_broker_info", "Always 1; labels name the broker.", []string{"cluster", "broker", "id", "role", "addr"}, nil)
)

func (c storeCollector) Describe(ch chan<- *prometheus.Desc) {
	for _, d := range []*prometheus.Desc{descCommitLogMax, descCommitLogMin, descDispatchLag, descIndexLag, descHeldPulls,
		descFlushedOffset, descFlushLatency, descDiskUsed, descBadRecords, descIndexDamaged, descIndexRebuilt, descCQRebuilt, descCQLost, descForceDeleted, descRetainHeld, descOpenFiles, descFileReopens, descWritesRefused, descStoreEvents, descReplLagBytes,
		descReplLagSeconds, descSlaves, descReplRefused, descInfo} {
		ch <- d
	}
}

func (c storeCollector) Collect(ch chan<- prometheus.Metric) {
	b := c.b
	s := b.store
	st := s.Stats()
	gauge := func(d *prometheus.Desc, v float64, labels ...string) {
		ch <- prometheus.MustNewConstMetric(d, prometheus.GaugeValue, v, labels...)
	}
	gauge(descCommitLogMax, float64(st.MaxPhysical))
	gauge(descCommitLogMin, float64(st.MinPhysical))
	gauge(descDispatchLag, float64(st.DispatchLagBytes))
	gauge(descIndexLag, float64(st.IndexLagBytes))
	gauge(descHeldPulls, float64(b.hold.Len()))
	gauge(descFlushedOffset, float64(s.FlushedPhysicalOffset()))

	buckets := make(map[float64]uint64, len(store.LatencyBuckets))
	var cum uint64
	for i, ub := range store.LatencyBuckets {
		cum += uint64(st.FlushLatency[i])
		buckets[ub.Seconds()] = cum
	}
	ch <- prometheus.MustNewConstHistogram(descFlushLatency, uint64(st.Flushes), st.FlushTime.Seconds(), buckets)

	gauge(descDiskUsed, s.DiskUsed())
	ch <- prometheus.MustNewConstMetric(descBadRecords, prometheus.CounterValue, float64(st.BadRecords))
	ch <- prometheus.MustNewConstMetric(descIndexDamaged, prometheus.CounterValue, float64(st.IndexFilesDamaged))
	ch <- prometheus.MustNewConstMetric(descIndexRebuilt, prometheus.CounterValue, float64(st.IndexFilesRebuilt))
	ch <- prometheus.MustNewConstMetric(descCQRebuilt, prometheus.CounterValue, float64(st.CQEntriesRebuilt))
	ch <- prometheus.MustNewConstMetric(descCQLost, prometheus.CounterValue, float64(st.CQEntriesLost))
	ch <- prometheus.MustNewConstMetric(descForceDeleted, prometheus.CounterValue, float64(st.ForceDeletedUnconsumed))
	gauge(descRetainHeld, float64(st.RetainHeldBytes))
	gauge(descOpenFiles, float64(st.OpenFiles))
	ch <- prometheus.MustNewConstMetric(descFileReopens, prometheus.CounterValue, float64(st.FileReopens))
	gauge(descWritesRefused, b2f(st.DiskFull), "disk-full")
	gauge(descWritesRefused, b2f(st.WriteFailed), "write-failed")

	b.metrics.evMu.Lock()
	for k, n := range b.metrics.events {
		ch <- prometheus.MustNewConstMetric(descStoreEvents, prometheus.CounterValue, float64(n), k.String())
	}
	b.metrics.evMu.Unlock()

	if lag, behind, ok := b.ReplicationLag(); ok {
		gauge(descReplLagBytes, float64(lag))
		gauge(descReplLagSeconds, behind.Seconds())
	}
	if srv := b.haSrv.Load(); srv != nil {
		gauge(descSlaves, float64(len(srv.Slaves())))
	}
	if cli := b.haCli.Load(); cli != nil {
		why := cli.Refusal()
		for _, r := range ha.Refusals {
			gauge(descReplRefused, b2f(why == r), r)
		}
	}
	id, _ := b.registryBrokerID()
	gauge(descInfo, 1, b.opts.ClusterName, b.opts.BrokerName, fmt.Sprint(id), b.roleName(), b.addr)
}

func b2f(v bool) float64 {
	if v {
		return 1
	}
	return 0
}
