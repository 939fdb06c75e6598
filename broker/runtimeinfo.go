package broker

import (
	"fmt"
	"path/filepath"
	"runtime"
	"strconv"
	"strings"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// processRuntimeInfo serves GET_BROKER_RUNTIME_INFO.
func (b *Broker) processRuntimeInfo(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	return jsonResponse(protocol.KVTable{Table: b.RuntimeInfo()})
}

// versionDesc is the RocketMQ version name of the protocol version SmartGo
// speaks ("V4_9_8"): mqadmin clusterList shows it as the broker version.
var versionDesc = map[int32]string{protocol.VersionV4_9_8: "V4_9_8"}

// RuntimeInfo returns the table GET_BROKER_RUNTIME_INFO serves: every key a
// RocketMQ 4.9 broker reports (mqadmin clusterList and brokerStatus read
// them), with SmartGo's values, the two RocketMQ 5's clusterList adds
// (getTransferredTps, brokerActive), plus SmartGo's own keys (brokerRole,
// replication, per-topic and per-group totals and rates). Rates named
// *Tps are per second over the last 10 s, 60 s and 600 s, space
// separated; per-topic and per-group rates (topicPutTps.*, groupGetTps.*)
// are over 1 min, 10 min and 1 h.
func (b *Broker) RuntimeInfo() map[string]string {
	s := b.store
	st := s.Stats()
	rt := b.rt
	itoa64 := func(n int64) string { return strconv.FormatInt(n, 10) }
	puts := st.PutMessages
	put, get := rt.dayTotals()
	transferred := rt.tps(rateTransferred)
	t := map[string]string{
		// StoreStatsService
		"bootTimestamp":            itoa64(rt.boot.UnixMilli()),
		"runtime":                  rt.runtimeText(),
		"putMessageEntireTimeMax":  itoa64(rt.putMaxMs.Load()),
		"putMessageTimesTotal":     itoa64(max(puts, 1)), // RocketMQ reports at least 1
		"putMessageFailedTimes":    itoa64(st.PutErrors),
		"putMessageSizeTotal":      itoa64(st.PutBytes),
		"putMessageDistributeTime": rt.putDistribution(),
		"putMessageAverageSize":    javaDouble(float64(st.PutBytes) / float64(max(puts, 1))),
		"dispatchMaxBuffer":        "0", // records are dispatched from the log itself, never buffered
		"getMessageEntireTimeMax":  itoa64(rt.getMaxMs.Load()),
		"putTps":                   rt.tps(ratePut),
		"getFoundTps":              rt.tps(rateFound),
		"getMissTps":               rt.tps(rateMiss),
		"getTotalTps":              rt.totalTPS(),
		"getTransferedTps":         transferred,
		// RocketMQ 5 spells it right; its mqadmin clusterList reads this one.
		"getTransferredTps": transferred,
		"putLatency99":      fmt.Sprintf("%.2f", rt.putPercentile(0.99)),
		"putLatency999":     fmt.Sprintf("%.2f", rt.putPercentile(0.999)),
		// DefaultMessageStore
		"commitLogMinOffset": itoa64(s.MinPhysicalOffset()),
		"commitLogMaxOffset": itoa64(s.MaxPhysicalOffset()),
		// BrokerStats and the broker
		"brokerVersionDesc":               versionDesc[protocol.CurrentVersion],
		"brokerVersion":                   strconv.Itoa(int(protocol.CurrentVersion)),
		"msgPutTotalYesterdayMorning":     itoa64(put[0]),
		"msgPutTotalTodayMorning":         itoa64(put[1]),
		"msgPutTotalTodayNow":             itoa64(puts),
		"msgGetTotalYesterdayMorning":     itoa64(get[0]),
		"msgGetTotalTodayMorning":         itoa64(get[1]),
		"msgGetTotalTodayNow":             itoa64(rt.getTransferred.Load()),
		"dispatchBehindBytes":             itoa64(st.DispatchLagBytes),
		"pageCacheLockTimeMills":          itoa64(s.PutLockHeld().Milliseconds()),
		"startAcceptSendRequestTimeStamp": "0", // sends are accepted from the start
		// No transient store pool: RocketMQ reports Integer.MAX_VALUE then.
		"remainTransientStoreBufferNumbs": strconv.Itoa(1<<31 - 1),
		"remainHowManyDataToFlush":        humanBytes(st.FlushLagBytes),
		// RocketMQ 5: whether the services of a master (delayed messages,
		// transaction checks) run here; clusterList shows it as "Activated".
		"brokerActive": strconv.FormatBool(!b.isSlave()),
		// SmartGo's own
		"brokerRole":             b.roleName(),
		"brokerName":             b.opts.BrokerName,
		"brokerId":               itoa64(b.runtimeBrokerID()),
		"brokerAddr":             b.addr,
		"clusterName":            b.opts.ClusterName,
		"commitLogFlushedOffset": itoa64(s.FlushedPhysicalOffset()),
		"getMessageTimesTotal":   itoa64(st.GetMessages),
		"heldPulls":              strconv.Itoa(b.hold.Len()),
		"flushDiskType":          s.Options().FlushMode.String(),
		"goVersion":              runtime.Version(),
	}
	b.poolRuntimeInfo(t)
	b.diskRuntimeInfo(t)
	b.haRuntimeInfo(t)
	b.monitorRuntimeInfo(t)
	b.controllerRuntimeInfo(t)
	if ts, ok := s.EarliestMessageTime(); ok {
		t["earliestMessageTimeStamp"] = itoa64(ts)
	} else {
		t["earliestMessageTimeStamp"] = itoa64(b.now().UnixMilli()) // an empty store: nothing older than now
	}
	for level := range b.opts.DelayLevels {
		q := int32(level)
		if off := b.delayOffsets.Get(q + 1); off > 0 || s.MaxOffset(ScheduleTopic, q) > 0 {
			t[fmt.Sprintf("scheduleMessageOffset_%d", level+1)] = fmt.Sprintf("%d,%d", off, s.MaxOffset(ScheduleTopic, q))
		}
	}
	for _, snap := range b.stats.All(TopicPutNums) {
		t["topicPutTps."+snap.Key] = windowTriple(snap)
		t["topicPutTotal."+snap.Key] = itoa64(snap.Total)
	}
	for _, snap := range b.stats.All(GroupGetNums) {
		t["groupGetTps."+snap.Key] = windowTriple(snap)
		t["groupGetTotal."+snap.Key] = itoa64(snap.Total)
	}
	return t
}

// poolRuntimeInfo adds the worker pools' queue sizes, capacities and head
// waits under RocketMQ's thread-pool names: send and pull pools as they
// are; RocketMQ's query pool (message queries and views) is SmartGo's
// default pool. SmartGo has no transaction pool yet: its queue is empty
// and has no capacity.
func (b *Broker) poolRuntimeInfo(t map[string]string) {
	for _, p := range []struct {
		name string
		pool remoting.Pool
	}{{"send", remoting.PoolSend}, {"pull", remoting.PoolPull}, {"query", remoting.PoolDefault}} {
		st := b.srv.PoolStats(p.pool)
		t[p.name+"ThreadPoolQueueSize"] = strconv.Itoa(st.Queued)
		t[p.name+"ThreadPoolQueueCapacity"] = strconv.Itoa(st.Capacity)
		t[p.name+"ThreadPoolQueueHeadWaitTimeMills"] = strconv.FormatInt(st.HeadWait.Milliseconds(), 10)
	}
	t["EndTransactionQueueSize"] = "0"
	t["EndTransactionThreadPoolQueueCapacity"] = "0"
}

// diskRuntimeInfo adds the used ratio of the file systems holding the
// commitlog and the consume queues, and the store root's capacity; and,
// SmartGo's own, the ratio above which the store refuses writes
// (diskFullRatio, store.disk_full_ratio) and whether it refuses them now
// for a full disk (diskFull: "true" or "false"), which an AMQP node
// reads for its disk alarm (client/admin BrokerDisk).
func (b *Broker) diskRuntimeInfo(t map[string]string) {
	o := b.store.Options()
	t["diskFullRatio"] = javaDouble(o.DiskFullRatio)
	t["diskFull"] = strconv.FormatBool(b.store.Stats().DiskFull)
	ratio := func(dir string) string {
		u, err := b.store.DiskUsage(dir)
		if err != nil {
			return "-1.0" // RocketMQ's value for a path it cannot measure
		}
		return javaDouble(u)
	}
	cl := filepath.Join(o.Root, "commitlog")
	t["commitLogDiskRatio"] = ratio(cl)
	t["commitLogDiskRatio_"+cl] = t["commitLogDiskRatio"]
	t["consumeQueueDiskRatio"] = ratio(filepath.Join(o.Root, "consumequeue"))
	if total, free, ok := diskSpace(o.Root); ok {
		t["commitLogDirCapacity"] = fmt.Sprintf("Total : %s, Free : %s.", humanBytes(total), humanBytes(free))
	}
}

func windowTriple(snap StatSnapshot) string {
	parts := make([]string, 0, len(snap.Windows))
	for _, w := range snap.Windows {
		parts = append(parts, strconv.FormatFloat(w.TPS, 'f', 2, 64))
	}
	return strings.Join(parts, " ")
}
