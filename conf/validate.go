package conf

import (
	"encoding/base64"
	"errors"
	"fmt"
	"net"
	"regexp"
	"slices"
	"strconv"
	"strings"
	"time"
)

// Validate checks every section and returns all problems joined, each
// naming its key and the allowed values.
func (f *File) Validate() error {
	v := &validator{}
	f.Log.validate(v)
	f.Registry.validate(v)
	f.Broker.validate(v)
	f.Store.validate(v)
	f.Bridge.validate(v)
	f.Controller.validate(v)
	v.addr("metrics.listen", f.Metrics.Listen, true)
	f.Console.validate(v)
	f.StateStore.validate(v)
	f.Twin.validate(v)
	f.IoTHub.validate(v, &f.Bridge)
	f.AMQP.validate(v)
	return v.err()
}

// Validate checks the [amqp] section.
func (a *AMQP) Validate() error { v := &validator{}; a.validate(v); return v.err() }

func (a *AMQP) validate(v *validator) {
	v.addr("amqp.listen", a.Listen, true)
	if len(a.VHosts) == 0 {
		v.bad("amqp.vhosts", "[]", `must name at least one virtual host (RabbitMQ's default is "/")`)
	}
	seen := map[string]bool{}
	for _, h := range a.VHosts {
		switch {
		case h == "" || len(h) > 255:
			v.bad("amqp.vhosts", strconv.Quote(h), "a virtual host name must be 1 to 255 bytes")
		case seen[h]:
			v.bad("amqp.vhosts", strconv.Quote(h), "listed twice")
		}
		seen[h] = true
	}
	v.intRange("amqp.channel_max", int64(a.ChannelMax), 1, 65535)
	v.sizeRange("amqp.frame_max", a.FrameMax, 4096, 1<<30)
	v.durRange("amqp.heartbeat", a.Heartbeat, 0, 65535*time.Second)
	if a.Heartbeat.D()%time.Second != 0 {
		v.bad("amqp.heartbeat", a.Heartbeat.D(), `must be whole seconds (AMQP negotiates seconds); "0s" = off`)
	}
	v.sizeRange("amqp.max_message_size", a.MaxMessageSize, 1, 512<<20)
	v.sizeRange("amqp.max_queue_bytes", a.MaxQueueBytes, 1<<10, 1<<40)
}

// Validate checks the [log] section.
func (l *Log) Validate() error { v := &validator{}; l.validate(v); return v.err() }

// Validate checks the [registry] section.
func (r *Registry) Validate() error { v := &validator{}; r.validate(v); return v.err() }

// Validate checks the [broker] section.
func (b *Broker) Validate() error { v := &validator{}; b.validate(v); return v.err() }

// Validate checks the [store] section.
func (s *Store) Validate() error { v := &validator{}; s.validate(v); return v.err() }

// Validate checks the [controller] section.
func (c *Controller) Validate() error { v := &validator{}; c.validate(v); return v.err() }

// Validate checks the [statestore] section.
func (s *StateStore) Validate() error { v := &validator{}; s.validate(v); return v.err() }

// Validate checks the [twin] section.
func (t *Twin) Validate() error { v := &validator{}; t.validate(v); return v.err() }

// Validate checks the [iothub] section alone (with the bridge's TLS files
// it may fall back on).
func (h *IoTHub) Validate(b *Bridge) error { v := &validator{}; h.validate(v, b); return v.err() }

// Validate checks the [bridge] section.
func (b *Bridge) Validate() error { v := &validator{}; b.validate(v); return v.err() }

type validator struct{ errs []error }

func (v *validator) bad(key string, value any, why string) {
	v.errs = append(v.errs, fmt.Errorf("%w: %s = %v: %s", ErrInvalid, key, value, why))
}

func (v *validator) err() error { return errors.Join(v.errs...) }

func (v *validator) oneOf(key, value string, allowed ...string) {
	for _, a := range allowed {
		if value == a {
			return
		}
	}
	v.bad(key, strconv.Quote(value), "must be one of "+strings.Join(allowed, ", "))
}

func (v *validator) intRange(key string, value, lo, hi int64) {
	if value < lo || value > hi {
		v.bad(key, value, fmt.Sprintf("must be between %d and %d", lo, hi))
	}
}

func (v *validator) sizeRange(key string, value, lo, hi Size) {
	if value < lo || value > hi {
		v.bad(key, value, fmt.Sprintf("must be between %s and %s", lo, hi))
	}
}

func (v *validator) durRange(key string, value Duration, lo, hi time.Duration) {
	if value.Duration < lo || value.Duration > hi {
		v.bad(key, value.Duration, fmt.Sprintf("must be between %s and %s", lo, hi))
	}
}

// addr checks a host:port listen or dial address; empty is allowed when
// optional.
func (v *validator) addr(key, value string, optional bool) {
	if value == "" {
		if !optional {
			v.bad(key, `""`, "must be host:port")
		}
		return
	}
	host, port, err := net.SplitHostPort(value)
	if err != nil {
		v.bad(key, strconv.Quote(value), "must be host:port")
		return
	}
	if host != "" && net.ParseIP(host) == nil && !validHostname(host) {
		v.bad(key, strconv.Quote(value), "host must be an IP address or a host name")
	}
	p, err := strconv.Atoi(port)
	if err != nil || p < 0 || p > 65535 {
		v.bad(key, strconv.Quote(value), "port must be between 0 and 65535")
	}
}

var hostnameRE = regexp.MustCompile(`^[A-Za-z0-9]([A-Za-z0-9.-]{0,251}[A-Za-z0-9])?$`)

func validHostname(h string) bool { return hostnameRE.MatchString(h) }

// topicRE is RocketMQ's rule for topic and group names.
var topicRE = regexp.MustCompile(`^[%|a-zA-Z0-9_-]{1,127}$`)

func (l *Log) validate(v *validator) {
	v.oneOf("log.level", l.Level, "debug", "info", "warn", "error")
	v.oneOf("log.format", l.Format, "text", "json")
}

func (r *Registry) validate(v *validator) {
	v.addr("registry.listen", r.Listen, false)
	if r.KVConfigPath == "" {
		v.bad("registry.kv_config_path", `""`, "must be a file path")
	}
	v.durRange("registry.scan_interval", r.ScanInterval, 100*time.Millisecond, time.Hour)
	v.durRange("registry.broker_expiry", r.BrokerExpiry, time.Second, 24*time.Hour)
	v.durRange("registry.idle_timeout", r.IdleTimeout, time.Second, 24*time.Hour)
	v.sizeRange("registry.max_frame_size", r.MaxFrameSize, 64<<10, 1<<30)
}

// A cluster name is 1-127 characters, as a topic's. The cluster's
// request-reply topic is the name followed by "_REPLY_TOPIC"
// (protocol.ReplyTopicSuffix), so a name of more than 115 characters has
// none: the broker says so at start (a WARN) and request-reply fails
// for its cluster, the rest works. Such names are accepted all the same,
// as SmartGo took them before it knew: refusing them would stop a broker
// that worked from starting after an upgrade.

func (b *Broker) validate(v *validator) {
	if !topicRE.MatchString(b.Name) || strings.ContainsAny(b.Name, "%|") {
		v.bad("broker.name", strconv.Quote(b.Name), "must be 1-127 characters of [a-zA-Z0-9_-]")
	}
	if !topicRE.MatchString(b.Cluster) || strings.ContainsAny(b.Cluster, "%|") {
		v.bad("broker.cluster", strconv.Quote(b.Cluster), "must be 1-127 characters of [a-zA-Z0-9_-] (at most 115 for request-reply: its reply topic is the name followed by \"_REPLY_TOPIC\")")
	}
	v.oneOf("broker.role", b.Role, "async_master", "sync_master", "slave")
	switch {
	case len(b.Controllers) > 0:
		if b.Role == "slave" {
			v.bad("broker.role", `"slave"`, "with broker.controllers the controller picks master and slaves; role says how a master acknowledges: sync_master or async_master")
		}
		for i, c := range b.Controllers {
			v.addr(fmt.Sprintf("broker.controllers[%d]", i), c, false)
		}
	case b.Role == "slave" && b.ID <= 0:
		v.bad("broker.id", b.ID, "a slave must have an id between 1 and 1023")
	case b.Role != "slave" && b.ID != 0:
		v.bad("broker.id", b.ID, "a master must have id 0 (slaves use 1-1023 with role = \"slave\")")
	}
	v.intRange("broker.id", b.ID, 0, 1023)
	v.addr("broker.listen", b.Listen, false)
	if b.AdvertiseIP != "" && net.ParseIP(b.AdvertiseIP) == nil {
		v.bad("broker.advertise_ip", strconv.Quote(b.AdvertiseIP), "must be an IP address")
	}
	v.addr("broker.ha_listen", b.HAListen, true)
	v.addr("broker.ha_master_address", b.HAMasterAddress, true)
	for i, r := range b.Registries {
		v.addr(fmt.Sprintf("broker.registries[%d]", i), r, false)
	}
	v.durRange("broker.register_interval", b.RegisterInterval, 10*time.Second, 60*time.Second)
	v.intRange("broker.default_topic_queues", int64(b.DefaultTopicQueues), 1, 1024)
	v.intRange("broker.max_auto_created_groups", int64(b.MaxAutoCreatedGroups), 1, 1<<30)
	v.intRange("broker.in_memory_max_ratio", int64(b.InMemoryMaxRatio), 1, 100)
	if _, err := ParseDelayLevels(b.DelayLevels); err != nil {
		v.bad("broker.delay_levels", strconv.Quote(b.DelayLevels), err.Error())
	}
	v.durRange("broker.client_expiry", b.ClientExpiry, time.Second, 24*time.Hour)
	v.durRange("broker.idle_timeout", b.IdleTimeout, time.Second, 24*time.Hour)
	v.durRange("broker.read_coalesce", b.ReadCoalesce, 0, 100*time.Millisecond)
	if b.ReadBuffer != 0 {
		v.sizeRange("broker.read_buffer", b.ReadBuffer, 4<<10, 1<<30)
	}
	v.sizeRange("broker.max_frame_size", b.MaxFrameSize, 64<<10, 1<<30)
	v.durRange("broker.consumer_offset_persist_interval", b.ConsumerOffsetPersistEvery, 100*time.Millisecond, time.Hour)
	v.durRange("broker.short_polling_hold", b.ShortPollingHold, 10*time.Millisecond, time.Minute)
	v.durRange("broker.slave_ack_timeout", b.SlaveAckTimeout, time.Millisecond, time.Minute)
	v.durRange("broker.slave_sync_interval", b.SlaveSyncInterval, 100*time.Millisecond, time.Hour)
	v.durRange("broker.transaction_timeout", b.TransactionTimeout, time.Millisecond, 24*time.Hour)
	v.durRange("broker.transaction_check_interval", b.TransactionCheckInterval, 10*time.Millisecond, 24*time.Hour)
	v.intRange("broker.transaction_check_max", int64(b.TransactionCheckMax), 1, 10000)
	v.durRange("broker.write_timeout", b.WriteTimeout, 100*time.Millisecond, time.Hour)
	v.sizeRange("broker.max_write_queue", b.MaxWriteQueue, 64<<10, 1<<30)
	v.durRange("broker.request_timeout", b.RequestTimeout, 10*time.Millisecond, 10*time.Minute)
	for _, p := range []struct {
		name          string
		workers, size int
	}{{"send", b.SendWorkers, b.SendQueue}, {"pull", b.PullWorkers, b.PullQueue}, {"admin", b.AdminWorkers, b.AdminQueue},
		{"heartbeat", b.HeartbeatWorkers, b.HeartbeatQueue}, {"default", b.DefaultWorkers, b.DefaultQueue}} {
		v.intRange("broker."+p.name+"_workers", int64(p.workers), 1, 4096)
		v.intRange("broker."+p.name+"_queue", int64(p.size), 1, 10_000_000)
	}
	v.durRange("broker.ha_heartbeat_interval", b.HAHeartbeatInterval, 10*time.Millisecond, time.Minute)
	v.durRange("broker.ha_idle_timeout", b.HAIdleTimeout, 100*time.Millisecond, time.Hour)
	if b.HAHeartbeatInterval.Duration >= b.HAIdleTimeout.Duration {
		v.bad("broker.ha_heartbeat_interval", b.HAHeartbeatInterval.Duration,
			fmt.Sprintf("must be below broker.ha_idle_timeout (%s)", b.HAIdleTimeout.Duration))
	}
	v.sizeRange("broker.ha_fall_behind_max", b.HAFallBehindMax, 1<<20, 1<<40)
	v.durRange("broker.ha_reconnect_min", b.HAReconnectMin, time.Millisecond, time.Minute)
	v.durRange("broker.ha_reconnect_max", b.HAReconnectMax, b.HAReconnectMin.Duration, 10*time.Minute)
	v.intRange("broker.min_insync_replicas", int64(b.MinInSyncReplicas), 1, 16)
	v.durRange("broker.sync_lag_max", b.SyncLagMax, 100*time.Millisecond, time.Hour)
}

func (c *Controller) validate(v *validator) {
	v.addr("controller.listen", c.Listen, false)
	v.addr("controller.advertise", c.Advertise, true)
	v.addr("controller.raft_listen", c.RaftListen, false)
	v.addr("controller.raft_advertise", c.RaftAdvertise, true)
	switch len(c.Peers) {
	case 0, 1, 3, 5:
	default:
		v.bad("controller.peers", len(c.Peers), "list 1, 3 or 5 replicas (or none for a single one)")
	}
	for i, p := range c.Peers {
		a, r, ok := strings.Cut(p, "=")
		if !ok {
			v.bad(fmt.Sprintf("controller.peers[%d]", i), strconv.Quote(p), "must be \"addr=raftAddr\", e.g. \"10.0.0.1:9878=10.0.0.1:9880\"")
			continue
		}
		v.addr(fmt.Sprintf("controller.peers[%d] (address)", i), strings.TrimSpace(a), false)
		v.addr(fmt.Sprintf("controller.peers[%d] (raft address)", i), strings.TrimSpace(r), false)
	}
	if c.DataDir == "" {
		v.bad("controller.data_dir", `""`, "must be a directory path")
	}
	v.durRange("controller.heartbeat_interval", c.HeartbeatInterval, 10*time.Millisecond, time.Minute)
	v.durRange("controller.heartbeat_timeout", c.HeartbeatTimeout, time.Second, 10*time.Minute)
	if c.HeartbeatTimeout.Duration < 3*c.HeartbeatInterval.Duration {
		v.bad("controller.heartbeat_timeout", c.HeartbeatTimeout.Duration,
			fmt.Sprintf("must be at least 3 heartbeat intervals (controller.heartbeat_interval = %s)", c.HeartbeatInterval.Duration))
	}
	v.durRange("controller.election_timeout", c.ElectionTimeout, 50*time.Millisecond, time.Minute)
	v.intRange("controller.snapshot_threshold", int64(c.SnapshotThreshold), 16, 1<<20)
}

func (s *Store) validate(v *validator) {
	if s.Root == "" {
		v.bad("store.root", `""`, "must be a directory path")
	}
	v.sizeRange("store.segment_size", s.SegmentSize, 4<<10, 16<<30)
	v.intRange("store.cq_entries_per_file", int64(s.CQEntriesPerFile), 16, 50_000_000)
	v.intRange("store.index_slots", int64(s.IndexSlots), 16, 50_000_000)
	v.intRange("store.index_entries", int64(s.IndexEntries), 16, 100_000_000)
	v.sizeRange("store.max_message_size", s.MaxMessageSize, 1<<10, 128<<20)
	if s.MaxMessageSize+(1<<10) > s.SegmentSize {
		v.bad("store.max_message_size", s.MaxMessageSize, fmt.Sprintf("must be at least 1KiB smaller than store.segment_size (%s)", s.SegmentSize))
	}
	v.sizeRange("store.preallocate", s.Preallocate, 64<<10, 16<<30)
	v.oneOf("store.flush", s.Flush, "async", "sync")
	v.oneOf("store.async_writes", s.AsyncWrites, "hybrid", "mapped", "pwrite")
	v.durRange("store.flush_interval", s.FlushInterval, time.Millisecond, time.Minute)
	v.durRange("store.sync_flush_timeout", s.SyncFlushTimeout, time.Millisecond, time.Minute)
	v.durRange("store.file_reserved_time", s.FileReservedTime, time.Minute, 10*365*24*time.Hour)
	if _, err := ParseDeleteWhen(s.DeleteWhen); err != nil {
		v.bad("store.delete_when", strconv.Quote(s.DeleteWhen), err.Error())
	}
	v.intRange("store.disk_max_used_ratio", int64(s.DiskMaxUsedRatio), 10, 95)
	v.intRange("store.disk_force_clean_ratio", int64(s.DiskForceCleanRatio), 10, 99)
	v.intRange("store.disk_full_ratio", int64(s.DiskFullRatio), 10, 99)
	if s.DiskMaxUsedRatio > s.DiskForceCleanRatio || s.DiskForceCleanRatio > s.DiskFullRatio {
		v.bad("store.disk_force_clean_ratio", s.DiskForceCleanRatio,
			fmt.Sprintf("must satisfy disk_max_used_ratio (%d) <= disk_force_clean_ratio <= disk_full_ratio (%d)", s.DiskMaxUsedRatio, s.DiskFullRatio))
	}
	v.durRange("store.logic_flush_interval", s.LogicFlushInterval, 10*time.Millisecond, time.Minute)
	v.durRange("store.index_flush_interval", s.IndexFlushInterval, 100*time.Millisecond, time.Hour)
	v.durRange("store.clean_interval", s.CleanInterval, 100*time.Millisecond, time.Hour)
	v.intRange("store.recover_segments", int64(s.RecoverSegments), 1, 1000)
	v.intRange("store.max_open_files", int64(s.MaxOpenFiles), 8, 1_000_000)
}

func (s *StateStore) validate(v *validator) {
	v.intRange("statestore.shards", int64(s.Shards), 1, 1024)
	v.durRange("statestore.snapshot_interval", s.SnapshotInterval, time.Second, 24*time.Hour)
	if s.NodeID == "" || len(s.NodeID) > 64 || strings.Contains(s.NodeID, ":") {
		v.bad("statestore.node_id", strconv.Quote(s.NodeID), "must be 1-64 bytes without ':'")
	}
	v.intRange("statestore.max_keys", int64(s.MaxKeys), 1, 1<<31-1)
	v.sizeRange("statestore.max_bytes", s.MaxBytes, 1<<10, 1<<40)
	v.sizeRange("statestore.max_key_size", s.MaxKeySize, 1, 1<<20)
	v.sizeRange("statestore.max_value_size", s.MaxValueSize, 1, 100<<20)
	v.durRange("statestore.max_clock_skew", s.MaxClockSkew, time.Second, time.Hour)
	v.intRange("statestore.history_len", int64(s.HistoryLen), 1, 10_000_000)
	v.sizeRange("statestore.history_bytes", s.HistoryBytes, 1<<10, 1<<40)
	v.intRange("statestore.dedup_len", int64(s.DedupLen), 1, 10_000_000)
	v.intRange("statestore.max_watches_per_client", int64(s.MaxWatchesPerClient), 1, 10_000_000)
	v.durRange("statestore.request_timeout", s.RequestTimeout, 100*time.Millisecond, 10*time.Minute)
	v.durRange("statestore.route_refresh", s.RouteRefresh, time.Second, time.Hour)
	v.durRange("statestore.drop_timeout", s.DropTimeout, 100*time.Millisecond, time.Minute)
}

func (b *Bridge) validate(v *validator) {
	v.addr("bridge.listen", b.Listen, true)
	v.addr("bridge.tls_listen", b.TLSListen, true)
	if b.Listen == "" && b.TLSListen == "" {
		v.bad("bridge.listen", `""`, "bridge.listen or bridge.tls_listen must be set")
	}
	if b.TLSListen != "" && (b.TLSCert == "" || b.TLSKey == "") {
		v.bad("bridge.tls_listen", strconv.Quote(b.TLSListen), "needs bridge.tls_cert and bridge.tls_key")
	}
	for i, r := range b.Registries {
		v.addr(fmt.Sprintf("bridge.registries[%d]", i), r, false)
	}
	v.sizeRange("bridge.max_packet_size", b.MaxPacketSize, 128, 268435455)
	v.intRange("bridge.receive_maximum", int64(b.ReceiveMaximum), 1, 65535)
	v.intRange("bridge.max_client_id_len", int64(b.MaxClientIDLen), 0, 65535)
	v.intRange("bridge.max_identity_len", int64(b.MaxIdentityLen), 0, 2*65535)
	v.durRange("bridge.max_keep_alive", b.MaxKeepAlive, time.Second, 65535*time.Second)
	v.durRange("bridge.max_session_expiry", b.SessionExpiry, 0, 4294967295*time.Second)
	v.durRange("bridge.sys_interval", b.SysInterval, 0, 24*time.Hour)
	v.durRange("bridge.heartbeat_interval", b.HeartbeatEvery, time.Second, 60*time.Second)
	if !topicRE.MatchString(b.DefaultTopic) {
		v.bad("bridge.default_topic", strconv.Quote(b.DefaultTopic), "must be 1-127 characters of [%|a-zA-Z0-9_-]")
	}
	if !topicRE.MatchString(b.EgressTopic) {
		v.bad("bridge.egress_topic", strconv.Quote(b.EgressTopic), "must be 1-127 characters of [%|a-zA-Z0-9_-]")
	}
	v.intRange("bridge.topic_alias_maximum", int64(b.TopicAliasMaximum), 0, 65535)
	v.intRange("bridge.max_queued_messages", int64(b.MaxQueuedMessages), 1, 10_000_000)
	v.sizeRange("bridge.max_outbound", b.MaxOutbound, 4<<10, 1<<30)
	v.durRange("bridge.slow_reader_timeout", b.SlowReaderTimeout, 0, time.Hour)
	v.sizeRange("bridge.max_inbound_memory", b.MaxInboundMemory, 1<<20, 1<<40)
	v.durRange("bridge.inbound_stall_timeout", b.InboundStall, 100*time.Millisecond, time.Hour)
	v.durRange("bridge.connect_timeout", b.ConnectTimeout, 100*time.Millisecond, 10*time.Minute)
	v.durRange("bridge.session_load_timeout", b.SessionLoadTimeout, 100*time.Millisecond, time.Hour)
	v.intRange("bridge.workers", int64(b.Workers), 1, 65536)
	v.intRange("bridge.pollers", int64(b.Pollers), 0, 256)
	v.durRange("bridge.poll_linger", b.PollLinger, 0, 2*time.Millisecond)
	for key, t := range map[string]string{"bridge.session_topic": b.SessionTopic, "bridge.retained_topic": b.RetainedTopic} {
		if !topicRE.MatchString(t) {
			v.bad(key, strconv.Quote(t), "must be 1-127 characters of [%|a-zA-Z0-9_-]")
		}
	}
	if len(b.NodeID) > 255 {
		v.bad("bridge.node_id", strconv.Quote(b.NodeID), "must be at most 255 bytes")
	}
	v.intRange("bridge.max_offline_messages", int64(b.MaxOfflineMessages), 1, 10_000_000)
	v.intRange("bridge.topic_queues", int64(b.TopicQueues), 1, 1024)
	v.durRange("bridge.start_timeout", b.StartTimeout, time.Second, time.Hour)
	v.durRange("bridge.send_timeout", b.SendTimeout, 100*time.Millisecond, 10*time.Minute)
	v.durRange("bridge.handoff_timeout", b.HandoffTimeout, 10*time.Millisecond, time.Minute)
	v.durRange("bridge.share_refresh", b.ShareRefresh, 10*time.Millisecond, time.Minute)
	v.durRange("bridge.checkpoint_interval", b.CheckpointInterval, 100*time.Millisecond, time.Hour)
	v.durRange("bridge.will_claim_grace", b.WillClaimGrace, 100*time.Millisecond, 10*time.Minute)
	v.durRange("bridge.refresh_age", b.RefreshAge, time.Minute, 30*24*time.Hour)
	for i, r := range b.Routes {
		if err := validTopicFilter(r.Filter); err != nil {
			v.bad(fmt.Sprintf("bridge.route[%d].filter", i), strconv.Quote(r.Filter), err.Error())
		}
		if !topicRE.MatchString(r.Topic) {
			v.bad(fmt.Sprintf("bridge.route[%d].topic", i), strconv.Quote(r.Topic), "must be 1-127 characters of [%|a-zA-Z0-9_-]")
		}
	}
}

// validTopicFilter applies the MQTT rules for a topic filter: non-empty,
// '#' only as the whole last level, '+' only as a whole level.
func validTopicFilter(f string) error {
	if f == "" {
		return errors.New("must not be empty")
	}
	levels := strings.Split(f, "/")
	for i, l := range levels {
		if strings.Contains(l, "#") && (l != "#" || i != len(levels)-1) {
			return errors.New("'#' must be the whole last level")
		}
		if strings.Contains(l, "+") && l != "+" {
			return errors.New("'+' must be a whole level")
		}
	}
	return nil
}

// ParseDelayLevels parses RocketMQ's delay level list ("1s 5s 10s 30s 1m
// ... 2h", units s, m, h, d) into durations; level L is index L-1.
func ParseDelayLevels(s string) ([]time.Duration, error) {
	fields := strings.Fields(s)
	if len(fields) == 0 || len(fields) > 64 {
		return nil, errors.New("must list 1 to 64 levels like \"1s 5s 1m 2h\"")
	}
	out := make([]time.Duration, 0, len(fields))
	for _, f := range fields {
		unit := map[byte]time.Duration{'s': time.Second, 'm': time.Minute, 'h': time.Hour, 'd': 24 * time.Hour}[f[len(f)-1]]
		n, err := strconv.Atoi(f[:len(f)-1])
		if unit == 0 || err != nil || n <= 0 {
			return nil, fmt.Errorf("level %q must be a positive number with unit s, m, h or d", f)
		}
		out = append(out, time.Duration(n)*unit)
	}
	return out, nil
}

// ParseDeleteWhen parses the hours at which expired files are deleted: a
// ';'-separated list of two-digit hours, "04" or "04;16".
func ParseDeleteWhen(s string) ([]int, error) {
	var hours []int
	for _, p := range strings.Split(s, ";") {
		p = strings.TrimSpace(p)
		h, err := strconv.Atoi(p)
		if err != nil || h < 0 || h > 23 || p == "" {
			return nil, fmt.Errorf("hour %q must be between 00 and 23 (list separated by ';')", p)
		}
		hours = append(hours, h)
	}
	return hours, nil
}

func (t *Twin) validate(v *validator) {
	v.intRange("twin.shards", int64(t.Shards), 1, 1024)
	v.durRange("twin.snapshot_interval", t.SnapshotInterval, time.Second, 24*time.Hour)
	if t.Events && !topicRE.MatchString(t.EventsTopic) {
		v.bad("twin.events_topic", strconv.Quote(t.EventsTopic), "must be 1-127 letters, digits, '-', '_' or '%'")
	}
	v.intRange("twin.max_modules_per_device", int64(t.MaxModulesPerDevice), 1, 10000)
	v.intRange("twin.max_page_size", int64(t.MaxPageSize), 1, 100000)
	for _, p := range t.IndexPaths {
		if !strings.HasPrefix(p, "properties.desired.") && !strings.HasPrefix(p, "properties.reported.") || strings.Contains(p, "..") || strings.HasSuffix(p, ".") {
			v.bad("twin.index_paths", strconv.Quote(p), "each must be properties.desired.<path> or properties.reported.<path>")
		}
	}
}

func (c *Console) validate(v *validator) {
	v.addr("console.listen", c.Listen, true)
	for i, r := range c.Registries {
		v.addr(fmt.Sprintf("console.registries[%d]", i), r, false)
	}
	if c.Listen != "" && c.CredentialsFile == "" {
		if host, _, err := net.SplitHostPort(c.Listen); err == nil {
			if ip := net.ParseIP(host); host != "localhost" && (ip == nil || !ip.IsLoopback()) {
				v.bad("console.listen", strconv.Quote(c.Listen), "without console.credentials_file the console may listen on a loopback address only (127.0.0.1:8080)")
			}
		}
	}
	v.durRange("console.sample_interval", c.SampleInterval, time.Second, time.Minute)
	v.durRange("console.session_ttl", c.SessionTTL, time.Minute, 30*24*time.Hour)
	v.durRange("console.request_timeout", c.RequestTimeout, time.Second, 5*time.Minute)
}

// IoTHub permissions ([[iothub.policy]] permissions).
var iotHubPermissions = []string{"registryRead", "registryWrite", "serviceConnect", "deviceConnect"}

func (h *IoTHub) validate(v *validator, b *Bridge) {
	v.oneOf("iothub.device_auth", h.DeviceAuth, "registry", "none")
	if strings.ContainsAny(h.HostName, "/ ?&") {
		v.bad("iothub.hostname", strconv.Quote(h.HostName), "must be a host name")
	}
	v.addr("iothub.https_listen", h.HTTPSListen, true)
	if h.Enabled && h.HTTPSListen != "" && (h.TLSCert == "" && b.TLSCert == "" || h.TLSKey == "" && b.TLSKey == "") {
		v.bad("iothub.https_listen", strconv.Quote(h.HTTPSListen), "needs iothub.tls_cert and iothub.tls_key (or bridge.tls_cert and bridge.tls_key)")
	}
	v.addr("iothub.amqps_listen", h.AMQPSListen, true)
	if h.Enabled && h.AMQPSListen != "" && (h.TLSCert == "" && b.TLSCert == "" || h.TLSKey == "" && b.TLSKey == "") {
		v.bad("iothub.amqps_listen", strconv.Quote(h.AMQPSListen), "needs iothub.tls_cert and iothub.tls_key (or bridge.tls_cert and bridge.tls_key)")
	}
	for key, t := range map[string]string{"iothub.events_topic": h.EventsTopic, "iothub.rpc_topic": h.RPCTopic, "iothub.feedback_topic": h.FeedbackTopic} {
		if !topicRE.MatchString(t) {
			v.bad(key, strconv.Quote(t), "must be 1-127 characters of [%|a-zA-Z0-9_-]")
		}
	}
	v.durRange("iothub.method_ack_timeout", h.MethodAckTimeout, 100*time.Millisecond, time.Minute)
	v.durRange("iothub.feedback_lock_duration", h.FeedbackLock, 5*time.Second, 5*time.Minute) // IoT Hub's range
	v.durRange("iothub.max_method_timeout", h.MaxMethodTimeout, time.Second, time.Hour)
	v.durRange("iothub.c2d_ttl", h.C2DTTL, time.Second, 30*24*time.Hour)
	v.durRange("iothub.c2d_max_ttl", h.C2DMaxTTL, time.Second, 30*24*time.Hour)
	v.intRange("iothub.c2d_max_queue_depth", int64(h.C2DMaxQueueDepth), 1, 10000) // twin.MaxC2DQueueDepth
	if h.C2DTTL.D() > h.C2DMaxTTL.D() {
		v.bad("iothub.c2d_ttl", h.C2DTTL.D().String(), "must not exceed iothub.c2d_max_ttl")
	}
	v.sizeRange("iothub.c2d_max_size", h.C2DMaxSize, 1, 1<<20)
	v.intRange("iothub.twin_rate", int64(h.TwinRate), 0, 1_000_000)
	v.durRange("iothub.request_timeout", h.RequestTimeout, 100*time.Millisecond, 10*time.Minute)
	v.durRange("iothub.start_timeout", h.StartTimeout, time.Second, time.Hour)
	v.durRange("iothub.route_refresh", h.RouteRefresh, time.Second, time.Hour)
	v.durRange("iothub.watch_check", h.WatchCheck, 100*time.Millisecond, time.Hour)
	v.sizeRange("iothub.max_body", h.MaxBody, 1<<10, 64<<20)
	seen := map[string]bool{}
	for i, p := range h.Policies {
		key := fmt.Sprintf("iothub.policy[%d]", i)
		if p.Name == "" || strings.ContainsAny(p.Name, "&= ") || seen[p.Name] {
			v.bad(key+".name", strconv.Quote(p.Name), "must be a unique name without '&', '=' or spaces")
		}
		seen[p.Name] = true
		if k, err := base64.StdEncoding.DecodeString(p.Key); err != nil || len(k) < 16 {
			v.bad(key+".key", "(hidden)", "must be base64 of at least 16 bytes")
		}
		for _, perm := range p.Permissions {
			if !slices.Contains(iotHubPermissions, perm) {
				v.bad(key+".permissions", strconv.Quote(perm), "must be one of "+strings.Join(iotHubPermissions, ", "))
			}
		}
	}
}
