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
	}
	routes := []route{
		{protocol.SendMessage, remoting.PoolSend, b.processSend},
		{protocol.SendMessageV2, remoting.PoolSend, b.processSend},
		{protocol.SendBatchMessage, remoting.PoolSend, b.processSend},
		{protocol.ConsumerSendMsgBack, remoting.PoolSend, b.processSendBack},

		{protocol.PullMessage, remoting.PoolPull, b.processPull},

		{protocol.HeartBeat, remoting.PoolHeartbeat, b.processHeartbeat},
		{protocol.UnregisterClient, remoting.PoolHeartbeat, b.processUnregisterClient},

		{protocol.GetConsumerListByGroup, remoting.PoolDefault, b.processConsumerList},
		{protocol.QueryConsumerOffset, remoting.PoolDefault, b.processQueryOffset},
		{protocol.UpdateConsumerOffset, remoting.PoolDefault, b.processUpdateOffset},
		{protocol.GetMaxOffset, remoting.PoolDefault, b.processMaxOffset},
		{protocol.GetMinOffset, remoting.PoolDefault, b.processMinOffset},
		{protocol.SearchOffsetByTimestamp, remoting.PoolDefault, b.processSearchOffset},
		{protocol.GetEarliestMsgStoretime, remoting.PoolDefault, b.processEarliestTime},
		{protocol.LockBatchMQ, remoting.PoolDefault, b.processLockBatch},
		{protocol.UnlockBatchMQ, remoting.PoolDefault, b.processUnlockBatch},
		{protocol.ViewMessageByID, remoting.PoolDefault, b.processViewMessage},
		{protocol.QueryMessage, remoting.PoolDefault, b.processQueryMessage},

		{protocol.UpdateAndCreateTopic, remoting.PoolAdmin, b.processCreateTopic},
		{protocol.DeleteTopicInBroker, remoting.PoolAdmin, b.processDeleteTopic},
		{protocol.GetAllTopicConfig, remoting.PoolAdmin, b.processAllTopicConfig},
		{protocol.UpdateAndCreateSubscriptionGroup, remoting.PoolAdmin, b.processUpdateGroup},
		{protocol.DeleteSubscriptionGroup, remoting.PoolAdmin, b.processDeleteGroup},
		{protocol.GetAllSubscriptionGroupConfig, remoting.PoolAdmin, b.processAllGroups},
		{protocol.GetAllConsumerOffset, remoting.PoolAdmin, b.processAllConsumerOffsets},
		{protocol.GetAllDelayOffset, remoting.PoolAdmin, b.processAllDelayOffsets},
		{protocol.GetBrokerRuntimeInfo, remoting.PoolAdmin, b.processRuntimeInfo},
		{protocol.GetConsumeStats, remoting.PoolAdmin, b.processConsumeStats},
		{protocol.GetTopicStatsInfo, remoting.PoolAdmin, b.processTopicStats},
		{protocol.GetConsumerConnectionList, remoting.PoolAdmin, b.processConsumerConnections},
		{protocol.GetProducerConnectionList, remoting.PoolAdmin, b.processProducerConnections},
	}
	for _, r := range routes {
		b.srv.RegisterFunc(r.code, r.pool, r.fn)
	}
}
