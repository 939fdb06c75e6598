package main

import (
	"fmt"
	"log/slog"

	"github.com/smartgo/smartgo/broker"
	"github.com/smartgo/smartgo/conf"
	"github.com/smartgo/smartgo/store"
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
	o.CheckCRCOnRecover = s.CheckCRCOnRecover
	o.VerifyAllOnCrash = s.VerifyAllOnCrash
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
		AutoCreateGroup: c.AutoCreateSubscriptionGrp, DefaultTopicQueues: int32(c.DefaultTopicQueues),
		LongPolling: c.LongPolling, SlaveReadEnable: c.SlaveReadEnable, DelayLevels: levels,
		ClientExpiry: c.ClientExpiry.D(), OffsetPersistPeriod: c.ConsumerOffsetPersistEvery.D(),
		Store: storeOptions(f.Store, c.InMemoryMaxRatio, log), Logger: log,
		HAListen: c.HAListen, HAMasterAddress: c.HAMasterAddress, SlaveAckTimeout: f.Store.SyncFlushTimeout.D(),
	}
	o.Remoting.IdleTimeout = c.IdleTimeout.D()
	o.Remoting.MaxFrameSize = c.MaxFrameSize.Bytes()
	return o, o.Validate()
}
