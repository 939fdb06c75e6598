package broker

import (
	"slices"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Admin requests about the broker itself: system topics, clean-ups,
// statistics, consume queues, producers (mqadmin exportMetadata,
// cleanExpiredCQ, deleteExpiredCommitLog, cleanUnusedTopic, statsAll,
// queryCq, producer).

// systemTopicNames are the topics GET_SYSTEM_TOPIC_LIST_FROM_BROKER lists:
// RocketMQ's system topics, SmartGo's state store topic, and the cluster
// and broker names.
func (b *Broker) systemTopicNames() []string {
	names := []string{AutoCreateTopicKey, ScheduleTopic, SelfTestTopic, OffsetMovedEvent, TransHalfTopic,
		TransOpHalfTopic, TransCheckMax, "BenchmarkTest", TraceTopic, StateStoreTopic,
		b.opts.ClusterName, b.opts.BrokerName, protocol.ReplyTopic(b.opts.ClusterName)}
	slices.Sort(names)
	return slices.Compact(names)
}

// keepQueues reports whether a topic's consume queues must survive the
// clean-ups even without a topic configuration.
func keepQueues(topic string) bool {
	return topic == ScheduleTopic || topic == TransOpHalfTopic || topic == StateStoreTopic
}

func (b *Broker) processSystemTopics(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	return jsonResponse(protocol.TopicList{TopicList: b.systemTopicNames()})
}

// processCleanExpiredCQ serves CLEAN_EXPIRED_CONSUMEQUEUE: the consume
// queues of every topic whose messages are all gone from the commitlog
// are deleted (the schedule and state store topics excepted), as
// RocketMQ deletes fully expired queues.
func (b *Broker) processCleanExpiredCQ(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var deleted []string
	for _, topic := range b.store.Topics() {
		if keepQueues(topic) {
			continue
		}
		expired := true
		for _, q := range b.store.QueueIDs(topic) {
			if b.store.MinOffset(topic, q) < b.store.MaxOffset(topic, q) {
				expired = false
				break
			}
		}
		if !expired {
			continue
		}
		if err := b.store.DeleteTopic(topic); err != nil {
			return errResp(protocol.SystemError, "delete the consume queues of %s: %v", topic, err), nil
		}
		deleted = append(deleted, topic)
	}
	b.log.Info("expired consume queues cleaned", "topics", deleted, "peer", c.RemoteAddr().String())
	return protocol.NewResponse(protocol.Success, ""), nil
}

// processCleanUnusedTopic serves CLEAN_UNUSED_TOPIC: the consume queues of
// topics the broker has no configuration for are deleted.
func (b *Broker) processCleanUnusedTopic(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var deleted []string
	for _, topic := range b.store.Topics() {
		if _, ok := b.topics.Get(topic); ok || keepQueues(topic) {
			continue
		}
		if err := b.store.DeleteTopic(topic); err != nil {
			return errResp(protocol.SystemError, "delete the consume queues of %s: %v", topic, err), nil
		}
		b.offsets.DeleteTopic(topic)
		b.stats.ForgetTopic(topic)
		deleted = append(deleted, topic)
	}
	b.log.Info("unused topics cleaned", "topics", deleted, "peer", c.RemoteAddr().String())
	return protocol.NewResponse(protocol.Success, ""), nil
}

// processDeleteExpiredCommitLog serves DELETE_EXPIRED_COMMITLOG: retention
// runs now, whatever the hour.
func (b *Broker) processDeleteExpiredCommitLog(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	n := b.store.CleanExpired()
	b.log.Info("expired commitlog segments deleted on request", "segments", n, "peer", c.RemoteAddr().String())
	return protocol.NewResponse(protocol.Success, ""), nil
}

// processViewStatsData serves VIEW_BROKER_STATS_DATA: one statistic over
// the last minute, hour and day.
func (b *Broker) processViewStatsData(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.ViewBrokerStatsDataRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	kind, ok := ParseStatKind(h.StatsName)
	var minute, hour, day WindowStat
	if ok {
		minute, hour, day, ok = b.stats.MinuteHourDay(kind, h.StatsKey)
	}
	if !ok {
		return errResp(protocol.SystemError, "The stats <%s> <%s> not exist", h.StatsName, h.StatsKey), nil
	}
	item := func(w WindowStat) protocol.BrokerStatsItem {
		return protocol.BrokerStatsItem{Sum: w.Sum, TPS: w.TPS, Avgpt: w.AvgPerAdd()}
	}
	return jsonResponse(protocol.BrokerStatsData{StatsMinute: item(minute), StatsHour: item(hour), StatsDay: item(day)})
}

// processAllProducers serves GET_ALL_PRODUCER_INFO: the online producers
// by group.
func (b *Broker) processAllProducers(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	out := protocol.ProducerTableInfo{Data: map[string][]*protocol.ProducerInfo{}}
	for group, clients := range b.producers.All() {
		for _, cl := range clients {
			out.Data[group] = append(out.Data[group], &protocol.ProducerInfo{ClientID: cl.ClientID, RemoteIP: cl.Addr,
				Language: cl.Language, Version: cl.Version, LastUpdateTimestamp: cl.LastUpdate.UnixMilli()})
		}
	}
	return jsonResponse(out)
}

// maxQueryCQEntries bounds QUERY_CONSUME_QUEUE's count.
const maxQueryCQEntries = 1000

// processQueryConsumeQueue serves QUERY_CONSUME_QUEUE: count consume-queue
// entries of a queue from a logical offset (commitlog offset, size, tag
// hash), and, for a group given, its subscription and whether it accepts
// each entry.
func (b *Broker) processQueryConsumeQueue(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.QueryConsumeQueueRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	if !slices.Contains(b.store.QueueIDs(h.Topic), h.QueueID) {
		return errResp(protocol.SystemError, "%d@%s is not exist!", h.QueueID, h.Topic), nil
	}
	out := protocol.QueryConsumeQueueResponseBody{MaxQueueIndex: b.store.MaxOffset(h.Topic, h.QueueID),
		MinQueueIndex: b.store.MinOffset(h.Topic, h.QueueID), QueueData: []*protocol.ConsumeQueueData{}}
	var codes map[int64]bool // nil: every entry matches
	if h.ConsumerGroup != "" {
		if sd, ok := b.consumers.Subscription(h.ConsumerGroup, h.Topic); ok {
			out.SubscriptionData = &sd
			if sd.SubString != "" && sd.SubString != protocol.SubscriptionAll {
				codes = map[int64]bool{}
				for _, code := range sd.CodeSet {
					codes[int64(code)] = true
				}
			}
		}
	}
	count := min(max(int(h.Count), 0), maxQueryCQEntries)
	for off := max(h.Index, out.MinQueueIndex); len(out.QueueData) < count && off < out.MaxQueueIndex; {
		res, err := b.store.GetMessages(h.Topic, h.QueueID, off, count-len(out.QueueData), nil)
		if err != nil {
			return errResp(protocol.SystemError, "read %d@%s at %d: %v", h.QueueID, h.Topic, off, err), nil
		}
		for i, buf := range res.Buffers {
			tags := b.entryTagsCode(h.Topic, buf)
			out.QueueData = append(out.QueueData, &protocol.ConsumeQueueData{PhysicOffset: res.PhysicalOffsets[i],
				PhysicSize: int32(len(buf)), TagsCode: tags, Eval: codes == nil || codes[tags]})
		}
		next := res.NextBeginOffset
		res.Release()
		if next <= off {
			break
		}
		off = next
	}
	return jsonResponse(out)
}

// entryTagsCode is the tag hash a consume-queue entry holds for a record:
// the delivery time for the schedule topic, else the hash of TAGS (0 with
// none), as the store computes it when it dispatches.
func (b *Broker) entryTagsCode(topic string, rec []byte) int64 {
	m, _, err := record.Decode(rec, false)
	if err != nil {
		return 0
	}
	if code, ok := b.scheduleTagsCode([]byte(topic), []byte(m.Properties), m.StoreTimestamp); ok {
		return code
	}
	if tag, ok := record.LookupPropertyString(m.Properties, record.PropertyTags); ok {
		return record.TagsHash(tag)
	}
	return 0
}
