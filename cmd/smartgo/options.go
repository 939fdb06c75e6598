package main

import (
	"fmt"
	"log/slog"
	"slices"

	"github.com/smartgo/smartgo/bridge"
	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/client/statestore/router"
	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/statestore"
	"github.com/smartgo/smartgo/store"
	"github.com/smartgo/smartgo/store/ha"
	"github.com/smartgo/smartgo/twin"
)

// storeOptions maps [store] (and the broker's in-memory ratio) onto
// store.Options.
func storeOptions(s conf.Store, inMemoryRatio int, log *slog.Logger) store.Options {
	o := store.DefaultOptions(s.Root)
	o.SegmentSize = s.SegmentSize.Bytes()
	o.CQEntriesPerFile = s.CQEntriesPerFile
	o.IndexSlots = s.IndexSlots
	o.IndexEntries = s.IndexEntries
	o.MaxMessageSize = int(s.MaxMessageSize.Bytes())
	if s.Flush == "sync" {
		o.FlushMode = store.FlushSync
	}
	switch s.AsyncWrites {
	case "mapped":
		o.AsyncWrites = store.AsyncWriteMapped
	case "pwrite":
		o.AsyncWrites = store.AsyncWritePwrite
	}
	o.FlushInterval = s.FlushInterval.D()
	o.SyncFlushTimeout = s.SyncFlushTimeout.D()
	o.FileReservedTime = s.FileReservedTime.D()
	o.DeleteWhen = s.DeleteWhen
	o.DiskMaxUsedRatio = float64(s.DiskMaxUsedRatio) / 100
	o.DiskForceCleanRatio = float64(s.DiskForceCleanRatio) / 100
	o.DiskFullRatio = float64(s.DiskFullRatio) / 100
	o.DiskForceClean = s.DiskForceClean
	o.Preallocate = s.Preallocate.Bytes()
	o.CheckCRCOnRecover = s.CheckCRCOnRecover
	o.VerifyAllOnCrash = s.VerifyAllOnCrash
	o.LogicFlushInterval = s.LogicFlushInterval.D()
	o.IndexFlushInterval = s.IndexFlushInterval.D()
	o.CleanInterval = s.CleanInterval.D()
	o.RecoverSegments = s.RecoverSegments
	o.WarmSegments = s.WarmSegments
	o.MaxOpenFiles = s.MaxOpenFiles
	if total := store.TotalMemory(); total > 0 && inMemoryRatio > 0 {
		o.MemoryResidentBytes = int64(total) * int64(inMemoryRatio) / 100
	}
	o.Logger = log
	return o
}

// brokerOptions maps [broker] and [store] onto broker.Options.
func brokerOptions(f conf.File, log *slog.Logger) (broker.Options, error) {
	c := f.Broker
	role, err := broker.ParseRole(c.Role)
	if err != nil {
		return broker.Options{}, err
	}
	levels, err := conf.ParseDelayLevels(c.DelayLevels)
	if err != nil {
		return broker.Options{}, fmt.Errorf("broker.delay_levels: %w", err)
	}
	o := broker.Options{
		BrokerName: c.Name, ClusterName: c.Cluster, BrokerID: c.ID, Role: role,
		ListenAddr: c.Listen, AdvertiseIP: c.AdvertiseIP, Registries: c.Registries,
		RegisterInterval: c.RegisterInterval.D(), AutoCreateTopic: c.AutoCreateTopic,
		AutoCreateGroup: c.AutoCreateSubscriptionGrp, MaxAutoCreatedGroups: c.MaxAutoCreatedGroups,
		DefaultTopicQueues: int32(c.DefaultTopicQueues),
		LongPolling:        c.LongPolling, SlaveReadEnable: c.SlaveReadEnable, DelayLevels: levels,
		ClientExpiry: c.ClientExpiry.D(), OffsetPersistPeriod: c.ConsumerOffsetPersistEvery.D(),
		Store: storeOptions(f.Store, c.InMemoryMaxRatio, log), Logger: log,
		HAListen: c.HAListen, HAMasterAddress: c.HAMasterAddress, SlaveAckTimeout: c.SlaveAckTimeout.D(),
		ShortPollingHold: c.ShortPollingHold.D(), SlaveSyncInterval: c.SlaveSyncInterval.D(),
		MinInSyncReplicas: c.MinInSyncReplicas, SyncLagMax: c.SyncLagMax.D(),
		EnablePropertyFilter: c.EnablePropertyFilter,
		TransactionTimeout:   c.TransactionTimeout.D(), TransactionCheckInterval: c.TransactionCheckInterval.D(),
		TransactionCheckMax: c.TransactionCheckMax,
		// The bridge (in this process or another reading the same file)
		// keeps its sessions and retained messages in these, and delivers
		// live from the others: deleted while it runs, a topic is made again
		// at offset 0 below the bridge's positions, and what is published
		// there is acknowledged and never delivered live.
		ProtectedTopics: bridgeTopics(f.Bridge),
		// An AMQP durable queue keeps a confirmed message until a consumer
		// acks it, and the backend reads the newest definitions snapshot
		// (re-appended every 6 h while a bridge runs, so it pins no more
		// than that unless every bridge is down): retention must not
		// delete them, however old.
		Retained: []broker.RetainRule{
			{Prefix: bridge.AMQPQueuePrefix, Group: bridge.AMQPOffsetGroup},
			{Prefix: bridge.AMQPDefinitionsTopic, Newest: 1},
		},
	}
	if len(c.Controllers) > 0 {
		o.Controllers = c.Controllers
	}
	o.Remoting.ConnOptions = remoting.ConnOptions{IdleTimeout: c.IdleTimeout.D(), MaxFrameSize: c.MaxFrameSize.Bytes(),
		WriteTimeout: c.WriteTimeout.D(), MaxWriteQueue: c.MaxWriteQueue.Bytes(), RequestTimeout: c.RequestTimeout.D(),
		ReadCoalesce: c.ReadCoalesce.D()}
	o.Remoting.ReadBuffer = int(c.ReadBuffer.Bytes())
	if o.Remoting.ReadCoalesce == 0 {
		o.Remoting.ReadCoalesce = -1 // "0s" turns it off
	}
	if o.Remoting.ReadBuffer == 0 {
		o.Remoting.ReadBuffer = -1 // "0" leaves it to the kernel
	}
	o.Remoting.SendPool = remoting.PoolOptions{Workers: c.SendWorkers, QueueSize: c.SendQueue}
	o.Remoting.PullPool = remoting.PoolOptions{Workers: c.PullWorkers, QueueSize: c.PullQueue}
	o.Remoting.AdminPool = remoting.PoolOptions{Workers: c.AdminWorkers, QueueSize: c.AdminQueue}
	o.Remoting.HeartbeatPool = remoting.PoolOptions{Workers: c.HeartbeatWorkers, QueueSize: c.HeartbeatQueue}
	o.Remoting.DefaultPool = remoting.PoolOptions{Workers: c.DefaultWorkers, QueueSize: c.DefaultQueue}
	o.HA = ha.Options{HeartbeatInterval: c.HAHeartbeatInterval.D(), IdleTimeout: c.HAIdleTimeout.D(),
		FallBehindMax: c.HAFallBehindMax.Bytes(), ReconnectMin: c.HAReconnectMin.D(), ReconnectMax: c.HAReconnectMax.D()}
	return o, o.Validate()
}

// stateStoreOptions maps [statestore] onto the shards a broker hosts.
func stateStoreOptions(s conf.StateStore) broker.StateStoreOptions {
	return broker.StateStoreOptions{
		Shards: s.Shards, Dir: s.Dir, SnapshotInterval: s.SnapshotInterval.D(),
		Engine: statestore.Options{
			NodeID: s.NodeID, MaxKeys: s.MaxKeys, MaxBytes: s.MaxBytes.Bytes(),
			MaxKeySize: int(s.MaxKeySize.Bytes()), MaxValueSize: int(s.MaxValueSize.Bytes()),
			MaxClockSkew: s.MaxClockSkew.D(), HistoryLen: s.HistoryLen, HistoryBytes: s.HistoryBytes.Bytes(),
			DedupLen: s.DedupLen, MaxWatchesPerClient: s.MaxWatchesPerClient,
		},
	}
}

// twinOptions maps [twin] onto the broker's twin shards.
func twinOptions(t conf.Twin) broker.TwinOptions {
	var paths []string // nil when none, as the package's default
	if len(t.IndexPaths) > 0 {
		paths = t.IndexPaths
	}
	return broker.TwinOptions{
		Shards: t.Shards, Dir: t.Dir, SnapshotInterval: t.SnapshotInterval.D(),
		EventsTopic: t.EventsTopic, NoEvents: !t.Events,
		Engine: twin.Options{MaxModulesPerDevice: t.MaxModulesPerDevice, IndexPaths: paths, MaxPageSize: t.MaxPageSize},
	}
}

// bridgeTopics are the topics the MQTT bridge configured by b keeps its
// state in or delivers from: its sessions', its retained messages', its
// default (ingress) and egress topics and its routes' topics, each once.
func bridgeTopics(b conf.Bridge) []string {
	out := []string{b.SessionTopic, b.RetainedTopic, b.DefaultTopic, b.EgressTopic}
	for _, r := range b.Routes {
		out = append(out, r.Topic)
	}
	out = slices.DeleteFunc(out, func(t string) bool { return t == "" })
	slices.Sort(out)
	return slices.Compact(out)
}

// frontOptions maps [bridge] and [statestore] onto the bridge's state
// store front (its Hook, Local brokers and Logger are the caller's).
func frontOptions(b conf.Bridge, s conf.StateStore) bridge.StateStoreFrontOptions {
	return bridge.StateStoreFrontOptions{
		Router:      router.Options{Registries: b.Registries, RouteRefresh: s.RouteRefresh.D(), RequestTimeout: s.RequestTimeout.D()},
		DropTimeout: s.DropTimeout.D(),
	}
}
