package broker

import (
	"errors"
	"math"
	"strconv"
	"strings"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

func jsonResponse(v any) (*protocol.Command, error) {
	body, err := protocol.EncodeJSON(v)
	if err != nil {
		return nil, err
	}
	resp := protocol.NewResponse(protocol.Success, "")
	resp.Body = body
	return resp, nil
}

func clientInfo(c *remoting.Conn, req *protocol.Command, clientID string, b *Broker) ClientInfo {
	return ClientInfo{ClientID: clientID, Channel: c, Addr: c.RemoteAddr().String(),
		Language: req.Language.String(), Version: req.Version, LastUpdate: b.now()}
}

// processHeartbeat serves HEART_BEAT: consumers and producers (re)register;
// each consumer group gets its retry topic; a membership change is pushed
// to the group's members.
func (b *Broker) processHeartbeat(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var hb protocol.HeartbeatData
	if err := protocol.DecodeJSON(req.Body, &hb); err != nil {
		return errResp(protocol.SystemError, "bad heartbeat body: %v", err), nil
	}
	if hb.ClientID == "" {
		return errResp(protocol.SystemError, "heartbeat without clientID"), nil
	}
	info := clientInfo(c, req, hb.ClientID, b)
	info.Fingerprint = hb.HeartbeatFingerprint
	// Heartbeat v2 (a fingerprint sent): a heartbeat without
	// subscriptions refreshes the client and keeps what its last full
	// one subscribed, unless the broker does not hold that (subChanged:
	// the client sends them again next time).
	withoutSub := hb.WithoutSub && hb.HeartbeatFingerprint != 0
	subChanged := false
	var refused *protocol.Command // the first subscription refused
	for _, cd := range hb.ConsumerDataSet {
		if cd == nil || cd.GroupName == "" {
			continue
		}
		if err := b.groups.ValidateName(cd.GroupName); err != nil {
			// That group only: the client's other groups and its
			// producers are registered all the same.
			if refused == nil {
				refused = errResp(protocol.SystemError, "%v", err)
			}
			continue
		}
		if !withoutSub {
			var bad *protocol.Command
			cd, bad = b.acceptedSubscriptions(cd, hb.ClientID, info.Addr)
			if refused == nil {
				refused = bad
			}
		}
		g, err := b.groups.FindOrCreate(cd.GroupName)
		if errors.Is(err, ErrGroupLimit) {
			b.plog.Warn("consumer group not created: its pulls are refused", "group", cd.GroupName, "client", hb.ClientID, "err", err)
		}
		if err == nil && g.RetryQueueNums > 0 && !LongGroup(cd.GroupName) {
			retry := RetryTopic(cd.GroupName)
			if _, ok := b.topics.Get(retry); !ok {
				if _, err := b.topics.CreateSystemTopic(retry, g.RetryQueueNums, PermRW); err != nil {
					b.plog.Warn("create retry topic", "topic", retry, "err", err)
				} else {
					b.triggerRegister()
				}
			}
		}
		var members bool
		if withoutSub {
			var current bool
			members, current = b.consumers.RegisterWithoutSub(info, cd)
			subChanged = subChanged || !current
		} else {
			members, _ = b.consumers.Register(info, cd)
		}
		if members {
			b.shareStarts.joined(cd.GroupName)
			b.plog.Info("consumer joined", "group", cd.GroupName, "client", hb.ClientID, "peer", info.Addr)
			b.notifyConsumerIDsChanged(cd.GroupName)
		}
	}
	for _, pd := range hb.ProducerDataSet {
		if pd != nil && pd.GroupName != "" {
			b.producers.Register(pd.GroupName, info)
		}
	}
	if refused != nil {
		return refused, nil // the rest of the heartbeat was registered
	}
	resp := protocol.NewResponse(protocol.Success, "")
	if hb.HeartbeatFingerprint != 0 {
		resp.ExtFields = protocol.ExtFields{protocol.HeartbeatV2Supported: "true",
			protocol.HeartbeatSubChanged: strconv.FormatBool(subChanged)}
	}
	return resp, nil
}

// processUnregisterClient serves UNREGISTER_CLIENT.
func (b *Broker) processUnregisterClient(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.UnregisterClientRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad unregister header: %v", err), nil
	}
	if h.ProducerGroup != "" {
		b.producers.Unregister(h.ProducerGroup, h.ClientID)
	}
	if h.ConsumerGroup != "" && b.consumers.Unregister(h.ConsumerGroup, h.ClientID) {
		b.plog.Info("consumer left", "group", h.ConsumerGroup, "client", h.ClientID)
		b.notifyConsumerIDsChanged(h.ConsumerGroup)
	}
	return protocol.NewResponse(protocol.Success, ""), nil
}

// processConsumerList serves GET_CONSUMER_LIST_BY_GROUP.
func (b *Broker) processConsumerList(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.ConsumerGroupHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	ids := b.consumers.ClientIDs(h.ConsumerGroup)
	if len(ids) == 0 {
		return errResp(protocol.SystemError, "no consumer for this group, %s", h.ConsumerGroup), nil
	}
	return jsonResponse(protocol.ConsumerIDList{ConsumerIDList: ids})
}

// processQueryOffset serves QUERY_CONSUMER_OFFSET. A group with no stored
// offset gets 0 when the queue starts at 0 and its first message is still
// in memory (a young queue is consumed from the beginning), otherwise
// QUERY_NOT_FOUND so the client applies its consume-from rule; a request
// with setZeroIfNotFound=false always gets QUERY_NOT_FOUND then.
func (b *Broker) processQueryOffset(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.QueryConsumerOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	off, ok := b.offsets.Query(h.ConsumerGroup, h.Topic, h.QueueID)
	if !ok {
		if h.HasSetZeroIfNotFound && !h.SetZeroIfNotFound {
			return protocol.NewResponse(protocol.QueryNotFound, "no offset of this group on this queue (setZeroIfNotFound=false)"), nil
		}
		if b.store.MinOffset(h.Topic, h.QueueID) > 0 || !b.firstMessageInMemory(h.Topic, h.QueueID) {
			return protocol.NewResponse(protocol.QueryNotFound, "Not found, V3_0_6_SNAPSHOT maybe this group consumer boot first"), nil
		}
		off = 0
	}
	resp := protocol.NewResponse(protocol.Success, "")
	resp.SetHeader(&protocol.OffsetResponseHeader{Offset: off})
	return resp, nil
}

// firstMessageInMemory reports whether the queue's first message lies
// within the memory-resident window at the end of the commitlog.
func (b *Broker) firstMessageInMemory(topic string, queueID int32) bool {
	res, err := b.store.GetMessages(topic, queueID, b.store.MinOffset(topic, queueID), 1, nil)
	if err != nil {
		return false
	}
	defer res.Release()
	if len(res.PhysicalOffsets) == 0 {
		return true // empty queue
	}
	window := b.store.Options().MemoryResidentBytes
	return window <= 0 || b.store.MaxPhysicalOffset()-res.PhysicalOffsets[0] <= window
}

// processUpdateOffset serves UPDATE_CONSUMER_OFFSET.
func (b *Broker) processUpdateOffset(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.UpdateConsumerOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	b.offsets.Commit(h.ConsumerGroup, h.Topic, h.QueueID, h.CommitOffset)
	return protocol.NewResponse(protocol.Success, ""), nil
}

func offsetResponse(off int64) *protocol.Command {
	resp := protocol.NewResponse(protocol.Success, "")
	resp.SetHeader(&protocol.OffsetResponseHeader{Offset: off})
	return resp
}

// processMaxOffset serves GET_MAX_OFFSET.
func (b *Broker) processMaxOffset(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.TopicQueueHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	return offsetResponse(b.store.MaxOffset(h.Topic, h.QueueID)), nil
}

// processMinOffset serves GET_MIN_OFFSET.
func (b *Broker) processMinOffset(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.TopicQueueHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	return offsetResponse(b.store.MinOffset(h.Topic, h.QueueID)), nil
}

// processSearchOffset serves SEARCH_OFFSET_BY_TIMESTAMP.
func (b *Broker) processSearchOffset(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.SearchOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	if strings.EqualFold(h.BoundaryType, protocol.BoundaryUpper) {
		return offsetResponse(b.upperOffsetByTime(h.Topic, h.QueueID, h.Timestamp)), nil
	}
	return offsetResponse(b.store.OffsetByTime(h.Topic, h.QueueID, h.Timestamp)), nil
}

// upperOffsetByTime is a search's upper boundary (RocketMQ 5's
// BoundaryType.UPPER): the last offset of the queue stored at or before
// ts, the one before the first stored after it. When every message is
// later than ts it is the queue's first offset (RocketMQ answers 0, the
// same for a queue that starts at 0), and the queue's last message when
// every one is earlier.
func (b *Broker) upperOffsetByTime(topic string, queueID int32, ts int64) int64 {
	after := b.store.MaxOffset(topic, queueID)
	if ts < math.MaxInt64 {
		after = b.store.OffsetByTime(topic, queueID, ts+1)
	}
	return max(after-1, b.store.MinOffset(topic, queueID))
}

// processEarliestTime serves GET_EARLIEST_MSG_STORETIME.
func (b *Broker) processEarliestTime(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.TopicQueueHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	ts, ok := b.store.EarliestStoreTime(h.Topic, h.QueueID)
	if !ok {
		ts = -1
	}
	resp := protocol.NewResponse(protocol.Success, "")
	resp.SetHeader(&protocol.GetEarliestMsgStoretimeResponseHeader{Timestamp: ts})
	return resp, nil
}

func mqs(set []*protocol.MessageQueue) []protocol.MessageQueue {
	out := make([]protocol.MessageQueue, 0, len(set))
	for _, q := range set {
		if q != nil {
			out = append(out, *q)
		}
	}
	return out
}

// processLockBatch serves LOCK_BATCH_MQ for orderly consumers.
func (b *Broker) processLockBatch(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var body protocol.LockBatchRequestBody
	if err := protocol.DecodeJSON(req.Body, &body); err != nil {
		return errResp(protocol.SystemError, "bad lock body: %v", err), nil
	}
	if body.ConsumerGroup == "" || body.ClientID == "" {
		return errResp(protocol.SystemError, "lock body needs consumerGroup and clientId"), nil
	}
	locked := b.locks.TryLock(body.ConsumerGroup, body.ClientID, mqs(body.MQSet), b.now())
	out := protocol.LockBatchResponseBody{LockOKMQSet: make([]*protocol.MessageQueue, len(locked))}
	for i := range locked {
		out.LockOKMQSet[i] = &locked[i]
	}
	return jsonResponse(out)
}

// processUnlockBatch serves UNLOCK_BATCH_MQ.
func (b *Broker) processUnlockBatch(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var body protocol.UnlockBatchRequestBody
	if err := protocol.DecodeJSON(req.Body, &body); err != nil {
		return errResp(protocol.SystemError, "bad unlock body: %v", err), nil
	}
	b.locks.Unlock(body.ConsumerGroup, body.ClientID, mqs(body.MQSet))
	return protocol.NewResponse(protocol.Success, ""), nil
}

// processViewMessage serves VIEW_MESSAGE_BY_ID: the record at a commitlog
// offset, sent from the mapped segment without copying.
func (b *Broker) processViewMessage(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.ViewMessageRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	res, err := b.store.MessageAt(h.Offset)
	if err != nil {
		return errResp(protocol.SystemError, "can not find message by the offset, %d: %v", h.Offset, err), nil
	}
	if len(res.Buffers) == 0 {
		res.Release()
		return errResp(protocol.SystemError, "can not find message by the offset, %d", h.Offset), nil
	}
	resp := protocol.NewResponse(protocol.Success, "")
	resp.BodyBuffers, resp.Release = res.Buffers, res.Release
	return resp, nil
}

// processQueryMessage serves QUERY_MESSAGE: messages by key (KEYS) or by
// unique key, within a store-time range.
func (b *Broker) processQueryMessage(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.QueryMessageRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	maxNum := int(h.MaxNum)
	if req.ExtFields["_UNIQUE_KEY_QUERY"] == "true" || maxNum <= 0 {
		maxNum = 32
	}
	res, err := b.store.QueryByKey(h.Topic, h.Key, maxNum, h.BeginTimestamp, h.EndTimestamp)
	if err != nil {
		return errResp(protocol.SystemError, "query %s by key %q: %v", h.Topic, h.Key, err), nil
	}
	hdr := protocol.QueryMessageResponseHeader{IndexLastUpdateTimestamp: res.IndexLastUpdateTimestamp, IndexLastUpdatePhyoffset: res.IndexLastUpdatePhyOffset}
	if len(res.Buffers) == 0 {
		res.Release()
		resp := protocol.NewResponse(protocol.QueryNotFound, "can not find message, maybe time range not correct")
		resp.SetHeader(&hdr)
		return resp, nil
	}
	resp := protocol.NewResponse(protocol.Success, "")
	resp.SetHeader(&hdr)
	resp.BodyBuffers, resp.Release = res.Buffers, res.Release
	return resp, nil
}
