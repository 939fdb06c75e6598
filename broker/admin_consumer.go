package broker

import (
	"errors"
	"sort"
	"strconv"
	"strings"
	"sync"
	"time"

	"github.com/smartgo/smartgo/remoting"
	"github.com/smartgo/smartgo/remoting/protocol"
	"github.com/smartgo/smartgo/store/record"
)

// Admin requests about consumer groups (mqadmin consumerProgress,
// consumerStatus, queryMsgById, resetOffsetByTime, brokerConsumeStats ...),
// some of which the broker answers by asking the group's clients.

// Timeouts of the broker's calls to clients (RocketMQ's values).
const (
	callClientTimeout   = 10 * time.Second // GET_CONSUMER_RUNNING_INFO, CONSUME_MESSAGE_DIRECTLY
	clientStatusTimeout = 5 * time.Second  // GET_CONSUMER_STATUS_FROM_CLIENT
)

// processTopicConsumeByWho serves QUERY_TOPIC_CONSUME_BY_WHO: the groups
// that consume a topic here, online (subscribed) or with committed
// offsets on it.
func (b *Broker) processTopicConsumeByWho(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.TopicHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	set := map[string]struct{}{}
	for _, g := range b.consumers.GroupsSubscribing(h.Topic) {
		set[g] = struct{}{}
	}
	for _, g := range b.offsets.GroupsOfTopic(h.Topic) {
		set[g] = struct{}{}
	}
	return jsonResponse(protocol.GroupList{GroupList: sortedSet(set)})
}

// processTopicsByConsumer serves QUERY_TOPICS_BY_CONSUMER: the topics a
// group has committed offsets on.
func (b *Broker) processTopicsByConsumer(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.QueryByConsumerHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	return jsonResponse(protocol.TopicList{TopicList: b.offsets.TopicsOfGroup(h.Group), BrokerAddr: b.addr})
}

// processSubscriptionByConsumer serves QUERY_SUBSCRIPTION_BY_CONSUMER: an
// online group's subscription to a topic (absent when it has none).
func (b *Broker) processSubscriptionByConsumer(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.QueryByConsumerHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	out := protocol.QuerySubscriptionResponseBody{Group: h.Group, Topic: h.Topic}
	if sd, ok := b.consumers.Subscription(h.Group, h.Topic); ok {
		out.SubscriptionData = &sd
	}
	return jsonResponse(out)
}

// processConsumeTimeSpan serves QUERY_CONSUME_TIME_SPAN: per write queue of
// the topic, the store times of its first and last message and of the
// group's last consumed one, and how long its next message has waited.
func (b *Broker) processConsumeTimeSpan(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.TopicGroupHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	tc, ok := b.topics.Get(h.Topic)
	if !ok {
		return errResp(protocol.TopicNotExist, "topic[%s] not exist", h.Topic), nil
	}
	out := protocol.QueryConsumeTimeSpanBody{ConsumeTimeSpanSet: []*protocol.QueueTimeSpan{}}
	now := b.now().UnixMilli()
	for q := int32(0); q < tc.WriteQueueNums; q++ {
		span := &protocol.QueueTimeSpan{MessageQueue: &protocol.MessageQueue{Topic: h.Topic, BrokerName: b.opts.BrokerName, QueueID: q}}
		span.MinTimeStamp, _ = b.store.EarliestStoreTime(h.Topic, q)
		maxOff := b.store.MaxOffset(h.Topic, q)
		if maxOff > 0 {
			span.MaxTimeStamp, _ = b.storeTimeAtOffset(h.Topic, q, maxOff-1)
		}
		consumed, _ := b.offsets.Query(h.Group, h.Topic, q)
		span.ConsumeTimeStamp = span.MinTimeStamp
		if consumed > 0 {
			span.ConsumeTimeStamp, _ = b.storeTimeAtOffset(h.Topic, q, consumed-1)
		}
		if consumed < maxOff {
			if next, ok := b.storeTimeAtOffset(h.Topic, q, consumed); ok {
				span.DelayTime = now - next
			}
		}
		out.ConsumeTimeSpanSet = append(out.ConsumeTimeSpanSet, span)
	}
	return jsonResponse(out)
}

// processCloneGroupOffset serves CLONE_GROUP_OFFSET: destGroup gets
// srcGroup's offsets on one topic or on every topic srcGroup has offsets
// on; unless offline, topics an online srcGroup does not subscribe are
// left out.
func (b *Broker) processCloneGroupOffset(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.CloneGroupOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	topics := []string{h.Topic}
	if h.Topic == "" {
		topics = b.offsets.TopicsOfGroup(h.SrcGroup)
	}
	info, online := b.consumers.Group(h.SrcGroup)
	for _, topic := range topics {
		if _, ok := b.topics.Get(topic); !ok {
			continue
		}
		if !h.Offline && online && len(info.Subscriptions) > 0 {
			if _, ok := info.Subscriptions[topic]; !ok {
				continue
			}
		}
		b.offsets.Clone(h.SrcGroup, h.DestGroup, topic)
	}
	b.log.Info("group offsets cloned", "src", h.SrcGroup, "dest", h.DestGroup, "topic", h.Topic, "peer", c.RemoteAddr().String())
	return protocol.NewResponse(protocol.Success, ""), nil
}

// processBrokerConsumeStats serves GET_BROKER_CONSUME_STATS: the progress
// of every subscription group of this broker on each topic it has offsets
// on (write queues; only ordered topics when isOrder), and the total lag.
func (b *Broker) processBrokerConsumeStats(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.GetConsumeStatsInBrokerHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	out := protocol.ConsumeStatsList{BrokerAddr: b.addr, ConsumeStatsList: []map[string][]protocol.ConsumeStats{}}
	for _, group := range b.groups.Names() {
		list := []protocol.ConsumeStats{}
		for _, topic := range b.offsets.TopicsOfGroup(group) {
			if h.IsOrder && !b.topics.IsOrder(topic) {
				continue
			}
			cs, ok := b.topicConsumeStats(group, topic, true)
			if !ok {
				continue
			}
			cs.OffsetTable.Sort()
			out.TotalDiff += cs.Lag()
			list = append(list, cs)
		}
		out.ConsumeStatsList = append(out.ConsumeStatsList, map[string][]protocol.ConsumeStats{group: list})
	}
	return jsonResponse(out)
}

// processResetOffset serves INVOKE_BROKER_TO_RESET_OFFSET (mqadmin
// resetOffsetByTime, skipAccumulatedMessage): each write queue of the
// topic goes to the first message stored at or after timestamp (-1: the
// queue's end), or stays where the group is when that is further back and
// isForce is off. The group's online clients are told with
// RESET_CONSUMER_CLIENT_OFFSET (one way) and the broker commits the new
// offsets itself, so a client that starts or takes a queue over reads the
// new offsets; a running client that missed the notice writes its own
// back at its next periodic commit.
// With no client online the answer is CONSUMER_NOT_ONLINE, and mqadmin
// falls back to committing offsets one queue at a time.
//
// RocketMQ 5's request may name one queue (queueId >= 0; its mqadmin
// resetOffsetByTime -b -q [-o]): only that queue moves, to offset when
// given (within the queue's range), else to the one at timestamp, isForce
// aside (RocketMQ 5's broker resets so); it is done whether or not a
// client is online.
func (b *Broker) processResetOffset(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.ResetOffsetRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	tc, ok := b.topics.Get(h.Topic)
	if !ok {
		return errResp(protocol.SystemError, "[reset-offset] reset offset failed, no topic in this broker. topic=%s", h.Topic), nil
	}
	if h.HasQueueID && h.QueueID >= 0 {
		return b.resetQueueOffset(c, &h, tc)
	}
	var table protocol.MQMap[int64]
	for q := int32(0); q < tc.WriteQueueNums; q++ {
		target := b.store.MaxOffset(h.Topic, q)
		if h.Timestamp != -1 {
			target = b.store.OffsetByTime(h.Topic, q, h.Timestamp)
		}
		target = max(0, target)
		if cur, ok := b.offsets.Query(h.Group, h.Topic, q); ok && !h.IsForce && cur <= target {
			target = cur
		}
		table = append(table, protocol.MQEntry[int64]{Queue: protocol.MessageQueue{Topic: h.Topic, BrokerName: b.opts.BrokerName, QueueID: q}, Value: target})
	}
	info, _ := b.consumers.Group(h.Group)
	if len(info.Clients) == 0 {
		return errResp(protocol.ConsumerNotOnline, "Consumer not online, so can not reset offset, Group: %s Topic: %s Timestamp: %d",
			h.Group, h.Topic, h.Timestamp), nil
	}
	return b.applyReset(c, &h, info, table)
}

// resetQueueOffset serves a reset of the one queue h names (see
// processResetOffset).
func (b *Broker) resetQueueOffset(c *remoting.Conn, h *protocol.ResetOffsetRequestHeader, tc protocol.TopicConfig) (*protocol.Command, error) {
	q := h.QueueID
	if n := max(tc.ReadQueueNums, tc.WriteQueueNums); q >= n {
		return errResp(protocol.SystemError, "[reset-offset] queue %d not in topic %s (%d queues)", q, h.Topic, n), nil
	}
	target := b.store.MaxOffset(h.Topic, q)
	switch {
	case h.HasOffset && h.Offset != -1:
		lo := b.store.MinOffset(h.Topic, q)
		if h.Offset < lo || h.Offset > target {
			return errResp(protocol.SystemError, "Target offset %d not in consume queue range [%d-%d]", h.Offset, lo, target), nil
		}
		target = h.Offset
	case h.Timestamp != -1:
		target = max(0, b.store.OffsetByTime(h.Topic, q, h.Timestamp))
	}
	info, _ := b.consumers.Group(h.Group)
	return b.applyReset(c, h, info, protocol.MQMap[int64]{{Queue: protocol.MessageQueue{Topic: h.Topic, BrokerName: b.opts.BrokerName, QueueID: q}, Value: target}})
}

// applyReset tells the group's online clients of a reset to table, commits
// it and answers with it.
func (b *Broker) applyReset(c *remoting.Conn, h *protocol.ResetOffsetRequestHeader, info ConsumerGroupInfo, table protocol.MQMap[int64]) (*protocol.Command, error) {
	body, err := protocol.EncodeJSON(protocol.ResetOffsetBody{OffsetTable: table})
	if err != nil {
		return nil, err
	}
	var told []string // client id@peer of each client the notice was written to
	for _, cl := range info.Clients {
		conn, ok := cl.Channel.(*remoting.Conn)
		if !ok {
			continue
		}
		notice := protocol.NewRequest(protocol.ResetConsumerClientOffset,
			&protocol.ResetOffsetRequestHeader{Topic: h.Topic, Group: h.Group, Timestamp: h.Timestamp}, body)
		notice.SerializeType = protocol.SerializeJSON
		if err := conn.OnewayNoWait(notice); err != nil {
			b.log.Warn("reset offset: client not told", "group", h.Group, "client", cl.ClientID, "peer", conn.RemoteAddr().String(), "err", err)
			continue
		}
		told = append(told, cl.ClientID+"@"+conn.RemoteAddr().String())
	}
	for _, e := range table {
		b.offsets.Commit(h.Group, h.Topic, e.Queue.QueueID, e.Value)
	}
	b.log.Info("consumer offsets reset", "group", h.Group, "topic", h.Topic, "timestamp", h.Timestamp, "force", h.IsForce,
		"offsets", resetOffsetsLog(table), "told", told, "peer", c.RemoteAddr().String())
	return jsonResponse(protocol.ResetOffsetBody{OffsetTable: table})
}

// resetOffsetsLog renders a reset's offset table for the log, queue id:
// offset in queue order ("0:1426 1:1427").
func resetOffsetsLog(table protocol.MQMap[int64]) string {
	var sb strings.Builder
	for i, e := range table {
		if i > 0 {
			sb.WriteByte(' ')
		}
		sb.WriteString(strconv.Itoa(int(e.Queue.QueueID)) + ":" + strconv.FormatInt(e.Value, 10))
	}
	return sb.String()
}

// processConsumerStatus serves INVOKE_BROKER_TO_GET_CONSUMER_STATUS: each
// online client of the group (or the one named) reports its offsets on the
// topic (GET_CONSUMER_STATUS_FROM_CLIENT); the answer maps client ids to
// those tables. Clients that do not answer within clientStatusTimeout, or
// are not reading their connection, are left out. The clients are asked
// at once and the request is answered by the last answer's callback: no
// worker waits for them.
func (b *Broker) processConsumerStatus(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.GetConsumerStatusRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	info, ok := b.consumers.Group(h.Group)
	if !ok || len(info.Clients) == 0 {
		return errResp(protocol.SystemError, "No Any Consumer online in the consumer group: [%s]", h.Group), nil
	}
	out := protocol.GetConsumerStatusBody{ConsumerTable: map[string]protocol.MQMap[int64]{}}
	var mu sync.Mutex
	left := 1 // the calls in flight, plus this goroutine's until it asked them all
	done := func() *protocol.Command {
		mu.Lock()
		left--
		last := left == 0
		mu.Unlock()
		if !last {
			return nil
		}
		resp, err := jsonResponse(out)
		if err != nil {
			resp = errResp(protocol.SystemError, "encode consumer status: %v", err)
		}
		return resp
	}
	for _, cl := range info.Clients {
		if h.ClientAddr != "" && h.ClientAddr != cl.ClientID {
			continue
		}
		conn, ok := cl.Channel.(*remoting.Conn)
		if !ok {
			continue
		}
		ask := protocol.NewRequest(protocol.GetConsumerStatusFromClient,
			&protocol.GetConsumerStatusRequestHeader{Topic: h.Topic, Group: h.Group}, nil)
		ask.SerializeType = protocol.SerializeJSON
		clientID := cl.ClientID
		mu.Lock()
		left++
		mu.Unlock()
		err := conn.InvokeNoWait(ask, clientStatusTimeout, func(resp *protocol.Command, err error) {
			var st protocol.GetConsumerStatusBody
			switch {
			case err != nil || resp.Code != protocol.Success || len(resp.Body) == 0:
				b.log.Debug("consumer status: client did not answer", "group", h.Group, "client", clientID, "err", err)
			case protocol.DecodeJSON(resp.Body, &st) != nil:
				b.log.Debug("consumer status: bad answer", "group", h.Group, "client", clientID)
			default:
				st.MessageQueueTable.Sort()
				mu.Lock()
				out.ConsumerTable[clientID] = st.MessageQueueTable
				mu.Unlock()
			}
			if r := done(); r != nil {
				_ = c.WriteResponse(req, r)
			}
		})
		if err != nil {
			b.log.Debug("consumer status: client not asked", "group", h.Group, "client", clientID, "err", err)
			done() // never the last: this goroutine still holds its own count
		}
	}
	return done(), nil // nil while calls are in flight: the last one answers
}

// processConsumerRunningInfo serves GET_CONSUMER_RUNNING_INFO: the request
// goes on to the named client and its answer comes back as it is.
func (b *Broker) processConsumerRunningInfo(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.GetConsumerRunningInfoRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	return b.callConsumer(c, req, protocol.GetConsumerRunningInfo, req.ExtFields, nil, h.ConsumerGroup, h.ClientID), nil
}

// processConsumeMessageDirectly serves CONSUME_MESSAGE_DIRECTLY: the
// message named by its offset id goes to the named client, which consumes
// it and answers how that went.
func (b *Broker) processConsumeMessageDirectly(c *remoting.Conn, req *protocol.Command) (*protocol.Command, error) {
	var h protocol.ConsumeMessageDirectlyRequestHeader
	if err := req.DecodeHeader(&h); err != nil {
		return errResp(protocol.SystemError, "bad header: %v", err), nil
	}
	_, phy, err := record.ParseOffsetMessageID(h.MsgID)
	if err != nil {
		return errResp(protocol.SystemError, "bad message id %q: %v", h.MsgID, err), nil
	}
	res, err := b.store.MessageAt(phy)
	if err != nil {
		return errResp(protocol.SystemError, "can not find message by the offset, %d: %v", phy, err), nil
	}
	var body []byte
	for _, buf := range res.Buffers {
		body = append(body, buf...)
	}
	res.Release()
	fields := make(protocol.ExtFields, len(req.ExtFields)+1)
	for k, v := range req.ExtFields {
		fields[k] = v
	}
	fields["brokerName"] = b.opts.BrokerName
	return b.callConsumer(c, req, protocol.ConsumeMessageDirectly, fields, body, h.ConsumerGroup, h.ClientID), nil
}

// callConsumer sends a request with the given fields and body to one
// client of a group, without waiting for the client's socket, and answers
// req with the client's answer (code, remark, fields and body) from the
// call's callback: no worker waits for the client. It returns the answer
// itself when there is nothing to wait for: SYSTEM_ERROR when the client
// is not online, not reading its connection (its write queue is full) or
// the call cannot be sent. CONSUME_MSG_TIMEOUT answers a client that does
// not answer within callClientTimeout (the remark says whether the request
// was still waiting for the client's socket then).
func (b *Broker) callConsumer(c *remoting.Conn, req *protocol.Command, code int32, fields protocol.ExtFields, body []byte,
	group, clientID string) *protocol.Command {
	cl, ok := b.consumers.Client(group, clientID)
	if !ok {
		return errResp(protocol.SystemError, "The Consumer <%s> <%s> not online", group, clientID)
	}
	conn, ok := cl.Channel.(*remoting.Conn)
	if !ok {
		return errResp(protocol.SystemError, "The Consumer <%s> <%s> not online", group, clientID)
	}
	call := protocol.NewRequest(code, nil, body)
	call.ExtFields = fields
	call.SerializeType = protocol.SerializeJSON
	err := conn.InvokeNoWait(call, callClientTimeout, func(resp *protocol.Command, err error) {
		_ = c.WriteResponse(req, consumerAnswer(resp, err, group, clientID))
	})
	switch {
	case errors.Is(err, remoting.ErrNotReading):
		return errResp(protocol.SystemError, "consumer <%s> <%s> is not reading its connection: %v", group, clientID, err)
	case err != nil:
		return errResp(protocol.SystemError, "invoke consumer <%s> <%s> Exception: %v", group, clientID, err)
	}
	return nil // answered by the callback
}

// consumerAnswer is the answer to an admin request that callConsumer
// passed on to a client, from the client's answer resp or the call's err.
func consumerAnswer(resp *protocol.Command, err error, group, clientID string) *protocol.Command {
	switch {
	case errors.Is(err, remoting.ErrTimeout):
		return errResp(protocol.ConsumeMsgTimeout, "consumer <%s> <%s> Timeout: %v", group, clientID, err)
	case err != nil:
		return errResp(protocol.SystemError, "invoke consumer <%s> <%s> Exception: %v", group, clientID, err)
	}
	out := protocol.NewResponse(resp.Code, resp.Remark)
	if len(resp.ExtFields) > 0 {
		out.ExtFields = make(protocol.ExtFields, len(resp.ExtFields))
		for k, v := range resp.ExtFields {
			out.ExtFields[k] = v
		}
	}
	out.Body = resp.Body
	return out
}

func sortedSet(set map[string]struct{}) []string {
	out := make([]string, 0, len(set))
	for k := range set {
		out = append(out, k)
	}
	sort.Strings(out)
	return out
}
