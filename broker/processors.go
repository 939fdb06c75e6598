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
		// noRetain: checked to keep no reference to req.Body (or a slice
		// of it) once it returned, so the connection may reuse the
		// request's receive buffer (remoting.RegisterOptions.NoRetain).
		// Header fields (ExtFields, Remark) are copies and do not count.
		noRetain bool
	}
	// Sends never wait (see sendasync.go): a send that waits for the
	// group commit or a slave is answered by its callback.
	send := b.processSend
	// noRetain was checked per processor: sends (store.Put/PutBatch encode
	// the body into the log, or its write-behind buffer, before they
	// return); pull (no body; a held pull keeps req but reads only its
	// header fields); heartbeat, lock/unlock and group updates
	// (DecodeJSON copies every string out of the body); the rest read
	// header fields only. The other admin codes are rare and stay unmarked.
	routes := []route{
		{protocol.SendMessage, remoting.PoolSend, send, true, true},
		{protocol.SendMessageV2, remoting.PoolSend, send, true, true},
		{protocol.SendBatchMessage, remoting.PoolSend, send, true, true},
		{protocol.ConsumerSendMsgBack, remoting.PoolSend, b.processSendBack, false, true},
		{protocol.EndTransaction, remoting.PoolSend, b.processEndTransaction, false, true},

		{protocol.PullMessage, remoting.PoolPull, b.metrics.timedPull(b.processPull), true, true},

		{protocol.HeartBeat, remoting.PoolHeartbeat, b.processHeartbeat, false, true},
		{protocol.UnregisterClient, remoting.PoolHeartbeat, b.processUnregisterClient, false, true},

		{protocol.GetConsumerListByGroup, remoting.PoolDefault, b.processConsumerList, false, true},
		{protocol.QueryConsumerOffset, remoting.PoolDefault, b.processQueryOffset, false, true},
		// A commit runs on the connection's reader (a map write under a
		// lock), so a query the client sends after it on the same
		// connection reads it: rocketmq-client-go commits a reset one way
		// and reads it back at once when it resumes (a query served first
		// on another worker gave it the old offset, and the reset was lost).
		{protocol.UpdateConsumerOffset, remoting.PoolDefault, b.processUpdateOffset, true, true},
		{protocol.GetMaxOffset, remoting.PoolDefault, b.processMaxOffset, false, true},
		{protocol.GetMinOffset, remoting.PoolDefault, b.processMinOffset, false, true},
		{protocol.SearchOffsetByTimestamp, remoting.PoolDefault, b.processSearchOffset, false, true},
		{protocol.GetEarliestMsgStoretime, remoting.PoolDefault, b.processEarliestTime, false, true},
		{protocol.LockBatchMQ, remoting.PoolDefault, b.processLockBatch, false, true},
		{protocol.StartShareGroup, remoting.PoolDefault, b.processStartShareGroup, false, true},
		{protocol.UnlockBatchMQ, remoting.PoolDefault, b.processUnlockBatch, false, true},
		{protocol.ViewMessageByID, remoting.PoolDefault, b.processViewMessage, false, true},
		{protocol.QueryMessage, remoting.PoolDefault, b.processQueryMessage, false, true},

		{protocol.UpdateAndCreateTopic, remoting.PoolAdmin, b.processCreateTopic, false, false},
		{protocol.DeleteTopicInBroker, remoting.PoolAdmin, b.processDeleteTopic, false, false},
		{protocol.GetAllTopicConfig, remoting.PoolAdmin, b.processAllTopicConfig, false, false},
		{protocol.UpdateAndCreateSubscriptionGroup, remoting.PoolAdmin, b.processUpdateGroup, false, true},
		{protocol.DeleteSubscriptionGroup, remoting.PoolAdmin, b.processDeleteGroup, false, true},
		{protocol.GetAllSubscriptionGroupConfig, remoting.PoolAdmin, b.processAllGroups, false, false},
		{protocol.GetAllConsumerOffset, remoting.PoolAdmin, b.processAllConsumerOffsets, false, false},
		{protocol.GetAllDelayOffset, remoting.PoolAdmin, b.processAllDelayOffsets, false, false},
		{protocol.NotifyMetadataChanged, remoting.PoolAdmin, b.processMetadataChanged, false, true},
		{protocol.GetBrokerRuntimeInfo, remoting.PoolAdmin, b.processRuntimeInfo, false, false},
		{protocol.GetConsumeStats, remoting.PoolAdmin, b.processConsumeStats, false, false},
		{protocol.GetTopicStatsInfo, remoting.PoolAdmin, b.processTopicStats, false, false},
		{protocol.GetConsumerConnectionList, remoting.PoolAdmin, b.processConsumerConnections, false, false},
		{protocol.GetProducerConnectionList, remoting.PoolAdmin, b.processProducerConnections, false, false},
		{protocol.GetAllProducerInfo, remoting.PoolAdmin, b.processAllProducers, false, true},
		{protocol.GetBrokerConfig, remoting.PoolAdmin, b.processGetBrokerConfig, false, true},
		{protocol.UpdateBrokerConfig, remoting.PoolAdmin, b.processUpdateBrokerConfig, false, true},
		{protocol.GetSystemTopicListFromBroker, remoting.PoolAdmin, b.processSystemTopics, false, true},
		{protocol.CleanExpiredConsumeQueue, remoting.PoolAdmin, b.processCleanExpiredCQ, false, true},
		{protocol.CleanUnusedTopic, remoting.PoolAdmin, b.processCleanUnusedTopic, false, true},
		{protocol.DeleteExpiredCommitlog, remoting.PoolAdmin, b.processDeleteExpiredCommitLog, false, true},
		{protocol.ViewBrokerStatsData, remoting.PoolAdmin, b.processViewStatsData, false, true},
		{protocol.QueryConsumeQueue, remoting.PoolAdmin, b.processQueryConsumeQueue, false, true},
		{protocol.GetBrokerConsumeStats, remoting.PoolAdmin, b.processBrokerConsumeStats, false, true},
		{protocol.QueryTopicConsumeByWho, remoting.PoolAdmin, b.processTopicConsumeByWho, false, true},
		{protocol.QueryTopicsByConsumer, remoting.PoolAdmin, b.processTopicsByConsumer, false, true},
		{protocol.QuerySubscriptionByConsumer, remoting.PoolAdmin, b.processSubscriptionByConsumer, false, true},
		{protocol.QueryConsumeTimeSpan, remoting.PoolAdmin, b.processConsumeTimeSpan, false, true},
		{protocol.CloneGroupOffset, remoting.PoolAdmin, b.processCloneGroupOffset, false, true},
		{protocol.InvokeBrokerToResetOffset, remoting.PoolAdmin, b.processResetOffset, false, true},
		// The calls to clients are answered by their callbacks (no worker
		// waits for a client, nor for its socket): the request is kept
		// until then, so none of them is noRetain.
		{protocol.InvokeBrokerToGetConsumerStatus, remoting.PoolDefault, b.processConsumerStatus, false, false},
		{protocol.GetConsumerRunningInfo, remoting.PoolDefault, b.processConsumerRunningInfo, false, false},
		{protocol.ConsumeMessageDirectly, remoting.PoolDefault, b.processConsumeMessageDirectly, false, false},
		{protocol.CheckClientConfig, remoting.PoolDefault, b.processCheckClientConfig, false, true},
		// A reply is answered once the requester took its push
		// (reply.go), which carries the request's body: retained.
		{protocol.SendReplyMessage, remoting.PoolDefault, b.processSendReply, false, false},
		{protocol.SendReplyMessageV2, remoting.PoolDefault, b.processSendReply, false, false},
		{protocol.ForwardReplyMessage, remoting.PoolDefault, b.processForwardReply, false, false},
	}
	// Sends and pulls read their header only through DecodeHeader: their
	// reader keeps extFields as a field list and the header is decoded
	// from it without a map (remoting.RegisterOptions.TypedHeader).
	typed := func(code int32) bool {
		switch code {
		case protocol.SendMessage, protocol.SendMessageV2, protocol.SendBatchMessage, protocol.PullMessage:
			return true
		}
		return false
	}
	// A send's put is written behind and answered at the end of the
	// reader's batch (store.Store.Drain): one pwrite for the batch, and
	// the answers leave with the batch's other answers.
	drain := func(*remoting.Conn) { b.store.Drain() }
	batchEnd := func(code int32) func(*remoting.Conn) {
		switch code {
		case protocol.SendMessage, protocol.SendMessageV2, protocol.SendBatchMessage:
			return drain
		}
		return nil
	}
	// A send keeps no reference to its request once processSend returned
	// (a pendingSend copies what its answer needs): the connection reuses
	// the request's Command (remoting.RegisterOptions.NoKeep).
	noKeep := func(code int32) bool {
		switch code {
		case protocol.SendMessage, protocol.SendMessageV2, protocol.SendBatchMessage:
			return true
		}
		return false
	}
	for _, r := range routes {
		b.srv.RegisterWith(r.code, r.pool, remoting.ProcessorFunc(r.fn),
			remoting.RegisterOptions{Inline: r.inline, NoRetain: r.noRetain, NoKeep: noKeep(r.code), TypedHeader: typed(r.code), BatchEnd: batchEnd(r.code)})
	}
}
