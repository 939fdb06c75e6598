package broker

import (
	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// registerProcessors maps every request code the broker serves to its
// handler and worker pool. Codes not listed get REQUEST_CODE_NOT_SUPPORTED.
func (b *Broker) registerProcessors() {
	type route struct {
		code int32
		pool remoting.Pool
		fn   func(*remoting.Conn, *protocol.Command) (*protocol.Command, error)
		// inline: quick and never waiting on the peer, so it may run on
		// the connection's reader when its pool is idle (saves a
		// goroutine hand-off per request; see remoting.RegisterInline).
		inline bool
	}
	// Sends wait only for the in-memory append unless a put waits for a
	// disk flush or a slave: then they stay on the pool so that many of
	// them share one group commit.
	quickSend := !b.putWaits()
	routes := []route{
		{protocol.SendMessage, remoting.PoolSend, b.processSend, quickSend},
		{protocol.SendMessageV2, remoting.PoolSend, b.processSend, quickSend},
		{protocol.SendBatchMessage, remoting.PoolSend, b.processSend, quickSend},
		{protocol.ConsumerSendMsgBack, remoting.PoolSend, b.processSendBack, false},

		{protocol.PullMessage, remoting.PoolPull, b.processPull, true},

		{protocol.HeartBeat, remoting.PoolHeartbeat, b.processHeartbeat, false},
		{protocol.UnregisterClient, remoting.PoolHeartbeat, b.processUnregisterClient, false},

		{protocol.GetConsumerListByGroup, remoting.PoolDefault, b.processConsumerList, false},
		{protocol.QueryConsumerOffset, remoting.PoolDefault, b.processQueryOffset, false},
		{protocol.UpdateConsumerOffset, remoting.PoolDefault, b.processUpdateOffset, false},
		{protocol.GetMaxOffset, remoting.PoolDefault, b.processMaxOffset, false},
		{protocol.GetMinOffset, remoting.PoolDefault, b.processMinOffset, false},
		{protocol.SearchOffsetByTimestamp, remoting.PoolDefault, b.processSearchOffset, false},
		{protocol.GetEarliestMsgStoretime, remoting.PoolDefault, b.processEarliestTime, false},
		{protocol.LockBatchMQ, remoting.PoolDefault, b.processLockBatch, false},
		{protocol.UnlockBatchMQ, remoting.PoolDefault, b.processUnlockBatch, false},
		{protocol.ViewMessageByID, remoting.PoolDefault, b.processViewMessage, false},
		{protocol.QueryMessage, remoting.PoolDefault, b.processQueryMessage, false},

		{protocol.UpdateAndCreateTopic, remoting.PoolAdmin, b.processCreateTopic, false},
		{protocol.DeleteTopicInBroker, remoting.PoolAdmin, b.processDeleteTopic, false},
		{protocol.GetAllTopicConfig, remoting.PoolAdmin, b.processAllTopicConfig, false},
		{protocol.UpdateAndCreateSubscriptionGroup, remoting.PoolAdmin, b.processUpdateGroup, false},
		{protocol.DeleteSubscriptionGroup, remoting.PoolAdmin, b.processDeleteGroup, false},
		{protocol.GetAllSubscriptionGroupConfig, remoting.PoolAdmin, b.processAllGroups, false},
		{protocol.GetAllConsumerOffset, remoting.PoolAdmin, b.processAllConsumerOffsets, false},
		{protocol.GetAllDelayOffset, remoting.PoolAdmin, b.processAllDelayOffsets, false},
		{protocol.GetBrokerRuntimeInfo, remoting.PoolAdmin, b.processRuntimeInfo, false},
		{protocol.GetConsumeStats, remoting.PoolAdmin, b.processConsumeStats, false},
		{protocol.GetTopicStatsInfo, remoting.PoolAdmin, b.processTopicStats, false},
		{protocol.GetConsumerConnectionList, remoting.PoolAdmin, b.processConsumerConnections, false},
		{protocol.GetProducerConnectionList, remoting.PoolAdmin, b.processProducerConnections, false},
	}
	for _, r := range routes {
		if r.inline {
			b.srv.RegisterInline(r.code, r.pool, remoting.ProcessorFunc(r.fn))
			continue
		}
		b.srv.RegisterFunc(r.code, r.pool, r.fn)
	}
}
