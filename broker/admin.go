package broker

import (
	"slices"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
)

// processCreateTopic serves UPDATE_AND_CREATE_TOPIC.
func (b *Broker) processCreateTopic(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.CreateTopicRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	if err := ValidateTopicName(h.Topic); err != nil {
		return errResp(protocol.SystemError, "%v", err), nil
	}
	if h.Topic == AutoCreateTopicKey {
		return errResp(protocol.SystemError, "the topic[%s] is conflict with system reserved words", h.Topic), nil
	}
	if h.TopicFilterType == "" {
		h.TopicFilterType = protocol.TopicFilterSingleTag
	}
	if h.TopicFilterType != protocol.TopicFilterSingleTag && h.TopicFilterType != protocol.TopicFilterMultiTag {
		return errResp(protocol.SystemError, "topicFilterType %q must be SINGLE_TAG or MULTI_TAG", h.TopicFilterType), nil
	}
	if h.Perm&^(PermRW|PermInherit|PermPriority) != 0 {
		return errResp(protocol.SystemError, "perm %d has unknown bits", h.Perm), nil
	}
	tc := protocol.TopicConfig{TopicName: h.Topic, ReadQueueNums: h.ReadQueueNums, WriteQueueNums: h.WriteQueueNums,
		Perm: h.Perm, TopicFilterType: h.TopicFilterType, TopicSysFlag: h.TopicSysFlag, Order: h.Order}
	if err := b.topics.Update(tc); err != nil {
		return errResp(protocol.SystemError, "%v", err), nil
	}
	b.triggerRegister()
	return protocol.NewResponse(protocol.Success, ""), nil
}

// processDeleteTopic serves DELETE_TOPIC_IN_BROKER: the topic's config,
// its consume queues, every group's offsets on it and its statistics. The broker's own
// topics (systemTopicNames, the twins') and Options.ProtectedTopics are
// refused with NO_PERMISSION: the state store, the twins, the MQTT
// bridge's sessions and retained messages, delayed and transactional
// messages and topic auto-creation live in them (RocketMQ 4.9 deletes
// them).
func (b *Broker) processDeleteTopic(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.DeleteTopicRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	if h.Topic == TwinTopic || slices.Contains(b.systemTopicNames(), h.Topic) || slices.Contains(b.opts.ProtectedTopics, h.Topic) {
		return errResp(protocol.NoPermission, "%s is a system topic of broker %s: it cannot be deleted", h.Topic, b.opts.BrokerName), nil
	}
	if _, err := b.topics.Delete(h.Topic); err != nil {
		return errResp(protocol.SystemError, "%v", err), nil
	}
	if err := b.store.DeleteTopic(h.Topic); err != nil {
		return errResp(protocol.SystemError, "delete %s from the store: %v", h.Topic, err), nil
	}
	b.offsets.DeleteTopic(h.Topic)
	b.stats.ForgetTopic(h.Topic)
	b.triggerRegister()
	return protocol.NewResponse(protocol.Success, ""), nil
}

// processAllTopicConfig serves GET_ALL_TOPIC_CONFIG.
func (b *Broker) processAllTopicConfig(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	return jsonResponse(b.topics.Snapshot())
}

// processUpdateGroup serves UPDATE_AND_CREATE_SUBSCRIPTIONGROUP.
func (b *Broker) processUpdateGroup(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var g protocol.SubscriptionGroupConfig
	if err := protocol.DecodeJSON(req.Body, &g); err != nil {
		return errResp(protocol.SystemError, "bad subscription group body: %v", err), nil
	}
	if err := b.groups.Update(g); err != nil {
		return errResp(protocol.SystemError, "%v", err), nil
	}
	return protocol.NewResponse(protocol.Success, ""), nil
}

// processDeleteGroup serves DELETE_SUBSCRIPTIONGROUP: the group's config
// and its statistics; with removeOffset its committed offsets too.
func (b *Broker) processDeleteGroup(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.DeleteSubscriptionGroupRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	if _, err := b.groups.Delete(h.GroupName); err != nil {
		return errResp(protocol.SystemError, "%v", err), nil
	}
	if h.RemoveOffset {
		b.offsets.DeleteGroup(h.GroupName)
	}
	b.stats.ForgetGroup(h.GroupName)
	return protocol.NewResponse(protocol.Success, ""), nil
}

func (b *Broker) processAllGroups(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	return jsonResponse(b.groups.Snapshot())
}

func (b *Broker) processAllConsumerOffsets(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	return b.offsetsResponse()
}

func (b *Broker) processAllDelayOffsets(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	return b.delayOffsetsResponse()
}

// processConsumeStats serves GET_CONSUME_STATS: per queue of the group's
// topics (or of one topic), the broker's max offset and the group's
// committed offset; SUBSCRIPTION_GROUP_NOT_EXIST for a group the broker
// does not know at all.
func (b *Broker) processConsumeStats(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.GetConsumeStatsRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	topics := []string{h.Topic}
	groupTopics := b.offsets.TopicsOfGroup(h.ConsumerGroup)
	if h.Topic == "" {
		topics = groupTopics
	}
	// A group this broker has no config, no offsets and no consumers of is
	// unknown here: say so rather than answer lags of a group that never
	// was (a typo in the group name).
	if _, cfg := b.groups.Get(h.ConsumerGroup); !cfg && len(groupTopics) == 0 {
		if _, online := b.consumers.Group(h.ConsumerGroup); !online {
			return errResp(protocol.SubscriptionGroupNotExist, "subscription group [%s] does not exist", h.ConsumerGroup), nil
		}
	}
	var stats protocol.ConsumeStats
	for _, topic := range topics {
		if cs, ok := b.topicConsumeStats(h.ConsumerGroup, topic, false); ok {
			stats.OffsetTable = append(stats.OffsetTable, cs.OffsetTable...)
			stats.ConsumeTps += cs.ConsumeTps
		}
	}
	stats.OffsetTable.Sort()
	return jsonResponse(stats)
}

// topicConsumeStats is a group's progress on one topic of this broker: per
// queue (read queues, or write queues when byWrite) the broker's max
// offset, the group's committed offset (0 if none, also the pull offset)
// and the store time of the last message it consumed, and its consume
// rate (last minute). A
// topic the broker does not have, or that an online group does not
// subscribe, has none (RocketMQ skips both).
func (b *Broker) topicConsumeStats(group, topic string, byWrite bool) (protocol.ConsumeStats, bool) {
	var stats protocol.ConsumeStats
	tc, ok := b.topics.Get(topic)
	if !ok {
		return stats, false
	}
	if info, online := b.consumers.Group(group); online && len(info.Subscriptions) > 0 {
		if _, subscribed := info.Subscriptions[topic]; !subscribed {
			return stats, false
		}
	}
	queues := tc.ReadQueueNums
	if byWrite {
		queues = tc.WriteQueueNums
	}
	for q := int32(0); q < queues; q++ {
		w := &protocol.OffsetWrapper{BrokerOffset: max(0, b.store.MaxOffset(topic, q))}
		if off, ok := b.offsets.Query(group, topic, q); ok {
			w.ConsumerOffset = max(0, off)
		}
		// The broker does not record how far a group's pulls reached: it
		// reports the committed offset, as a RocketMQ 5 broker does for a
		// queue it saw no pull of (in flight: 0, not minus the offset).
		w.PullOffset = w.ConsumerOffset
		if w.ConsumerOffset > 0 {
			if ts, ok := b.storeTimeAtOffset(topic, q, w.ConsumerOffset-1); ok {
				w.LastTimestamp = ts
			}
		}
		stats.OffsetTable = append(stats.OffsetTable, protocol.MQEntry[*protocol.OffsetWrapper]{
			Queue: protocol.MessageQueue{Topic: topic, BrokerName: b.opts.BrokerName, QueueID: q}, Value: w})
	}
	if snap, ok := b.stats.Get(GroupGetNums, topic+"@"+group); ok && len(snap.Windows) > 0 {
		stats.ConsumeTps = snap.Windows[0].TPS
	}
	return stats, true
}

// storeTimeAtOffset returns the store time of the message at a logical
// offset.
func (b *Broker) storeTimeAtOffset(topic string, queueID int32, offset int64) (int64, bool) {
	res, err := b.store.GetMessages(topic, queueID, offset, 1, nil)
	if err != nil {
		return 0, false
	}
	defer res.Release()
	if len(res.PhysicalOffsets) == 0 {
		return 0, false
	}
	m, err := b.store.ReadMessage(res.PhysicalOffsets[0])
	if err != nil {
		return 0, false
	}
	return m.StoreTimestamp, true
}

// processTopicStats serves GET_TOPIC_STATS_INFO.
func (b *Broker) processTopicStats(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.TopicHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	tc, ok := b.topics.Get(h.Topic)
	if !ok {
		return errResp(protocol.TopicNotExist, "topic[%s] not exist", h.Topic), nil
	}
	var t protocol.TopicStatsTable
	for q := int32(0); q < tc.WriteQueueNums; q++ {
		o := &protocol.TopicOffset{MinOffset: b.store.MinOffset(h.Topic, q), MaxOffset: b.store.MaxOffset(h.Topic, q)}
		if o.MaxOffset > 0 {
			if ts, ok := b.storeTimeAtOffset(h.Topic, q, o.MaxOffset-1); ok {
				o.LastUpdateTimestamp = ts
			}
		}
		t.OffsetTable = append(t.OffsetTable, protocol.MQEntry[*protocol.TopicOffset]{
			Queue: protocol.MessageQueue{Topic: h.Topic, BrokerName: b.opts.BrokerName, QueueID: q}, Value: o})
	}
	return jsonResponse(t)
}

// processConsumerConnections serves GET_CONSUMER_CONNECTION_LIST.
func (b *Broker) processConsumerConnections(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.ConsumerGroupHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	info, ok := b.consumers.Group(h.ConsumerGroup)
	if !ok {
		return errResp(protocol.ConsumerNotOnline, "the consumer group[%s] not online", h.ConsumerGroup), nil
	}
	out := protocol.ConsumerConnection{ConsumeType: info.ConsumeType, MessageModel: info.MessageModel,
		ConsumeFromWhere: info.ConsumeFromWhere, SubscriptionTable: map[string]*protocol.SubscriptionData{}}
	for _, cl := range info.Clients {
		out.ConnectionSet = append(out.ConnectionSet, &protocol.Connection{ClientID: cl.ClientID, ClientAddr: cl.Addr, Language: cl.Language, Version: cl.Version})
	}
	for t, s := range info.Subscriptions {
		s := s
		out.SubscriptionTable[t] = &s
	}
	return jsonResponse(out)
}

// processProducerConnections serves GET_PRODUCER_CONNECTION_LIST.
func (b *Broker) processProducerConnections(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	group := req.ExtFields["producerGroup"]
	if group == "" {
		return errResp(protocol.SystemError, "bad header: missing producerGroup"), nil
	}
	clients := b.producers.Clients(group)
	if len(clients) == 0 {
		return errResp(protocol.SystemError, "the producer group[%s] not exist", group), nil
	}
	var out protocol.ProducerConnection
	for _, cl := range clients {
		out.ConnectionSet = append(out.ConnectionSet, &protocol.Connection{ClientID: cl.ClientID, ClientAddr: cl.Addr, Language: cl.Language, Version: cl.Version})
	}
	return jsonResponse(out)
}
